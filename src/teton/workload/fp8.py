"""fp8 training's own kernels: the recipe's casts around each fp8 GEMM, fp8 attention, bf16 layers.

Transformer Engine (TE docs, "Using FP8 with Transformer Engine"; Micikevicius et al. 2022, "FP8
Formats for Deep Learning") feeds every fp8 GEMM fp8 operands. What that costs depends on the
scaling recipe (``software.fp8_recipe``; bytes per element in ``hardware.kernels.FP8_RECIPES``):

* ``delayed``: the scale comes from an amax history; one cast-transpose kernel reads the bf16
  tensor and writes it in fp8 and transposed in fp8 (the weight-gradient GEMM's operand),
  recording the amax as it goes: 4 B per element.
* ``current``: the tensor's own amax must be known before it is cast: an amax pass (2 B) and
  the cast-transpose (4 B); under sequence parallelism the amax of a sequence-sharded tensor is
  all-reduced over TP first (a 4-byte all-reduce, latency-bound and exposed): the input of QKV
  and MLP-up in forward, the output gradient of attention-out and MLP-down in backward (TE
  Linear's current-scaling quantizers with ``with_amax_reduction`` for a column-parallel
  layer's SP input and a row-parallel layer's SP output gradient). A MoE layer's grouped expert
  GEMMs see dispatched tokens and reduce no amax (TE 2.9 ``GroupedLinear``'s current-scaling
  quantizers set no ``with_amax_reduction``).
* ``blockwise`` and ``mxfp8``: one kernel quantises rowwise and columnwise with per-block
  scales (read 2, write 1 + 1 + scales).

The transposed copy of the two per-tensor recipes exists because Hopper's fp8 GEMMs take only TN
operands; on a GPU whose fp8 GEMMs take any layout (Blackwell, ``GPU.fp8_any_layout``) TE writes
the rowwise copy alone. Each cast carries that copy's bytes as ``tn_only_bytes``, which the compute
model drops on such a GPU (the work stays hardware-free; the time is the engine's).
* ``nvfp4`` (arXiv 2509.25149): the GEMMs run on the fp4 tensor cores (the engine's compute
  model, ``Fp8Recipe.gemm_precision``); each operand's cast is as current scaling's (an amax pass,
  the TP amax all-reduce of a sequence-sharded tensor, no norm fusion) writing half-byte values
  with a 1-byte scale per 16 elements, rowwise and (Hadamard-transformed) columnwise. Refused on
  a GPU without fp4 tensor cores when the job loads (``hardware.kernels.fp8_recipe_unsupported``).

In backward the output gradient (m x n) of each fp8 GEMM is cast the same way. Weights are
cast once per step and cached across micro-batches (not charged). GEMMs outside TE's fp8
autocast stay bf16: the output layer and the MoE router.

With ``software.fused_norm_linear`` (TE ``LayerNormLinear`` / ``LayerNormMLP``) the norm before
QKV and before a dense MLP's up projection writes the GEMM's fp8 operand itself under delayed,
blockwise and mxfp8 scaling: those two forward input casts run no kernel of their own, and the
norm writes fp8 + transposed fp8 (+ scales) where it wrote the bf16 output, a net
:func:`fused_norm_extra_bytes` (0 for delayed). Under current scaling the amax pass still needs
the bf16 output: no saving. Without fp8 the flag changes nothing.

``software.fp8_attention`` (cuDNN's fp8 fused attention, TE's ``NVTE_FP8_DPA``): the attention
kernels run at the fp8 dense peak times the same attention efficiency fractions as bf16
(ASSUMPTION: no public fp8 attention benchmark is in the repository), after a cast of Q, K and
V (4 B per element, a cast-transpose as the GEMMs') and in backward of the output gradient dO.

``software.fp8_bf16_layers``: the first and last N transformer layers keep the bf16 block
(:func:`bf16_block`; Megatron's ``--first-last-layers-bf16``); ``workload.layer_kinds`` places them.
"""

from __future__ import annotations

from dataclasses import replace

from teton.hardware.kernels import FP8_RECIPES, Fp8Recipe
from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.items import ACT_BYTES, FP8_1X128_BYTES, Block, Collective, ComputeOp, Item, memory_op

FP8_CAST_TRANSPOSE_BYTES = FP8_RECIPES["delayed"].cast_bytes  # read bf16 (2), write fp8 (1) and its transpose (1)
AMAX_BYTES = 4  # one fp32 amax per tensor, all-reduced over TP under current scaling


def recipe_of(job: JobSpec) -> Fp8Recipe:
    """The job's fp8 recipe (``hardware.kernels.FP8_RECIPES``)."""
    return FP8_RECIPES[job.software.fp8_recipe]


def norm_writes_fp8(job: JobSpec) -> bool:
    """Whether the norms before QKV and MLP-up write their GEMMs' fp8 operands (``fused_norm_linear``
    under a recipe whose scale is known before the norm runs)."""
    return job.precision == "fp8" and job.software.fused_norm_linear and recipe_of(job).norm_fusable


def fused_norm_extra_bytes(job: JobSpec, elements: float) -> tuple[float, float]:
    """(bytes, of them TN-only) a norm that writes its GEMM's fp8 operand moves beyond its bf16
    form over ``elements``: fp8 + transposed fp8 + scales written instead of the bf16 output (0 for
    delayed scaling), the transposed copy only for a GPU whose fp8 GEMMs are TN-only."""
    if not norm_writes_fp8(job):
        return 0.0, 0.0
    r = recipe_of(job)
    return (r.write_bytes - ACT_BYTES) * elements, r.transpose_bytes * elements


def _quantise(job: JobSpec, name: str, elements: float, backward: bool, reduce_amax: bool,
              groups: int = 1, gathered: bool = False) -> list[Item]:
    """The recipe's kernels that cast ``elements`` bf16 values to fp8: amax pass, TP amax
    all-reduce (current scaling of a sequence-sharded tensor), quantise. The operand of a grouped
    GEMM (``groups`` MoE experts) is cast split by split, each split's kernels launched on their
    own, except under delayed scaling (Transformer Engine 2.9, ``split_quantize`` ->
    ``multi_tensor_quantize_impl``: one fused ``nvte_multi_cast_transpose`` for delayed-scaling
    quantisers, "Quantize kernels individually" for the others). ``gathered``: ``elements`` are a
    shard all-gathered quantised afterwards (:func:`gather_bytes`), which a per-tensor recipe casts
    rowwise only and transposes once gathered (:func:`_gathered_transpose`)."""
    r = recipe_of(job)
    per_split = groups if job.software.fp8_recipe != "delayed" else 1
    out: list[Item] = []
    if r.amax_bytes:
        out.append(memory_op(f"{name}_amax", r.amax_bytes * elements, backward, kernels=per_split))
    if r.amax_all_reduce and reduce_amax and job.layout.sequence_parallel:
        out.append(Collective(f"tp.{name}_amax", "all_reduce", "tp", AMAX_BYTES))
    transposed = 0.0 if gathered else r.transpose_bytes
    out.append(memory_op(name, (r.cast_bytes - r.transpose_bytes + transposed) * elements, backward,
                         kernels=per_split, tn_only_bytes=transposed * elements))
    return out


def _gathered_transpose(job: JobSpec, name: str, elements: float) -> list[Item]:
    """The fp8 transpose of a gathered per-tensor-scaled operand before its weight-gradient GEMM, on
    a GPU whose fp8 GEMMs are TN-only (read 1, write 1 per element): TE gathers such a tensor
    rowwise only ("All-gather is not supported with FP8 column-wise data") and makes the
    columnwise copy of the whole gathered tensor (``update_usage(columnwise_usage=True)``, TE 2.9
    ``pytorch/module/linear.py``). None for block-scaled recipes, gathered columnwise."""
    r = recipe_of(job)
    if not r.transpose_bytes:
        return []
    moved = 2 * r.transpose_bytes * elements
    return [memory_op(f"{name}.fp8_transpose", moved, True, tn_only_bytes=moved)]


def fp8_casts(job: JobSpec, gemm: tuple[ComputeOp, ...], fused_input: bool = False, sharded_input: bool = False,
              sharded_grad: bool = False) -> tuple[list[Item], list[Item]]:
    """(forward, backward) fp8 casts around one fp8 GEMM, for ``job.precision == "fp8"`` (module
    docstring): the input (m x k) in forward, unless the norm before it writes it
    (``fused_input`` and :func:`norm_writes_fp8`), and the output gradient (m x n) in backward.
    ``sharded_input`` / ``sharded_grad``: that tensor is sequence-sharded under SP (its amax is
    all-reduced over TP under current scaling; a stack that gathers it quantised,
    :func:`gathers_quantized`, casts only this rank's shard). Empty lists for bf16 jobs and non-fp8
    GEMMs."""
    fwd = gemm[0]
    if job.precision != "fp8" or not fwd.fp8:
        return [], []
    rows = fwd.flops / (2.0 * fwd.n * fwd.k)  # all the GEMM's rows (MoE: every expert's tokens)
    quant = gathers_quantized(job, fwd)
    gin, ggrad = quant and sharded_input, quant and sharded_grad
    tp = job.layout.tp
    f = [] if fused_input and norm_writes_fp8(job) else _quantise(
        job, f"{fwd.name}.fp8_cast", rows * fwd.k / (tp if gin else 1), False, sharded_input, fwd.groups, gin)
    b = _quantise(job, f"{fwd.name}.grad_fp8_cast", rows * fwd.n / (tp if ggrad else 1), True, sharded_grad,
                  fwd.groups, ggrad)
    b += _gathered_transpose(job, f"{fwd.name}.input", rows * fwd.k) if gin else []
    b += _gathered_transpose(job, f"{fwd.name}.grad", rows * fwd.n) if ggrad else []
    return f, b


def gathers_quantized(job: JobSpec, gemm: ComputeOp) -> bool:
    """Whether the SP all-gather of ``gemm``'s sequence-sharded operand (its input, or a row-parallel
    GEMM's output gradient) carries the quantised tensor: an fp8 GEMM of a stack that quantises
    the shard, then gathers it (``software.fp8_gather_quantized``)."""
    return (job.precision == "fp8" and gemm.fp8 and job.software.fp8_gather_quantized
            and job.layout.sequence_parallel and job.layout.tp > 1)


def gather_bytes(job: JobSpec, gemm: ComputeOp, elements: float, grad: bool = False) -> float:
    """Bytes of the SP all-gather of ``elements`` values of ``gemm``'s input (``grad``: of its
    output gradient) where :func:`gathers_quantized`, else bf16. Transformer Engine 2.9 quantises
    the local shard and gathers that, over NCCL or userbuffers (``pytorch/module/linear.py``: "Cast
    local input tensor if needed" before ``gather_along_first_dim`` /
    ``fill_userbuffers_buffer_for_all_gather``; ``module/base.py`` ``grad_output_preprocess`` for the
    output gradient): one quantised copy with its scales (``Fp8Recipe.saved_bytes``: 1 per-tensor,
    1 + 1/32 MXFP8, 1 + 4/128 blockwise, 1/2 + 1/16 NVFP4), rowwise for the forward GEMM and
    columnwise for the weight gradient's re-gather; an output gradient under a block-scaled recipe
    twice, rowwise for the data gradient and columnwise for the weight gradient (a per-tensor copy
    is transposed once gathered). The reduce-scatters stay bf16."""
    if not gathers_quantized(job, gemm):
        return elements * ACT_BYTES
    r = recipe_of(job)
    return elements * r.saved_bytes * (2 if grad and not r.transpose_bytes else 1)


def layer_casts(model: ModelSpec, job: JobSpec,
                gemms: tuple[tuple[ComputeOp, ...], ...]) -> list[tuple[list[Item], list[Item]]]:
    """:func:`fp8_casts` of a layer's (QKV, attention-out, MLP-up, MLP-down) GEMM triples: QKV's and
    a dense MLP-up's inputs come from a norm (``fused_norm_linear``) and are sequence-sharded
    under SP, as are attention-out's and a dense MLP-down's output gradients."""
    qkv, out, up, down = gemms
    dense = model.experts <= 1
    return [fp8_casts(job, qkv, fused_input=True, sharded_input=True),
            fp8_casts(job, out, sharded_grad=True),
            fp8_casts(job, up, fused_input=dense, sharded_input=dense),
            fp8_casts(job, down, sharded_grad=dense)]


def fp8_attention(job: JobSpec) -> bool:
    """Whether the flash-attention kernels run in fp8 (``software.fp8_attention`` in an fp8 job)."""
    return job.precision == "fp8" and job.software.fp8_attention and job.flash_attention


def attention_casts(model: ModelSpec, lay: Layout, job: JobSpec) -> tuple[list[Item], list[Item]]:
    """(forward, backward) casts of fp8 attention: Q, K and V of this rank's heads before the
    kernel, the output gradient dO before its backward, 4 B per element; none without fp8 attention."""
    if not fp8_attention(job):
        return [], []
    q, kv = model.q_width / lay.tp, model.kv_width / lay.tp
    return ([memory_op("attention.fp8_cast", FP8_CAST_TRANSPOSE_BYTES * lay.tokens * (q + 2 * kv))],
            [memory_op("attention.grad_fp8_cast", FP8_CAST_TRANSPOSE_BYTES * lay.tokens * q, True)])


def bf16_block(block: Block) -> Block:
    """``block`` (built for a bf16 job: no casts) with every GEMM and attention kernel at the bf16
    peak, for the layers an fp8 job keeps in bf16 (``software.fp8_bf16_layers``)."""

    def strip(items: tuple[Item, ...]) -> tuple[Item, ...]:
        return tuple(replace(i, fp8=False) if isinstance(i, ComputeOp) and i.fp8 else i for i in items)

    return replace(block, fwd=strip(block.fwd), bwd=strip(block.bwd))


def saved_input_bytes(job: JobSpec) -> float:
    """Bytes per element of a GEMM input a layer keeps for its backward: an fp8 value with a 1x128
    scale under ``software.fp8_activation_cache`` (DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.2,
    "Low-Precision Storage"); the recipe's quantised columnwise copy (``Fp8Recipe.saved_bytes``)
    for an fp8 job of a stack that keeps it (``software.fp8_saves_quantized``: Transformer
    Engine's Linear, LayerNormLinear and GroupedLinear); else two (bf16)."""
    if job.software.fp8_activation_cache:
        return FP8_1X128_BYTES
    return quantized_copy_bytes(job) or ACT_BYTES


def quantized_copy_bytes(job: JobSpec) -> float:
    """Bytes per element of the quantised copy of a GEMM input an fp8 job of a Transformer Engine
    stack keeps *beside* a bf16 tensor another op keeps anyway (the attention output, which the
    attention kernel saves for its own backward, is also the output projection's input); 0 if the
    stack keeps no quantised copies (``software.fp8_saves_quantized``) or the job is not fp8."""
    if job.precision != "fp8" or not job.software.fp8_saves_quantized:
        return 0.0
    return FP8_RECIPES[job.software.fp8_recipe].saved_bytes


def weights_quantised(job: JobSpec) -> bool:
    """Whether the job holds its transformer layers' weights in the recipe's quantised form only
    (``software.fp8_param_gather`` in an fp8 job)."""
    return job.precision == "fp8" and job.software.fp8_param_gather


def weight_bytes(job: JobSpec) -> float:
    """Bytes per parameter of a transformer layer's weights on the GPU: the recipe's quantised
    copies (``Fp8Recipe.weight_bytes``: rowwise and columnwise; 2 per-tensor, 2 + 1/16 MXFP8,
    1 + 1/128 NVFP4) where :func:`weights_quantised`, else bf16. The embedding, the output layer
    and the norms stay bf16; so do the layers an fp8 job keeps in bf16 (``fp8_bf16_layers``,
    not separated here)."""
    return recipe_of(job).weight_bytes if weights_quantised(job) else ACT_BYTES


def fp8_weight_cache_bytes(job: JobSpec) -> float:
    """Bytes per parameter of the quantised weight copies a Transformer Engine stack keeps beside
    its bf16 weights through a step in an fp8 job (``Fp8Recipe.weight_bytes``: rowwise and
    columnwise), 0 otherwise: TE's Linear quantises a weight at the step's first micro-batch and
    keeps it for the rest (``get_weight_workspace`` with ``cache_name="weight"`` whenever the caller
    passes ``is_first_microbatch``, which Megatron-Core does unless
    ``disable_parameter_transpose_cache``; TE 2.9 pytorch/module/linear.py). Under
    :func:`weights_quantised` those copies are the weights themselves (no bf16 beside them)."""
    if job.precision != "fp8" or weights_quantised(job) or not job.software.fp8_saves_quantized:
        return 0.0
    return recipe_of(job).weight_bytes


def param_gather_bytes(job: JobSpec) -> float:
    """Bytes per parameter of a transformer layer's weights in the ZeRO / FSDP parameter
    all-gather: the recipe's rowwise copy where :func:`weights_quantised` (``Fp8Recipe
    .param_gather_bytes``: 1 per-tensor, 2 MXFP8 through the bf16 gradient buffer, 1/2 + 1/256
    NVFP4), else bf16."""
    return recipe_of(job).param_gather_bytes if weights_quantised(job) else ACT_BYTES
