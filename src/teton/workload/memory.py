"""Memory per GPU: weights, gradients, optimizer state, activations, working buffers.

Model state (mixed-precision Adam, Rajbhandari et al. 2020, ZeRO, Sec. 3): bf16 weights (2 B),
gradients (fp32 accumulation 4 B, or bf16 2 B), fp32 master weights + Adam m + v (12 B) per
parameter. ZeRO-1 shards the optimizer state over DP, ZeRO-2 also the gradients (but a job that
reduces them once per step over several micro-batches keeps the unsharded accumulation buffer),
ZeRO-3 also the weights (plus the gathered parameters of the layers being computed). A MoE layer's routed
experts are sharded over their expert-data-parallel group (the dp / ep ranks holding the same
experts; Megatron-Core, DeepSpeed-MoE), the rest over all of DP.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation", Sec. 4): the tensors
each layer saves for its backward, counted op by op. For a GPT layer with dropout, no flash
attention and sequence parallelism this gives their ``s b h (34 + 5 a s / h) / t`` bytes; flash
attention (Dao 2022) keeps no s^2 scores, only its output and log-sum-exp; a fused SwiGLU keeps
the gate and up projections and recomputes their product. A pipeline rank holds the activations
of its in-flight micro-batches: for rank 0 of 1F1B that is p micro-batches of its layers; of the
interleaved schedule ``(p-1)*2 + (v-1)*p + 1`` chunk micro-batches (Korthikanti Sec. 4.2.3:
``L (1 + (p-1)/(p v))`` layers' worth at rank 0).

Recompute (``job.recompute``; docs/recompute.md): ``selective`` (Megatron) drops the s^2 scores;
``full`` keeps each layer's input, plus one layer's activations while it is recomputed;
``selective_op`` (torchtitan's per-op SAC) keeps each layer's input and the outputs its policy
saves (``workload.recompute.sac_op_saved_bytes``), plus what one layer's recompute brings back;
``selective_layer`` (torchtitan's per-layer AC) mixes the two per chunk: its checkpointed layers
(every N-th a rank builds, ``workload.recompute.checkpointed_layers``) keep their input, the others
everything, plus one layer's recompute on ranks that checkpoint any.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teton.memo import cached
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.units import ADAM_STATE_BYTES
from teton.workload.elementwise import eager_saved_bytes
from teton.workload.items import ACT_BYTES, FP32
from teton.workload.pipeline import PipelineSplit, chunk_orders, in_flight_microbatches
from teton.workload.recompute import checkpointed_layers, sac_op_recomputed_bytes, sac_op_saved_bytes

# CUDA context, cuBLAS/cuDNN workspaces and NCCL channel buffers: ~1 GiB on Hopper (PyTorch
# "CUDA semantics" notes: context 300-500 MB; cuBLAS workspace 32 MiB per stream; NCCL_BUFFSIZE
# 4 MiB x channels x peers).
RUNTIME_BYTES = 2**30


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    working: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.working

    def as_dict(self) -> dict[str, float]:
        return {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations, "working": self.working}

    def largest(self) -> str:
        d = self.as_dict()
        return max(d, key=d.get)


def layer_activation_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes one layer saves for backward for one micro-batch on one GPU: without recompute (also
    a selective_layer layer that is not checkpointed), without the scores (selective, full),
    or what torchtitan's per-op policy saves (selective_op). Full recompute's checkpoints are
    :func:`checkpoint_bytes`."""
    if job.recompute == "selective_op":
        return sac_op_saved_bytes(model, job)
    lay = job.layout
    t, c, b, s = lay.tp, lay.cp, lay.micro_batch, lay.seq_len
    a = ACT_BYTES
    h, q, kv, f = model.hidden, model.q_width, model.kv_width, model.ffn_hidden
    tok = lay.tokens
    tok_e = tok / t if lay.sequence_parallel else tok  # unrounded, as workload.recompute's byte counts
    drop = 1 if model.dropout else 0
    hidden_saved = (
        a * tok_e * h  # attention-norm input
        + a * tok_e * h  # QKV GEMM input (SP: the shard; re-gathered in backward)
        + a * tok * (q + 2 * kv) / t  # Q, K, V (post-rotary)
        + a * tok * q / t  # attention output = output-projection input
        + drop * tok_e * h  # dropout mask after the output projection
        + a * tok_e * h  # MLP-norm input
        + a * tok_e * h  # MLP-up GEMM input
        + drop * tok_e * h  # dropout mask after the MLP
    )
    if model.mlp == "swiglu":
        mlp_saved = 2 * a * tok * f / t  # gate and up projections (fused SwiGLU recomputes the product)
    else:
        mlp_saved = 2 * a * tok * f / t  # GELU input and GELU output (= down-projection input)
    if model.experts > 1:
        # each token's top_k expert copies keep their MLP activations; router probabilities;
        # the dispatched expert inputs (the combine's inputs are the down projections' outputs)
        mlp_saved *= model.top_k
        hidden_saved += FP32 * tok_e * model.experts + a * tok * model.top_k * h / t
    if c > 1 and job.cp_algo == "all_gather" and not job.cp_regather_kv:
        hidden_saved += a * b * s * 2 * kv / t  # gathered K, V of the whole sequence (a ring keeps its own)
    stats = FP32 * tok_e * 2 + FP32 * tok * model.heads / t  # norm rstd, softmax log-sum-exp
    scores = 0.0
    if not job.flash_attention and job.recompute in ("none", "selective_layer"):
        # softmax output (bf16), plus dropout mask and dropped-out probabilities with dropout
        scores = (a + drop * (1 + a)) * b * (model.heads / t) * (s / c) * s
    eager = (eager_saved_bytes(model, tok, tok_e, t, model.top_k if model.experts > 1 else 1)
             if job.kernel_fusion == "eager" else 0.0)
    return hidden_saved + mlp_saved + stats + scores + eager


def activation_bytes_per_rank(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """Peak activation bytes of each pipeline rank, in-flight micro-batches included."""
    p, v, m = split.p, split.v, job.micro_batches
    per_layer = layer_activation_bytes(model, job)
    if job.recompute == "full":
        per_layer = checkpoint_bytes(model, job)
    per_chunk = split.layers * per_layer  # (p, v) bytes of one micro-batch of each chunk
    if job.recompute == "selective_layer":  # checkpointed layers keep their input, the others all
        ckpt = checkpointed_layers(split.layers, job.recompute_interval)
        per_chunk = (split.layers - ckpt) * per_layer + ckpt * checkpoint_bytes(model, job)
    ranks = np.arange(p)
    if v == 1:
        held = np.minimum(p - ranks, m)
        out = held * per_chunk[:, 0]
    else:
        # the chunk micro-batches held at the peak are the earliest forwards of the schedule's order
        n_round = job.pp_round_size
        fwd, _ = chunk_orders(v, m, n_round)
        counts = np.zeros((p, v))
        for r in range(p):
            held = in_flight_microbatches(p, v, m, r, n_round)
            counts[r] = np.bincount(fwd[:held, 0], minlength=v)
        out = (counts * per_chunk).sum(axis=1).astype(float)
    if job.recompute == "full":
        # one layer's activations while recomputing it (with its scores when they are materialised),
        # on ranks that hold a layer; its input is one of them and already held as its checkpoint
        recomputed = layer_activation_bytes(model, job.model_copy(update={"recompute": "none"})) - per_layer
        out += np.where(split.layers_on_rank() > 0, recomputed, 0.0)
    elif job.recompute == "selective_layer":  # the same, on ranks that checkpoint a layer
        recomputed = per_layer - checkpoint_bytes(model, job)
        out += np.where(ckpt.sum(axis=1) > 0, recomputed, 0.0)
    elif job.recompute == "selective_op":  # what one layer's recompute brings back for its backward
        plain = layer_activation_bytes(model, job.model_copy(update={"recompute": "none"}))
        out += np.where(split.layers_on_rank() > 0, sac_op_recomputed_bytes(model, job, plain), 0.0)
    return out


def checkpoint_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes a fully checkpointed layer keeps per micro-batch: its input hidden state (SP-sharded)."""
    return ACT_BYTES * job.micro_batch * job.seq_len / job.cp * model.hidden / (
        job.tp if job.sequence_parallel and job.tp > 1 else 1)


def params_per_rank(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """Parameters each pipeline rank's GPU holds before ZeRO sharding (TP-sharded)."""
    from teton.workload.step_work import chunk_params

    return chunk_params(model, job, split).sum(axis=1)


@cached(512)
def memory_per_gpu(model: ModelSpec, job: JobSpec) -> tuple[MemoryBreakdown, int]:
    """The breakdown of the fullest GPU and its pipeline rank (memoised per model and job)."""
    from teton.workload.step_work import dp_shard, step_work

    work = step_work(model, job)  # memoised: the split and chunk parameters the step uses too
    split = work.split
    params = work.chunk_params.sum(axis=1)
    # ZeRO shards over DP x CP; the routed experts' parameters over their dp / ep (x CP) expert-DP group
    shard = dp_shard(params, work.expert_params.sum(axis=1), job.dp_degree, job.ep, job.cp)
    grad_bytes = FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES
    weights = (shard if job.zero >= 3 else params) * ACT_BYTES
    # ZeRO-2/3 shard gradients, but reducing once per step means the unsharded accumulation
    # buffer lives through the step whenever there is more than one micro-batch.
    sharded_grads = job.zero >= 2 and (job.grad_reduce_mode == "per_microbatch" or job.micro_batches == 1)
    grads = (shard if sharded_grads else params) * grad_bytes
    optim = (shard if job.zero >= 1 else params) * ADAM_STATE_BYTES
    acts = activation_bytes_per_rank(model, job, split)
    # working buffers: gathered SP activation and MLP intermediate of one layer, bucketed
    # unsharded gradients (ZeRO-2/3), gathered parameters of two layers (ZeRO-3), logits (last).
    tok = job.micro_batch * job.seq_len // job.cp
    local_experts = model.experts // job.ep if model.experts > 1 else 1  # a MoE layer gathers all its experts
    layer_params = (model.attention_params() + local_experts * model.mlp_params()) / job.tp
    working = np.full(job.pp, RUNTIME_BYTES + ACT_BYTES * tok * (2 * model.hidden + 3 * model.ffn_hidden / job.tp))
    if sharded_grads:
        working += layer_params * grad_bytes
    if job.zero >= 3:
        working += 2 * layer_params * ACT_BYTES
    working[-1] += (ACT_BYTES + 2 * FP32) * tok * model.vocab / job.tp
    total = weights + grads + optim + acts + working
    r = int(np.argmax(total))
    return MemoryBreakdown(float(weights[r]), float(grads[r]), float(optim[r]), float(acts[r]), float(working[r])), r
