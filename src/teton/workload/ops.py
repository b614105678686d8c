"""Per-layer operations of a dense or MoE transformer on one GPU, for one micro-batch.

Each block (a transformer layer, the embedding, the output head) is an ordered list of
:class:`ComputeOp` and :class:`Collective` (``workload.items``) for the forward pass and for the
backward pass, as the GPU executes them under tensor (TP), sequence (SP), context (CP) and expert
(EP) parallelism:

* GEMM FLOPs are ``2 m n k``; the backward of each GEMM is a data-gradient GEMM and a
  weight-gradient GEMM of the same FLOPs (Narayanan et al. 2021, eq. 2: 3x forward).
* Memory-bound ops (norms, rotary, activation, residual adds, cross-entropy, optimizer) move
  the bytes they read and write; their backward moves about twice as much.
* The layer's sub-blocks state their models and sources where they are built: the sharded and
  MoE GEMMs (:func:`_layer_gemms`), the attention core (:func:`_attention_core`), TP with and
  without SP (:func:`_tp_gather`, :func:`_tp_scatter`), CP (:func:`_cp_comm`), MoE routing and
  the EP all-to-alls (:func:`_moe_routing`), the memory-bound ops (:func:`_layer_elementwise`),
  TP collectives run alongside GEMMs (:func:`_tp_overlap`) and activation recompute
  (:func:`_recompute_items`); the fp8 recipe's casts, fp8 attention and norm + cast fusion in
  ``workload.fp8``; the output head and its cross-entropy kernel in ``workload.head``; CUDA-graph
  capture as ``Block.graphed`` (``software.cuda_graphs``: layers or the whole step).
"""

from __future__ import annotations

from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.elementwise import eager_copy_bytes, elementwise_bytes
from teton.workload.fp8 import (
    FP8_CAST_TRANSPOSE_BYTES,
    attention_casts,
    fp8_attention,
    fp8_casts,
    fused_norm_extra_bytes,
    layer_casts,
)
from teton.workload.gradients import accum_bytes, grad_accumulate
from teton.workload.head import head_block
from teton.workload.items import (
    ACT_BYTES,
    FP32,
    Block,
    Collective,
    ComputeOp,
    Item,
    as_recompute,
    gemm_ops,
    memory_op,
)
from teton.workload.recompute import sac_op_recompute

# re-exported: callers import these from here
__all__ = ["ACT_BYTES", "FP32", "FP8_CAST_TRANSPOSE_BYTES", "Block", "embedding_block", "fp8_casts", "grad_accumulate",
           "head_block", "layer_block", "layer_params_per_gpu", "pipeline_p2p_bytes", "pipeline_p2p_gather_bytes"]


def layer_params_per_gpu(model: ModelSpec, job: JobSpec) -> float:
    """Parameters of one transformer layer held by one GPU (TP- and EP-sharded)."""
    lay = job.layout
    t = lay.tp
    if model.experts > 1:
        return (model.attention_params() / t + model.experts * model.mlp_params() / (t * lay.ep)
                + 2 * model.norm_params() + model.hidden * model.experts)
    return (model.attention_params() + model.mlp_params()) / t + 2 * model.norm_params()



def _layer_gemms(model: ModelSpec, lay: Layout, acc: int) -> tuple[tuple[ComputeOp, ...], ...]:
    """The layer's GEMM triples (forward, data gradient, weight gradient): QKV and MLP-up
    column-parallel, attention output and MLP-down row-parallel over TP (Shoeybi et al. 2019).

    MoE (Shazeer et al. 2017; Fedus et al. 2021): the experts' GEMMs process ``top_k`` tokens per
    token (balanced routing), TP-sharded like a dense MLP, as one grouped GEMM over the local
    experts; each expert sees ``tokens * top_k * ep / experts`` rows, which sets the GEMM shape.
    """
    tok, h, f = lay.tokens, model.hidden, model.ffn_hidden
    qkv = gemm_ops("qkv", tok, lay.local(model.q_width + 2 * model.kv_width), h, acc)
    out = gemm_ops("attn_out", tok, h, lay.local(model.q_width), acc)
    up_width = lay.local((2 if model.mlp == "swiglu" else 1) * f)
    if model.experts <= 1:
        return qkv, out, gemm_ops("mlp_up", tok, up_width, h, acc), gemm_ops("mlp_down", tok, h, lay.local(f), acc)
    rows = tok * model.top_k
    per_expert = max(1, rows * lay.ep // model.experts)
    up = tuple(_scaled_rows(g, rows, per_expert, i) for i, g in enumerate(gemm_ops("expert_up", tok, up_width, h, acc)))
    down = tuple(_scaled_rows(g, rows, per_expert, i)
                 for i, g in enumerate(gemm_ops("expert_down", tok, h, lay.local(f), acc)))
    return qkv, out, up, down


def _attention_core(model: ModelSpec, lay: Layout, flash_attention: bool,
                    fp8: bool = False) -> tuple[ComputeOp, ComputeOp, float, float]:
    """(forward, backward, score bytes, dropout bytes) of the layer's attention core.

    Flash attention, causal: the kernel skips the masked blocks, ``4 * tokens_q * keys_avg *
    heads * d_head`` FLOPs with ``keys_avg = s/2`` (CP uses load-balanced chunks: rank i holds
    chunks i and 2CP-1-i, so every rank sees s/2 keys on average); the scores stay on chip (and
    the dropout masks are drawn there); the backward recomputes the scores, 2.5x the forward FLOPs
    (Dao 2023, FlashAttention-2, Sec. 3.2: 5 vs 2 matmuls). Megatron's unfused path: batched GEMMs
    over every (query, key) pair, the mask applied after; backward is four batched GEMMs (2x
    forward). It materialises the scores (write QK^T, softmax read+write, PV read, bf16) and runs
    torch's dropout on the probabilities after the fused softmax: read P, write the dropped P and
    a 1-byte mask; backward reads the gradient and the mask and writes the masked gradient.
    ``fp8``: the flash kernels run in fp8 (``workload.fp8.fp8_attention``).
    """
    t, s, tok, a = lay.tp, lay.seq_len, lay.tokens, ACT_BYTES
    q = model.q_width
    qkvo_bytes = a * tok * (2 * q + 2 * model.kv_width) / t
    if flash_attention:
        attn_flops = 4.0 * tok * (s / 2) * (q // t)
        return (ComputeOp("attention", "attention", attn_flops, qkvo_bytes, fp8=fp8),
                ComputeOp("attention.bwd", "attention", 2.5 * attn_flops, 2 * qkvo_bytes, fp8=fp8, backward=True),
                0.0, 0.0)
    # m: query rows of all local heads, n: keys, k: head dim (Q K^T; P V is the same with n and k swapped)
    attn_flops = 4.0 * tok * s * (q // t)
    bmm = dict(m=tok * lay.local(model.heads), n=s, k=model.d_head)
    fwd = ComputeOp("attention", "attention", attn_flops, qkvo_bytes, **bmm)
    bwd = ComputeOp("attention.bwd", "attention", 2.0 * attn_flops, 2 * qkvo_bytes, **bmm, backward=True)
    score_elements = lay.micro_batch * lay.local(model.heads) * (s // lay.cp) * s
    dropout_bytes = (2 * a + 1) * score_elements if model.dropout else 0.0
    return fwd, bwd, 4.0 * a * score_elements, dropout_bytes


def _tp_gather(lay: Layout, name: str, nbytes: float) -> list[Item]:
    """TP with SP (Korthikanti et al. 2022, Sec. 4.2.2): the all-gather before the QKV and MLP-up
    GEMMs; in backward the transpose of a reduce-scatter, and the re-all-gather of a sharded input
    for the weight gradients (Megatron keeps only the shard). None without SP."""
    return [Collective(name, "all_gather", "tp", nbytes)] if lay.sequence_parallel else []


def _tp_scatter(lay: Layout, name: str, nbytes: float) -> list[Item]:
    """The reduce-scatter after the attention-output and MLP-down GEMMs under SP (in backward: the
    transpose of an all-gather); without SP one all-reduce after each row-parallel GEMM forward,
    one per column-parallel GEMM backward. None for TP = 1."""
    if lay.tp == 1:
        return []
    return [Collective(name, "reduce_scatter" if lay.sequence_parallel else "all_reduce", "tp", nbytes)]


def _cp_comm(job: JobSpec, lay: Layout, kv_bytes: float) -> tuple[list[Item], list[Item], list[Item]]:
    """(forward, backward, backward re-gather) CP collectives of one layer's K and V, ``kv_bytes``.

    Llama 3 (Sec. 3.3.2): all-gather K and V before attention, reduce-scatter their gradients after
    its backward; ``job.cp_regather_kv`` keeps only the local chunk and gathers K and V again for
    backward. ``cp_algo = ring``: the K/V blocks (and in backward their gradients) go round a ring
    of ``cp - 1`` steps under the attention kernel.
    """
    c = lay.cp
    if c > 1 and job.cp_algo == "ring":
        return ([Collective("cp.kv_ring", "all_gather", "cp", kv_bytes, overlap="attention", ring_steps=c - 1)],
                [Collective("cp.kv_ring.bwd", "all_gather", "cp", 2 * kv_bytes, overlap="attention.bwd",
                            ring_steps=c - 1)], [])
    if c > 1:
        regather = [Collective("cp.kv_regather", "all_gather", "cp", kv_bytes)] if job.cp_regather_kv else []
        return ([Collective("cp.kv_gather", "all_gather", "cp", kv_bytes)],
                [Collective("cp.kv_grad_scatter", "reduce_scatter", "cp", kv_bytes)], regather)
    return [], [], []


def _moe_routing(model: ModelSpec, lay: Layout, acc: int) -> tuple[list[Item], list[Item], list[Item], list[Item]]:
    """(router and dispatch, dispatch gradient and router backward, combine, combine gradient) of an
    MoE layer; all empty for a dense one.

    Megatron-Core's all-to-all token dispatcher: a router GEMM (kept in high precision) and its
    softmax / top-k, then with EP an all-to-all dispatch of each token's ``top_k`` copies to the
    ranks holding their experts and an all-to-all combine back (two more in backward).
    """
    if model.experts <= 1:
        return [], [], [], []
    tok_e, h = lay.elementwise_tokens, model.hidden
    router = gemm_ops("router", tok_e, model.experts, h, acc, fp8=False)
    a2a_bytes = ACT_BYTES * lay.tokens * model.top_k * h / lay.tp  # this rank's share of the token copies
    fwd: list[Item] = [router[0], memory_op("router.softmax_topk", 3 * FP32 * tok_e * model.experts)]
    bwd: list[Item] = [router[1], router[2]]
    if lay.ep <= 1:
        return fwd, bwd, [], []
    return ([*fwd, Collective("ep.dispatch", "all_to_all", "ep", a2a_bytes)],
            [Collective("ep.dispatch_grad", "all_to_all", "ep", a2a_bytes), *bwd],
            [Collective("ep.combine", "all_to_all", "ep", a2a_bytes)],
            [Collective("ep.combine_grad", "all_to_all", "ep", a2a_bytes)])


def _layer_elementwise(model: ModelSpec, lay: Layout, fusion: str) -> tuple[tuple[float, float], ...]:
    """(forward, backward) bytes (``workload.elementwise``) of the norm and the residual add (bias,
    dropout and residual with dropout), over the elementwise tokens; rotary over this rank's Q and
    K (0 without RoPE); the MLP activation over the routed tokens' local FFN width."""
    t, tok, tok_e, h = lay.tp, lay.tokens, lay.elementwise_tokens, model.hidden
    k_route = model.top_k if model.experts > 1 else 1
    return (elementwise_bytes(model.norm, fusion, tok_e * h),
            elementwise_bytes("bias_dropout_add" if model.dropout else "residual", fusion, tok_e * h),
            (elementwise_bytes("rope", fusion, tok * (model.q_width + model.kv_width) / t)
             if model.position_embedding == "rope" else (0.0, 0.0)),
            elementwise_bytes(model.mlp, fusion, tok * k_route * model.ffn_hidden / t))


def layer_block(model: ModelSpec, job: JobSpec) -> Block:
    """One transformer layer: forward and backward items for one micro-batch on one GPU, in the
    order the GPU runs them (the sub-blocks' models at their functions)."""
    lay = job.layout
    t = lay.tp
    acc = accum_bytes(job)
    act_in = model.hidden * lay.tokens * ACT_BYTES  # one full hidden-state tensor of this CP rank
    qkv, out, up, down = _layer_gemms(model, lay, acc)
    attn_fwd, attn_bwd, score_bytes, dropout_bytes = _attention_core(model, lay, job.flash_attention,
                                                                     fp8_attention(job))
    # K and V of the whole sequence, this TP rank's heads
    kv_bytes = ACT_BYTES * lay.micro_batch * lay.seq_len * 2 * model.kv_width / t
    cp_fwd, cp_bwd, cp_regather = _cp_comm(job, lay, kv_bytes)
    moe_fwd, moe_bwd, moe_combine, moe_combine_bwd = _moe_routing(model, lay, acc)
    ((norm_b, norm_bwd_b), (resid_b, resid_bwd_b), (rope_b, rope_bwd_b),
     (act_b, act_bwd_b)) = _layer_elementwise(model, lay, job.kernel_fusion)
    copies = eager_copy_bytes(model, lay.tokens, t) if job.kernel_fusion == "eager" else {}

    def copy(name: str, backward: bool = False) -> list[Item]:
        """The eager code's copy or gradient sum ``name`` as a memory-bound item (none when fused)."""
        if name not in copies:
            return []
        return [memory_op(name + (".bwd" if backward else ""), copies[name][backward], backward)]

    def ag(name: str) -> list[Item]:
        return _tp_gather(lay, name, act_in)

    def rs(name: str) -> list[Item]:
        return _tp_scatter(lay, name, act_in)

    cast = layer_casts(model, job, (qkv, out, up, down))
    attn_cast = attention_casts(model, lay, job)
    # a norm that writes its GEMM's fp8 operand (fused_norm_linear): what it writes beyond bf16
    norm_fp8, norm_tn = fused_norm_extra_bytes(job, lay.elementwise_tokens * model.hidden)

    def norm(name: str, writes_fp8: bool) -> ComputeOp:
        return memory_op(name, norm_b + norm_fp8 * writes_fp8, tn_only_bytes=norm_tn * writes_fp8)

    fwd: list[Item] = [
        norm("attn_norm", True), *ag("tp.ag_qkv"), *cast[0][0], qkv[0], memory_op("rope", rope_b),
        *copy("repeat_kv"), *cp_fwd, *attn_cast[0], attn_fwd, memory_op("attn_scores", score_bytes),
        memory_op("attn_dropout", dropout_bytes), *cast[1][0], out[0], *rs("tp.rs_attn"), memory_op("attn_residual", resid_b),
        norm("mlp_norm", model.experts <= 1), *ag("tp.ag_mlp"), *moe_fwd,
        *cast[2][0], up[0], memory_op("mlp_act", act_b),
        *cast[3][0], down[0], *moe_combine, *rs("tp.rs_mlp"), memory_op("mlp_residual", resid_b),
    ]
    bwd: list[Item] = [
        memory_op("mlp_residual.bwd", resid_bwd_b, True), *ag("tp.ag_mlp_grad"), *moe_combine_bwd,
        *cast[3][1], down[1], down[2], memory_op("mlp_act.bwd", act_bwd_b, True), *ag("tp.ag_mlp_input"),
        *cast[2][1], up[1], *copy("mlp_input_grad_sum", True), up[2], *moe_bwd, *rs("tp.rs_mlp_grad"),
        memory_op("mlp_norm.bwd", norm_bwd_b, True),
        memory_op("attn_residual.bwd", resid_bwd_b, True), *ag("tp.ag_attn_grad"),
        *cast[1][1], out[1], out[2], *copy("attn_out_grad_copy", True),
        memory_op("attn_dropout.bwd", dropout_bytes, True), memory_op("attn_scores.bwd", 2 * score_bytes, True), *cp_regather,
        *attn_cast[1], attn_bwd, *copy("repeat_kv", True), *cp_bwd,
        memory_op("rope.bwd", rope_bwd_b, True), *ag("tp.ag_qkv_input"), *cast[0][1],
        qkv[1], *copy("qkv_input_grad_sum", True), qkv[2],
        *rs("tp.rs_qkv_grad"), memory_op("attn_norm.bwd", norm_bwd_b, True),
        *grad_accumulate(job, layer_params_per_gpu(model, job)),
    ]
    if t > 1 and job.tp_overlap != "none":
        fwd, bwd = _tp_overlap(fwd, bwd, job.tp_overlap if lay.sequence_parallel else "bwd", t)
    attn_replay = (attn_fwd, memory_op("attn_scores", score_bytes), memory_op("attn_dropout", dropout_bytes))
    bwd = [*_recompute_items(fwd, attn_replay, model, job, acc), *bwd]
    return Block("layer", tuple(i for i in fwd if not _empty(i)), tuple(i for i in bwd if not _empty(i)),
                 graphed=job.software.cuda_graphs != "none")


def _recompute_items(fwd: list[Item], attn: tuple[Item, ...], model: ModelSpec, job: JobSpec,
                     acc: int) -> list[Item]:
    """The ``recompute.*`` items ahead of a layer's backward (``job.recompute``; docs/recompute.md).

    ``full`` replays the whole forward; ``selective`` (Megatron-LM, Korthikanti et al. 2022) the
    attention core ``attn`` (core, scores, dropout), only without flash attention;
    ``selective_op`` (torchtitan's per-op SAC, ``torchtitan/distributed/activation_checkpoint.py``,
    ``_custom_policy`` and the model's ``_save_list``) every op its policy does not save: the 2nd,
    4th, ... ``aten.mm`` of the block (wk, wo, w3 of Llama's separate projections) and the
    memory-bound ops (``workload.recompute``); ``selective_layer`` (torchtitan's per-layer AC,
    ``_apply_layer_sac``) is ``full`` on every N-th layer and nothing on the others: this block is
    a plain layer, ``workload.step_work`` adds the checkpointed one.
    """
    if job.recompute == "full":
        return [as_recompute(i) for i in fwd]
    if job.recompute == "selective" and not job.flash_attention:
        return [as_recompute(i) for i in attn]
    if job.recompute == "selective_op":
        return list(sac_op_recompute(fwd, model, job, acc))
    return []


# (collective, GEMM it runs alongside). Backward (Megatron's async TP,
# LinearWithGradAccumulationAndAsyncCommunication; Korthikanti et al. 2022 Sec. 4.2.2): under
# sequence parallelism the re-gather of a column-parallel GEMM's input runs under its
# data-gradient GEMM and the reduce-scatter of the input gradient under its weight-gradient GEMM;
# without it the input gradient's all-reduce runs under the weight-gradient GEMM (Megatron's
# async_tensor_model_parallel_allreduce). Forward and the output-gradient gathers need the
# decomposed (collective-matmul) kernels.
_TP_OVERLAP_BWD = {"tp.ag_mlp_input": "mlp_up.dgrad", "tp.rs_mlp_grad": "mlp_up.wgrad",
                   "tp.ag_qkv_input": "qkv.dgrad", "tp.rs_qkv_grad": "qkv.wgrad"}
_TP_OVERLAP_FULL = {"tp.ag_qkv": "qkv", "tp.rs_attn": "attn_out", "tp.ag_mlp": "mlp_up", "tp.rs_mlp": "mlp_down",
                    "tp.ag_mlp_grad": "mlp_down.dgrad", "tp.ag_attn_grad": "attn_out.dgrad"}


def _tp_overlap(fwd: list[Item], bwd: list[Item], mode: str, t: int) -> tuple[list[Item], list[Item]]:
    """Mark the TP collectives that run alongside a GEMM (``job.tp_overlap``: bwd | full; without
    sequence parallelism only the backward all-reduces have a GEMM to hide under); MoE layers'
    expert GEMMs stand in for the dense MLP's."""
    from dataclasses import replace

    pairs = dict(_TP_OVERLAP_BWD)
    if mode == "full":
        pairs.update(_TP_OVERLAP_FULL)

    def mark(items: list[Item]) -> list[Item]:
        names = {i.name for i in items if isinstance(i, ComputeOp)}
        out = []
        for it in items:
            if isinstance(it, Collective) and it.name in pairs:
                gemm = pairs[it.name]
                if gemm not in names:
                    gemm = gemm.replace("mlp_", "expert_")
                if gemm not in names:  # pragma: no cover - every pair names a GEMM of its pass
                    raise ValueError(f"{it.name} pairs with {pairs[it.name]}, which this layer does not run")
                it = replace(it, overlap=gemm, chunks=t if mode == "full" else 1)
            out.append(it)
        return out

    return mark(fwd), mark(bwd)


def _scaled_rows(op: ComputeOp, rows: int, per_expert: int, which: int) -> ComputeOp:
    """A GEMM of ``op``'s shape over ``rows`` token rows, split into experts of ``per_expert`` rows.

    ``which``: 0 forward (m = rows), 1 data gradient (m = rows), 2 weight gradient (k = rows).
    FLOPs and bytes scale with the rows; the shape the efficiency curve sees is one expert's.
    """
    from dataclasses import replace

    if which == 2:
        scale = rows / op.k
        return replace(op, flops=op.flops * scale, bytes=op.bytes * scale, k=per_expert)
    scale = rows / op.m
    return replace(op, flops=op.flops * scale, bytes=op.bytes * scale, m=per_expert)


def _empty(item: Item) -> bool:
    return isinstance(item, ComputeOp) and item.flops == 0 and item.bytes == 0


def embedding_block(model: ModelSpec, job: JobSpec) -> Block:
    """Vocab-parallel input embedding: lookup, then a TP reduce-scatter (SP) or all-reduce; eager
    unless the whole step is a CUDA graph (``software.cuda_graphs: full``)."""
    lay = job.layout
    t, sp, tok = lay.tp, lay.sequence_parallel, lay.tokens
    act_in = ACT_BYTES * tok * model.hidden
    lookup = memory_op("embedding.lookup", 2 * act_in)
    comm: list[Item] = []
    if t > 1:
        comm = [Collective("tp.embedding", "reduce_scatter" if sp else "all_reduce", "tp", act_in)]
    grad = memory_op("embedding.grad_scatter_add", 2 * act_in + FP32 * tok * model.hidden, True)
    bwd_comm: list[Item] = [Collective("tp.embedding_grad", "all_gather", "tp", act_in)] if sp else []
    accumulate = grad_accumulate(job, lay.local_vocab(model.vocab) * model.hidden)
    return Block("embedding", (lookup, *comm), (*bwd_comm, grad, *accumulate),
                 graphed=job.software.cuda_graphs == "full")


def pipeline_p2p_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes one GPU sends to the next pipeline stage per micro-batch: the hidden state, SP-sharded
    (or scattered over TP, ``job.pp_scatter_gather``)."""
    lay = job.layout
    sharded = lay.sequence_parallel or pipeline_p2p_gather_bytes(model, job)
    return ACT_BYTES * lay.tokens * model.hidden / (lay.tp if sharded else 1)


def pipeline_p2p_gather_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes of the TP all-gather that rebuilds a scattered pipeline message on the receiving
    stage (``job.pp_scatter_gather`` without sequence parallelism), 0 otherwise."""
    lay = job.layout
    if not job.pp_scatter_gather or lay.tp == 1 or lay.sequence_parallel:
        return 0.0
    return ACT_BYTES * job.layout.tokens * model.hidden
