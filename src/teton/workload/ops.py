"""Per-layer operations of a dense transformer on one GPU, for one micro-batch.

Each block (a transformer layer, the embedding, the output head) is an ordered list of
:class:`ComputeOp` and :class:`Collective` for the forward pass and for the backward pass, as the
GPU executes them under tensor (TP), sequence (SP) and context (CP) parallelism:

* GEMM FLOPs are ``2 m n k``; the backward of each GEMM is a data-gradient GEMM and a
  weight-gradient GEMM of the same FLOPs (Narayanan et al. 2021, eq. 2: 3x forward).
* Causal attention forward FLOPs are ``4 * tokens_q * keys_avg * heads * d_head`` with
  ``keys_avg = s/2`` (CP uses load-balanced chunks: rank i holds chunks i and 2CP-1-i, so every
  rank sees s/2 keys on average); the flash-attention backward recomputes the scores, 2.5x the
  forward FLOPs (Dao 2023, FlashAttention-2, Sec. 3.2: 5 vs 2 matmuls).
* Memory-bound ops (norms, rotary, activation, residual adds, cross-entropy, optimizer) move
  the bytes they read and write; their backward moves about twice as much.
* TP with SP (Korthikanti et al. 2022, Sec. 4.2.2): all-gather before the QKV and MLP-up
  GEMMs, reduce-scatter after the output and MLP-down GEMMs; in backward the transposes, plus
  a re-all-gather of the sharded inputs for the weight gradients (Megatron keeps only the shard).
  Without SP: one all-reduce after each row-parallel GEMM forward, one per column-parallel
  GEMM backward.
* CP (Llama 3, Sec. 3.3.2): all-gather of K and V before attention, reduce-scatter of their
  gradients after its backward.
* MoE (Shazeer et al. 2017; Fedus et al. 2021; Megatron-Core's all-to-all token dispatcher):
  a router GEMM, then with EP an all-to-all dispatch of each token's ``top_k`` copies to the
  ranks holding their experts and an all-to-all combine back (two more in backward). The
  experts' GEMMs process ``top_k`` tokens per token (balanced routing), TP-sharded like a dense
  MLP; each expert sees ``tokens * top_k * ep / experts`` rows, which sets the GEMM shape.
* Activation recompute (``job.recompute``; docs/recompute.md), as ``recompute.*`` items ahead
  of the layer's backward: ``full`` replays the whole forward; ``selective`` (Megatron-LM,
  Korthikanti et al. 2022) the attention core, only without flash attention; ``selective_op``
  (torchtitan's per-op SAC, ``torchtitan/distributed/activation_checkpoint.py``,
  ``_custom_policy`` and the model's ``_save_list``) every op its policy does not save: the
  2nd, 4th, ... ``aten.mm`` of the block (wk, wo, w3 of Llama's separate projections) and the
  memory-bound ops (``workload.recompute``); ``selective_layer`` (torchtitan's per-layer AC,
  ``_apply_layer_sac``) is ``full`` on every N-th layer and nothing on the others: this block
  is a plain layer, ``workload.step_work`` adds the checkpointed one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from teton.spec.schema import JobSpec
from teton.workload.elementwise import eager_copy_bytes, elementwise_bytes
from teton.workload.model import ModelSpec

ACT_BYTES = 2  # bf16 activations
FP32 = 4

Kind = Literal["gemm", "attention", "memory"]


@dataclass(frozen=True)
class ComputeOp:
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


@dataclass(frozen=True)
class Collective:
    name: str
    op: str  # all_gather | reduce_scatter | all_reduce | all_to_all | send_recv
    axis: str  # tp | cp | pp | dp | ep
    bytes: float  # nccl-tests S: the gathered / reduced array size
    overlap: str = ""  # the GEMM / attention op (by name, same pass) this collective runs alongside
    chunks: int = 1  # > 1: decomposed with that op into this many pipelined chunks
    ring_steps: int = 0  # > 0: a ring of this many exchange steps under that op's blocks (ring attention)


def overlapped_exposed_s(comm_s: float, gemm_s: float, chunks: int, sm_fraction: float = 0.0) -> float:
    """Exposed seconds of a collective run alongside a GEMM it does not depend on.

    While the collective runs, its kernel holds a fraction ``f`` of the SMs (one CTA per NCCL
    channel), so the GEMM advances at ``1 - f``: together they take
    ``T = max(t_comm, t_gemm + f t_comm)``. Concurrent (``chunks == 1``, Megatron's async TP in
    backward: the input re-gather runs under the data-gradient GEMM, the gradient
    reduce-scatter under the weight-gradient GEMM): exposed ``T - t_gemm``. Decomposed into
    ``c`` chunks (collective matmul: Wang et al., ASPLOS 2023; TransformerEngine's userbuffers;
    PyTorch async-TP), one chunk cannot hide: ``T + min(t_comm, t_gemm) / c - t_gemm``. With
    ``f = 0``: ``max(0, t_comm - t_gemm)`` and ``max(t_comm, t_gemm) + min / c - t_gemm``.
    """
    together = max(comm_s, gemm_s + sm_fraction * comm_s)
    if chunks <= 1:
        return together - gemm_s
    return together + min(comm_s, gemm_s) / chunks - gemm_s


def ring_exposed_s(comm_s: float, compute_s: float, steps: int) -> float:
    """Exposed seconds of a ring exchange of ``steps`` steps under ``steps + 1`` equal compute blocks.

    Ring attention (Liu et al. 2023; TransformerEngine / Megatron-Core context parallelism with
    p2p): block 0 uses the local K/V; while block i is computed the next K/V block travels one
    hop. Step i waits for ``max(t_step, t_block)``: exposed ``steps * max(0, t_comm / steps -
    t_compute / (steps + 1))``. A ring moves the same bytes as the all-gather of the sequence.
    """
    if steps <= 0:
        return comm_s
    return steps * max(0.0, comm_s / steps - compute_s / (steps + 1))


Item = ComputeOp | Collective


@dataclass(frozen=True)
class Block:
    """Forward and backward items of one block for one micro-batch on one GPU."""

    name: str
    fwd: tuple[Item, ...]
    bwd: tuple[Item, ...]


def _gemm(name: str, m: int, n: int, k: int, wgrad_accum_bytes: int = FP32, fp8: bool = True) -> tuple[ComputeOp, ...]:
    """Forward GEMM (m x k)(k x n) and its two backward GEMMs.

    Weight-gradient GEMMs accumulate into the gradient buffer (beta = 1): they read and write a
    k x n matrix of ``wgrad_accum_bytes`` per element. ``wgrad_accum_bytes = 0`` means unfused
    accumulation: the GEMM writes a fresh bf16 k x n gradient (beta = 0) and
    :func:`grad_accumulate` adds it into the buffer.
    """
    a = ACT_BYTES
    wgrad_out = 2 * wgrad_accum_bytes if wgrad_accum_bytes else a
    fwd = ComputeOp(name, "gemm", 2.0 * m * n * k, a * (m * k + k * n + m * n), m, n, k, fp8=fp8)
    dgrad = ComputeOp(f"{name}.dgrad", "gemm", 2.0 * m * n * k, a * (m * n + k * n + m * k), m, k, n,
                      fp8=fp8, backward=True)
    wgrad = ComputeOp(f"{name}.wgrad", "gemm", 2.0 * m * n * k,
                      a * (m * n + m * k) + wgrad_out * k * n, k, n, m, fp8=fp8, backward=True,
                      accumulate_bytes=wgrad_accum_bytes)
    return fwd, dgrad, wgrad


def _accum_bytes(job: JobSpec) -> int:
    """Gradient-buffer bytes per element a fused weight-gradient GEMM reads and writes; 0 if unfused."""
    if not job.grad_accum_fusion:
        return 0
    return FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES


FP8_CAST_TRANSPOSE_BYTES = 4  # read bf16 (2), write fp8 (1) and its transpose (1)


def fp8_casts(job: JobSpec, gemm: tuple[ComputeOp, ...]) -> tuple[list[ComputeOp], list[ComputeOp]]:
    """(forward, backward) fp8 casts around one fp8 GEMM, for ``job.precision == "fp8"``.

    Transformer Engine's fp8 recipe (TE docs, "FP8 primer"; Micikevicius et al. 2022, "FP8
    Formats for Deep Learning") feeds every fp8 GEMM fp8 operands: a fused cast-transpose kernel
    reads the bf16 input once and writes it in fp8 and transposed in fp8 (the transpose is the
    weight-gradient GEMM's operand), 4 bytes per element; in backward the same for the output
    gradient (m x n). Weights are cast once per step and cached across micro-batches (not
    charged). Returns empty lists for bf16 jobs and non-fp8 GEMMs.
    """
    fwd = gemm[0]
    if job.precision != "fp8" or not fwd.fp8:
        return [], []
    rows = fwd.flops / (2.0 * fwd.n * fwd.k)  # all the GEMM's rows (MoE: every expert's tokens)
    return ([_mem(f"{fwd.name}.fp8_cast", FP8_CAST_TRANSPOSE_BYTES * rows * fwd.k)],
            [_mem(f"{fwd.name}.grad_fp8_cast", FP8_CAST_TRANSPOSE_BYTES * rows * fwd.n, backward=True)])


def grad_accumulate(job: JobSpec, params: float) -> list[ComputeOp]:
    """The unfused gradient accumulation of ``params`` parameters after one micro-batch's backward.

    PyTorch autograd (and FSDP2's ``unsharded_accumulated_grad`` with an fp32 ``reduce_dtype``)
    adds each new bf16 gradient into the accumulation buffer with an elementwise kernel: read
    the bf16 gradient, read and write the buffer (2 + 2 x 4 bytes per parameter for fp32). With
    ``job.grad_accum_fusion`` the weight-gradient GEMM does this in its epilogue (Megatron's
    ``gradient_accumulation_fusion``) and no separate kernel runs.
    """
    if job.grad_accum_fusion:
        return []
    acc = FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES
    return [_mem("grad_accumulate", (ACT_BYTES + 2 * acc) * params, backward=True)]


def layer_params_per_gpu(model: ModelSpec, job: JobSpec) -> float:
    """Parameters of one transformer layer held by one GPU (TP- and EP-sharded)."""
    t = job.tp
    if model.experts > 1:
        return (model.attention_params() / t + model.experts * model.mlp_params() / (t * job.ep)
                + 2 * model.norm_params() + model.hidden * model.experts)
    return (model.attention_params() + model.mlp_params()) / t + 2 * model.norm_params()


def _mem(name: str, nbytes: float, backward: bool = False) -> ComputeOp:
    return ComputeOp(name, "memory", 0.0, float(nbytes), backward=backward)


def layer_block(model: ModelSpec, job: JobSpec) -> Block:
    """One transformer layer: forward and backward items for one micro-batch on one GPU."""
    t, c, b, s = job.tp, job.cp, job.micro_batch, job.seq_len
    sp = job.sequence_parallel and t > 1
    a = ACT_BYTES
    h, q, kv, f = model.hidden, model.q_width, model.kv_width, model.ffn_hidden
    tok = b * s // c  # tokens of this CP rank
    tok_e = tok // t if sp else tok  # tokens an elementwise op sees (SP shards them)
    acc = _accum_bytes(job)
    act_in = h * tok * a  # one full hidden-state tensor of this CP rank

    qkv = _gemm("qkv", tok, (q + 2 * kv) // t, h, acc)
    out = _gemm("attn_out", tok, h, q // t, acc)
    up_width = (2 if model.mlp == "swiglu" else 1) * f // t
    moe = model.experts > 1
    k_route = model.top_k if moe else 1
    up = _gemm("mlp_up", tok, up_width, h, acc)
    down = _gemm("mlp_down", tok, h, f // t, acc)
    if moe:  # one grouped GEMM over the local experts: top_k x the rows, per-expert row count
        rows = tok * k_route
        per_expert = max(1, rows * job.ep // model.experts)
        up = tuple(_scaled_rows(g, rows, per_expert, i) for i, g in enumerate(_gemm("expert_up", tok, up_width, h, acc)))
        down = tuple(_scaled_rows(g, rows, per_expert, i)
                     for i, g in enumerate(_gemm("expert_down", tok, h, f // t, acc)))

    qkvo_bytes = a * tok * (2 * q + 2 * kv) / t
    if job.flash_attention:  # causal: the kernel skips the masked blocks; backward recomputes P
        attn_flops = 4.0 * tok * (s / 2) * (q // t)
        attn_fwd = ComputeOp("attention", "attention", attn_flops, qkvo_bytes)
        attn_bwd = ComputeOp("attention.bwd", "attention", 2.5 * attn_flops, 2 * qkvo_bytes, backward=True)
    else:  # Megatron's unfused path: batched GEMMs over every (query, key) pair, the mask applied
        # after; backward is four batched GEMMs (2x forward). m: query rows of all local heads,
        # n: keys, k: head dim (Q K^T; P V is the same with n and k swapped)
        attn_flops = 4.0 * tok * s * (q // t)
        bmm = dict(m=tok * (model.heads // t), n=s, k=model.d_head)
        attn_fwd = ComputeOp("attention", "attention", attn_flops, qkvo_bytes, **bmm)
        attn_bwd = ComputeOp("attention.bwd", "attention", 2.0 * attn_flops, 2 * qkvo_bytes, **bmm, backward=True)
    score_elements = b * (model.heads // t) * (s // c) * s
    if job.flash_attention:  # the kernel keeps scores on chip (and draws dropout masks there)
        score_bytes = dropout_bytes = 0.0
    else:  # materialised scores: write QK^T, softmax read+write, PV read (bf16)
        score_bytes = 4.0 * a * score_elements
        # attention dropout on the probabilities (Megatron's core attention runs torch's dropout
        # after the fused softmax): read P, write the dropped P and a 1-byte mask; backward reads
        # the gradient and the mask and writes the masked gradient
        dropout_bytes = (2 * a + 1) * score_elements if model.dropout else 0.0

    def gather(name: str) -> list[Item]:
        return [Collective(name, "all_gather", "tp", act_in)] if sp else []

    def scatter(name: str) -> list[Item]:
        if t == 1:
            return []
        return [Collective(name, "reduce_scatter" if sp else "all_reduce", "tp", act_in)]

    kv_bytes = a * b * s * 2 * kv / t  # K and V of the whole sequence, this TP rank's heads
    cp_fwd: list[Item] = []
    cp_bwd: list[Item] = []
    cp_regather: list[Item] = []
    if c > 1 and job.cp_algo == "ring":  # K/V blocks (and in backward their gradients) go round
        cp_fwd = [Collective("cp.kv_ring", "all_gather", "cp", kv_bytes, overlap="attention", ring_steps=c - 1)]
        cp_bwd = [Collective("cp.kv_ring.bwd", "all_gather", "cp", 2 * kv_bytes, overlap="attention.bwd",
                             ring_steps=c - 1)]
    elif c > 1:  # Llama 3: all-gather K and V, attend, reduce-scatter their gradients
        cp_fwd = [Collective("cp.kv_gather", "all_gather", "cp", kv_bytes)]
        cp_bwd = [Collective("cp.kv_grad_scatter", "reduce_scatter", "cp", kv_bytes)]
        if job.cp_regather_kv:  # only the local chunk was kept: gather K and V again for backward
            cp_regather = [Collective("cp.kv_regather", "all_gather", "cp", kv_bytes)]
    drop = 1 if model.dropout else 0  # one byte mask written per dropout
    fusion = job.kernel_fusion
    norm_bytes, norm_bwd_bytes = elementwise_bytes(model.norm, fusion, tok_e * h)
    resid_bytes, resid_bwd_bytes = elementwise_bytes("bias_dropout_add" if drop else "residual", fusion, tok_e * h)
    rope_bytes, rope_bwd_bytes = (elementwise_bytes("rope", fusion, tok * (q + kv) / t)
                                  if model.position_embedding == "rope" else (0.0, 0.0))
    act_bytes, act_bwd_bytes = elementwise_bytes(model.mlp, fusion, tok * k_route * f / t)
    copies = eager_copy_bytes(model, tok, t) if fusion == "eager" else {}

    def copy(name: str, backward: bool = False) -> list[Item]:
        """The eager code's copy or gradient sum ``name`` as a memory-bound item (none when fused)."""
        if name not in copies:
            return []
        return [_mem(name + (".bwd" if backward else ""), copies[name][backward], backward)]
    moe_fwd: list[Item] = []
    moe_bwd: list[Item] = []
    moe_combine: list[Item] = []
    moe_combine_bwd: list[Item] = []
    if moe:
        router = _gemm("router", tok_e, model.experts, h, acc, fp8=False)  # routers stay in high precision
        a2a_bytes = a * tok * k_route * h / t  # this rank's share of the token copies
        moe_fwd = [router[0], _mem("router.softmax_topk", 3 * FP32 * tok_e * model.experts)]
        moe_bwd = [router[1], router[2]]
        if job.ep > 1:
            moe_fwd.append(Collective("ep.dispatch", "all_to_all", "ep", a2a_bytes))
            moe_combine = [Collective("ep.combine", "all_to_all", "ep", a2a_bytes)]
            moe_combine_bwd = [Collective("ep.combine_grad", "all_to_all", "ep", a2a_bytes)]
            moe_bwd = [Collective("ep.dispatch_grad", "all_to_all", "ep", a2a_bytes), *moe_bwd]

    cast = [fp8_casts(job, g) for g in (qkv, out, up, down)]
    fwd: list[Item] = [
        _mem("attn_norm", norm_bytes), *gather("tp.ag_qkv"), *cast[0][0], qkv[0], _mem("rope", rope_bytes),
        *copy("repeat_kv"), *cp_fwd, attn_fwd, _mem("attn_scores", score_bytes), _mem("attn_dropout", dropout_bytes), *cast[1][0], out[0], *scatter("tp.rs_attn"),
        _mem("attn_residual", resid_bytes),
        _mem("mlp_norm", norm_bytes), *gather("tp.ag_mlp"), *moe_fwd, *cast[2][0], up[0], _mem("mlp_act", act_bytes),
        *cast[3][0], down[0], *moe_combine, *scatter("tp.rs_mlp"), _mem("mlp_residual", resid_bytes),
    ]

    def bwd_gather(name: str) -> list[Item]:  # transpose of a reduce-scatter / all-reduce
        if t == 1:
            return []
        return [Collective(name, "all_gather", "tp", act_in)] if sp else []

    def bwd_scatter(name: str) -> list[Item]:  # transpose of an all-gather (or the input grad AR)
        if t == 1:
            return []
        return [Collective(name, "reduce_scatter" if sp else "all_reduce", "tp", act_in)]

    bwd: list[Item] = [
        _mem("mlp_residual.bwd", resid_bwd_bytes, True), *bwd_gather("tp.ag_mlp_grad"), *moe_combine_bwd,
        *cast[3][1], down[1], down[2], _mem("mlp_act.bwd", act_bwd_bytes, True), *gather("tp.ag_mlp_input"),
        *cast[2][1], up[1], *copy("mlp_input_grad_sum", True), up[2], *moe_bwd, *bwd_scatter("tp.rs_mlp_grad"),
        _mem("mlp_norm.bwd", norm_bwd_bytes, True),
        _mem("attn_residual.bwd", resid_bwd_bytes, True), *bwd_gather("tp.ag_attn_grad"),
        *cast[1][1], out[1], out[2], *copy("attn_out_grad_copy", True),
        _mem("attn_dropout.bwd", dropout_bytes, True), _mem("attn_scores.bwd", 2 * score_bytes, True), *cp_regather, attn_bwd, *copy("repeat_kv", True), *cp_bwd,
        _mem("rope.bwd", rope_bwd_bytes, True), *gather("tp.ag_qkv_input"), *cast[0][1],
        qkv[1], *copy("qkv_input_grad_sum", True), qkv[2],
        *bwd_scatter("tp.rs_qkv_grad"), _mem("attn_norm.bwd", norm_bwd_bytes, True),
        *grad_accumulate(job, layer_params_per_gpu(model, job)),
    ]
    if t > 1 and job.tp_overlap != "none":
        fwd, bwd = _tp_overlap(fwd, bwd, job.tp_overlap if sp else "bwd", t)
    if job.recompute == "full":
        bwd = [*(_as_recompute(i) for i in fwd), *bwd]
    elif job.recompute == "selective" and not job.flash_attention:
        bwd = [_as_recompute(attn_fwd), _as_recompute(_mem("attn_scores", score_bytes)),
               _as_recompute(_mem("attn_dropout", dropout_bytes)), *bwd]
    elif job.recompute == "selective_op":  # torchtitan's per-op SAC: what its policy did not save
        from teton.workload.recompute import sac_op_recompute

        bwd = [*sac_op_recompute(fwd, model, job, acc), *bwd]
    # selective_layer: this is a layer that keeps its activations; the checkpointed ones are
    # recompute = full's block (workload.step_work)
    return Block("layer", tuple(i for i in fwd if not _empty(i)), tuple(i for i in bwd if not _empty(i)))


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


def _as_recompute(item: Item) -> Item:
    """A forward item re-run in backward: a forward computation still (a recomputed flash-attention
    forward runs the forward kernel, at the forward kernel's efficiency)."""
    if isinstance(item, ComputeOp):
        return ComputeOp(f"recompute.{item.name}", item.kind, item.flops, item.bytes, item.m, item.n, item.k,
                         item.fp8, item.backward)
    return Collective(f"recompute.{item.name}", item.op, item.axis, item.bytes)


def _empty(item: Item) -> bool:
    return isinstance(item, ComputeOp) and item.flops == 0 and item.bytes == 0


def embedding_block(model: ModelSpec, job: JobSpec) -> Block:
    """Vocab-parallel input embedding: lookup, then a TP reduce-scatter (SP) or all-reduce."""
    t, c, b, s = job.tp, job.cp, job.micro_batch, job.seq_len
    sp = job.sequence_parallel and t > 1
    tok = b * s // c
    act_in = ACT_BYTES * tok * model.hidden
    lookup = _mem("embedding.lookup", 2 * act_in)
    comm: list[Item] = []
    if t > 1:
        comm = [Collective("tp.embedding", "reduce_scatter" if sp else "all_reduce", "tp", act_in)]
    grad = _mem("embedding.grad_scatter_add", 2 * act_in + FP32 * tok * model.hidden, True)
    bwd_comm: list[Item] = [Collective("tp.embedding_grad", "all_gather", "tp", act_in)] if sp else []
    accumulate = grad_accumulate(job, model.vocab * model.hidden / t)
    return Block("embedding", (lookup, *comm), (*bwd_comm, grad, *accumulate))


def head_block(model: ModelSpec, job: JobSpec) -> Block:
    """Final norm, vocab-parallel output projection and cross-entropy (logits in fp32)."""
    t, c, b, s = job.tp, job.cp, job.micro_batch, job.seq_len
    sp = job.sequence_parallel and t > 1
    tok = b * s // c
    tok_e = tok // t if sp else tok
    h, v = model.hidden, model.vocab
    act_in = ACT_BYTES * tok * h
    # ceil: the last shard is padded. The output layer stays bf16 under fp8 recipes (Megatron's
    # output_layer is a plain ColumnParallelLinear, outside Transformer Engine's fp8 autocast).
    logits = _gemm("lm_head", tok, -(-v // t), h, _accum_bytes(job), fp8=False)
    # cross-entropy over this rank's vocab shard: cast to fp32, max, exp-sum, loss, gradient
    ce_bytes, ce_bwd_bytes = elementwise_bytes("cross_entropy", job.kernel_fusion, tok * v / t)
    norm_bytes, norm_bwd_bytes = elementwise_bytes(model.norm, job.kernel_fusion, tok_e * h)
    small = FP32 * tok
    tp = t > 1
    fwd: list[Item] = [
        _mem("final_norm", norm_bytes),
        *([Collective("tp.ag_head", "all_gather", "tp", act_in)] if sp else []),
        logits[0], _mem("cross_entropy", ce_bytes),
        *([Collective("tp.ce_max", "all_reduce", "tp", small), Collective("tp.ce_sum", "all_reduce", "tp", small)]
          if tp else []),
    ]
    bwd: list[Item] = [
        _mem("cross_entropy.bwd", ce_bwd_bytes, True), logits[1], logits[2],
        *([Collective("tp.rs_head_grad", "reduce_scatter" if sp else "all_reduce", "tp", act_in)] if tp else []),
        _mem("final_norm.bwd", norm_bwd_bytes, True),
        *grad_accumulate(job, v * h / t + model.norm_params()),
    ]
    return Block("head", tuple(fwd), tuple(bwd))


def pipeline_p2p_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes one GPU sends to the next pipeline stage per micro-batch: the hidden state, SP-sharded
    (or scattered over TP, ``job.pp_scatter_gather``)."""
    sp = job.sequence_parallel and job.tp > 1
    tok = job.micro_batch * job.seq_len // job.cp
    return ACT_BYTES * tok * model.hidden / (job.tp if sp or pipeline_p2p_gather_bytes(model, job) else 1)


def pipeline_p2p_gather_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes of the TP all-gather that rebuilds a scattered pipeline message on the receiving
    stage (``job.pp_scatter_gather`` without sequence parallelism), 0 otherwise."""
    if not job.pp_scatter_gather or job.tp == 1 or job.sequence_parallel:
        return 0.0
    return ACT_BYTES * job.micro_batch * job.seq_len // job.cp * model.hidden
