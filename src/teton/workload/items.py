"""The items a block of work is made of, for one micro-batch on one GPU (no seconds).

A :class:`ComputeOp` is a kernel: its FLOPs, the HBM bytes it moves and, for a GEMM or batched
attention GEMM, its shape ``m x n x k`` (what the compute model's efficiency curves read). A
:class:`Collective` is a communication over one parallel axis: nccl-tests' array size ``S`` and,
when it runs alongside a GEMM or attention op of the same pass, which one and how
(``engine.overlap`` prices that). A :class:`HostCopy` is a copy between HBM and host memory on a
copy stream of its own (CPU activation offload). A :class:`Block` is the ordered forward and
backward items of a transformer layer, the embedding or the output head (``workload.ops``,
``workload.head``), and whether a CUDA graph replays them (``Block.graphed``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from teton.units import BF16_BYTES, FP32_BYTES

ACT_BYTES = BF16_BYTES  # activations are bf16
FP32 = FP32_BYTES
# an fp8 tensor with 1x128 scales: the e4m3 value and an fp32 scale per 128 elements (DeepSeek-V3
# Sec. 3.3.2's tile-wise quantisation; DeepEP's fp8 dispatch; the fp8 activation cache)
FP8_1X128_BYTES = 1.0 + 4.0 / 128

Kind = Literal["gemm", "attention", "memory"]


@dataclass(frozen=True)
class ComputeOp:
    """One kernel: ``flops`` and HBM ``bytes``; ``m, n, k`` the GEMM shape (0 for memory-bound ops)."""

    name: str
    kind: Kind
    flops: float
    bytes: float
    m: int = 0
    n: int = 0
    k: int = 0
    fp8: bool = False  # runs at fp8 throughput when the job's precision is fp8
    backward: bool = False
    # bytes per output element of a C the GEMM reads and writes back (beta = 1: a weight-gradient
    # GEMM accumulating into the gradient buffer in its epilogue, Megatron's
    # gradient_accumulation_fusion); 0: a fresh output (beta = 0)
    accumulate_bytes: int = 0
    # kernels this op stands for (an eager loss is several passes): the CPU launches each
    kernels: int = 1
    # of ``bytes``, the transposed fp8 copy a cast writes only for a GPU whose fp8 GEMMs are
    # TN-only (``hardware.kernels.Fp8Recipe.transpose_bytes``; the compute model drops it on a GPU
    # with ``fp8_any_layout``)
    tn_only_bytes: float = 0.0
    # a grouped GEMM (MoE experts): ``groups`` GEMMs of shape (m, n, k) running together
    groups: int = 1
    # the CPU waits for the GPU to finish this op before it launches the next: a device-to-host
    # copy of values the host needs (an MoE dispatcher's token counts); engine.block_timer
    host_sync: bool = False


@dataclass(frozen=True)
class Collective:
    """One collective over a parallel axis of the job's groups."""

    name: str
    op: str  # all_gather | reduce_scatter | all_reduce | all_to_all | send_recv
    axis: str  # tp | cp | pp | dp | ep
    bytes: float  # nccl-tests S: the gathered / reduced array size
    overlap: str = ""  # the GEMM / attention op (by name, same pass) this collective runs alongside
    chunks: int = 1  # > 1: decomposed with that op into this many pipelined chunks
    ring_steps: int = 0  # > 0: a ring of this many exchange steps under that op's blocks (ring attention)
    # > 0 (an all_to_all): node-limited routing, each token's ``top_k`` copies reach at most this
    # many NVLink domains, sent once per domain (``collectives.node_limited``)
    max_nodes: int = 0
    top_k: int = 0  # the copies per token of a node-limited all-to-all's ``bytes``


@dataclass(frozen=True)
class HostCopy:
    """A copy of ``bytes`` between HBM and host memory over the GPU's PCIe link, issued on a
    separate stream and overlapped with the compute of the pass it sits in (CPU activation
    offload: ``workload.layer_kinds``; ``engine.block_timer`` charges what that compute does not hide)."""

    name: str
    direction: Literal["d2h", "h2d"]
    bytes: float


Item = ComputeOp | Collective | HostCopy


@dataclass(frozen=True)
class Block:
    """Forward and backward items of one block for one micro-batch on one GPU."""

    name: str
    fwd: tuple[Item, ...]
    bwd: tuple[Item, ...]
    # captured in a CUDA graph (``software.cuda_graphs``): replayed without a CPU launch per kernel
    graphed: bool = False


def memory_op(name: str, nbytes: float, backward: bool = False, kernels: int = 1,
              tn_only_bytes: float = 0.0, host_sync: bool = False) -> ComputeOp:
    """A memory-bound kernel (or ``kernels`` of them) moving ``nbytes`` through HBM, of which
    ``tn_only_bytes`` only on a GPU whose fp8 GEMMs are TN-only; ``host_sync``: the CPU waits for
    it (:class:`ComputeOp`)."""
    return ComputeOp(name, "memory", 0.0, float(nbytes), backward=backward, kernels=kernels,
                     tn_only_bytes=float(tn_only_bytes), host_sync=host_sync)


def gemm_ops(name: str, m: float, n: int, k: int, wgrad_accum_bytes: int = FP32, fp8: bool = True,
             groups: int = 1) -> tuple[ComputeOp, ...]:
    """Forward GEMM (m x k)(k x n) and its two backward GEMMs.

    Weight-gradient GEMMs accumulate into the gradient buffer (beta = 1): they read and write a
    k x n matrix of ``wgrad_accum_bytes`` per element. ``wgrad_accum_bytes = 0`` means unfused
    accumulation: the GEMM writes a fresh bf16 k x n gradient (beta = 0) and
    :func:`grad_accumulate` adds it into the buffer.

    ``groups > 1``: one grouped GEMM of ``groups`` weight matrices over ``m`` rows in all (an MoE
    layer's local experts: Megatron-Core's ``TEGroupedMLP``, Transformer Engine's ``GroupedLinear``);
    FLOPs and activation bytes are the rows', weight bytes every group's ``k x n``; the shape is one
    group's (``m / groups`` rows, the shape per expert) and the efficiency curve sees ``groups`` of
    them filling the SMs' waves together (``ComputeOp.groups``). Each is a kernel of its own, as
    ``GroupedLinear`` runs them (Transformer Engine 2.9, ``te_general_grouped_gemm`` ->
    ``nvte_multi_tensor_gemm``: one cuBLAS GEMM per group, round-robin over a few streams), so the
    CPU launches ``groups`` of them (``ComputeOp.kernels``).
    """
    a = ACT_BYTES
    wgrad_out = 2 * wgrad_accum_bytes if wgrad_accum_bytes else a
    w = k * n * groups
    rows = m if groups == 1 and isinstance(m, int) else max(1, round(m / groups))  # the shape's rows: one group's
    fwd = ComputeOp(name, "gemm", 2.0 * m * n * k, a * (m * k + w + m * n), rows, n, k, fp8=fp8, groups=groups,
                    kernels=groups)
    dgrad = ComputeOp(f"{name}.dgrad", "gemm", 2.0 * m * n * k, a * (m * n + w + m * k), rows, k, n,
                      fp8=fp8, backward=True, groups=groups, kernels=groups)
    wgrad = ComputeOp(f"{name}.wgrad", "gemm", 2.0 * m * n * k,
                      a * (m * n + m * k) + wgrad_out * w, k, n, rows, fp8=fp8, backward=True,
                      accumulate_bytes=wgrad_accum_bytes, groups=groups, kernels=groups)
    return fwd, dgrad, wgrad


def as_recompute(item: Item) -> Item:
    """A forward item re-run in backward: a forward computation still (a recomputed flash-attention
    forward runs the forward kernel, at the forward kernel's efficiency)."""
    if isinstance(item, ComputeOp):  # every field kept (a grouped GEMM's groups, a host sync), renamed
        return replace(item, name=f"recompute.{item.name}")
    if isinstance(item, HostCopy):  # pragma: no cover - host copies are added after recompute
        raise TypeError(f"{item.name}: a host copy is not recomputed")
    return Collective(f"recompute.{item.name}", item.op, item.axis, item.bytes, max_nodes=item.max_nodes, top_k=item.top_k)
