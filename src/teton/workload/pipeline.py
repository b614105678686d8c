"""How the model's layers are split over pipeline ranks and virtual stages (chunks)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from teton.spec.schema import JobSpec
from teton.workload.model import ModelSpec


@dataclass(frozen=True)
class PipelineSplit:
    """``layers[r, c]``: transformer layers of chunk c on pipeline rank r (virtual stage c*p + r).

    The embedding lives on (rank 0, chunk 0) and the output head on (rank p-1, chunk v-1).
    """

    layers: np.ndarray  # (p, v) int

    @property
    def p(self) -> int:
        return int(self.layers.shape[0])

    @property
    def v(self) -> int:
        return int(self.layers.shape[1])

    def layers_on_rank(self) -> np.ndarray:
        return self.layers.sum(axis=1)


def split_layers(model: ModelSpec, job: JobSpec) -> PipelineSplit:
    v = job.virtual_stages if job.pp_schedule == "interleaved" else 1
    return PipelineSplit(_split(model.layers, job.pp, v, job.pp_embedding_slots))


@functools.lru_cache(maxsize=1024)
def _split(n_layers: int, p: int, v: int, embedding_slots: bool) -> np.ndarray:
    out = _split_layers(n_layers, p, v, embedding_slots)
    out.flags.writeable = False
    return out


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


def in_flight_microbatches(p: int, v: int, m: int, rank: int) -> int:
    """Chunk activations pipeline rank ``rank`` holds at its peak: its warm-up forwards plus one
    (Megatron-LM interleaved 1F1B: ``(p-rank-1)*2 + (v-1)*p`` warm-up forwards; 1F1B: ``p-rank-1``)."""
    if v == 1:
        return min(p - rank, m)
    return min((p - rank - 1) * 2 + (v - 1) * p + 1, m * v)
