"""Multi-token prediction modules on the last pipeline stage: their work, parameters and activations.

DeepSeek-V3 (arXiv 2412.19437, Sec. 2.2): ``model.mtp_depth`` sequential modules, the k-th
predicting token ``i + k + 1``. Module k takes the previous depth's hidden state (the main model's
last layer for k = 1) and the embedding of token ``i + k``: it RMS-normalises both, concatenates
them and projects ``2h -> h`` (``M_k``), runs one transformer layer (``TRM_k``; here one layer of
the model's last kind) and the output head shared with the main model, then its own
cross-entropy. The embedding and the output head are shared: their weights are the main model's,
their GEMMs run again. Megatron-Core builds the modules on the last pipeline stage (its
``MultiTokenPredictionBlock`` after the decoder, ``post_process`` only), so:

* work: the modules' items run after the output head's forward and before its backward, inside the
  ``head`` block (:func:`with_mtp`); the engine charges the head block on the last chunk of the last
  rank, so that is where MTP's time lands; ``mtp.*`` names in the op table;
* parameters: the modules' layers, projections and norms on that chunk (:func:`mtp_params_per_gpu`),
  plus, with more than one pipeline chunk, a copy of the embedding's vocab shard (the last stage
  looks tokens up itself; its gradient is summed with the first stage's copy once a step, as
  tied embeddings' are: ``teton.engine.shared_embedding``), except under DualPipe, whose first
  rank holds both ends of the model and shares one embedding (:func:`embedding_copy`);
* activations: each module's saved tensors per in-flight micro-batch of that chunk
  (:func:`mtp_saved_bytes`).

The projection ``M_k``: column-parallel over TP, its SP input all-gathered first and its output
gathered back to the full hidden state (Megatron-Core 0.16 ``multi_token_prediction.py``,
``MultiTokenPredictionLayer._concat_embeddings``: ``eh_proj`` a column-parallel linear with
``gather_output=False``, then ``gather_from_tensor_model_parallel_region`` and, under SP, a split
back to the sequence shard, which moves no bytes).
"""

from __future__ import annotations

from dataclasses import replace

from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.workload.activations import layer_saved_bytes
from teton.workload.elementwise import elementwise_bytes
from teton.workload.gradients import accum_bytes
from teton.workload.items import ACT_BYTES, FP32, Block, Collective, Item, gemm_ops, memory_op
from teton.workload.mlp import tp_gather, tp_scatter
from teton.workload.moe import routed_params_per_gpu
from teton.workload.ops import layer_params_per_gpu


def mtp_layer_model(model: ModelSpec) -> ModelSpec:
    """The model whose every layer is one module's layer: the model's last layer kind."""
    return model.as_layer(model.layer_types()[-1])


def _renamed(items: tuple[Item, ...], prefix: str) -> list[Item]:
    """``items`` with ``prefix`` before their names (and the names of the ops they overlap)."""
    out: list[Item] = []
    for it in items:
        it = replace(it, name=prefix + it.name)
        if isinstance(it, Collective) and it.overlap:
            it = replace(it, overlap=prefix + it.overlap)
        out.append(it)
    return out


def _module_items(model: ModelSpec, job: JobSpec, prefix: str) -> tuple[list[Item], list[Item]]:
    """(forward, backward) of one module's own ops: the two norms, the TP gathers and ``2h -> h``
    projection (the embedding lookup, layer and head are the shared blocks' items)."""
    lay = job.layout
    tok, tok_e, h = lay.tokens, lay.elementwise_tokens, model.hidden
    norm_f, norm_b = elementwise_bytes(model.norm, job.kernel_fusion, tok_e * h)
    proj = gemm_ops(prefix + "proj", tok, lay.local(h), 2 * h, accum_bytes(job))
    act = ACT_BYTES * tok * h
    gathered = [Collective(prefix + "tp.ag_proj_out", "all_gather", "tp", act)] if lay.tp > 1 else []
    fwd: list[Item] = [memory_op(prefix + "hidden_norm", norm_f), memory_op(prefix + "embedding_norm", norm_f),
                       *tp_gather(lay, prefix + "tp.ag_proj", 2 * act), proj[0], *gathered]
    bwd: list[Item] = [proj[1], proj[2], *tp_scatter(lay, prefix + "tp.rs_proj_grad", 2 * act),
                       memory_op(prefix + "embedding_norm.bwd", norm_b, True),
                       memory_op(prefix + "hidden_norm.bwd", norm_b, True)]
    return fwd, bwd


def with_mtp(head: Block, embedding: Block, layer: Block, model: ModelSpec, job: JobSpec) -> Block:
    """The output head with the ``model.mtp_depth`` modules after it (module docstring): each the
    ``embedding`` block's lookup, its own ops, the ``layer`` block and the ``head`` block again,
    named ``mtp.`` (``mtp1.``, ``mtp2.``, ... for several)."""
    fwd, bwd = list(head.fwd), list(head.bwd)
    for k in range(1, model.mtp_depth + 1):
        prefix = "mtp." if model.mtp_depth == 1 else f"mtp{k}."
        own_f, own_b = _module_items(model, job, prefix)
        fwd += [*_renamed(embedding.fwd, prefix), *own_f, *_renamed(layer.fwd, prefix), *_renamed(head.fwd, prefix)]
        bwd = [*_renamed(head.bwd, prefix), *_renamed(layer.bwd, prefix), *own_b, *_renamed(embedding.bwd, prefix),
               *bwd]
    return replace(head, fwd=tuple(fwd), bwd=tuple(bwd))


def mtp_params_per_gpu(model: ModelSpec, job: JobSpec, chunks: int) -> tuple[float, float]:
    """(parameters, of them routed experts) one GPU of the last chunk holds for the modules: each
    one's layer (``workload.ops.layer_params_per_gpu``), its TP-sharded projection and three norms,
    and a copy of the embedding's vocab shard when the embedding sits on another of ``chunks`` and
    another rank: DualPipe puts the first and last stage on one rank, which shares the embedding
    between the modules and the main model (DeepSeek-V3 Sec. 3.2.3, "Shared Embedding and Output
    Head for Multi-Token Prediction")."""
    if not model.mtp_depth:
        return 0.0, 0.0
    lay, m = job.layout, mtp_layer_model(model)
    layer = layer_params_per_gpu(m, job) + 2 * model.hidden * model.hidden / lay.tp + 3 * model.norm_params()
    experts = routed_params_per_gpu(m, lay) if m.experts > 1 else 0.0
    # a tied head's copy on the last chunk (``workload.step_work.chunk_params``) serves the modules too
    copy = embedding_copy(job, chunks) and not model.tied_embeddings
    embedding = lay.local_vocab(model.vocab) * model.hidden if copy else 0
    return model.mtp_depth * layer + embedding, model.mtp_depth * experts


def embedding_copy(job: JobSpec, chunks: int) -> bool:
    """Whether the last chunk holds its own copy of the input embedding (its tokens looked up there:
    multi-token prediction, or a tied output head): the model is split over more than one chunk and
    the first and last stage sit on different ranks (not DualPipe's mirrored pair)."""
    return chunks > 1 and job.pp_schedule != "dualpipe"


def mtp_saved_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes the modules keep for backward per micro-batch on the last chunk: each one's layer
    (``workload.activations.layer_saved_bytes``), the two norms' inputs and statistics and the
    projection's input (SP shard, re-gathered in backward)."""
    if not model.mtp_depth:
        return 0.0
    lay = job.layout
    tok_e, h = lay.elementwise_tokens, model.hidden
    own = ACT_BYTES * tok_e * (2 * h + 2 * h) + FP32 * tok_e * 2
    return model.mtp_depth * (layer_saved_bytes(mtp_layer_model(model), job) + own)
