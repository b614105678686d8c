"""A layer's token mixer: grouped-query or multi-head latent attention, full or windowed, or Mamba-2.

``workload.ops.layer_block`` builds one layer from its norm, mixer, residual and feed-forward
sub-blocks; ``model.mixer`` (``teton.spec.layer_types``) says which mixer. This module holds what
the attention mixers share with it and the mixers besides Llama's grouped-query attention:

* The attention core (:func:`attention_core`) and the CP exchange of K and V (:func:`cp_comm`);
  TP with and without sequence parallelism around a mixer's column- and row-parallel GEMMs is
  ``workload.mlp``'s (``tp_gather``, ``tp_scatter``).
* Sliding-window attention (GPT-OSS's windowed layers, ``model.sliding_window``): a query sees
  the last ``window`` keys only; a flash kernel skips the blocks outside the band
  (:func:`causal_keys`).
* Multi-head latent attention (:func:`mla_items`; DeepSeek-V2, arXiv 2405.04434, Sec. 2.1;
  DeepSeek-V3, arXiv 2412.19437, Sec. 2.1.1).
* Mamba-2 (``workload.mamba``).
* No mixer (an MLP- or MoE-only layer of a hybrid pattern): the layer is its feed-forward
  sub-block alone, with its one norm and residual; no feed-forward part (a Mamba- or
  attention-only layer): the mixer's sub-block alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from teton.errors import SpecError
from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.elementwise import elementwise_bytes
from teton.workload.fp8 import (
    FP8_CAST_TRANSPOSE_BYTES,
    fp8_attention,
    fp8_casts,
    gather_bytes,
    quantized_copy_bytes,
    saved_input_bytes,
)
from teton.workload.items import ACT_BYTES, FP32, Collective, ComputeOp, Item, gemm_ops, memory_op
from teton.workload.mlp import tp_gather, tp_scatter


def causal_keys(seq_len: int, window: int | None) -> float:
    """Keys a query sees on average under a causal mask: ``s / 2``; within a sliding window of
    ``w < s`` keys, query i sees ``min(i + 1, w)``: ``w - w^2 / (2 s)`` on average."""
    if not window or window >= seq_len:
        return seq_len / 2
    return window * (1 - window / (2 * seq_len))


def attention_widths(model: ModelSpec) -> tuple[int, int, int, int]:
    """Per-token widths of Q, K, V and the output the attention core reads and writes: GQA's
    ``q_width, kv_width, kv_width, q_width``; MLA's per-head K and V after the up-projection,
    ``heads x qk_head_dim`` for Q and K, ``heads x v_head_dim`` for V and the output."""
    if model.mla:
        qk, v = model.heads * model.qk_head_dim, model.heads * model.v_dim
        return qk, qk, v, v
    return model.q_width, model.kv_width, model.kv_width, model.q_width


def attention_core(model: ModelSpec, lay: Layout, flash_attention: bool,
                   fp8: bool = False) -> tuple[ComputeOp, ComputeOp, float, float]:
    """(forward, backward, score bytes, dropout bytes) of the layer's attention core.

    Flash attention, causal: the kernel skips the masked blocks, ``2 * tokens_q * keys_avg *
    heads * (d_qk + d_v)`` FLOPs (GQA: ``4 * tokens * keys_avg * q_width``) with ``keys_avg = s/2``
    (:func:`causal_keys`; a windowed layer's average within its window, the op's ``n`` the window
    the kernel's efficiency is read at). CP uses load-balanced chunks: rank i holds chunks i and
    2CP-1-i, so every rank sees the average. The scores stay on chip (and the dropout masks are
    drawn there); the backward recomputes the scores, 2.5x the forward FLOPs (Dao 2023,
    FlashAttention-2, Sec. 3.2: 5 vs 2 matmuls). Megatron's unfused path: batched GEMMs over
    every (query, key) pair, the mask applied after; backward is four batched GEMMs (2x forward).
    It materialises the scores (write QK^T, softmax read+write, PV read, bf16) and runs torch's
    dropout on the probabilities after the fused softmax: read P, write the dropped P and a 1-byte
    mask; backward reads the gradient and the mask and writes the masked gradient. ``fp8``: the
    flash kernels run in fp8 (``workload.fp8.fp8_attention``).
    """
    t, s, tok, a = lay.tp, lay.seq_len, lay.tokens, ACT_BYTES
    q = model.q_width
    qw, kw, vw, ow = attention_widths(model)
    qkvo_bytes = a * tok * (qw + kw + vw + ow) / t
    heads = lay.local(model.heads)
    if flash_attention:
        keys = causal_keys(s, model.sliding_window)
        w = model.sliding_window
        window = w if w and w < s else 0  # the keys the kernel's efficiency is read at (0: the sequence)
        attn_flops = (2.0 * tok * keys * heads * (model.qk_head_dim + model.v_dim) if model.mla
                      else 4.0 * tok * keys * (q // t))
        return (ComputeOp("attention", "attention", attn_flops, qkvo_bytes, n=window, fp8=fp8),
                ComputeOp("attention.bwd", "attention", 2.5 * attn_flops, 2 * qkvo_bytes, n=window, fp8=fp8,
                          backward=True),
                0.0, 0.0)
    # m: query rows of all local heads, n: keys, k: head dim (Q K^T; P V is the same with n and k swapped)
    attn_flops = 2.0 * tok * s * heads * (model.qk_head_dim + model.v_dim) if model.mla else 4.0 * tok * s * (q // t)
    bmm = dict(m=tok * heads, n=s, k=model.qk_head_dim)
    fwd = ComputeOp("attention", "attention", attn_flops, qkvo_bytes, **bmm)
    bwd = ComputeOp("attention.bwd", "attention", 2.0 * attn_flops, 2 * qkvo_bytes, **bmm, backward=True)
    score_elements = lay.micro_batch * heads * (s // lay.cp) * s
    dropout_bytes = (2 * a + 1) * score_elements if model.dropout else 0.0
    return fwd, bwd, 4.0 * a * score_elements, dropout_bytes


def attention_cp_bytes(model: ModelSpec, lay: Layout) -> float:
    """K and V of the whole sequence, this TP rank's heads: what CP exchanges. MLA exchanges the
    up-projected per-head K and V (Transformer Engine's context-parallel attention takes the
    heads' Q, K and V as a GQA layer's)."""
    if model.mla:
        _, kw, vw, _ = attention_widths(model)
        return ACT_BYTES * lay.micro_batch * lay.seq_len * (kw + vw) / lay.tp
    return ACT_BYTES * lay.micro_batch * lay.seq_len * 2 * model.kv_width / lay.tp


def attention_a2a_bytes(model: ModelSpec, lay: Layout) -> tuple[float, float]:
    """(Q, K and V; the output) bytes of one CP rank's sequence shard, this TP rank's heads: what
    ``cp_algo = a2a`` sends over CP before and after the attention core."""
    qw, kw, vw, ow = attention_widths(model) if model.mla else (model.q_width, model.kv_width, model.kv_width,
                                                                  model.q_width)
    per_token = ACT_BYTES * lay.tokens / lay.tp
    return per_token * (qw + kw + vw), per_token * ow


def cp_comm(job: JobSpec, lay: Layout, kv_bytes: float, window: int | None = None,
            a2a_bytes: tuple[float, float] = (0.0, 0.0)) -> tuple[list[Item], list[Item], list[Item]]:
    """(forward, backward, backward re-gather) CP collectives of one layer's K and V, ``kv_bytes``.

    Llama 3 (Sec. 3.3.2): all-gather K and V before attention, reduce-scatter their gradients after
    its backward; ``job.cp_regather_kv`` keeps only the local chunk and gathers K and V again for
    backward. ``cp_algo = ring``: the K/V blocks (and in backward their gradients) go round a ring
    of ``cp - 1`` steps under the attention kernel. A windowed layer (``window``) gathers the whole
    K and V as a full one does; its ring stops once the window is covered: a rank's two
    load-balanced chunks of ``s / 2cp`` tokens need the ``ceil(2 cp w / s)`` chunks before each
    (ASSUMPTION: the ring skips the steps whose blocks lie wholly outside every query's window;
    Transformer Engine 2.9 refuses sliding windows under p2p, and so does a job that runs its
    attention there: ``teton.spec.job_rules.check_cp_kernel``).
    ``cp_algo = a2a`` (``a2a_bytes``: :func:`attention_a2a_bytes`): Q, K and V go from sequence- to
    head-sharded by all-to-all before the core and the output back after it; backward sends the
    output gradient one way and Q's, K's and V's gradients the other (Transformer Engine 2.9
    ``AttnFuncWithCPAndQKVOA2A``), none of them under the attention kernel; the core then runs the
    whole sequence for ``1 / cp`` of the heads, the same work as a shard of every head.
    ``cp_algo = a2a+p2p`` (hierarchical: ``AttnFuncWithCPAndKVP2P`` with ``cp_group = [a2a, p2p]``):
    Q, K and V all-to-all over the ``cp_a2a`` ranks of the rank's all-to-all group, then the ring
    over the ``cp / cp_a2a`` groups, each step a block of the group's ``1 / cp_a2a`` of the heads'
    K and V under the attention kernel, and the output all-to-all back; backward sends the output
    and its gradient one way before the core's backward (Transformer Engine re-shards both), the
    K / V gradients round the ring under it, and Q's, K's and V's gradients back after it.
    """
    c = lay.cp
    if c > 1 and job.cp_algo == "a2a+p2p":
        return _hierarchical_cp(lay, kv_bytes, a2a_bytes)
    if c > 1 and job.cp_algo == "a2a":
        qkv, out = a2a_bytes
        return ([Collective("cp.a2a_qkv", "all_to_all", "cp", qkv), Collective("cp.a2a_out", "all_to_all", "cp", out)],
                [Collective("cp.a2a_qkv_grad", "all_to_all", "cp", qkv)],
                [Collective("cp.a2a_out_grad", "all_to_all", "cp", out)])
    if c > 1 and job.cp_algo == "ring":
        steps = c - 1 if not window else min(c - 1, math.ceil(2 * c * window / lay.seq_len))
        return ([Collective("cp.kv_ring", "all_gather", "cp", kv_bytes, overlap="attention", ring_steps=steps)],
                [Collective("cp.kv_ring.bwd", "all_gather", "cp", 2 * kv_bytes, overlap="attention.bwd",
                            ring_steps=steps)], [])
    if c > 1:
        regather = [Collective("cp.kv_regather", "all_gather", "cp", kv_bytes)] if job.cp_regather_kv else []
        return ([Collective("cp.kv_gather", "all_gather", "cp", kv_bytes)],
                [Collective("cp.kv_grad_scatter", "reduce_scatter", "cp", kv_bytes)], regather)
    return [], [], []


def _hierarchical_cp(lay: Layout, kv_bytes: float, a2a_bytes: tuple[float, float]
                     ) -> tuple[list[Item], list[Item], list[Item]]:
    """:func:`cp_comm`'s a2a+p2p collectives: all-to-alls on ``cp_a2a``, the ring on ``cp_p2p``."""
    qkv, out = a2a_bytes
    ring_kv, steps = kv_bytes / lay.cp_a2a, lay.cp // lay.cp_a2a - 1
    return ([Collective("cp.a2a_qkv", "all_to_all", "cp_a2a", qkv),
             Collective("cp.kv_ring", "all_gather", "cp_p2p", ring_kv, overlap="attention", ring_steps=steps),
             Collective("cp.a2a_out", "all_to_all", "cp_a2a", out)],
            [Collective("cp.kv_ring.bwd", "all_gather", "cp_p2p", 2 * ring_kv, overlap="attention.bwd",
                        ring_steps=steps), Collective("cp.a2a_qkv_grad", "all_to_all", "cp_a2a", qkv)],
            [Collective("cp.a2a_out_grad", "all_to_all", "cp_a2a", 2 * out)])


@dataclass(frozen=True)
class MixerKit:
    """What a layer lends its mixer: the pre-norm (``norm(name, writes_fp8)``), that norm's
    backward bytes and the residual add's (forward, backward) bytes."""

    norm: Callable[[str, bool], ComputeOp]
    norm_bwd_bytes: float
    residual_bytes: tuple[float, float]


def mla_params(model: ModelSpec) -> tuple[int, int]:
    """(TP-sharded, replicated) parameters of an MLA mixer: Megatron-Core's ``MLASelfAttention``
    (``megatron/core/transformer/multi_latent_attention.py``) builds the Q and KV down-projections
    as duplicated linears (``parallel_mode="duplicated"``: every TP rank holds them whole) and the
    latents' norms replicated; the up-projections and the output projection shard the heads."""
    h, rope = model.hidden, model.qk_rope_head_dim
    q_lora, kv_lora = model.q_lora_rank or 0, model.kv_lora_rank
    replicated = h * (q_lora + kv_lora + rope) + q_lora + kv_lora
    return model.attention_params() - replicated, replicated


def mixer_params(model: ModelSpec) -> tuple[int, int]:
    """(TP-sharded, replicated over TP) parameters of one layer's mixer (``model.mixer`` of a
    uniform model): attention, MLA (:func:`mla_params`), Mamba-2 (every tensor of Megatron-Core's
    ``MambaMixer`` shards its heads / channels / groups over TP) or none."""
    mixer = model.first_layer_type.mixer
    if mixer == "mamba":
        return model.mamba_params(), 0
    if mixer == "none":
        return 0, 0
    return mla_params(model) if model.mla else (model.attention_params(), 0)


def check_mixer(model: ModelSpec, job: JobSpec) -> None:
    """The job settings a layer other than Llama's attention + MLP block cannot run with: the
    eager reference code (``job.kernel_fusion = eager``, HF's Llama) and torchtitan's per-op
    policy (``selective_op``, its projections' save list) are modelled for that block only. (The
    heads TP and CP split are job rules, checked at load: ``teton.spec.job_rules.check_head_split``.)"""
    kind = model.first_layer_type
    if kind.mixer == "attention" and not model.mla and kind.ffn != "none":
        return
    what = {"mamba": "Mamba-2", "none": "MLP-only"}.get(kind.mixer, "MLA" if model.mla else "attention-only")
    if job.kernel_fusion == "eager":
        raise SpecError("job.kernel_fusion", "eager", f"is modelled for Llama's attention + MLP layers, not {what} layers")
    if job.recompute == "selective_op":
        raise SpecError("job.recompute", "selective_op",
                        f"(torchtitan's per-op policy) is modelled for Llama's attention + MLP layers, not {what} layers")


# (collective, GEMM it runs alongside) of the mixers' own TP collectives, as ``workload.ops``'s
# pairs for QKV: the re-gather of MLA's latents / Mamba's in_proj input under that GEMM's data
# gradient, the reduce-scatter of its input gradient under its weight gradient; with the
# decomposed kernels (``tp_overlap: full``) the forward gather and scatter too.
MIXER_TP_OVERLAP_BWD = {"tp.ag_latents_input": "kv_up.dgrad", "tp.rs_latents_grad": "kv_up.wgrad",
                        "tp.ag_in_proj_input": "in_proj.dgrad", "tp.rs_in_proj_grad": "in_proj.wgrad"}
MIXER_TP_OVERLAP_FULL = {"tp.ag_latents": "kv_up", "tp.ag_in_proj": "in_proj", "tp.rs_out_proj": "out_proj",
                         "tp.ag_out_proj_grad": "out_proj.dgrad"}


def _latent_widths(model: ModelSpec) -> tuple[int, int]:
    """(Q input width, KV latent width incl. the shared RoPE key) the up-projections read: the Q
    latent (``q_lora_rank``; without it the hidden state, projected directly) and
    ``kv_lora_rank + qk_rope_head_dim``."""
    return model.q_lora_rank or model.hidden, model.kv_lora_rank + model.qk_rope_head_dim


def mla_items(model: ModelSpec, job: JobSpec, acc: int, kit: MixerKit) -> tuple[list[Item], list[Item], tuple]:
    """(forward, backward, selective-recompute replay) items of an MLA mixer sub-block.

    DeepSeek-V2 (arXiv 2405.04434, Sec. 2.1) as Megatron-Core's ``MLASelfAttention`` runs it:
    the Q down-projection to ``q_lora_rank`` (or Q projected directly) and the joint KV
    down-projection to ``kv_lora_rank + qk_rope_head_dim`` are duplicated over TP (every rank
    holds the weights) and run on the rank's sequence shard under SP; their RMSNorms; the latents
    are all-gathered over TP (SP) into the column-parallel up-projections (Q to ``heads x
    qk_head_dim``, KV to ``heads x (head_dim + v_head_dim)``), the heads split over TP. Rotary
    (Megatron-Core's fused MLA rope) writes the RoPE parts into the full-width Q and K; the core
    runs with the qk and v head dims (:func:`attention_core`); the row-parallel output projection
    reads ``heads x v_head_dim``. The duplicated down-projections' weight gradients, computed on
    each rank's own sequence shard, are summed over TP once a step like the norms' under SP: not
    modelled (a few MB).
    """
    lay = job.layout
    t, tok, tok_e, h, fusion = lay.tp, lay.tokens, lay.elementwise_tokens, model.hidden, job.kernel_fusion
    heads = lay.local(model.heads)
    q_in, kv_in = _latent_widths(model)
    q_lora, kv_lora = model.q_lora_rank, model.kv_lora_rank
    kv_down = gemm_ops("kv_down", tok_e, kv_in, h, acc)
    q_down = gemm_ops("q_down", tok_e, q_lora, h, acc) if q_lora else ()
    q_up = gemm_ops("q_up" if q_lora else "q_proj", tok, heads * model.qk_head_dim, q_in, acc)
    kv_up = gemm_ops("kv_up", tok, heads * (model.d_head + model.v_dim), kv_lora, acc)
    out = gemm_ops("attn_out", tok, h, heads * model.v_dim, acc)
    # the up-projections' inputs are sequence-sharded under SP, as is the output's gradient
    casts = {g[0].name: fp8_casts(job, g, sharded_input=up, sharded_grad=g is out)
             for g, up in ((q_down, False), (kv_down, False), (q_up, True), (kv_up, True), (out, False)) if g}
    core_f, core_b, scores, dropout = attention_core(model, lay, job.flash_attention, fp8_attention(job))
    cp_f, cp_b, cp_re = cp_comm(job, lay, attention_cp_bytes(model, lay), model.sliding_window,
                                attention_a2a_bytes(model, lay))
    norms = [elementwise_bytes(model.norm, fusion, tok_e * r) for r in (q_lora or 0, kv_lora)]
    rope = elementwise_bytes("rope", fusion, tok * heads * 2 * model.qk_head_dim)
    latents = gather_bytes(job, kv_up[0], tok * (q_in + kv_in))  # the up-projections' inputs
    qw, kw, vw, ow = attention_widths(model)
    f8 = FP8_CAST_TRANSPOSE_BYTES * tok / t
    a_cast = ([memory_op("attention.fp8_cast", f8 * (qw + kw + vw))],
              [memory_op("attention.grad_fp8_cast", f8 * ow, True)]) if fp8_attention(job) else ([], [])
    resid_f, resid_b = kit.residual_bytes

    def fw(g: tuple) -> list[Item]:
        return [*casts[g[0].name][0], g[0]] if g else []

    def bw(g: tuple) -> list[Item]:
        return [*casts[g[0].name][1], g[1], g[2]] if g else []

    fwd: list[Item] = [
        kit.norm("attn_norm", False), *fw(q_down), *fw(kv_down),
        memory_op("q_norm", norms[0][0]), memory_op("kv_norm", norms[1][0]),
        *tp_gather(lay, "tp.ag_latents", latents), *fw(q_up), *fw(kv_up), memory_op("rope", rope[0]),
        *cp_f, *a_cast[0], core_f, memory_op("attn_scores", scores), memory_op("attn_dropout", dropout),
        *fw(out), *tp_scatter(lay, "tp.rs_attn", ACT_BYTES * tok * h), memory_op("attn_residual", resid_f),
    ]
    bwd: list[Item] = [
        memory_op("attn_residual.bwd", resid_b, True),
        *tp_gather(lay, "tp.ag_attn_grad", gather_bytes(job, out[0], tok * h, grad=True)),
        *bw(out), memory_op("attn_dropout.bwd", dropout, True), memory_op("attn_scores.bwd", 2 * scores, True),
        *cp_re, *a_cast[1], core_b, *cp_b, memory_op("rope.bwd", rope[1], True),
        *tp_gather(lay, "tp.ag_latents_input", latents), *bw(kv_up), *bw(q_up),
        *tp_scatter(lay, "tp.rs_latents_grad", latents),
        memory_op("kv_norm.bwd", norms[1][1], True), memory_op("q_norm.bwd", norms[0][1], True),
        *bw(kv_down), *bw(q_down), memory_op("attn_norm.bwd", kit.norm_bwd_bytes, True),
    ]
    replay = (core_f, memory_op("attn_scores", scores), memory_op("attn_dropout", dropout))
    return fwd, bwd, replay


def mla_saved_bytes(model: ModelSpec, job: JobSpec, modules: frozenset[str] | None = None) -> float:
    """Bytes an MLA mixer sub-block keeps for backward per micro-batch on one GPU (Korthikanti et
    al. 2022's op-by-op count applied to :func:`mla_items`): the pre-norm's input and output (the
    down-projections' input, SP shard), the latents before their norms and after (the
    up-projections' inputs, SP shard, re-gathered in backward), the core's Q, K, V and its output
    (the output projection's input), the dropout mask and the latents' norm statistics; an
    all-gather CP's gathered K and V. The core's log-sum-exp, the softmax scores (unfused
    attention) and the layer's own pre-norm statistics are ``workload.activations``'.

    ``modules`` (default ``job.recomputed_modules``): ``layernorm`` drops the pre-norm's output,
    ``mla_up_proj`` the normed latents and Q, K, V (Megatron-Core's output-discarding checkpoint
    of the up-projections and rotary: DeepSeek-V3 Sec. 3.2.3); ``software.fp8_activation_cache``
    keeps the down- and up-projections' inputs in fp8 (the output projection's stays two bytes)."""
    lay = job.layout
    t, a, tok, tok_e, h = lay.tp, ACT_BYTES, lay.tokens, lay.elementwise_tokens, model.hidden
    mods = job.recomputed_modules if modules is None else modules
    g = saved_input_bytes(job)
    norm_out = 0 if "layernorm" in mods else 1
    up_kept = 0 if "mla_up_proj" in mods else 1
    qw, kw, vw, ow = attention_widths(model)
    q_in, kv_in = _latent_widths(model)
    latents = (model.q_lora_rank or 0) + model.kv_lora_rank
    saved = (a * tok_e * h + norm_out * g * tok_e * h + a * tok_e * latents + up_kept * g * tok_e * (q_in + kv_in)
             + up_kept * a * tok * (qw + kw + vw) / t + (a + quantized_copy_bytes(job)) * tok * ow / t
             + (1 if model.dropout else 0) * tok_e * h + FP32 * tok_e * 2)
    if lay.cp > 1 and job.cp_algo == "all_gather" and not job.cp_regather_kv:
        saved += attention_cp_bytes(model, lay)
    return saved
