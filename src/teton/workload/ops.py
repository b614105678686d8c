"""Per-layer operations of a dense or MoE transformer on one GPU, for one micro-batch.

Each block (a transformer layer, the embedding, the output head) is an ordered list of
:class:`ComputeOp` and :class:`Collective` (``workload.items``) for the forward pass and for the
backward pass, as the GPU executes them under tensor (TP), sequence (SP), context (CP) and expert
(EP) parallelism:

* GEMM FLOPs are ``2 m n k``; the backward of each GEMM is a data-gradient GEMM and a
  weight-gradient GEMM of the same FLOPs (Narayanan et al. 2021, eq. 2: 3x forward).
* Memory-bound ops (norms, rotary, activation, residual adds, cross-entropy, optimizer) move
  the bytes they read and write; their backward moves about twice as much.
* The layer's sub-blocks state their models and sources where they are built: the sharded
  GEMMs (:func:`_layer_gemms`), the attention core (:func:`_attention_core`), TP with and
  without SP and the dense MLP (``workload.mlp``), CP (:func:`_cp_comm`), an MoE layer's router,
  token dispatch, grouped expert GEMMs and shared experts (``workload.moe``), the memory-bound
  ops (:func:`_layer_elementwise`), TP collectives run alongside GEMMs (:func:`_tp_overlap`) and
  activation recompute (:func:`_recompute_items`); the fp8 recipe's casts, fp8 attention and norm + cast fusion in
  ``workload.fp8``; the output head and its cross-entropy kernel in ``workload.head``; CUDA-graph
  capture as ``Block.graphed`` (``software.cuda_graphs``: layers or the whole step).
"""

from __future__ import annotations

from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.elementwise import eager_copy_bytes, elementwise_bytes, mlp_activation_bytes, rope_bytes
from teton.workload.fp8 import (
    FP8_CAST_TRANSPOSE_BYTES,
    attention_casts,
    fp8_attention,
    fp8_casts,
    fused_norm_extra_bytes,
    gather_bytes,
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
from teton.workload.mamba import mamba_items
from teton.workload.mixers import (
    MIXER_TP_OVERLAP_BWD,
    MIXER_TP_OVERLAP_FULL,
    MixerKit,
    attention_a2a_bytes,
    attention_core,
    attention_cp_bytes,
    check_mixer,
    cp_comm,
    mixer_params,
    mla_items,
)
from teton.workload.mlp import mlp_items
from teton.workload.mlp import tp_gather as _tp_gather
from teton.workload.mlp import tp_scatter as _tp_scatter
from teton.workload.moe import MoeRows, moe_items, moe_params_per_gpu, moe_rows, routed_gemms
from teton.workload.recompute import sac_op_recompute

# re-exported: callers import these from here
__all__ = ["ACT_BYTES", "FP32", "FP8_CAST_TRANSPOSE_BYTES", "Block", "embedding_block", "fp8_casts", "grad_accumulate",
           "head_block", "layer_block", "layer_params_per_gpu", "pipeline_p2p_bytes", "pipeline_p2p_gather_bytes"]


def layer_params_per_gpu(model: ModelSpec, job: JobSpec) -> float:
    """Parameters of one transformer layer held by one GPU (TP-sharded; an MoE layer's routed
    experts EP- and etp-sharded: ``workload.moe.moe_params_per_gpu``)."""
    lay = job.layout
    t = lay.tp
    sharded, replicated = mixer_params(model)  # the mixer's (``workload.mixers``): MLA keeps some whole
    kind = model.first_layer_type
    norms = kind.sub_blocks * model.norm_params()
    if model.experts > 1:
        return sharded / t + moe_params_per_gpu(model, lay) + norms + replicated
    mlp = model.mlp_params() if kind.ffn != "none" else 0
    return (sharded + mlp) / t + norms + replicated


def _layer_gemms(model: ModelSpec, lay: Layout, acc: int, rows: MoeRows | None = None) -> tuple[tuple[ComputeOp, ...], ...]:
    """The layer's GEMM triples (forward, data gradient, weight gradient): QKV and MLP-up
    column-parallel, attention output and MLP-down row-parallel over TP (Shoeybi et al. 2019).

    MoE (``rows`` given): the routed experts' grouped GEMMs in place of the MLP's
    (``workload.moe.routed_gemms``).
    """
    tok, h, f = lay.tokens, model.hidden, model.ffn_hidden
    qkv = gemm_ops("qkv", tok, lay.local(model.q_width + 2 * model.kv_width), h, acc)
    out = gemm_ops("attn_out", tok, h, lay.local(model.q_width), acc)
    up_width = lay.local((2 if model.mlp == "swiglu" else 1) * f)
    if rows is not None:
        return (qkv, out, *routed_gemms(model, lay, acc, rows))
    return qkv, out, gemm_ops("mlp_up", tok, up_width, h, acc), gemm_ops("mlp_down", tok, h, lay.local(f), acc)


def _layer_elementwise(model: ModelSpec, job: JobSpec) -> tuple[tuple[float, float], ...]:
    """(forward, backward) bytes (``workload.elementwise``) of the norm and the residual add (bias,
    dropout and residual with dropout), over the elementwise tokens; rotary over this rank's Q and
    K (``rope_bytes``: 0 without rotary embeddings); a dense MLP's activation over its local FFN
    width (an MoE layer's activations are ``workload.moe``'s)."""
    lay, fusion = job.layout, job.kernel_fusion
    t, tok, tok_e, h = lay.tp, lay.tokens, lay.elementwise_tokens, model.hidden
    return (elementwise_bytes(model.norm, fusion, tok_e * h),
            elementwise_bytes("bias_dropout_add" if model.dropout else "residual", fusion, tok_e * h),
            rope_bytes(model, job.software.fused_yarn_rope, fusion, tok * (model.q_width + model.kv_width) / t),
            mlp_activation_bytes(model, fusion, tok * model.ffn_hidden / t))


def layer_block(model: ModelSpec, job: JobSpec) -> Block:
    """One transformer layer: forward and backward items for one micro-batch on one GPU, in the
    order the GPU runs them (the sub-blocks' models at their functions)."""
    lay = job.layout
    t = lay.tp
    acc = accum_bytes(job)
    hidden_elements = model.hidden * lay.tokens  # one full hidden-state tensor of this CP rank
    act_in = hidden_elements * ACT_BYTES
    rows = moe_rows(model, job) if model.experts > 1 else None
    qkv, out, up, down = _layer_gemms(model, lay, acc, rows)
    attn_fwd, attn_bwd, score_bytes, dropout_bytes = attention_core(model, lay, job.flash_attention,
                                                                    fp8_attention(job))
    cp_fwd, cp_bwd, cp_regather = cp_comm(job, lay, attention_cp_bytes(model, lay), model.sliding_window,
                                          attention_a2a_bytes(model, lay))
    ((norm_b, norm_bwd_b), (resid_b, resid_bwd_b), (rope_b, rope_bwd_b),
     (act_b, act_bwd_b)) = _layer_elementwise(model, job)
    copies = eager_copy_bytes(model, lay.tokens, t) if job.kernel_fusion == "eager" else {}
    # per-head norms of this rank's queries and keys (model.qk_norm)
    qk_elements = lay.tokens * (model.q_width + model.kv_width) / t
    qk_b, qk_bwd_b = elementwise_bytes(model.norm, job.kernel_fusion, qk_elements) if model.qk_norm else (0.0, 0.0)

    def copy(name: str, backward: bool = False) -> list[Item]:
        """The eager code's copy or gradient sum ``name`` as a memory-bound item (none when fused)."""
        if name not in copies:
            return []
        return [memory_op(name + (".bwd" if backward else ""), copies[name][backward], backward)]

    def ag(name: str, gemm: ComputeOp, grad: bool = False) -> list[Item]:
        return _tp_gather(lay, name, gather_bytes(job, gemm, hidden_elements, grad))

    def rs(name: str) -> list[Item]:
        return _tp_scatter(lay, name, act_in)

    cast = layer_casts(model, job, (qkv, out, up, down))
    attn_cast = attention_casts(model, lay, job)
    # a norm that writes its GEMM's fp8 operand (fused_norm_linear): what it writes beyond bf16
    norm_fp8, norm_tn = fused_norm_extra_bytes(job, lay.elementwise_tokens * model.hidden)

    def norm(name: str, writes_fp8: bool) -> ComputeOp:
        return memory_op(name, norm_b + norm_fp8 * writes_fp8, tn_only_bytes=norm_tn * writes_fp8)

    ffn_fwd, ffn_bwd = (moe_items(model, job, acc, rows, (up, down), cast[2:], act_in) if rows else
                        mlp_items(lay, act_in, up, down, cast[2:], (act_b, act_bwd_b),
                                  grad_sum=copy("mlp_input_grad_sum", True),
                                  gathered=(gather_bytes(job, up[0], hidden_elements),
                                            gather_bytes(job, down[0], hidden_elements, grad=True))))

    mixer_fwd: list[Item] = [
        norm("attn_norm", True), *ag("tp.ag_qkv", qkv[0]), *cast[0][0], qkv[0], memory_op("qk_norm", qk_b),
        memory_op("rope", rope_b),
        *copy("repeat_kv"), *cp_fwd, *attn_cast[0], attn_fwd, memory_op("attn_scores", score_bytes),
        memory_op("attn_dropout", dropout_bytes), *cast[1][0], out[0], *rs("tp.rs_attn"), memory_op("attn_residual", resid_b),
    ]
    ffn_fwd = [norm("mlp_norm", model.experts <= 1), *ffn_fwd, memory_op("mlp_residual", resid_b)]
    ffn_bwd = [memory_op("mlp_residual.bwd", resid_bwd_b, True), *ffn_bwd, memory_op("mlp_norm.bwd", norm_bwd_b, True)]
    mixer_bwd: list[Item] = [
        memory_op("attn_residual.bwd", resid_bwd_b, True), *ag("tp.ag_attn_grad", out[0], grad=True),
        *cast[1][1], out[1], out[2], *copy("attn_out_grad_copy", True),
        memory_op("attn_dropout.bwd", dropout_bytes, True), memory_op("attn_scores.bwd", 2 * score_bytes, True), *cp_regather,
        *attn_cast[1], attn_bwd, *copy("repeat_kv", True), *cp_bwd,
        memory_op("rope.bwd", rope_bwd_b, True), memory_op("qk_norm.bwd", qk_bwd_b, True),
        *ag("tp.ag_qkv_input", qkv[0]), *cast[0][1],
        qkv[1], *copy("qkv_input_grad_sum", True), qkv[2],
        *rs("tp.rs_qkv_grad"), memory_op("attn_norm.bwd", norm_bwd_b, True),
    ]
    attn_replay = (attn_fwd, memory_op("attn_scores", score_bytes), memory_op("attn_dropout", dropout_bytes))
    mixer_fwd, mixer_bwd, attn_replay = _mixer(model, job, acc, MixerKit(norm, norm_bwd_b, (resid_b, resid_bwd_b)),
                                               (mixer_fwd, mixer_bwd, attn_replay))
    if model.first_layer_type.ffn == "none":
        ffn_fwd, ffn_bwd = [], []
    fwd = [*mixer_fwd, *ffn_fwd]
    bwd = [*ffn_bwd, *mixer_bwd, *grad_accumulate(job, layer_params_per_gpu(model, job))]
    if t > 1 and job.tp_overlap != "none":
        fwd, bwd = _tp_overlap(fwd, bwd, job.tp_overlap if lay.sequence_parallel else "bwd", t)
    bwd = [*_recompute_items(fwd, attn_replay, model, job, acc), *bwd]
    return Block("layer", tuple(i for i in fwd if not _empty(i)), tuple(i for i in bwd if not _empty(i)),
                 graphed=job.software.cuda_graphs != "none")


def _mixer(model: ModelSpec, job: JobSpec, acc: int, kit: MixerKit, attention: tuple) -> tuple:
    """(forward, backward, selective-recompute replay) of the layer's mixer sub-block (``model.mixer``):
    ``attention``'s grouped-query attention, MLA, Mamba-2 (``workload.mixers``, ``workload.mamba``)
    or none (an MLP- or MoE-only layer)."""
    check_mixer(model, job)
    mixer = model.first_layer_type.mixer
    if mixer == "mamba":
        return mamba_items(model, job, acc, kit)
    if mixer == "none":
        return [], [], ()
    return mla_items(model, job, acc, kit) if model.mla else attention


# the forward ops a selective job's recompute_modules run again in backward (``_recompute_items``)
_MODULE_OPS = {
    "layernorm": frozenset({"attn_norm", "mlp_norm"}),
    "mla_up_proj": frozenset({"q_norm", "kv_norm", "tp.ag_latents", "q_up.fp8_cast", "q_up", "q_proj.fp8_cast",
                              "q_proj", "kv_up.fp8_cast", "kv_up", "rope"}),
}


# an MoE layer's TP collectives around its shared experts (workload.moe: they stand in for the dense MLP's)
_SHARED_EXPERT_TP = frozenset({"tp.ag_mlp", "tp.rs_mlp"})


def checkpointed_ffn(fwd: list[Item], modules: frozenset[str]) -> set[str]:
    """Names of the forward items that Megatron-Core's whole-module checkpoints among ``modules``
    replay (``tensor_parallel.checkpoint`` / ``te_checkpoint`` of the module: its input kept, its
    forward run again ahead of its backward; Megatron-Core 0.16 ``TransformerLayer._forward_mlp``,
    ``MoELayer.forward``, ``SharedExpertMLP``): ``mlp`` the feed-forward sub-block of a dense
    layer, ``moe`` that of an MoE layer (router, dispatch, experts, combine, shared experts), each
    everything between the pre-MLP norm and the residual add, which stay outside the module;
    ``shared_experts`` the shared experts' GEMMs, activation and TP collectives (their sum into the
    routed output is the MoE layer's)."""
    names = [i.name for i in fwd]
    if "mlp_norm" not in names or "mlp_residual" not in names:
        return set()
    ffn = names[names.index("mlp_norm") + 1:names.index("mlp_residual")]
    moe = "router" in ffn
    out: set[str] = set()
    if ("moe" if moe else "mlp") in modules:
        out.update(ffn)
    if moe and "shared_experts" in modules:
        out.update(n for n in ffn if n.startswith("shared_expert_") or n in _SHARED_EXPERT_TP)
    return out


def _recompute_items(fwd: list[Item], attn: tuple[Item, ...], model: ModelSpec, job: JobSpec,
                     acc: int) -> list[Item]:
    """The ``recompute.*`` items ahead of a layer's backward (``job.recompute``; docs/recompute.md).

    ``full`` replays the whole forward; ``selective`` (Megatron-LM, Korthikanti et al. 2022) the
    attention core ``attn`` (core, scores, dropout), only without flash attention, and the ops of
    the other ``recompute_modules`` it names (Megatron-Core's ``TransformerConfig``: ``layernorm``
    the two pre-norms, ``mla_up_proj`` MLA's latent norms, their TP gather, the up-projections with
    their fp8 casts and rotary; ``moe_act``'s activation is already recomputed by the fused SwiGLU;
    ``mlp``, ``moe`` and ``shared_experts`` their whole sub-block, :func:`checkpointed_ffn`);
    ``selective_op`` (torchtitan's per-op SAC, ``torchtitan/distributed/activation_checkpoint.py``,
    ``_custom_policy`` and the model's ``_save_list``) every op its policy does not save: the 2nd,
    4th, ... ``aten.mm`` of the block (wk, wo, w3 of Llama's separate projections) and the
    memory-bound ops (``workload.recompute``); ``selective_layer`` (torchtitan's per-layer AC,
    ``_apply_layer_sac``) is ``full`` on every N-th layer and nothing on the others: this block is
    a plain layer, ``workload.step_work`` adds the checkpointed one.
    """
    if job.recompute == "full":
        return [as_recompute(i) for i in fwd]
    if job.recompute == "selective":
        mods = job.recomputed_modules
        core = [as_recompute(i) for i in attn] if "core_attn" in mods and not job.flash_attention else []
        names = set().union(*(_MODULE_OPS[m] for m in mods if m in _MODULE_OPS), checkpointed_ffn(fwd, mods))
        return [*core, *(as_recompute(i) for i in fwd if i.name in names)]
    if job.recompute == "selective_op":
        return list(sac_op_recompute(fwd, model, job, acc))
    return []


# (collective, GEMM it runs alongside). Backward (Megatron's async TP,
# LinearWithGradAccumulationAndAsyncCommunication; Korthikanti et al. 2022 Sec. 4.2.2): under
# sequence parallelism the re-gather of a column-parallel GEMM's input runs under its
# data-gradient GEMM and the reduce-scatter of the input gradient under its weight-gradient GEMM;
# without it the input gradient's all-reduce runs under the weight-gradient GEMM (Megatron's
# async_tensor_model_parallel_allreduce); under ``full`` these stay concurrent (the userbuffers'
# ``bulk`` overlaps in Megatron-Bridge's configurations). Forward and the output-gradient gathers
# need the decomposed (collective-matmul, ``ring_exchange``) kernels, pipelined in tp chunks.
_TP_OVERLAP_BWD = {"tp.ag_mlp_input": "mlp_up.dgrad", "tp.rs_mlp_grad": "mlp_up.wgrad",
                   "tp.ag_qkv_input": "qkv.dgrad", "tp.rs_qkv_grad": "qkv.wgrad"}
_TP_OVERLAP_FULL = {"tp.ag_qkv": "qkv", "tp.rs_attn": "attn_out", "tp.ag_mlp": "mlp_up", "tp.rs_mlp": "mlp_down",
                    "tp.ag_mlp_grad": "mlp_down.dgrad", "tp.ag_attn_grad": "attn_out.dgrad"}


def _tp_overlap(fwd: list[Item], bwd: list[Item], mode: str, t: int) -> tuple[list[Item], list[Item]]:
    """Mark the TP collectives that run alongside a GEMM (``job.tp_overlap``: bwd | full; without
    sequence parallelism only the backward all-reduces have a GEMM to hide under); an MoE layer's
    MLP collectives are its shared experts' (``workload.moe``), whose GEMMs stand in for the dense
    MLP's; its routed experts' etp collectives run alone (Megatron's TP communication overlap
    covers TE's linear layers, not the grouped GEMMs). A decomposed reduce-scatter ends with the
    sum of the ``t`` partial chunks (PyTorch 2.13 ``_fused_matmul_reduce_scatter_impl``'s
    ``torch.sum``; the ring exchange's reduce kernel): a memory-bound kernel reading the GEMM's
    whole output and writing this rank's ``1 / t`` of it (``<collective>.reduce``)."""
    from dataclasses import replace

    pairs = dict(_TP_OVERLAP_BWD, **MIXER_TP_OVERLAP_BWD)
    decomposed = {}
    if mode == "full":
        decomposed = dict(_TP_OVERLAP_FULL, **MIXER_TP_OVERLAP_FULL)
        pairs.update(decomposed)

    def mark(items: list[Item], backward: bool) -> list[Item]:
        names = {i.name for i in items if isinstance(i, ComputeOp)}
        out = []
        for it in items:
            if isinstance(it, Collective) and it.name in pairs:
                gemm = pairs[it.name]
                if gemm not in names:
                    gemm = gemm.replace("mlp_", "shared_expert_")
                if gemm not in names:  # pragma: no cover - every pair names a GEMM of its pass
                    raise ValueError(f"{it.name} pairs with {pairs[it.name]}, which this layer does not run")
                it = replace(it, overlap=gemm, chunks=t if it.name in decomposed else 1)
            out.append(it)
            if isinstance(it, Collective) and it.chunks > 1 and it.op == "reduce_scatter":
                out.append(memory_op(f"{it.name}.reduce", it.bytes * (1 + 1 / t), backward))
        return out

    return mark(fwd, False), mark(bwd, True)


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
