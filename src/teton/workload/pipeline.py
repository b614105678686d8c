"""How the model's layers are split over pipeline ranks and virtual stages (chunks)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teton.memo import cached
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.spec.pipeline_layout import stage_layers
from teton.workload.dualpipe import held_per_rank


@dataclass(frozen=True)
class PipelineSplit:
    """``layers[r, c]``: transformer layers of chunk c on pipeline rank r (virtual stage c*p + r).

    The embedding lives on (rank 0, chunk 0) and the output head on (rank p-1, chunk v-1).
    """

    layers: np.ndarray  # (p, v) int
    # DualPipe (``workload.dualpipe``): the (p, 1) split of the model's stages, each rank holding
    # its stage and the mirrored one's (p-1-r)
    mirrored: bool = False

    @property
    def p(self) -> int:
        return int(self.layers.shape[0])

    @property
    def v(self) -> int:
        return int(self.layers.shape[1])

    def layers_on_rank(self) -> np.ndarray:
        return self.held(self.layers)

    def held(self, per_chunk: np.ndarray) -> np.ndarray:
        """(p,) what each rank holds of a (p, v) per-chunk quantity: the sum over its chunks, under
        DualPipe both its stages' (``workload.dualpipe.held_per_rank``)."""
        return held_per_rank(per_chunk) if self.mirrored else np.asarray(per_chunk).sum(axis=1)


def split_layers(model: ModelSpec, job: JobSpec) -> PipelineSplit:
    """The job's split (:func:`_split_layers`): ``virtual_stages`` chunks per rank under the
    interleaved schedule, else one; the stages ``job.pp_layout`` names where it is given; under
    DualPipe the (p, 1) split of the model's stages, marked ``mirrored`` (each rank also holds
    stage p-1-r)."""
    lay = job.layout
    v = lay.virtual_stages if job.pp_schedule == "interleaved" else 1
    if job.pp_layout is not None:
        return PipelineSplit(_given_split(job.pp_layout, lay.pp, v, model.layers, model.mtp_depth))
    dual = job.pp_schedule == "dualpipe"
    ends = (job.pp_first_stage_layers, job.pp_last_stage_layers)
    if job.pp_split == "balanced" and v == 1 and lay.pp > 2:
        ends = balanced_ends(model, lay.pp, lay.seq_len, dual)
    return PipelineSplit(_split(model.layers, lay.pp, v, job.pp_embedding_slots, ends), dual)


@cached(1024)
def balanced_ends(model: ModelSpec, p: int, seq_len: int, mirrored: bool) -> tuple[int, int]:
    """(first, last) stage layers of ``job.pp_split: balanced``: of the splits with the middle
    stages even (Megatron-Core's uneven-pipeline rule), the one whose busiest rank runs the fewest
    training FLOPs per token (``spec.model_flops``: each layer's own, the output head and
    multi-token prediction on the last stage; under DualPipe a rank runs stage r and p-1-r); ties
    to the split nearest the even one. FLOPs stand in for time: a proxy, not the engine's step."""
    from teton.spec.model_flops import last_stage_extra_flops_per_token, layer_flops_per_token

    per_kind = {k: layer_flops_per_token(model, k, seq_len) for k in model.layer_type_counts()}
    prefix = np.concatenate([[0.0], np.cumsum([per_kind[k] for k in model.layer_types()])])
    n, middle, head = model.layers, p - 2, last_stage_extra_flops_per_token(model, seq_len)
    best: tuple[float, int, tuple[int, int]] | None = None
    for each in range(1, n // middle + 1):
        for first in range(0, n - middle * each + 1):
            last = n - middle * each - first
            bounds = np.cumsum([0, first, *([each] * middle), last])
            load = prefix[bounds[1:]] - prefix[bounds[:-1]]
            load[-1] += head
            if mirrored:
                load = load + load[::-1]
            key = (float(load.max()), abs(first - each) + abs(last - each), (first, last))
            if best is None or key[:2] < best[:2]:
                best = key
    return best[2]


def balanced_is_uneven(model: ModelSpec, p: int, seq_len: int, mirrored: bool) -> bool:
    """Whether ``job.pp_split: balanced`` splits a ``p``-stage pipeline of one chunk per rank
    differently from the even split (a search tries it only then)."""
    if p < 3 or p - 2 > model.layers:
        return False
    first, last = balanced_ends(model, p, seq_len, mirrored)
    return not np.array_equal(_uneven_split(model.layers, p, first, last), _split_layers(model.layers, p, 1, False))


@cached(256)
def _given_split(layout: str, p: int, v: int, layers: int, mtp_depth: int) -> np.ndarray:
    """The split ``job.pp_layout`` names (Megatron-Core's layout string)."""
    out = stage_layers(layout, p, v, layers, mtp_depth)
    out.flags.writeable = False
    return out


@cached(1024)
def _split(n_layers: int, p: int, v: int, embedding_slots: bool,
           ends: tuple[int | None, int | None] = (None, None)) -> np.ndarray:
    out = _uneven_split(n_layers, p, *ends) if ends != (None, None) else _split_layers(n_layers, p, v, embedding_slots)
    out.flags.writeable = False
    return out


def _uneven_split(n_layers: int, p: int, first: int | None, last: int | None) -> np.ndarray:
    """(p, 1) layers of a split with the first and / or last stage's count given (``job.
    pp_first_stage_layers`` / ``pp_last_stage_layers``, Megatron-Core's uneven pipeline): the
    middle stages share the rest evenly (the job rules made it divide)."""
    given = [x for x in (first, last) if x is not None]
    middle = p - len(given)
    each = (n_layers - sum(given)) // middle if middle else 0
    sizes = np.full(p, each, dtype=np.int64)
    if first is not None:
        sizes[0] = first
    if last is not None:
        sizes[-1] = last
    return sizes.reshape(p, 1)


def _split_layers(n_layers: int, p: int, v: int, embedding_slots: bool) -> np.ndarray:
    """Contiguous split of the layers over the p*v virtual stages.

    With ``pp_embedding_slots`` the embedding and the output head each take one layer's slot
    (Llama 3, Sec. 3.3.2: "we reduce one Transformer layer each from the first and the last
    stages", so the first chunk of the first stage holds only the embedding and the last chunk
    of the last stage only the output projection and loss). Slots that don't divide evenly go
    one extra to the middle virtual stages first.
    """
    n = p * v
    extra = 2 if embedding_slots else 0
    units = n_layers + extra
    base, rem = divmod(units, n)
    sizes = np.full(n, base, dtype=np.int64)
    if rem:
        mid = n // 2
        order = sorted(range(n), key=lambda g: (abs(g - mid + 0.5), g))
        sizes[order[:rem]] += 1
    if embedding_slots:
        sizes[0] -= 1
        sizes[-1] -= 1
    layers = np.zeros((p, v), dtype=np.int64)
    for g in range(n):
        c, r = divmod(g, p)
        layers[r, c] = sizes[g]
    return layers


def warmup_forwards(p: int, v: int, m: int, rank: int, n_round: int | None = None, extra: int = 0) -> int:
    """Forwards pipeline rank ``rank`` runs before its first backward.

    1F1B: ``min(p - rank - 1, m)``. Interleaved (Megatron-LM, ``n_round = p``; Llama 3's schedule
    with ``N = n_round`` consecutive micro-batches per chunk): ``min((p-rank-1)*2 + (v-1)*N, m*v)``.
    ``extra`` more under all-to-all overlap (:func:`ep_overlap_warmup`).
    """
    if v == 1:
        return min(p - rank - 1 + extra, m)
    return min((p - rank - 1) * 2 + (v - 1) * (n_round or p) + extra, m * v)


def ep_overlap_warmup(job: JobSpec) -> int:
    """Extra warm-up forwards of a schedule that overlaps the MoE all-to-all (``software.
    ep_comm_overlap`` with ``ep > 1``): 1, else 0.

    Megatron-Core's ``--overlap-moe-expert-parallel-comm`` (``combined_1f1b``, after DeepSeek-V3's
    DualPipe, arXiv 2412.19437 Sec. 3.2.1) runs each steady-state forward together with the
    backward of an earlier micro-batch, so the dispatch and combine of one run under the other's
    compute. The backward paired with the forward of micro-batch ``k`` must not need ``k``'s own
    output, so every rank runs one forward more before its first backward (the last stage too) and
    holds one micro-batch's activations more."""
    return int(job.software.ep_comm_overlap and job.layout.ep > 1)


@cached(256)
def chunk_orders(v: int, m: int, n_round: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) order of (chunk, micro-batch) pairs on every rank, (m*v, 2) each.

    Micro-batches go in rounds of ``n_round`` consecutive ones; a round passes through chunk 0,
    1, ... v-1 forward, and through the chunks in reverse backward (Narayanan et al. 2021, Sec.
    2.2, with rounds of p; Llama 3, Sec. 3.3.2, Fig. 6, with rounds of N). Job checks admit only
    whole rounds of N >= p (a shorter last round can deadlock the fixed 1F1B order).
    """
    fwd, bwd = [], []
    for start in range(0, m, n_round):
        mbs = range(start, min(start + n_round, m))
        fwd += [(c, mb) for c in range(v) for mb in mbs]
        bwd += [(c, mb) for c in reversed(range(v)) for mb in mbs]
    out = np.array(fwd, dtype=np.int64).reshape(-1, 2), np.array(bwd, dtype=np.int64).reshape(-1, 2)
    for a in out:
        a.flags.writeable = False  # shared by every caller (memoised)
    return out


def in_flight_microbatches(p: int, v: int, m: int, rank: int, n_round: int | None = None, extra: int = 0) -> int:
    """Chunk activations pipeline rank ``rank`` holds at its peak: its warm-up forwards plus one
    (Megatron-LM interleaved 1F1B: ``(p-rank-1)*2 + (v-1)*p`` warm-up forwards; 1F1B: ``p-rank-1``;
    ``extra`` more under all-to-all overlap)."""
    return min(warmup_forwards(p, v, m, rank, n_round, extra) + 1, m * v)
