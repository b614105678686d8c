"""Mixture-of-experts layers on one GPU for one micro-batch: routing, token permutation and
dispatch, the experts' grouped GEMMs, shared experts, expert tensor parallelism, capacity and
router imbalance.

The model is Megatron-Core's MoE layer (``megatron/core/transformer/moe/``, core_r0.10 and later,
"MoE parallel folding": Liu et al. 2025, arXiv 2504.14960, the experts' own TP degree ``etp`` and
EP over the ``tp cp dp`` ranks of a stage), in the order the GPU runs it:

* **Router** (``TopKRouter``): one GEMM of the rank's tokens onto the experts, kept out of fp8,
  then softmax and top-k in fp32. A rank routes its sequence-parallel shard, ``tokens / tp``:
  ``MoELayer`` takes the SP-sharded hidden state and runs no TP all-gather or reduce-scatter
  around the routed experts (it refuses tp > 1 without SP in training; teton takes that case as a
  local split of the replicated input and an all-gather of the output over TP, ``tp.ag_moe_out``,
  and of the input gradient in backward, ``tp.ag_moe_input_grad``).
* **Dispatch** (``MoEAlltoAllTokenDispatcher.token_permutation``): ``moe_utils.permute`` copies
  each token's hidden vector once per routed expert, grouped by expert; an all-to-all over EP
  sends the copies to the ranks holding their experts (``ep.dispatch``); with expert TP an
  all-gather over the expert-TP group (``gather_from_sequence_parallel_region`` on it; axis
  ``etp``, the TP groups themselves when etp = tp) gives each of its ranks the whole group's
  copies; with more than one local expert ``sort_chunks_by_idxs`` regroups them by expert.
  **Combine** (``token_unpermutation``) is the reverse: unsort, reduce-scatter over etp (the
  row-parallel down projection's partial sums), all-to-all back (``ep.combine``),
  ``moe_utils.unpermute`` (the sum of each token's copies, each weighted by its probability in
  the experts' activation: :func:`moe_saved_bytes`). Backward runs
  each as its transpose (an all-to-all's is an all-to-all, an all-gather's a reduce-scatter).
  A permutation is memory-bound: it reads and writes each copy's hidden vector.
* **Experts** (``GroupedMLP`` / ``TEGroupedMLP``): the local experts' up projections as one
  grouped GEMM (``items.gemm_ops`` with ``groups``), the activation, the down projections as
  another; ``expert_ffn / etp`` columns per rank (column- then row-parallel over etp), over the
  rows the rank's etp group received: ``etp x tokens/tp x top_k`` on average. Per rank that is
  ``2 (tokens/tp) top_k (mlp_matrices h expert_ffn)`` FLOPs whatever etp: etp trades rows for width.
* **Shared experts** (DeepSeek-V3, arXiv 2412.19437, Sec. 2.1.2; DeepSeekMoE, arXiv 2401.06066;
  Megatron-Core's ``SharedExpertMLP``): one dense MLP of width ``shared_experts x expert_ffn``
  that every token runs, TP-sharded over the dense layers' TP with their SP collectives
  (``workload.mlp``), its output added to the routed experts' (``shared_experts.add``).
* **Capacity** (GShard, Lepikhin et al. 2020, arXiv 2006.16668, Sec. 2.2; Switch Transformer,
  Fedus et al. 2021, arXiv 2101.03961, Sec. 2.2: capacity = tokens / experts x capacity factor;
  Megatron-Core's ``moe_expert_capacity_factor``): an expert takes at most ``capacity_factor``
  times its balanced share; the dropped copies are neither sent nor computed. None: dropless.
  With ``model.pad_to_capacity`` (``moe_pad_expert_input_to_capacity``, ``moe_utils.permute``'s
  ``drop_and_pad``) every expert's buffer is filled to its capacity: the permuted, dispatched and
  computed rows are ``capacity_factor`` times the balanced share whatever the routing.
* **Imbalance** (:func:`router_imbalance`): the synchronous all-to-alls wait for the most loaded
  rank, so every item on the receiving side (the all-to-alls, the etp collectives, the sorts,
  the grouped GEMMs and their activation) carries ``load = min(imbalance, capacity_factor)``
  times the mean rows (padded to capacity: ``load = capacity_factor`` whatever the imbalance); ``job.moe_router_balance = forced`` makes the imbalance 1.

* **Node-limited routing** (DeepSeek-V3, arXiv 2412.19437, Sec. 2.1.2 and 3.2.2; DeepEP):
  with ``model.moe_max_nodes`` a token's copies reach at most that many NVLink domains, and every
  EP all-to-all is DeepEP's hierarchical one: each token crosses the network once per destination
  domain and is forwarded over NVLink there (``collectives.node_limited``, priced by the block
  timer on the EP groups' rails and domains).
* **fp8 dispatch** (DeepSeek-V3 Sec. 3.3.2, DeepEP's FP8 dispatch): with
  ``software.moe_fp8_dispatch`` the all-to-alls towards the experts (``ep.dispatch`` and, in
  backward, ``ep.combine_grad``: the activation gradient before the down projections) move e4m3
  values with an fp32 scale per 128 channels (:data:`FP8_DISPATCH_BYTES`); the combine and the
  dispatch's gradient stay bf16.

* **Host sync** (Megatron-Core 0.15 ``MoEAlltoAllTokenDispatcher.preprocess``): the dispatcher
  copies the token counts per expert to the host and waits for them (``cuda_sync_point``: before
  the EP all-to-all, whose split sizes they are; without EP before the experts, whose
  ``GroupedLinear`` takes ``m_splits`` on the host), so in an eager forward the CPU cannot run
  ahead of the GPU past that point, taken here as the end of ``moe.permute`` in both cases (the
  one sort between is a single memory-bound kernel; ``ComputeOp.host_sync``,
  ``engine.block_timer``). The backward reuses the counts: no sync. Padded to capacity, every
  count is known on the host beforehand (``preprocess``'s ``drop_and_pad`` branch returns before
  any sync point): no sync.

ASSUMPTION: the all-to-alls do not overlap compute (Megatron's ``moe_shared_expert_overlap`` and
a2a overlap off, its defaults; no DualPipe), the fp8 dispatch's quantisation costs what the up
projection's own fp8 cast costs (no extra kernel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from teton.order_stats import expected_max_std_normal
from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import ModelSpec
from teton.workload.elementwise import clamped_copy_bytes, mlp_activation_bytes
from teton.workload.fp8 import fp8_casts, gather_bytes, saved_input_bytes
from teton.workload.items import (
    ACT_BYTES,
    FP8_1X128_BYTES,
    FP32,
    Collective,
    ComputeOp,
    Item,
    gemm_ops,
    memory_op,
)
from teton.workload.mlp import Casts, mlp_items

GemmTriple = tuple[ComputeOp, ...]
# bytes per element of an fp8 dispatch: the e4m3 value and an fp32 scale per 128 channels (DeepEP's
# FP8 dispatch with 1x128 block scales; DeepSeek-V3, arXiv 2412.19437, Sec. 3.3.2)
FP8_DISPATCH_BYTES = FP8_1X128_BYTES


def router_imbalance(ep: int, tokens: float, top_k: int) -> float:
    """The most loaded of ``ep`` EP ranks' routed copies relative to the mean, for one micro-batch
    in which each rank's experts share the copies of ``tokens`` tokens (``top_k`` each).

    Model: an aux-loss-balanced router (GShard's / Switch's load-balancing loss drives each
    expert's expected share to ``1 / experts``) with independent routing choices: the copies fall
    on the ranks as a multinomial with equal cells (balls into bins), mean ``mu = tokens top_k``
    each. In the normal approximation the cells are ``mu + sqrt(mu) (Z_i - mean(Z))`` for ``ep``
    independent standard normals ``Z`` (variance ``mu (1 - 1/ep)``, summing to the total), so the
    largest is on average ``mu + sqrt(mu) E[max Z]`` (:func:`~teton.order_stats.expected_max_std_normal`); for many ranks
    ``E[max Z] -> sqrt(2 ln ep)``, the heavily loaded balls-into-bins maximum ``m/n + sqrt(2 (m/n)
    ln n)`` of Raab & Steger (1998, "Balls into Bins: a simple and tight analysis", Theorem 1).
    Returns ``1 + E[max Z] / sqrt(mu)``; 1 for one rank.

    ASSUMPTION: tokens route independently. Real routers correlate the tokens of a sequence, so
    measured imbalance is at least this (a floor, growing with EP, shrinking with the batch).
    """
    mean = tokens * top_k
    if ep <= 1 or mean <= 0:
        return 1.0
    return 1.0 + expected_max_std_normal(ep) / math.sqrt(mean)


@dataclass(frozen=True)
class MoeRows:
    """Token rows of one MoE layer on one GPU for one micro-batch (:func:`moe_rows`)."""

    tokens: int  # tokens this rank routes: its sequence-parallel shard, tokens / tp
    sent: float  # routed copies it permutes and dispatches: top_k per token, less the dropped
    expert: float  # rows the most loaded rank's grouped GEMMs run: its etp group's copies x load
    local_experts: int  # routed experts per EP rank
    load: float  # the most loaded rank's copies relative to the mean (imbalance, capped by capacity)


def moe_rows(model: ModelSpec, job: JobSpec) -> MoeRows:
    """The rows of an MoE layer of ``job`` (module docstring: capacity and imbalance)."""
    lay = job.layout
    tokens = max(1, lay.tokens // lay.tp)
    cap = model.capacity_factor
    imbalance = (1.0 if job.moe_router_balance == "forced"
                 else router_imbalance(lay.ep, lay.etp * tokens, model.top_k))
    if model.pad_to_capacity:  # every expert's buffer is its capacity, full or padded
        load = kept = float(cap or 1.0)  # the spec requires capacity_factor with padding
    else:
        load = imbalance if cap is None else min(imbalance, cap)
        kept = 1.0 if cap is None else min(1.0, cap)
    return MoeRows(tokens, tokens * model.top_k * kept, lay.etp * tokens * model.top_k * load,
                   model.experts // lay.ep, load)


def expert_tp_axis(lay: Layout) -> str:
    """The axis of the expert-TP collectives: ``etp`` (Megatron-Core's expert tensor-parallel
    group), or ``tp`` when etp = tp (the same ranks, placed whatever the order)."""
    return "tp" if lay.etp == lay.tp else "etp"


def routed_params_per_gpu(model: ModelSpec, lay: Layout) -> float:
    """Routed-expert parameters one GPU holds per layer: its ``experts / ep`` experts of width
    ``expert_ffn``, sharded over etp; 0 for a dense layer."""
    return model.experts * model.mlp_params() / (lay.etp * lay.ep) if model.experts > 1 else 0.0


def moe_params_per_gpu(model: ModelSpec, lay: Layout) -> float:
    """An MoE block's parameters on one GPU: its routed experts, the shared experts (TP-sharded
    like a dense MLP) and the router (replicated)."""
    return (routed_params_per_gpu(model, lay) + model.shared_experts * model.mlp_params() / lay.tp
            + model.router_params())


def moe_ffn_elements(model: ModelSpec, job: JobSpec) -> float:
    """Elements of the MoE block's FFN intermediate on one GPU (per ``expert_ffn`` column, as a
    dense MLP's ``tokens ffn_hidden / tp``): the grouped GEMMs' rows x ``expert_ffn / etp``, plus
    every token x the shared width / tp."""
    lay = job.layout
    return (moe_rows(model, job).expert * model.expert_ffn / lay.etp
            + lay.tokens * model.shared_experts * model.expert_ffn / lay.tp)


def moe_saved_bytes(model: ModelSpec, job: JobSpec, modules: frozenset[str] = frozenset()) -> float:
    """Bytes an MoE block keeps for backward beyond its norm's output, one micro-batch on one GPU:

        4 T E  +  g R h  +  (2 s + p) R f / etp  +  (2 s + p) N S f / tp  (+ 2 T k h)

    for N the micro-batch's tokens on the rank, T = N / tp the ones it routes (its SP shard), E
    experts, R the rows its grouped GEMMs run (``moe_rows``), h hidden, f the expert FFN width, S
    shared experts: the router's fp32
    probabilities, the grouped up-projection's input (gathered over etp) at ``g`` bytes
    (``workload.fp8.saved_input_bytes``: bf16, a Transformer Engine fp8 job's quantised copy, or
    DeepSeek-V3's fp8 cache), the SwiGLU's gate and up at ``s`` bytes (bf16, fp8 only under
    ``software.fp8_activation_cache``: DeepSeek-V3 Sec. 3.3.2, which recomputes the product) and
    the product the down projections keep for their weight gradient at ``p = g`` bytes
    (``software.glu_product_saved``: Megatron-Core's fused SwiGLU returns it, TE's GroupedLinear /
    Linear save their input; ``recompute_modules: moe_act`` drops the routed experts'), and the
    shared experts' FFN-wide tensors likewise (their input is the SP-sharded norm output, re-gathered).

    ``unpermute`` keeps nothing: Megatron-Core 0.13 on (``TEGroupedMLP.forward``'s
    ``weighted_bias_swiglu_impl`` / ``activation_func_with_probs``;
    ``MoEAlltoAllTokenDispatcher.token_unpermutation`` calls ``unpermute`` without ``probs``)
    weights each copy by its probability in the experts' activation, whose saved input gives the
    probabilities' gradient, so the unpermute is a plain sum of the copies. Megatron-Core 0.10-0.12
    (``unpermute(..., probs=self.probs)``, read in their sdists) weighted the copies in the
    unpermute, which keeps them (``T k h`` bf16) for that gradient: ``software.moe_probs_in_experts``
    off, the NeMo 25.02 and 25.04 presets.

    Recompute ``modules`` that checkpoint a whole module keep only its input, the norm's output
    counted by the caller: ``moe`` keeps nothing of the block, ``shared_experts`` nothing of the
    shared experts (Megatron-Core 0.16 ``MoELayer`` / ``SharedExpertMLP``)."""
    if "moe" in modules:
        return 0.0
    lay = job.layout
    rows = moe_rows(model, job)
    a, h = ACT_BYTES, model.hidden
    g = saved_input_bytes(job)
    s = FP8_1X128_BYTES if job.software.fp8_activation_cache else a  # the SwiGLU's inputs: GEMM outputs
    glu = 2 * (s + clamped_copy_bytes(model, modules))  # per FFN column: gate and up (and their clamped copy)
    # the product the down projections keep (software.glu_product_saved), unless recomputed
    kept = job.software.glu_product_saved and not job.software.fp8_activation_cache
    product = g if kept and "moe_act" not in modules else 0.0
    routed = (FP32 * rows.tokens * model.experts + g * rows.expert * h
              + (glu + product) * rows.expert * model.expert_ffn / lay.etp)
    shared = 0 if "shared_experts" in modules else model.shared_experts
    unpermute = 0 if job.software.moe_probs_in_experts else a * rows.tokens * model.top_k * h
    return routed + unpermute + (glu + (g if kept else 0.0)) * lay.tokens * shared * model.expert_ffn / lay.tp


def routed_gemms(model: ModelSpec, lay: Layout, acc: int, rows: MoeRows) -> tuple[GemmTriple, GemmTriple]:
    """(up, down) grouped GEMM triples of the rank's routed experts: ``expert_ffn / etp`` columns
    (gate and up under SwiGLU), over the most loaded rank's rows, one group per local expert."""
    f, h = model.expert_ffn // lay.etp, model.hidden
    up_width = (2 if model.mlp == "swiglu" else 1) * f
    return (gemm_ops("expert_up", rows.expert, up_width, h, acc, groups=rows.local_experts),
            gemm_ops("expert_down", rows.expert, h, f, acc, groups=rows.local_experts))


def moe_items(model: ModelSpec, job: JobSpec, acc: int, rows: MoeRows, routed: tuple[GemmTriple, GemmTriple],
              casts: Casts, act_in: float) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of an MoE block after its norm (module docstring): router, routed
    experts with their dispatch and combine, shared experts. ``routed``: :func:`routed_gemms`,
    ``casts`` their fp8 casts; ``act_in``: one full hidden-state tensor."""
    lay = job.layout
    router = gemm_ops("router", rows.tokens, model.experts, model.hidden, acc, fp8=False)
    routed_fwd, routed_bwd = _routed_items(model, job, rows, routed, casts)
    shared_fwd, shared_bwd = _shared_items(model, job, acc, act_in)
    split = lay.tp > 1 and not lay.sequence_parallel  # each TP rank routes its slice of the replicated input
    add = 3 * ACT_BYTES * lay.elementwise_tokens * model.hidden if model.shared_experts else 0.0
    fwd: list[Item] = [router[0], memory_op("router.softmax_topk", 3 * FP32 * rows.tokens * model.experts),
                       *routed_fwd, *_collective("tp.ag_moe_out", "all_gather", "tp", act_in, split),
                       *shared_fwd, memory_op("shared_experts.add", add)]
    bwd: list[Item] = [*shared_bwd, *routed_bwd, router[1], router[2],
                       *_collective("tp.ag_moe_input_grad", "all_gather", "tp", act_in, split),
                       memory_op("moe.input_grad_sum", add, True)]
    return fwd, bwd


def _collective(name: str, op: str, axis: str, nbytes: float, present: bool) -> list[Item]:
    return [Collective(name, op, axis, nbytes)] if present else []


def _a2a(name: str, nbytes: float, model: ModelSpec, present: bool) -> list[Item]:
    """An all-to-all over EP of ``nbytes``: node-limited (DeepEP's hierarchical one) when the model
    limits its routing to ``moe_max_nodes`` domains (module docstring)."""
    limit = model.moe_max_nodes or 0
    return [Collective(name, "all_to_all", "ep", nbytes, max_nodes=limit, top_k=model.top_k if limit else 0)] if present else []


def _routed_items(model: ModelSpec, job: JobSpec, rows: MoeRows, routed: tuple[GemmTriple, GemmTriple],
                  casts: Casts) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of the routed experts: permute, dispatch, grouped GEMMs, combine,
    unpermute (module docstring). All-to-all size: the most loaded rank's received copies (it
    sends the mean), in fp8 for the dispatch and the combine's gradient with
    ``software.moe_fp8_dispatch``; the etp collectives': the group's gathered copies (nccl-tests' S)."""
    lay = job.layout
    a, h = ACT_BYTES, model.hidden
    (up, down), ep, etp, axis = routed, lay.ep > 1, lay.etp > 1, expert_tp_axis(lay)
    perm = 2 * a * rows.sent * h
    sort = 2 * a * rows.expert * h if rows.local_experts > 1 else 0.0
    a2a, gathered = a * h * rows.expert / lay.etp, a * h * rows.expert
    a2a_in = a2a * (FP8_DISPATCH_BYTES / a if job.software.moe_fp8_dispatch else 1.0)  # towards the experts
    act_f, act_b = mlp_activation_bytes(model, job.kernel_fusion, rows.expert * model.expert_ffn / lay.etp)
    fwd: list[Item] = [
        memory_op("moe.permute", perm, host_sync=not model.pad_to_capacity), *_a2a("ep.dispatch", a2a_in, model, ep),
        *_collective("etp.dispatch_gather", "all_gather", axis, gathered, etp), memory_op("moe.sort_chunks", sort),
        *casts[0][0], up[0], memory_op("expert_act", act_f), *casts[1][0], down[0], *_down_bias(model, rows)[0],
        memory_op("moe.unsort_chunks", sort), *_collective("etp.combine_scatter", "reduce_scatter", axis, gathered, etp),
        *_a2a("ep.combine", a2a, model, ep), memory_op("moe.unpermute", perm)]
    bwd: list[Item] = [
        memory_op("moe.unpermute.bwd", perm, True), *_a2a("ep.combine_grad", a2a_in, model, ep),
        *_collective("etp.combine_grad_gather", "all_gather", axis, gathered, etp),
        memory_op("moe.unsort_chunks.bwd", sort, True), *_down_bias(model, rows)[1], *casts[1][1], down[1], down[2],
        memory_op("expert_act.bwd", act_b, True), *casts[0][1], up[1], up[2], memory_op("moe.sort_chunks.bwd", sort, True),
        *_collective("etp.dispatch_grad_scatter", "reduce_scatter", axis, gathered, etp),
        *_a2a("ep.dispatch_grad", a2a, model, ep), memory_op("moe.permute.bwd", perm, True)]
    return fwd, bwd


# Bytes per element of the down projections' output that Megatron-Core's per-expert bias add moves
# (TEGroupedMLP._apply_bias, 0.13-0.16: ``cat([t + b * p ...]).to(t.dtype)``, the routing
# probabilities p in the router's dtype: bf16 unless moe_router_dtype asks for fp32, which GPT-OSS's
# Megatron-Bridge 0.6 configuration does not): forward b * p written (2), the add reading t and it
# and writing (6), the cat (4), the cast a no-op; backward b's and p's gradients, each a product
# written and read back by a sum (2 + 2 + 2 each); the add's and the cat's gradients are views
EXPERT_BIAS_BYTES = (12.0, 12.0)


def _down_bias(model: ModelSpec, rows: MoeRows) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of the routed experts' down-projection bias (``model.bias``):
    Transformer Engine's GroupedLinear returns it unapplied (Megatron-Core's TEGroupedMLP builds
    ``linear_fc2`` with ``skip_bias_add=True``) and ``_apply_bias`` adds it expert by expert, scaled
    by each row's routing probability (:data:`EXPERT_BIAS_BYTES`; two kernels an expert and the cat
    forward, four an expert backward). The up projection's bias is the GEMM's
    epilogue (``skip_bias_add=False``), its gradient the weight-gradient GEMM's: nothing more."""
    if not model.bias:
        return [], []
    elements, n = rows.expert * model.hidden, rows.local_experts
    return ([memory_op("expert_down.bias", EXPERT_BIAS_BYTES[0] * elements, kernels=2 * n + 1)],
            [memory_op("expert_down.bias.bwd", EXPERT_BIAS_BYTES[1] * elements, True, kernels=4 * n)])


def _shared_items(model: ModelSpec, job: JobSpec, acc: int, act_in: float) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of the shared experts: a dense MLP of width ``shared_experts x
    expert_ffn`` over every token (``workload.mlp``), its input not from a fused norm; none without."""
    if not model.shared_experts:
        return [], []
    lay = job.layout
    f, h = model.shared_experts * model.expert_ffn, model.hidden
    up = gemm_ops("shared_expert_up", lay.tokens, lay.local((2 if model.mlp == "swiglu" else 1) * f), h, acc)
    down = gemm_ops("shared_expert_down", lay.tokens, h, lay.local(f), acc)
    casts = [fp8_casts(job, up, sharded_input=True), fp8_casts(job, down, sharded_grad=True)]
    act = mlp_activation_bytes(model, job.kernel_fusion, lay.tokens * f / lay.tp)
    gathered = (gather_bytes(job, up[0], lay.tokens * h), gather_bytes(job, down[0], lay.tokens * h, grad=True))
    return mlp_items(lay, act_in, up, down, casts, act, "shared_expert_act", gathered=gathered)
