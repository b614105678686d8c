"""What a profiled GPU kernel is: its teton op class, its GEMM shape, its collective and message size.

Used by :mod:`teton.validation.kineto` and :mod:`teton.validation.trace`. Three small tables, each
easy to read and extend:

* ``CLASS_RULES``: ordered (class, regex) pairs on the kernel name; the first match wins, no match
  is ``other``. Memcpy / Memset activity (``cat`` gpu_memcpy / gpu_memset) is class ``memory``.
* ``GEMM_OPERANDS``: for each aten GEMM op, where its two matrix operands sit in ``Input Dims``;
  FLOPs = 2 b m n k for (b x) (m x k) @ (k x n).
* ``catalog_gpu_name``: the teton catalog GPU of a CUDA device name.
* ``COLLECTIVES``: the collective a PyTorch ``Collective name`` (or an NCCL kernel name) means, in
  teton's op names, for nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md).
"""

from __future__ import annotations

import math
import re

from teton.memo import cached

CLASSES = ("gemm", "attention", "nccl", "optimizer", "elementwise", "memory", "other")

CLASS_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((c, re.compile(p)) for c, p in (
    ("memory", r"^Mem(cpy|set)\b"),
    ("nccl", r"nccl\w*Kernel"),  # ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv
    # before gemm: CUTLASS-based attention kernels (fmha_cutlassF_*) also name cutlass
    ("attention", r"flash|fmha|sdpa|[Aa]ttention|attn_"),
    ("optimizer", r"multi_tensor_apply|[Aa]dam|fused_sgd|[Ll]amb[A-Z_]"),
    # cuBLAS / cuBLASLt (ampere_*gemm, sm80_xmma_gemm, nvjet_*, Kernel2, split-K reduce, gemv),
    # CUTLASS, and cuDNN's implicit-GEMM convolutions (xmma fprop / dgrad / wgrad, scudnn);
    # not fbgemm_gpu:: (embedding helpers)
    ("gemm", r"(?<!fb)gemm|gemv|xmma|nvjet|cutlass|Kernel2|cublas|splitKreduce|scudnn|wgrad|dgrad|fprop"
             r"|triton_\w*mm\b"),
    # memory-bound kernels: pointwise, reductions, norms, softmax, dropout, copies, layout
    # transposes, index / scatter / gather, scans and sorts, Triton (inductor) fusions
    ("elementwise", r"elementwise|reduce_kernel|[Rr]educe|softmax|[Nn]orm|bn_fw|bn_bw|dropout|[Ii]ndex"
                    r"|CatArray|cat_|[Cc]opy|[Ff]ill|scatter|gather|transpose|permute|nchwToNhwc"
                    r"|nhwcToNchw|triton|cub::|[Ss]ort|[Ss]can|where|arange|embedding_bag|_pool"),
))


@cached(8192)
def classify(name: str, cat: str = "kernel") -> str:
    """The op class of a GPU activity event: ``memory`` for Memcpy / Memset, else the first
    matching rule of ``CLASS_RULES``, else ``other``."""
    if cat in ("gpu_memcpy", "gpu_memset"):
        return "memory"
    for cls, rx in CLASS_RULES:
        if rx.search(name):
            return cls
    return "other"


# GEMM kernels that run without tensor cores (SIMT fp32 / gemv): counted, flagged in the notes
SIMT_GEMM = re.compile(r"simt|(^|_)sgemm|(^|_)dgemm|gemv")

_NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+?)(?:_|\(|$)")


def kernel_collective(name: str) -> str | None:
    """The collective an NCCL kernel runs, from its name: AllReduce, AllGather, ReduceScatter,
    Broadcast, Reduce, SendRecv, Send, Recv (None for a non-NCCL kernel)."""
    m = _NCCL_KERNEL.search(name)
    return m.group(1) if m else None


# --- GEMM shapes from Input Dims -------------------------------------------------------------

# op -> (index of A, index of B) in Input Dims; A = [..., m, k], B = [..., k, n]
GEMM_OPERANDS: dict[str, tuple[int, int]] = {
    "aten::mm": (0, 1), "aten::matmul": (0, 1), "aten::bmm": (0, 1), "aten::_scaled_mm": (0, 1),
    "aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2), "aten::_addmm_activation": (1, 2),
    "aten::linear": (0, 1),  # B is the weight [n, k] (y = x W^T)
}


MAX_GEMM_MACS = 2**100  # beyond, recorded dims describe no GEMM that ran (and 2 b m n k overflows a float)


def _dims(x) -> tuple[int, ...] | None:
    if not isinstance(x, list) or not x or not all(isinstance(d, int) and not isinstance(d, bool) for d in x):
        return None
    return tuple(x)


def gemm_shape(op: str, input_dims) -> tuple[int, int, int, int] | None:
    """(b, m, n, k) of aten GEMM ``op`` from its recorded ``Input Dims``, or None when the op is
    not a GEMM, the dims are missing or they do not describe (b x) (m x k) @ (k x n).

    mm [[m,k],[k,n]]; addmm [[bias],[m,k],[k,n],...]; bmm [[b,m,k],[b,k,n]]; linear
    [[...,k],[n,k],[n]] (m = product of the leading dims); matmul: 2-D @ 2-D, N-D @ 2-D (leading
    dims fold into m), N-D @ N-D (batched, b = product of the batch dims)."""
    where = GEMM_OPERANDS.get(op)
    if where is None or not isinstance(input_dims, list) or len(input_dims) <= max(where):
        return None
    a, b = _dims(input_dims[where[0]]), _dims(input_dims[where[1]])
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None
    if op == "aten::linear":
        n, k_b = b[0], b[1]
        batch, m, k = 1, math.prod(a[:-1]), a[-1]
    elif len(b) == 2:
        batch, m, k = 1, math.prod(a[:-1]), a[-1]
        k_b, n = b
    else:
        batch = math.prod(a[:-2]) if len(a) > 2 else math.prod(b[:-2])
        m, k, k_b, n = a[-2], a[-1], b[-2], b[-1]
    if k != k_b or min(batch, m, n, k) <= 0 or batch * m * n * k > MAX_GEMM_MACS:
        return None
    return batch, m, n, k


def gemm_flops(op: str, input_dims) -> float | None:
    """2 b m n k, the multiply-adds of the GEMM (a bias add is not counted); None if no shape."""
    shape = gemm_shape(op, input_dims)
    return None if shape is None else 2.0 * math.prod(shape)


def gemm_precision(input_types) -> str | None:
    """teton's precision for a GEMM from the recorded ``Input type`` of its operands: bf16 / fp16 ->
    ``bf16`` (same tensor-core rate), float -> ``tf32`` (the fp32 GEMM runs on TF32 tensor cores
    when allowed), float8 -> ``fp8``; ``bf16`` when no type was recorded; None for fp64 / integer
    (no catalog figure)."""
    for t in input_types or ():
        t = str(t).lower()
        if "bfloat16" in t or "half" in t:
            return "bf16"
        if "float8" in t:
            return "fp8"
        if t == "float":
            return "tf32"
        if t in ("double", "long", "int", "c10::complex<float>"):
            return None
    return "bf16"


ELEMENT_BYTES = {"bf16": 2, "tf32": 4, "fp8": 1}

# --- collectives ------------------------------------------------------------------------------

# PyTorch Collective name / NCCL kernel collective (lower case, '_' removed) -> teton op name;
# reduce has nccl-tests' broadcast definition (busbw = algbw)
COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather", "allgatherbase": "all_gather",
               "allgatherintotensorcoalesced": "all_gather", "reducescatter": "reduce_scatter",
               "reducescatterbase": "reduce_scatter", "reducescattertensorcoalesced": "reduce_scatter",
               "alltoall": "all_to_all", "alltoallbase": "all_to_all", "alltoallv": "all_to_all",
               "broadcast": "broadcast", "reduce": "broadcast", "send": "send_recv", "recv": "send_recv",
               "sendrecv": "send_recv"}

# c10 ScalarType names as Kineto writes them in ``dtype``
DTYPE_BYTES = {"float": 4, "float32": 4, "bfloat16": 2, "half": 2, "float16": 2, "double": 8, "long": 8,
               "int": 4, "int64": 8, "int32": 4, "byte": 1, "char": 1, "bool": 1, "float8_e4m3fn": 1,
               "float8_e5m2": 1}


def collective_op(name: str | None) -> str | None:
    """teton's op name (``all_reduce``, ``all_gather``, ...) for a PyTorch ``Collective name`` or an
    NCCL kernel's collective; None if unknown (barrier, gather, scatter, coalesced groups)."""
    return COLLECTIVES.get(str(name or "").lower().replace("_", "")) if name else None


def message(args: dict) -> tuple[str | None, int | None, float | None]:
    """(teton op, group size, nccl-tests S in bytes) from the comms args Kineto attaches to an NCCL
    kernel or a ``record_param_comms`` op (``Collective name``, ``In msg nelems``, ``Out msg
    nelems``, ``Group size``, ``dtype``); None where a field is missing. S is the larger of the
    input and output buffers: the gathered array of an all-gather, the input of a reduce-scatter,
    the buffer of an all-reduce (nccl-tests' size convention)."""
    op = collective_op(args.get("Collective name"))
    group = args.get("Group size")
    if not isinstance(group, int) or isinstance(group, bool):
        ranks = args.get("Process Group Ranks")
        group = len(re.findall(r"\d+", ranks)) if isinstance(ranks, str) and ranks.strip("[] ") else None
    n_in, n_out = args.get("In msg nelems"), args.get("Out msg nelems")
    elem = DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
    counts = [x for x in (n_in, n_out) if isinstance(x, (int, float)) and not isinstance(x, bool)]
    size = float(max(counts)) * elem if counts and elem else None
    return op, group, size if size else None


# --- devices ---------------------------------------------------------------------------------

def catalog_gpu_name(device_name: str, total_mem_bytes: float | None = None) -> str | None:
    """The teton catalog GPU for a CUDA device name (``deviceProperties[].name``), or None.

    A100 by memory (over 60 GB: 80 GB, PG509-200 is the 40 GB SXM4 board); H200; B200; GH200 and
    H100 with over 90 GB: ``h100-96gb``; other H100 SXM / HBM3 parts: ``h100-sxm``. PCIe and NVL
    boards (other clocks and power) have no catalog entry."""
    s = device_name.upper()
    mem_gb = (total_mem_bytes or 0) / 1e9
    if "PCIE" in s or " NVL" in s:
        return None
    if "A100" in s:
        return "a100-80gb" if ("80GB" in s or mem_gb > 60) else "a100-40gb"
    if "H200" in s and "GH200" not in s:
        return "h200"
    if "B200" in s:
        return "b200"
    if "GH200" in s or ("H100" in s and (mem_gb > 90 or "96GB" in s)):
        return "h100-96gb" if mem_gb < 120 else "h200"
    return "h100-sxm" if "H100" in s else None
