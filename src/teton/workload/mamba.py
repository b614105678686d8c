"""A Mamba-2 mixer sub-block on one GPU for one micro-batch: its ops, activations and FLOPs.

Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060) as Megatron-Core's
``MambaMixer`` runs it in a hybrid model (Nemotron-H, arXiv 2504.03624), for ``d_in = H x P``
(``model.mamba_inner``: heads x head dim), ``G`` groups of the ``N``-wide B and C
(``model.mamba_groups``, ``model.mamba_state_dim``):

* the layer's pre-norm fused into ``in_proj`` (Transformer Engine's LayerNormColumnParallelLinear),
  a column-parallel GEMM from ``h`` to z, x, B, C and dt (``2 d_in + 2 G N + H``); TP shards the
  heads and the groups (``d_in / tp``, ``G / tp``, ``H / tp`` per rank: tp must divide G and H);
* the depthwise causal conv1d (kernel ``model.mamba_conv_kernel``) with SiLU over x, B and C, one
  memory-bound kernel (Dao AILab's ``causal_conv1d``): read and write each element once;
* the SSD chunked scan (:func:`ssd_scan_ops`), a kernel of its own;
* the gated RMSNorm ``norm(y * silu(z))`` per group (no TP communication), memory-bound;
* ``out_proj``, row-parallel from ``d_in``, then the TP reduce-scatter (SP) or all-reduce and the
  residual add.

Model FLOPs follow Megatron-Bridge's hybrid formula (``training/utils/flop_utils.py`` at
NVIDIA-NeMo/Megatron-Bridge@067f987): forward in_proj ``2 B s h (2 d_in + 2 G N + H)``, scan
``7 B s d_in N``, out_proj ``2 B s d_in h``, three times that for training. Context parallelism
(``job.cp``) is Megatron-Core's all-to-all one (:func:`cp_all_to_alls`): the conv and the scan run
on the whole sequence for ``1 / cp`` of the rank's heads, the same elements as its sequence shard
for all of them.
"""

from __future__ import annotations

from teton.spec.job import JobSpec
from teton.spec.job_rules import check_head_split
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.fp8 import fp8_casts, gather_bytes
from teton.workload.items import ACT_BYTES, FP32, Collective, ComputeOp, Item, gemm_ops, memory_op
from teton.workload.mixers import MixerKit
from teton.workload.mlp import tp_gather, tp_scatter

# SSD chunk length Q: Megatron-Core's MambaMixer default (megatron/core/ssm/mamba_mixer.py,
# ``chunk_size=128``, Megatron-Core 0.16 sdist; the Mamba-2 reference module's default is 256)
SSD_CHUNK = 128
# mamba_ssm 2.3.2's combined scan (ops/triton/ssd_combined.py) as Megatron-Core's MambaMixer calls it
# (z=None, its gated norm outside): forward, _mamba_chunk_scan_combined_fwd: chunk cumsum, chunk
# state, state passing, C B^T (bmm_chunk), chunk scan
SSD_KERNELS = 5
# backward, _mamba_chunk_scan_combined_bwd: dt's clone, the four forward kernels again (cumsum, C B^T,
# chunk state, state passing), dstates, state passing bwd, dx, dB, dC, dCB, two bmm_chunk bwd, the
# ddA update, flip, cumsum, flip, ddA_cumsum (stable), two adds, chunk cumsum bwd
SSD_BWD_KERNELS = 21


def check_mamba(model: ModelSpec, job: JobSpec) -> None:
    """Megatron-Core's MambaMixer shards heads and B/C groups over TP, and over CP after its
    all-to-all (``teton.spec.job_rules.check_head_split``, which the job checks run at load)."""
    check_head_split(job, model)


def group_repeats(model: ModelSpec, lay: Layout) -> int:
    """How many CP ranks share one B / C group (``MambaContextParallel.group_repeat_count``: a TP
    rank's groups repeated when there are fewer of them than CP ranks), 1 otherwise."""
    groups = model.mamba_groups // lay.tp
    return lay.cp // groups if lay.cp > groups else 1


def cp_all_to_alls(model: ModelSpec, lay: Layout) -> tuple[list[Item], list[Item], list[Item], list[Item]]:
    """(before the scan, after it, and their backward transposes) of Mamba-2's all-to-all context
    parallelism (Megatron-Core 0.16 ``ssm/mamba_context_parallel.py``): before the conv and scan,
    ``pre_conv_ssm`` moves z, x, B, C and dt from sequence-sharded to head-sharded (five
    all-to-alls over CP; B and C repeated ``group_repeats`` times first), each split and
    concatenated around its all-to-all, then the halves the attention layers' load balancing
    permuted put back in order; after the scan, ``post_conv_ssm`` reorders y and sends it back
    (one all-to-all). Each reorder is a copy: read and write the tensor. None without CP."""
    if lay.cp == 1:
        return [], [], [], []
    d_in, gn, heads = _local(model, lay.tp)
    tok, r = lay.tokens, group_repeats(model, lay)
    widths = {"z": d_in, "x": d_in, "B": gn * r, "C": gn * r, "dt": heads}
    sent = [Collective(f"cp.a2a_{k}", "all_to_all", "cp", ACT_BYTES * tok * w) for k, w in widths.items()]
    copies = 2 * ACT_BYTES * tok * sum(widths.values())  # read + write, per reorder
    y = ACT_BYTES * tok * d_in
    pre = [memory_op("mamba.cp_split", copies), *sent, memory_op("mamba.cp_reorder", 2 * copies)]
    post = [memory_op("mamba.cp_reorder_y", 2 * y), Collective("cp.a2a_y", "all_to_all", "cp", y),
            memory_op("mamba.cp_concat_y", 2 * y)]
    post_bwd = [memory_op("mamba.cp_concat_y.bwd", 2 * y, True), Collective("cp.a2a_y.bwd", "all_to_all", "cp", y),
                memory_op("mamba.cp_reorder_y.bwd", 2 * y, True)]
    pre_bwd = [memory_op("mamba.cp_reorder.bwd", 2 * copies, True),
               *(Collective(f"{c.name}.bwd", "all_to_all", "cp", c.bytes) for c in sent),
               memory_op("mamba.cp_split.bwd", copies, True)]
    return pre, post, post_bwd, pre_bwd


def _local(model: ModelSpec, tp: int) -> tuple[int, int, int]:
    """(d_in, G N, H) of one TP rank."""
    return model.mamba_inner // tp, model.mamba_groups * model.mamba_state_dim // tp, model.n_mamba_heads // tp


def ssd_scan_ops(model: ModelSpec, tokens: int, tp: int, repeats: int = 1) -> tuple[ComputeOp, ComputeOp]:
    """(forward, backward) of the SSD chunked scan (Dao & Gu 2024, Sec. 6-7, the ``ssd_minimal``
    listing) over ``tokens`` on one TP rank: per chunk of ``Q`` tokens the intra-chunk quadratic
    part ``C B^T`` (``2 Q N`` per token and group) and its product with X (``2 Q P`` per token and
    head), the chunk states ``B^T X`` and the inter-chunk output ``C h`` (``2 N P`` each per token
    and head); state passing is ``O(1/Q)``. Bytes: :func:`ssd_scan_bytes`.

    Throughput (ASSUMPTION): the kernels are tensor-core matmuls over chunk tiles, fused like a
    flash-attention kernel, so the op is an ``attention`` op priced at the flash kernel's measured
    efficiency, bounded by its HBM bytes (``engine.compute``'s roofline); no stored source gives
    SSD's achieved fraction of peak (Dao & Gu 2024 report its time against FlashAttention-2, not
    a fraction). Backward: the gradients of each matmul (2x) plus the chunk states recomputed
    (mamba_ssm 2.3.2's ``ops/triton/ssd_combined.py``: ``_mamba_chunk_scan_combined_bwd`` runs
    ``_chunk_state_fwd`` and ``_state_passing_fwd`` again from the saved inputs).
    """
    d_in, gn, heads = _local(model, tp)
    gn *= repeats
    q, n = SSD_CHUNK, model.mamba_state_dim
    flops = tokens * (2.0 * q * gn + 2.0 * q * d_in + 4.0 * n * d_in)
    fwd_bytes, bwd_bytes = ssd_scan_bytes(model, tokens, tp, repeats)
    return (ComputeOp("mamba.ssd_scan", "attention", flops, fwd_bytes, kernels=SSD_KERNELS),
            ComputeOp("mamba.ssd_scan.bwd", "attention", 2 * flops + tokens * 2.0 * n * d_in, bwd_bytes,
                      backward=True, kernels=SSD_BWD_KERNELS))


def ssd_scan_bytes(model: ModelSpec, tokens: int, tp: int, repeats: int = 1) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the SSD scan over ``tokens`` on one TP rank, kernel by
    kernel as mamba_ssm 2.3.2's combined scan reads and writes them (:data:`SSD_KERNELS`,
    :data:`SSD_BWD_KERNELS`), per token in units of x or dout (``d_in`` bf16), B or C (``G N``
    bf16), the chunk's C B^T (``G Q`` fp32) and the chunk states (``d_in N / Q``, fp32 as
    computed, bf16 where state passing hands them on):

    * forward: x 3 (chunk state, chunk scan read; the output written), B and C 4, C B^T 2, states 2
      fp32 + 2 bf16;
    * backward: x and dout 11, B and C 15, C B^T 6, states 6 fp32 + 5 bf16 (the forward's four
      kernels again, then dstates, their passing, dx, dB, dC, dCB and the two bmm backwards; the
      per-head dt and dA terms are small and not counted)."""
    d_in, gn, _ = _local(model, tp)
    gn *= repeats
    a, cb = ACT_BYTES, FP32 * (model.mamba_groups // tp) * repeats * SSD_CHUNK  # C B^T per token
    st = d_in * model.mamba_state_dim / SSD_CHUNK
    fwd = a * 3 * d_in + a * 4 * gn + 2 * cb + (2 * FP32 + 2 * a) * st
    bwd = a * 11 * d_in + a * 15 * gn + 6 * cb + (6 * FP32 + 5 * a) * st
    return tokens * fwd, tokens * bwd


def mamba_items(model: ModelSpec, job: JobSpec, acc: int, kit: MixerKit) -> tuple[list[Item], list[Item], tuple]:
    """(forward, backward, selective-recompute replay: none) items of a Mamba-2 mixer sub-block
    (module docstring)."""
    check_mamba(model, job)
    lay = job.layout
    t, tok, h = lay.tp, lay.tokens, model.hidden
    d_in, gn, heads = _local(model, t)
    in_proj = gemm_ops("in_proj", tok, 2 * d_in + 2 * gn + heads, h, acc)
    out_proj = gemm_ops("out_proj", tok, h, d_in, acc)
    c_in = fp8_casts(job, in_proj, fused_input=True, sharded_input=True)
    c_out = fp8_casts(job, out_proj, sharded_grad=True)
    r = group_repeats(model, lay)
    conv = ACT_BYTES * tok * (d_in + 2 * gn * r)  # x, B, C: read once, written once (forward)
    scan_f, scan_b = ssd_scan_ops(model, tok, t, r)
    cp_pre, cp_post, cp_post_bwd, cp_pre_bwd = cp_all_to_alls(model, lay)
    # gated RMSNorm: read y and z, write the output; backward reads dy, y, z and writes dy, dz
    gate = ACT_BYTES * tok * d_in
    act = ACT_BYTES * tok * h
    resid_f, resid_b = kit.residual_bytes
    fwd: list[Item] = [
        kit.norm("mamba_norm", True), *tp_gather(lay, "tp.ag_in_proj", gather_bytes(job, in_proj[0], tok * h)),
        *c_in[0], in_proj[0], *cp_pre,
        memory_op("mamba.conv1d", 2 * conv), scan_f, *cp_post, memory_op("mamba.gated_norm", 3 * gate),
        *c_out[0], out_proj[0], *tp_scatter(lay, "tp.rs_out_proj", act), memory_op("mamba_residual", resid_f),
    ]
    bwd: list[Item] = [
        memory_op("mamba_residual.bwd", resid_b, True),
        *tp_gather(lay, "tp.ag_out_proj_grad", gather_bytes(job, out_proj[0], tok * h, grad=True)),
        *c_out[1], out_proj[1], out_proj[2], memory_op("mamba.gated_norm.bwd", 5 * gate, True), *cp_post_bwd,
        scan_b, memory_op("mamba.conv1d.bwd", 3 * conv, True), *cp_pre_bwd,
        *tp_gather(lay, "tp.ag_in_proj_input", gather_bytes(job, in_proj[0], tok * h)),
        *c_in[1], in_proj[1], in_proj[2], *tp_scatter(lay, "tp.rs_in_proj_grad", act),
        memory_op("mamba_norm.bwd", kit.norm_bwd_bytes, True),
    ]
    return fwd, bwd, ()


def mamba_saved_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes a Mamba-2 mixer sub-block keeps for backward per micro-batch on one GPU, op by op
    (Korthikanti et al. 2022's count applied to :func:`mamba_items`): the pre-norm's input and
    output (in_proj's input, SP shard), in_proj's output (z for the gate, x B C for the conv, dt
    for the scan), the conv's output (the scan's x, B, C), the scan's output y (the gated norm's
    input), the norm's output (out_proj's input), the dropout mask and the gated norm's
    per-group statistics. The SSD chunk states are recomputed in backward, not kept
    (:func:`ssd_scan_ops`); the layer's pre-norm statistics are ``workload.activations``'."""
    lay = job.layout
    t, a, tok, tok_e, h = lay.tp, ACT_BYTES, lay.tokens, lay.elementwise_tokens, model.hidden
    d_in, gn, heads = _local(model, t)
    gn *= group_repeats(model, lay)  # under CP the all-to-all's output, B and C repeated, is what is kept
    return (2 * a * tok_e * h + a * tok * (2 * d_in + 2 * gn + heads) + a * tok * (d_in + 2 * gn)
            + 2 * a * tok * d_in + (1 if model.dropout else 0) * tok_e * h
            + FP32 * tok * model.mamba_groups / t)

