"""The gradient sum of an embedding held on two pipeline stages.

With the model split over several pipeline ranks, the last stage holds a copy of the input
embedding when it reads it: a tied output head (Megatron-LM's shared word embeddings,
``shared_embedding_or_output_weight``) or multi-token prediction's token lookup
(``teton.workload.mtp``). The two copies must stay equal, so their gradients are summed once a
step after the backward: Megatron-LM's ``finalize_model_grads`` all-reduces the embedding's
``main_grad`` over the embedding group, the first and last stage of each pipeline
(``_allreduce_word_embedding_grads``), after the data-parallel gradient sync; the step waits for
it. Model::

    t = all_reduce(groups = (stage 0, stage p-1) of each pipeline, vocab / tp x hidden x grad bytes)

exposed, after the last backward. DualPipe puts both ends of the model on one rank and shares one
embedding (DeepSeek-V3 Sec. 3.2.3): nothing to sum (``workload.mtp.embedding_copy``).
"""

from __future__ import annotations

import numpy as np

from teton.workload.mtp import embedding_copy


def embedding_sum_s(cost, placement, model, job, work) -> float:
    """Seconds of the embedding group's gradient all-reduce (module docstring); 0 when the last
    stage holds no copy of the embedding."""
    lay = job.layout
    if not (model.tied_embeddings or model.mtp_depth) or not embedding_copy(job, work.split.p * work.split.v):
        return 0.0
    pipes = placement.groups("pp")
    group = np.stack([pipes[:, 0], pipes[:, -1]], axis=1)
    grad_bytes = lay.local_vocab(model.vocab) * model.hidden * work.grad_reduce_bytes_per_param
    return float(cost.collective_time("all_reduce", group, grad_bytes))
