"""The parallel layout of a job, built once from the job: every package reads its degrees, axis
order and per-rank shapes here instead of recomputing them.

A rank's coordinates follow the job's axis order, innermost first (Llama 3: tp, cp, pp, dp):
``rank = tp + TP (cp + CP (pp + PP dp))``. A job on an MoE model whose spec gives no order takes
Megatron-Core's ``tp-cp-ep-dp-pp`` (:data:`MOE_ORDER`; ``teton.spec.job.check_job`` decides it,
where the job first meets its model).

Expert layout (Megatron-Core ``parallel_state.initialize_model_parallel``: two ``RankGenerator``
decompositions of the same ranks). The dense one is over tp, cp, pp, dp in the order (ep has
degree 1 in it); the expert one is over ``etp`` (expert tensor parallel, ``job.etp``, default tp),
``ep`` and ``edp`` (expert data parallel) where the order puts tp, ep and dp, with no cp:
``etp ep edp = tp cp dp``, so EP may span TP and CP ranks (Megatron-Core's "MoE parallel
folding": EP 32 over TP 2 x DP 16 with etp 1). Megatron-Core asserts that both decompositions give
the same pipeline groups; teton decomposes the ``tp cp dp`` ranks of one pipeline stage (their
index in the order without pp), which is Megatron-Core's layout wherever that assertion holds and
keeps the pipeline groups whole for any order. An order without ep takes it just inside dp.

Per-rank shapes of one micro-batch (Megatron-LM: Shoeybi et al. 2019 for TP, Korthikanti et al.
2022 for sequence parallelism; Llama 3 for load-balanced CP):

- ``tokens``: ``b s / cp``, the tokens of one CP rank;
- ``elementwise_tokens``: ``tokens / tp`` with sequence parallelism (norms, dropout and residual
  adds see a shard of the sequence), else ``tokens``;
- heads, KV heads, FFN width and vocabulary: the model's divided by ``tp`` (the vocabulary
  rounded up: the last shard is padded).

The batch of a step: ``sequences_per_step`` (the job's global batch, in sequences), the
``micro_batches`` of one DP rank (the gradient-accumulation count m) and the ``tokens_per_step``.

The degrees' rules (:meth:`Layout.check`, and :func:`data_parallel_degree`, the one place dp is
derived) are here with them: each a one-line ``SpecError`` naming ``job.<field>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from teton.errors import SpecError
from teton.spec.pipeline_layout import stage_layers

if TYPE_CHECKING:
    from teton.spec.model import ModelSpec

BASE_AXES = ("tp", "cp", "pp", "dp")  # teton's default order for a dense model, innermost first (Llama 3)
# Megatron-Core's default order "tp-cp-ep-dp-pp" (parallel_state.initialize_model_parallel), the
# default of a job on an MoE model
MOE_ORDER = ("tp", "cp", "ep", "dp", "pp")
# the expert decomposition's axis for each axis of the order (cp folds into the others; pp is whole)
EXPERT_AXIS = {"tp": "etp", "ep": "ep", "dp": "edp"}
# Micro-batches per DP rank per step: the pipeline schedule keeps every one (Llama 3 405B runs 16;
# memory and time grow with them: 20M sequences a step on 128 DP ranks took 2 GB and 13 s).
MAX_MICRO_BATCHES = 65_536


def dp_of(gpus: int, model_parallel: int) -> int | None:
    """dp of ``gpus`` GPUs in model replicas of ``model_parallel`` (tp cp pp) GPUs; None when they
    do not divide. The one place dp is derived."""
    return None if gpus % model_parallel else gpus // model_parallel


def data_parallel_degree(job) -> int:
    """dp of a job: ``job.dp`` when given, else ``gpus / (tp cp pp)`` (which must divide)."""
    if job.dp is not None:
        return job.dp
    model_par = job.tp * job.cp * job.pp
    dp = dp_of(job.gpus, model_par)
    if dp is None:
        raise SpecError("job.gpus", job.gpus, f"must be a multiple of tp*cp*pp = {model_par}")
    return dp


def sequences_per_step(job, dp: int) -> int:
    """The job's global batch in sequences: given, from its tokens, or one micro-batch per DP rank."""
    if job.global_batch:
        return job.global_batch
    if job.global_batch_tokens:
        return job.global_batch_tokens // job.seq_len
    return dp * job.micro_batch


def default_order(experts: int) -> tuple[str, ...]:
    """The order a job takes when its spec gives none: Megatron-Core's for an MoE model (``experts
    > 1``), Llama 3's otherwise."""
    return MOE_ORDER if experts > 1 else BASE_AXES


def with_ep(order: tuple[str, ...]) -> tuple[str, ...]:
    """``order`` naming ep: as given, or with ep just inside dp."""
    if "ep" in order:
        return tuple(order)
    i = order.index("dp")
    return (*order[:i], "ep", *order[i:])


def expert_order(order: tuple[str, ...]) -> tuple[str, ...]:
    """The expert decomposition's axes of one pipeline stage, innermost first: etp, ep and edp
    where ``order`` (ep placed by :func:`with_ep`) puts tp, ep and dp."""
    return tuple(EXPERT_AXIS[a] for a in with_ep(order) if a in EXPERT_AXIS)


def expert_degrees(degrees: dict[str, int]) -> dict[str, int]:
    """etp, ep and edp of ``degrees`` (tp, cp, dp, and ep / etp when given: default 1 / tp);
    ``edp = tp cp dp / (etp ep)`` (Megatron-Core's expert_data_parallel_size)."""
    etp, ep = degrees.get("etp", degrees["tp"]), degrees.get("ep", 1)
    return {"etp": etp, "ep": ep, "edp": degrees["tp"] * degrees["cp"] * degrees["dp"] // (etp * ep)}


@dataclass(frozen=True)
class Layout:
    """Degrees, axis order, batch and the local token counts of one rank, for one job."""

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
    sequences_per_step: int = 0  # 0: one micro-batch per DP rank
    pp_round: int | None = None  # the interleaved schedule's N (None: pp)
    expert_tp: int | None = None  # job.etp (None: tp)
    cp_a2a: int = 1  # a2a+p2p CP: the ranks of one all-to-all group (job.cp_a2a; 1: none)

    @property
    def etp(self) -> int:
        """TP degree of the routed experts' GEMMs (``job.etp``, default ``tp``)."""
        return self.expert_tp or self.tp

    @classmethod
    def of(cls, job) -> Layout:
        """The layout of a ``JobSpec`` (dp derived when the job leaves it out)."""
        order = tuple(job.parallel_order)
        if job.ep > 1 or (job.etp or job.tp) != job.tp:
            order = with_ep(order)
        dp = data_parallel_degree(job)
        return cls(tp=job.tp, cp=job.cp, pp=job.pp, dp=dp, ep=job.ep,
                   virtual_stages=job.virtual_stages, order=order, micro_batch=job.micro_batch,
                   seq_len=job.seq_len, sequence_parallel=job.sequence_parallel and job.tp > 1,
                   sequences_per_step=sequences_per_step(job, dp), pp_round=job.pp_round,
                   expert_tp=job.etp, cp_a2a=(job.cp_a2a or 1) if job.cp_algo == "a2a+p2p" else 1)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def model_parallel(self) -> int:
        """GPUs of one model replica: ``tp cp pp``."""
        return self.tp * self.cp * self.pp

    @property
    def edp(self) -> int:
        """Expert data parallel: the ranks that hold the same experts, ``tp cp dp / (etp ep)``
        (Megatron-Core's expert_data_parallel_size; CP folded in)."""
        return self.tp * self.cp * self.dp // (self.etp * self.ep)

    @property
    def degrees(self) -> dict[str, int]:
        """Degree of each placed axis: tp, cp, pp, dp, and ep, etp and edp when the order names ep
        (an order may name ep with degree 1, for a dense model); cp_a2a and cp_p2p, the sub-groups
        of each CP group, under a2a+p2p CP."""
        d = {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp}
        if "ep" in self.order:
            d.update(ep=self.ep, etp=self.etp, edp=self.edp)
        if self.cp_a2a > 1:  # a2a+p2p CP's two levels (teton.placement.mapping)
            d.update(cp_a2a=self.cp_a2a, cp_p2p=self.cp // self.cp_a2a)
        return d

    @property
    def expert_order(self) -> tuple[str, ...]:
        """etp, ep and edp, innermost first, as the order places them (:func:`expert_order`)."""
        return expert_order(self.order)

    def rank_stride(self, axis: str) -> int:
        """Rank distance between the first two members of rank 0's group on ``axis`` (a dense axis,
        or etp / ep / edp of the expert decomposition)."""
        dense = {"tp": self.tp, "cp": self.cp, "pp": self.pp, "dp": self.dp}
        strides, stride = {}, 1
        for a in self.base_order:
            strides[a], stride = stride, stride * dense[a]
        if axis in dense:
            return strides[axis]
        exp = {"etp": self.etp, "ep": self.ep, "edp": self.edp}
        index = int(np.prod([exp[a] for a in self.expert_order[:self.expert_order.index(axis)]]))
        rank = 0
        for a in (a for a in self.base_order if a != "pp"):  # stage index -> dense coordinates
            rank, index = rank + index % dense[a] * strides[a], index // dense[a]
        return rank

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

    def expert_coords(self) -> dict[str, np.ndarray]:
        """Coordinate of every rank on etp, ep and edp: its index among its pipeline stage's ranks
        (the order without pp) decomposed over the expert order (module docstring)."""
        c, degrees = self.coords(), {"tp": self.tp, "cp": self.cp, "dp": self.dp}
        index, stride = np.zeros(self.gpus, dtype=np.int64), 1
        for axis in self.base_order:
            if axis != "pp":
                index, stride = index + c[axis] * stride, stride * degrees[axis]
        exp, out = {"etp": self.etp, "ep": self.ep, "edp": self.edp}, {}
        for axis in self.expert_order:
            out[axis], index = index % exp[axis], index // exp[axis]
        return out

    @property
    def micro_batches(self) -> int:
        """Micro-batches per DP rank per step (the gradient-accumulation count, m)."""
        return (self.sequences_per_step or self.dp * self.micro_batch) // (self.dp * self.micro_batch)

    @property
    def tokens_per_step(self) -> int:
        return (self.sequences_per_step or self.dp * self.micro_batch) * self.seq_len

    @property
    def pp_round_size(self) -> int:
        """N: consecutive micro-batches per chunk in the interleaved schedule (default pp)."""
        return self.pp_round or self.pp

    @property
    def chunks(self) -> int:
        """Pipeline chunks of one replica: ``pp x virtual_stages``."""
        return self.pp * self.virtual_stages

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

    def check(self, job, model: ModelSpec, domain_gpus: int) -> None:
        """The degrees' rules against the job's GPUs, the model and the NVLink domain's size."""
        self._check_degrees(job, model, domain_gpus)
        self._check_batch(job)

    def _check_degrees(self, job, model: ModelSpec, domain_gpus: int) -> None:
        if self.gpus != job.gpus:
            raise SpecError("job.dp", job.dp, f"tp*cp*pp*dp = {self.tp}*{self.cp}*{self.pp}*{self.dp} = "
                            f"{self.gpus} must equal job.gpus ({job.gpus})")
        for width, name in ((model.heads, "heads"), (model.n_kv_heads, "kv_heads"), (model.ffn_hidden, "ffn_hidden")):
            if width % self.tp:
                raise SpecError("job.tp", self.tp, f"must divide model.{name} ({width})")
        if self.tp > domain_gpus and self.tp % domain_gpus:
            raise SpecError("job.tp", self.tp, f"must divide or be a multiple of the GPUs per NVLink domain "
                            f"({domain_gpus})")
        if self.chunks > model.layers + (2 if job.pp_embedding_slots else 0):
            raise SpecError("job.pp", self.pp,
                            f"pp*virtual_stages = {self.chunks} exceeds the model's {model.layers} layers")
        self._check_stage_layers(job, model)
        if job.pp_layout is not None:
            stage_layers(job.pp_layout, self.pp, self.virtual_stages, model.layers, model.mtp_depth)
        if self.seq_len % (2 * self.cp) and self.cp > 1:
            raise SpecError("job.seq_len", self.seq_len,
                            f"must be divisible by 2*cp = {2 * self.cp} (load-balanced chunks)")
        if self.seq_len % self.tp and job.sequence_parallel:
            raise SpecError("job.seq_len", self.seq_len,
                            f"must be divisible by tp ({self.tp}) with sequence parallelism")
        if self.sequence_parallel and self.tokens % self.tp:
            raise SpecError("job.micro_batch", self.micro_batch,
                            f"micro_batch*seq_len/cp = {self.tokens} tokens per CP rank must be divisible by "
                            f"tp ({self.tp}) with sequence parallelism (or job.sequence_parallel: false)")
        self._check_experts(model)

    def _check_stage_layers(self, job, model: ModelSpec) -> None:
        """An uneven first / last stage leaves the middle stages the other layers, evenly (Megatron-
        Core's rule: they must divide by the middle stages), at least one each."""
        given = {k: v for k, v in (("job.pp_first_stage_layers", job.pp_first_stage_layers),
                                   ("job.pp_last_stage_layers", job.pp_last_stage_layers)) if v is not None}
        if not given:
            return
        field, value = next(iter(given.items()))
        rest, middle = model.layers - sum(given.values()), self.pp - len(given)
        if rest < middle or (middle == 0 and rest):
            raise SpecError(field, value, f"leaves {rest} of the model's {model.layers} layers for {middle} other "
                            "pipeline stages: each needs at least one, and together all of them")
        if middle and rest % middle:
            raise SpecError(field, value, f"leaves {rest} layers, which do not divide evenly over the "
                            f"{middle} other pipeline stages (Megatron-Core's rule)")

    def _check_experts(self, model: ModelSpec) -> None:
        """ep and etp against the model and the ranks of one pipeline stage (Megatron-Core:
        ``tp cp dp`` must be a multiple of ``etp ep``)."""
        if model.experts > 1 and model.experts % self.ep:
            raise SpecError("job.ep", self.ep, f"must divide model.experts ({model.experts})")
        if model.experts == 1 and self.ep != 1:
            raise SpecError("job.ep", self.ep, "expert parallelism needs a MoE model (model.experts > 1)")
        if model.experts == 1 and self.etp != self.tp:
            raise SpecError("job.etp", self.etp, f"expert tensor parallelism needs a MoE model (model.experts > 1); "
                            f"leave it out or equal to tp ({self.tp})")
        stage = self.tp * self.cp * self.dp
        if stage % self.etp:
            raise SpecError("job.etp", self.etp, f"must divide tp*cp*dp = {self.tp}*{self.cp}*{self.dp} = {stage}, "
                            "the ranks of one pipeline stage")
        if stage % (self.etp * self.ep):
            raise SpecError("job.ep", self.ep, f"etp*ep = {self.etp}*{self.ep} must divide tp*cp*dp = "
                            f"{self.tp}*{self.cp}*{self.dp} = {stage}, the ranks of one pipeline stage")
        if model.experts > 1 and model.expert_ffn % self.etp:
            raise SpecError("job.etp", self.etp, f"must divide the expert FFN width ({model.expert_ffn}, "
                            "model.moe_ffn_hidden or ffn_hidden)")

    def _check_batch(self, job) -> None:
        if job.global_batch_tokens and job.global_batch_tokens % self.seq_len:
            raise SpecError("job.global_batch_tokens", job.global_batch_tokens,
                            f"must be a whole number of sequences: a multiple of job.seq_len ({self.seq_len})")
        seqs, per, m = self.sequences_per_step, self.dp * self.micro_batch, self.micro_batches
        what = "job.global_batch" if job.global_batch or not job.global_batch_tokens else "job.global_batch_tokens"
        if seqs <= 0 or seqs % per:
            raise SpecError(what, job.global_batch if what == "job.global_batch" else job.global_batch_tokens,
                            f"must be a positive multiple of dp*micro_batch = {per} sequences")
        if m > MAX_MICRO_BATCHES:  # the step is simulated micro-batch by micro-batch
            raise SpecError(what, job.global_batch or job.global_batch_tokens,
                            f"gives {m:,} micro-batches per DP rank; at most {MAX_MICRO_BATCHES:,} "
                            "(a larger job.micro_batch takes fewer)")
        if self.pp_round is not None and job.pp_schedule != "interleaved":
            raise SpecError("job.pp_round", self.pp_round, "needs job.pp_schedule = interleaved")
        if job.software.ep_comm_overlap and self.ep > 1 and self.pp > 1 and (
                job.pp_schedule != "interleaved" or self.virtual_stages < 2):
            # a merged forward-backward waits for the next stage's backward, which waits for this
            # stage's previous merged op: without virtual stages every rank idles half the time
            raise SpecError("software.ep_comm_overlap", True, "with job.pp > 1 needs job.pp_schedule = interleaved "
                            "and job.virtual_stages >= 2 (as Megatron-Core's --overlap-moe-expert-parallel-comm)")
        if job.pp_schedule == "dualpipe" and (m % 2 or m < 2 * self.pp):  # DualPipe.step asserts both
            raise SpecError(what, job.global_batch or job.global_batch_tokens,
                            f"gives {m} micro-batches per DP rank; job.pp_schedule = dualpipe needs an even "
                            f"number, at least 2 pp = {2 * self.pp} (half flow each way)")
        if self.pp_round is not None and (self.pp_round < self.pp or m % self.pp_round):
            raise SpecError("job.pp_round", self.pp_round, f"must be at least pp ({self.pp}) and divide the "
                            f"micro-batches per DP rank ({m}); {m} itself always works")
        if (job.pp_schedule == "interleaved" and self.pp > 1 and self.virtual_stages > 1 and self.pp_round is None
                and m % self.pp):  # with v = 1 it is plain 1F1B, which takes any m
            raise SpecError("job.global_batch", seqs,
                            f"the interleaved schedule needs micro-batches per DP rank ({m}) "
                            f"divisible by pp ({self.pp}), or job.pp_round (Llama 3's N) dividing them")


def hierarchical_cp_a2a(model: ModelSpec, tp: int, cp: int, domain_gpus: int) -> int | None:
    """The all-to-all groups' size teton gives a2a+p2p CP (``job.cp_a2a``) where it chooses one
    (``teton search --cp-algo a2a+p2p``, ``teton run``'s hint): the most CP ranks of one NVLink
    domain (``tp x a`` GPUs at most ``domain_gpus``: the all-to-alls on NVLink, the ring between
    domains, as Megatron-Core's hierarchical CP is meant to run) that divides cp, is smaller and
    splits a TP rank's query and key / value heads (``model.cp_kv_heads``); None where no such
    a >= 2 exists."""
    heads, kv_heads = model.heads // tp, model.cp_kv_heads // tp
    fits = [a for a in range(2, cp) if not cp % a and tp * a <= domain_gpus and not heads % a and not kv_heads % a]
    return max(fits) if fits else None
