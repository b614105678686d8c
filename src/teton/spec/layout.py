"""The parallel layout of a job, built once from the job: every package reads its degrees, axis
order and per-rank shapes here instead of recomputing them.

A rank's coordinates follow the job's axis order, innermost first (Llama 3: tp, cp, pp, dp):
``rank = tp + TP (cp + CP (pp + PP dp))``. Expert parallelism, when the job has it, sits just
inside ``dp`` unless ``job.parallel_order`` places it (EP groups are carved out of DP ranks).

Per-rank shapes of one micro-batch (Megatron-LM: Shoeybi et al. 2019 for TP, Korthikanti et al.
2022 for sequence parallelism; Llama 3 for load-balanced CP):

- ``tokens``: ``b s / cp``, the tokens of one CP rank;
- ``elementwise_tokens``: ``tokens / tp`` with sequence parallelism (norms, dropout and residual
  adds see a shard of the sequence), else ``tokens``;
- heads, KV heads, FFN width and vocabulary: the model's divided by ``tp`` (the vocabulary
  rounded up: the last shard is padded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BASE_AXES = ("tp", "cp", "pp", "dp")


@dataclass(frozen=True)
class Layout:
    """Degrees, axis order and the local token counts of one rank, for one job."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int
    virtual_stages: int
    order: tuple[str, ...]  # innermost first, with ep when the job has (or places) it
    micro_batch: int
    seq_len: int
    sequence_parallel: bool  # in effect: asked for and tp > 1

    @classmethod
    def of(cls, job) -> Layout:
        """The layout of a (checked) ``JobSpec``."""
        order = tuple(job.parallel_order)
        if job.ep > 1 and "ep" not in order:
            i = order.index("dp")
            order = (*order[:i], "ep", *order[i:])
        return cls(tp=job.tp, cp=job.cp, pp=job.pp, dp=job.dp_degree, ep=job.ep,
                   virtual_stages=job.virtual_stages, order=order, micro_batch=job.micro_batch,
                   seq_len=job.seq_len, sequence_parallel=job.sequence_parallel and job.tp > 1)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def degrees(self) -> dict[str, int]:
        """Degree of each placed axis: tp, cp, pp, dp, and ep when the order names it (an order may
        name ep with degree 1, for a dense model)."""
        d = {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp}
        if "ep" in self.order:
            d["ep"] = self.ep
        return d

    @property
    def base_order(self) -> tuple[str, ...]:
        """The order of tp, cp, pp and dp alone (ep folded into dp)."""
        return tuple(a for a in self.order if a != "ep")

    def coords(self) -> dict[str, np.ndarray]:
        """Coordinate of every rank on each of tp, cp, pp, dp (the job's order, ep folded into dp)."""
        ranks = np.arange(self.gpus)
        degrees = {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp}
        out, stride = {}, 1
        for axis in self.base_order:
            out[axis] = (ranks // stride) % degrees[axis]
            stride *= degrees[axis]
        return out

    @property
    def tokens(self) -> int:
        """Tokens of one CP rank in one micro-batch: ``b s / cp``."""
        return self.micro_batch * self.seq_len // self.cp

    @property
    def elementwise_tokens(self) -> int:
        """Tokens an elementwise op of one rank sees: sequence parallelism shards them over TP."""
        return self.tokens // self.tp if self.sequence_parallel else self.tokens

    def local(self, width: int) -> int:
        """This TP rank's share of a head-, KV- or FFN-sharded width (``width / tp``)."""
        return width // self.tp

    def local_vocab(self, vocab: int) -> int:
        """This TP rank's share of the vocabulary, rounded up (the last shard is padded)."""
        return -(-vocab // self.tp)
