"""The per-step work of a parallel layout: ``(model, job) -> StepWork``.

What one GPU of each pipeline rank does per micro-batch (layer / embedding / head blocks with
their compute ops and TP/CP collectives), how layers are split over ranks and chunks, what
crosses each pipeline boundary, and what each chunk reduces / gathers over data parallelism.
Everything here is independent of where ranks sit: the engine prices it on a placement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from teton.memo import ValueMemo, cached, fields_key
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.workload.activations import layer_saved_bytes
from teton.workload.fp8 import bf16_block, param_gather_bytes
from teton.workload.items import HostCopy
from teton.workload.layer_kinds import (
    LayerKind,
    kind_model,
    layer_kind_counts,
    layer_type_counts,
    model_layer_types,
)
from teton.workload.moe import routed_params_per_gpu
from teton.workload.mtp import embedding_copy, mtp_layer_model, mtp_params_per_gpu, with_mtp
from teton.workload.ops import (
    ACT_BYTES,
    FP32,
    Block,
    embedding_block,
    head_block,
    layer_block,
    layer_params_per_gpu,
    pipeline_p2p_bytes,
    pipeline_p2p_gather_bytes,
)
from teton.workload.pipeline import PipelineSplit, split_layers


@dataclass(frozen=True)
class StepWork:
    layer: Block
    embedding: Block
    head: Block
    split: PipelineSplit
    micro_batches: int
    p2p_bytes: float  # sent by one GPU to the next pipeline stage per micro-batch
    chunk_params: np.ndarray  # (p, v) parameters per GPU of each chunk (TP-sharded)
    grad_reduce_bytes_per_param: int  # gradients reduced over DP in this width
    param_gather_bytes_per_param: float = ACT_BYTES  # of the ZeRO / FSDP parameter all-gather
    # (p, v) the routed experts' share of ``chunk_params`` (TP- and EP-sharded; zeros for a dense
    # model): replicated over the expert-data-parallel group of dp / ep ranks, not over all of DP
    chunk_expert_params: np.ndarray | None = None
    # TP all-gather on the receiving stage that rebuilds a scattered p2p message (0: none)
    p2p_gather_bytes: float = 0.0
    # (kind, its block, (p, v) layers of each chunk of that kind), plain kind first
    # (``workload.layer_kinds``: the model's layer types, fp8 jobs' bf16 layers, selective_layer's
    # checkpointed layers, CPU-offloaded layers); empty: every layer runs ``layer`` (a model of
    # several layer types: ``layer`` is its first type's plain block)
    kinds: tuple[tuple[LayerKind, Block, np.ndarray], ...] = ()

    def layer_mix(self) -> list[tuple[Block, np.ndarray]]:
        """(block, (p, v) layers of each chunk that run it): one per kind of layer."""
        if not self.kinds:
            return [(self.layer, self.split.layers)]
        return [(block, n) for _, block, n in self.kinds]

    @property
    def expert_params(self) -> np.ndarray:
        """(p, v) routed-expert parameters per GPU of each chunk (zeros for a dense model)."""
        return np.zeros_like(self.chunk_params) if self.chunk_expert_params is None else self.chunk_expert_params


def per_layer_type(model: ModelSpec, job: JobSpec, split: PipelineSplit, per_layer) -> np.ndarray:
    """(p, v) sum over each chunk's layers of ``per_layer(model of the layer's type)``
    (``workload.layer_kinds.layer_type_counts``; a uniform model's: ``split.layers * per_layer(model)``)."""
    out = None
    for layer, n in layer_type_counts(model, job, split).items():
        part = n * per_layer(kind_model(model, layer))
        out = part if out is None else out + part
    return out


def chunk_params(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """Parameters one GPU holds for each (rank, chunk): its layers' TP shard (each layer type's
    own, :func:`per_layer_type`), plus the embedding on (0, 0) and the output head and the
    multi-token prediction modules (``workload.mtp``) on (p-1, v-1); a tied output head is the
    embedding's copy there when the two ends sit on different ranks (``workload.mtp.embedding_copy``). The vocab-parallel matrices
    are split over TP, each rank holding its padded ``ceil(vocab / tp)`` rows
    (``Layout.local_vocab``, the rows its lm_head GEMM runs); learned positions and the final
    norm are replicated."""
    out = per_layer_type(model, job, split, lambda m: layer_params_per_gpu(m, job))
    out = out.astype(float)
    vocab_shard = job.layout.local_vocab(model.vocab) * model.hidden
    positions = model.embedding_params() - model.vocab * model.hidden
    out[0, 0] += vocab_shard + positions
    # the output head's matrix; a tied head reads the embedding, a copy of it on another rank's last chunk
    head = vocab_shard if not model.tied_embeddings or embedding_copy(job, split.p * split.v) else 0
    out[-1, -1] += head + model.norm_params()
    if model.mtp_depth:
        out[-1, -1] += mtp_params_per_gpu(model, job, split.p * split.v)[0]
    return out


def chunk_weight_bytes(model: ModelSpec, job: JobSpec, split: PipelineSplit, params: np.ndarray,
                       layer_bytes: float) -> np.ndarray:
    """(p, v) bytes of each chunk's weights on one GPU: of its ``params`` (:func:`chunk_params`),
    the transformer layers' at ``layer_bytes`` each (``workload.fp8.weight_bytes`` /
    ``param_gather_bytes``), the rest (embedding, output head, final norm, MTP modules) in bf16."""
    layers = per_layer_type(model, job, split, lambda m: layer_params_per_gpu(m, job))
    return layers * layer_bytes + (params - layers) * ACT_BYTES


def chunk_expert_params(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> np.ndarray:
    """The routed experts' parameters one GPU holds for each (rank, chunk): its layers' experts
    (``experts / ep`` of them, ``expert_ffn`` wide, sharded over etp:
    ``workload.moe.routed_params_per_gpu``); zeros for a dense model."""
    if model.experts <= 1:
        return np.zeros(split.layers.shape)
    out = per_layer_type(model, job, split, lambda m: routed_params_per_gpu(m, job.layout) if m.experts > 1 else 0.0)
    if model.mtp_depth:
        out = out.astype(float)
        out[-1, -1] += mtp_params_per_gpu(model, job, split.p * split.v)[1]
    return out


def dp_shard(params: np.ndarray, expert_params: np.ndarray, lay) -> np.ndarray:
    """Parameters per GPU after sharding over data parallelism (ZeRO): dense parameters over all
    ``dp x cp`` ranks that hold them, the routed experts' over their expert-data-parallel group of
    ``lay.edp = tp cp dp / (etp ep)`` ranks (Megatron-Core's expert_data_parallel_size, CP folded in;
    ``teton.spec.layout``: the ranks that hold the same experts; Megatron-Core's and DeepSpeed-MoE's
    expert-data-parallel groups shard the expert weights' optimizer state). CP ranks hold the same
    weights as their DP peers, and Megatron-Core's distributed optimizer (data-parallel group with
    CP) and torchtitan's FSDP (``dp_shard_cp`` mesh) shard over them too."""
    return (params - expert_params) / (lay.dp * lay.cp) + expert_params / lay.edp


# Job fields the pipeline split and the parameters per GPU do not read (the memory savers and the
# batch a layout search varies): jobs that differ only in these share ``step_params``.
NOT_IN_PARAMS = frozenset({"recompute", "recompute_interval", "recompute_modules", "zero", "grad_reduce",
                           "micro_batch", "global_batch", "global_batch_tokens", "adam_moments", "grad_accum_dtype"})
_PARAMS = ValueMemo(32768)


def step_params(model: ModelSpec, job: JobSpec) -> tuple[PipelineSplit, np.ndarray, np.ndarray]:
    """(the pipeline split, (p, v) parameters per GPU of each chunk, of them the routed experts'):
    what the memory model needs of the step's work, without its blocks (memoised by the fields
    they read: :data:`NOT_IN_PARAMS` are not)."""
    key = (model, fields_key(job, NOT_IN_PARAMS))
    hit = _PARAMS.get(key)
    if hit is None:  # shared by every job of the key: read-only
        split = split_layers(model, job)
        hit = _PARAMS.put(key, (split, _frozen(chunk_params(model, job, split)),
                                _frozen(chunk_expert_params(model, job, split))))
    return hit


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@cached(32768)
def step_work(model: ModelSpec, job: JobSpec) -> StepWork:
    """The work of one step (memoised: a pure function of the frozen model and job specs)."""
    return _step_work(model, job)


# Job fields that do not change what one GPU does per micro-batch inside a block: layouts that
# differ only in these share their blocks (a new field is part of the key unless listed here).
_NOT_IN_BLOCKS = frozenset({
    "gpus", "pp", "dp", "global_batch", "global_batch_tokens", "attention_kernel", "pp_schedule",
    "virtual_stages", "pp_round", "pp_embedding_slots", "pp_first_stage_layers", "pp_last_stage_layers", "pp_split",
    "pp_layout", "pp_scatter_gather", "pp_p2p", "zero", "overlap_dp_comm",
    "overlap_param_gather", "grad_reduce", "placement", "parallel_order", "recompute_interval",
})
_BLOCKS = ValueMemo(8192)  # by the block fields
_KIND_BLOCKS = ValueMemo(8192)  # by the block fields and the layer kind


def _block_key(model: ModelSpec, job: JobSpec) -> tuple:
    return model, fields_key(job, _NOT_IN_BLOCKS)


def blocks(model: ModelSpec, job: JobSpec) -> tuple[Block, Block, Block]:
    """(layer, embedding, head) blocks of ``job``, shared by every job with the same block fields;
    the layer of a model of several layer types is its first type's, the head carries the
    multi-token prediction modules (``workload.mtp.with_mtp``)."""
    key = _block_key(model, job)
    hit = _BLOCKS.get(key)
    if hit is None:
        types = model_layer_types(model)
        embedding, head = embedding_block(model, job), head_block(model, job)
        if model.mtp_depth:
            head = with_mtp(head, embedding, blocks(mtp_layer_model(model), job)[0], model, job)
        hit = _BLOCKS.put(key, (layer_block(kind_model(model, types[0] if types else None), job), embedding, head))
    return hit


def kind_block(model: ModelSpec, job: JobSpec, kind: LayerKind) -> Block:
    """The layer block of ``kind`` (``workload.layer_kinds``), shared like :func:`blocks`:

    * checkpointed: recompute = full's layer (shared with full's layouts, and its priced times);
    * bf16: the layer of the job in bf16, every GEMM and attention kernel at the bf16 peak;
    * offloaded: the layer with a copy of its saved activations (``workload.activations
      .layer_saved_bytes``) to host memory at the end of its forward and back at the start of
      its backward (:class:`~teton.workload.items.HostCopy`). Each copy runs on a stream of its
      own while the GPU computes: Megatron / TE overlap a layer's offload with the next layer's
      forward and its reload with the backward of the layer after it (in backward order); with
      layers alike that is one layer's compute, so the copy sits in the layer's own pass and the
      engine charges what that pass's compute does not hide."""
    key = (_block_key(model, job), kind)
    hit = _KIND_BLOCKS.get(key)
    if hit is not None:
        return hit
    m = kind_model(model, kind.layer)  # the model of the kind's layer type (``ModelSpec.as_layer``)
    base = job.model_copy(update={"recompute": "full"}) if kind.checkpointed else job
    block = blocks(m, base.model_copy(update={"precision": "bf16"}) if kind.bf16 else base)[0]
    if kind.bf16:
        block = bf16_block(block)
    if kind.offloaded:
        saved = layer_saved_bytes(m, base)
        block = replace(block, fwd=(*block.fwd, HostCopy("offload.d2h", "d2h", saved)),
                        bwd=(HostCopy("offload.h2d", "h2d", saved), *block.bwd))
    return _KIND_BLOCKS.put(key, block)


def _gathered_bytes_per_param(model: ModelSpec, job: JobSpec, split: PipelineSplit, params: np.ndarray) -> float:
    """Bytes per parameter of the ZeRO / FSDP parameter all-gather, over the whole model: the
    layers' quantised weights under ``software.fp8_param_gather`` (``workload.fp8
    .param_gather_bytes``), bf16 for the rest."""
    per_param = param_gather_bytes(job)
    if per_param == ACT_BYTES or not params.sum():
        return ACT_BYTES
    return float(chunk_weight_bytes(model, job, split, params, per_param).sum() / params.sum())


def _step_work(model: ModelSpec, job: JobSpec) -> StepWork:
    split, params, expert_params = step_params(model, job)
    layer, embedding, head = blocks(model, job)
    kinds = tuple((kind, layer if kind == LayerKind() else kind_block(model, job, kind), n)
                  for kind, n in layer_kind_counts(model, job, split).items())
    return StepWork(
        layer=layer,
        embedding=embedding,
        head=head,
        split=split,
        micro_batches=job.layout.micro_batches,
        p2p_bytes=pipeline_p2p_bytes(model, job),
        p2p_gather_bytes=pipeline_p2p_gather_bytes(model, job),
        chunk_params=params,
        grad_reduce_bytes_per_param=FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES,
        param_gather_bytes_per_param=_gathered_bytes_per_param(model, job, split, params),
        chunk_expert_params=expert_params,
        kinds=kinds,
    )
