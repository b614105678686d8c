"""Memory per GPU: weights, gradients, optimizer state, activations, working buffers.

Model state (mixed-precision Adam, Rajbhandari et al. 2020, ZeRO, Sec. 3): bf16 weights (2 B; an
fp8 job of a stack that keeps its layers' weights quantised only, ``software.fp8_param_gather``:
the recipe's copies, ``workload.fp8.weight_bytes``),
gradients (fp32 accumulation 4 B, or bf16 2 B), fp32 master weights + Adam m + v (12 B; 8 B with
the moments in bf16, ``job.adam_moments``: DeepSeek-V3 Sec. 3.3.2) per parameter. ZeRO-1 shards
the optimizer state over DP, ZeRO-2 also the gradients (but a job that reduces them once per step
over several micro-batches keeps the unsharded accumulation buffer), ZeRO-3 also the weights (plus the gathered parameters of the layers being computed). A MoE layer's routed
experts are sharded over their expert-data-parallel group (the ``tp cp dp / (etp ep)`` ranks holding
the same experts; Megatron-Core, DeepSpeed-MoE), the rest over all of DP. What an MoE layer keeps
for backward, and its parameters per GPU: ``workload.moe``.

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

CPU activation offload (``software.cpu_offload_layers``; ``workload.layer_kinds`` says which
layers): an offloaded layer's saved tensors (:func:`layer_saved_bytes`) leave HBM once copied to
host memory, for every micro-batch a rank holds. Transformer Engine's double-buffered offload
handler keeps at most one offloaded layer's tensors in HBM at a time (the one whose copy is in
flight in forward, or the one reloaded ahead of its backward): one layer's worth on ranks that
offload any.

What the CUDA context and NCCL's buffers take, and what fragmentation costs, is outside these
bytes (they are what the caching allocator hands out: ``torch.cuda.max_memory_allocated``);
``teton.workload.headroom`` keeps it free.

The output head's loss holds the cross-entropy kernel's peak bytes per logit
(``workload.head.head_peak_bytes``: eager keeps its fp32 log-softmax besides the bf16 logits and
their fp32 copy, 10 B; Megatron's vocab-parallel kernel its fp32 softmax in place of the copy,
6 B; TE's fused kernel only the bf16 gradient written over the logits, 2 B) as a working buffer
of the last pipeline rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teton.memo import ValueMemo, cached, fields_key
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.units import ADAM_STATE_BYTES
from teton.workload.activations import checkpoint_bytes, layer_activation_bytes, layer_saved_bytes
from teton.workload.dualpipe import mirrored, peak_activation_bytes
from teton.workload.fp8 import fp8_weight_cache_bytes, weight_bytes
from teton.workload.head import head_peak_bytes
from teton.workload.items import ACT_BYTES, FP32
from teton.workload.layer_kinds import kind_model, layer_kind_counts, layer_type_counts, model_layer_types
from teton.workload.mixers import mixer_params
from teton.workload.moe import moe_ffn_elements, moe_params_per_gpu
from teton.workload.mtp import mtp_saved_bytes
from teton.workload.pipeline import PipelineSplit, chunk_orders, ep_overlap_warmup, in_flight_microbatches
from teton.workload.recompute import sac_op_recomputed_bytes

# recompute_modules whose saved tensors a layer drops after its forward and rebuilds for its backward:
# the output-discarding ones and the whole-module checkpoints (workload.ops.checkpointed_ffn)
REBUILT_IN_BACKWARD = frozenset({"layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"})
# cuBLAS's workspace, which PyTorch allocates per handle from its caching allocator: 32 MiB, the
# size cuBLAS recommends on Hopper (cuBLAS docs, cublasSetWorkspace); one compute stream's
# (ASSUMPTION). The CUDA context
# and NCCL's buffers are outside the allocator: the headroom (teton.workload.headroom).
CUBLAS_WORKSPACE_BYTES = 32 * 2**20

__all__ = ["MemoryBreakdown", "activation_bytes_per_rank", "checkpoint_bytes", "layer_activation_bytes",
           "layer_saved_bytes", "memory_per_gpu", "params_per_rank"]


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


def _chunk_layer_bytes(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """((p, v) bytes one micro-batch of each chunk keeps in HBM, (p, v) checkpointed layers, (p,)
    bytes of the largest offloaded layer on each rank): the layer kinds' saved bytes, offloaded
    layers' left out; each layer type's own bytes (``workload.layer_kinds``), the multi-token
    prediction modules' on the last chunk (``workload.mtp``)."""
    ckpt_bytes = checkpoint_bytes(model, job)
    per_chunk = np.zeros(split.layers.shape)
    ckpt = np.zeros(split.layers.shape)
    buffer = np.zeros(split.p)
    for kind, n in layer_kind_counts(model, job, split).items():
        saved = ckpt_bytes if kind.checkpointed else layer_saved_bytes(kind_model(model, kind.layer), job)
        if kind.checkpointed:
            ckpt = ckpt + n
        if kind.offloaded:
            buffer = np.maximum(buffer, np.where(split.held(n) > 0, saved, 0.0))
        else:
            per_chunk = per_chunk + n * saved
    if model.mtp_depth:
        per_chunk[-1, -1] += mtp_saved_bytes(model, job)
    return per_chunk, ckpt, buffer


def _per_rank(model: ModelSpec, job: JobSpec, split: PipelineSplit, on_rank: np.ndarray, per_layer) -> np.ndarray:
    """(p,) the largest ``per_layer(model of a layer type)`` over the layer types of each rank's
    layers (``on_rank``: (p, v) layers that count; a DualPipe rank's both stages), 0 on a rank with
    none: the one layer a rank recomputes at a time."""
    out = np.zeros(split.p)
    for layer, n in layer_type_counts(model, job, split).items():
        counted = np.minimum(n, on_rank)
        out = np.maximum(out, np.where(split.held(counted) > 0, per_layer(kind_model(model, layer)), 0.0))
    return out


def activation_bytes_per_rank(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """Peak activation bytes of each pipeline rank, in-flight micro-batches included."""
    lay = job.layout
    p, v, m = split.p, split.v, lay.micro_batches
    per_chunk, ckpt, offload_buffer = _chunk_layer_bytes(model, job, split)  # (p, v) one micro-batch of each chunk
    extra = ep_overlap_warmup(job)
    if split.mirrored:  # DualPipe: each rank's fullest point of its order (p + 1 stage micro-batches)
        out = peak_activation_bytes(p, m, mirrored(per_chunk))
    elif v == 1:  # in_flight_microbatches of every rank at once: min(p - r + extra, m)
        held = np.minimum(p - np.arange(p) + extra, m)
        out = held * per_chunk[:, 0]
    else:
        out = _interleaved_peak(per_chunk, p, v, m, lay.pp_round_size, extra)
    plain_job = job.model_copy(update={"recompute": "none"})
    if job.recompute == "full":
        # one layer's activations while recomputing it (with its scores when they are materialised),
        # on ranks that hold a layer; its input is one of them and already held as its checkpoint
        out += _per_rank(model, job, split, split.layers,
                         lambda k: layer_activation_bytes(k, plain_job) - layer_saved_bytes(k, job))
    elif job.recompute == "selective_layer":  # the same, on ranks that checkpoint a layer
        out += _per_rank(model, job, split, ckpt,
                         lambda k: layer_saved_bytes(k, job) - checkpoint_bytes(k, job))
    elif job.recompute == "selective" and job.recomputed_modules & REBUILT_IN_BACKWARD:
        # what the recompute of one layer's norms / up-projections / checkpointed modules brings back
        kept = job.recomputed_modules - REBUILT_IN_BACKWARD
        out += _per_rank(model, job, split, split.layers,
                         lambda k: layer_activation_bytes(k, job, kept) - layer_activation_bytes(k, job))
    elif job.recompute == "selective_op":  # what one layer's recompute brings back for its backward
        out += _per_rank(model, job, split, split.layers,
                         lambda k: sac_op_recomputed_bytes(k, job, layer_activation_bytes(k, plain_job)))
    return out + offload_buffer


def _interleaved_peak(per_chunk: np.ndarray, p: int, v: int, m: int, n_round: int, extra: int) -> np.ndarray:
    """Each rank's peak activation bytes under interleaved 1F1B: its warm-up forwards, then each
    steady-state forward adds a chunk micro-batch before the backward that follows frees one, in the
    schedule's order (``workload.pipeline.chunk_orders``); the peak is the largest of those running
    totals, taken after each forward. With chunks of unequal layer counts (the embedding's and the
    loss's pipeline slots, a remainder of layers) a later forward of a larger chunk than the
    backward that freed its place makes it climb after the warm-up."""
    fwd, bwd = chunk_orders(v, m, n_round)
    out = np.zeros(p)
    for r in range(p):
        held = in_flight_microbatches(p, v, m, r, n_round, extra)  # warm-up forwards + the first steady one
        added = np.cumsum(per_chunk[r][fwd[:, 0]])
        freed = np.concatenate(([0.0], np.cumsum(per_chunk[r][bwd[:, 0]])))
        steady = np.arange(fwd.shape[0] - held + 1)
        out[r] = float((added[held - 1 + steady] - freed[steady]).max())
    return out


def adam_state_bytes(job: JobSpec) -> float:
    """Optimizer state per parameter: the fp32 master weight and Adam's two moments, in fp32
    (12 B) or bf16 (8 B, ``job.adam_moments``)."""
    return ADAM_STATE_BYTES - (2 * (FP32 - ACT_BYTES) if job.adam_moments == "bf16" else 0)


def params_per_rank(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """Parameters of each pipeline stage on one GPU before ZeRO sharding (TP-sharded): what a
    checkpoint saves per stage. Under DualPipe a rank also holds its mirror stage's copy, which the
    checkpoint does not save twice (``PipelineSplit.held`` counts it for memory)."""
    from teton.workload.step_work import chunk_params

    return chunk_params(model, job, split).sum(axis=1)


def _layer_working(model: ModelSpec, job: JobSpec) -> tuple[float, float]:
    """(parameters ZeRO-3 gathers for one layer, bytes of its gathered SP activation and FFN
    intermediate). An MoE layer gathers its local routed experts, the shared experts and the router
    (``workload.moe.moe_params_per_gpu``); its intermediate is the grouped GEMMs' and the shared
    experts' (``workload.moe.moe_ffn_elements``)."""
    lay = job.layout
    tok = lay.tokens
    sharded, replicated = mixer_params(model)  # the mixer's (``workload.mixers``)
    if model.experts > 1:
        return (sharded / lay.tp + moe_params_per_gpu(model, lay) + replicated,
                ACT_BYTES * (tok * 2 * model.hidden + 3 * moe_ffn_elements(model, job)))
    return ((sharded + (model.mlp_params() if model.first_layer_type.ffn != "none" else 0)) / lay.tp + replicated,
            ACT_BYTES * tok * (2 * model.hidden + 3 * model.ffn_hidden / lay.tp))


# Job fields the working buffers do not read: the memory savers and the batch (not the micro-batch)
NOT_IN_WORKING = frozenset({"recompute", "recompute_interval", "recompute_modules", "zero", "grad_reduce",
                            "global_batch", "global_batch_tokens", "adam_moments", "grad_accum_dtype"})
_WORKING = ValueMemo(32768)


def _working(model: ModelSpec, job: JobSpec) -> tuple[float, float, float]:
    """(parameters ZeRO-3 gathers for the largest layer, the largest layer's gathered activation and
    FFN intermediate bytes, the loss's peak bytes), over the model's layer types
    (``workload.layer_kinds``); memoised by the fields they read."""
    key = (model, fields_key(job, NOT_IN_WORKING))
    hit = _WORKING.get(key)
    if hit is None:
        per_type = [_layer_working(kind_model(model, t), job) for t in dict.fromkeys(model_layer_types(model) or (None,))]
        hit = _WORKING.put(key, (max(p for p, _ in per_type), max(w for _, w in per_type), head_peak_bytes(model, job)))
    return hit


# Job fields the activations do not read (the ZeRO stage and optimizer precisions a layout search
# varies): jobs that differ only in these share ``activation_bytes_per_rank``'s result.
NOT_IN_ACTIVATIONS = frozenset({"zero", "grad_reduce", "adam_moments", "grad_accum_dtype"})
_ACTIVATIONS = ValueMemo(32768)


def _weight_bytes_per_param(model: ModelSpec, job: JobSpec, split: PipelineSplit, chunk_params: np.ndarray,
                            params: np.ndarray):
    """Bytes per parameter each rank holds its weights in (``params``: the rank's, of its
    ``chunk_params``): bf16, or under ``software.fp8_param_gather`` its layers' quantised copies
    beside the bf16 rest (``workload.step_work.chunk_weight_bytes``); a Transformer Engine fp8 job
    without it keeps its layers' quantised copies beside their bf16 weights
    (``workload.fp8.fp8_weight_cache_bytes``)."""
    from teton.workload.step_work import chunk_weight_bytes

    # ZeRO-3 gathers a layer's weights for each use: no copy of the whole shard's quantised weights
    per_param = weight_bytes(job) + (fp8_weight_cache_bytes(job) if job.zero < 3 else 0.0)
    if per_param == ACT_BYTES:
        return ACT_BYTES
    held = split.held(chunk_weight_bytes(model, job, split, chunk_params, per_param))
    return np.divide(held, params, out=np.full(params.shape, float(ACT_BYTES)), where=params > 0)


@cached(32768)
def memory_per_gpu(model: ModelSpec, job: JobSpec) -> tuple[MemoryBreakdown, int]:
    """The breakdown of the fullest GPU and its pipeline rank (memoised per model and job)."""
    from teton.workload.step_work import dp_shard, step_params

    lay = job.layout
    split, chunk_params, expert_params = step_params(model, job)  # memoised: the step's split and parameters
    params = split.held(chunk_params)  # DualPipe: both of a rank's stages
    # ZeRO shards over DP x CP; the routed experts' parameters over their expert-DP group (lay.edp)
    shard = dp_shard(params, split.held(expert_params), lay)
    grad_bytes = FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES
    weights = (shard if job.zero >= 3 else params) * _weight_bytes_per_param(model, job, split, chunk_params, params)
    # ZeRO-2/3 shard gradients, but reducing once per step means the unsharded accumulation
    # buffer lives through the step whenever there is more than one micro-batch.
    sharded_grads = job.zero >= 2 and (job.grad_reduce_mode == "per_microbatch" or lay.micro_batches == 1)
    grads = (shard if sharded_grads else params) * grad_bytes
    optim = (shard if job.zero >= 1 else params) * adam_state_bytes(job)
    key = (model, fields_key(job, NOT_IN_ACTIVATIONS))
    acts = _ACTIVATIONS.get(key)
    if acts is None:  # shared by every job of the key: read-only
        acts = activation_bytes_per_rank(model, job, split)
        acts.flags.writeable = False
        _ACTIVATIONS.put(key, acts)
    # working buffers: gathered SP activation and MLP intermediate of one layer, bucketed
    # unsharded gradients (ZeRO-2/3), gathered parameters of two layers (ZeRO-3), the loss's logits
    # and (ZeRO-3) the output layer's gathered weight and whole gradient (last).
    # the largest layer type's (``workload.layer_kinds``)
    layer_params, layer_working, head_bytes = _working(model, job)
    working = np.full(lay.pp, CUBLAS_WORKSPACE_BYTES + layer_working)
    if sharded_grads:
        working += layer_params * grad_bytes
    if job.zero >= 3:
        working += 2 * layer_params * ACT_BYTES
    working[-1] += head_bytes
    if job.zero >= 3:  # FSDP gathers the output layer's weight for the loss; its gradient is whole until reduced
        working[-1] += model.vocab * model.hidden / lay.tp * (ACT_BYTES + (grad_bytes if sharded_grads else 0.0))
    if split.mirrored:  # DualPipe: the up direction's head is on the first rank
        working[0] += head_bytes
    total = weights + grads + optim + acts + working
    r = int(np.argmax(total))
    return MemoryBreakdown(float(weights[r]), float(grads[r]), float(optim[r]), float(acts[r]), float(working[r])), r
