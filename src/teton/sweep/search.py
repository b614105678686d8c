"""Layout search: every valid TP/CP/PP/DP/EP/expert-TP (and schedule, recompute, ZeRO, and for
an MoE model the rank order) layout of a job, simulated, filtered to what fits in memory, ranked by
step time.

EP (expert parallelism) and expert TP (etp) are searched on MoE models only, as Megatron-Core lays
them out (``teton.spec.layout``): ep must divide ``model.experts`` and etp the expert FFN width, and
``etp ep`` the ``tp cp dp`` ranks of a pipeline stage (the job rules). etp tries 1 (Megatron-Core's
"MoE parallel folding": experts whole, EP over the TP ranks) and tp (experts sharded as the dense
layers) unless ``--etp`` says which. The rank order is part of an MoE layout: with pp > 1 and dp > 1
the search tries the job's order, Megatron-Core's tp-cp-ep-dp-pp and Llama 3's tp-cp-pp-dp (ep inside
dp), which place EP and DP inside or across the pipeline stages. A dense model searches ep 1 and its
own order alone, and asking it for another ep or an etp is an error.

An MoE search is staged (``SearchSpace.refine_top``): a first pass simulates every other degree at
the first expert choice that fits in memory (etp 1 before tp, the job's order first), then the best ``refine_top`` layouts of that pass
(fitting ones first) are simulated with every expert TP degree and rank order. etp and the order
move the EP group's placement and the expert GEMMs' shape, not the dense degrees' ranking, so the
best layouts of the first pass hold the best of the whole space in the cases tested
(``tests/sweep``); ``refine_top=None`` searches every combination (6x the layouts).
**Dominated layouts are not simulated** (``SearchSpace.prune``). Recompute and ZeRO only save
memory by adding work: recompute ``none`` does none, ``selective``, ``selective_op`` and
``selective_layer`` part of what ``full`` recomputes; ZeRO-1 moves the least data, ZeRO-2 reducing
once a step as much, after every micro-batch more, ZeRO-3 the most. So of the layouts with the same
degrees, micro-batch and expert choice, one whose recompute and ZeRO stage both do at least the
work of a layout that fits can never be faster: the search takes memory verdicts in that order and
leaves such a layout out (``dominated``; the best layout and the order of the others are the
exhaustive search's, ``tests/sweep``); of two that do not fit, likewise the one that also misses
the HBM by no fewer bytes (selective recompute under flash attention saves nothing over none).
``--exhaustive`` simulates them too. A degree rule refusing an expert choice runs once per layout.
Rows carry ``mfu`` (against the job's precision peak)
and ``mfu_bf16`` (against the bf16 peak, what tables show as "MFU"); the ranking is by step time.

The global batch (tokens per step), sequence length, GPU count, model and cluster stay fixed;
the search varies how the job is laid out. Invalid layouts (a degree that doesn't divide heads,
an interleaved schedule whose micro-batch count isn't a multiple of pp, ...) are skipped by the
same rules ``teton run`` reports as errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from teton.engine.result import StepResult
from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.memo import fewer_collections
from teton.spec.job import RECOMPUTE_INTERVAL_DEFAULT, check_job
from teton.spec.layout import BASE_AXES, MOE_ORDER, dp_of, with_ep
from teton.spec.schema import Spec
from teton.workload.headroom import memory_headroom
from teton.workload.memory import memory_per_gpu

TP_CHOICES = (1, 2, 4, 8, 16)
CP_CHOICES = (1, 2, 4, 8, 16, 32)
PP_CHOICES = (1, 2, 4, 8, 16, 32, 64)
V_CHOICES = (1, 2, 4, 8)
MICRO_BATCH_CHOICES = (1, 2, 4)
# selective_layer at the job's recompute_interval (torchtitan's default N = 2 unless the job sets it);
# selective_op is skipped where the job rules refuse it (MoE, biases, fp8)
RECOMPUTE_CHOICES = ("none", "selective", "full", "selective_op", "selective_layer")
ZERO_CHOICES = (1, 2, 3)
EP_CHOICES = None  # every divisor of model.experts (ep 1 alone for a dense model)
ETP_CHOICES = None  # 1 and tp (MoE models; a dense model has no expert TP)
ORDER_CHOICES = (MOE_ORDER, with_ep(BASE_AXES))  # an MoE model's orders besides its own: Megatron-Core's, Llama 3's
REFINE_TOP = 24  # an MoE search's first-pass layouts whose expert TP and rank order are refined


@dataclass(frozen=True)
class SearchSpace:
    tp: tuple[int, ...] = TP_CHOICES
    cp: tuple[int, ...] = CP_CHOICES
    pp: tuple[int, ...] = PP_CHOICES
    virtual_stages: tuple[int, ...] = V_CHOICES
    micro_batch: tuple[int, ...] = MICRO_BATCH_CHOICES
    recompute: tuple[str, ...] = RECOMPUTE_CHOICES
    zero: tuple[int, ...] = ZERO_CHOICES
    ep: tuple[int, ...] | None = EP_CHOICES
    etp: tuple[int, ...] | None = ETP_CHOICES
    refine_top: int | None = REFINE_TOP  # MoE: staged search (module docstring); None: exhaustive
    prune: bool = True  # leave out dominated layouts (module docstring); False: exhaustive


def _degrees(text: str | None, field: str, default: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if text is None:
        return default
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or any(x <= 0 for x in values):
        raise SpecError(field, text, "expected a comma-separated list of positive integers")
    return values


def search_space(tp: str | None = None, cp: str | None = None, pp: str | None = None,
                 virtual_stages: str | None = None, ep: str | None = None, etp: str | None = None,
                 exhaustive: bool = False) -> SearchSpace:
    """The space of ``--tp 4,8 --cp ... --pp ... --virtual-stages ... --ep ... --etp ...`` (None:
    every choice; ``--exhaustive``: no staged MoE search, no dominance pruning)."""
    return SearchSpace(tp=_degrees(tp, "tp", TP_CHOICES), cp=_degrees(cp, "cp", CP_CHOICES),
                       pp=_degrees(pp, "pp", PP_CHOICES),
                       virtual_stages=_degrees(virtual_stages, "virtual_stages", V_CHOICES),
                       ep=_degrees(ep, "ep", None), etp=_degrees(etp, "etp", None),
                       refine_top=None if exhaustive else REFINE_TOP, prune=not exhaustive)


def ep_degrees(spec: Spec, space: SearchSpace) -> tuple[int, ...]:
    """The EP degrees to search: ``space.ep``, or every divisor of the MoE model's experts.
    A dense model has ep 1 only; another degree, or any expert TP degree, asked of it is a
    SpecError."""
    experts = spec.model.experts
    if experts == 1 and space.etp is not None:
        raise SpecError("etp", ",".join(map(str, space.etp)),
                        f"expert tensor parallelism needs a MoE model (model.experts > 1); {spec.model.name} is dense")
    if space.ep is None:
        return tuple(d for d in range(1, experts + 1) if experts % d == 0)
    if experts == 1 and set(space.ep) != {1}:
        raise SpecError("ep", ",".join(map(str, space.ep)),
                        f"expert parallelism needs a MoE model (model.experts > 1); {spec.model.name} is dense")
    return space.ep


def expert_choices(spec: Spec, space: SearchSpace, tp: int, pp: int, dp: int) -> list[dict]:
    """The job updates of the expert TP degrees and rank orders to try at one tp, pp, dp: none for
    a dense model; for an MoE model ``space.etp`` (default 1 and tp; etp = tp is left unset) times
    the job's own order, Megatron-Core's and Llama 3's (one order where pp or dp is 1: they all
    give the same groups)."""
    if spec.model.experts == 1:
        return [{"etp": None}] if spec.job.etp is not None else [{}]  # a dense job's etp can only be its tp
    own = with_ep(spec.job.layout.order)
    orders = list(dict.fromkeys((own, *ORDER_CHOICES))) if pp > 1 and dp > 1 else [own]
    etps = dict.fromkeys(space.etp or (1, tp))
    return [{"etp": None if etp == tp else etp, "parallel_order": order} for etp in etps for order in orders]


def candidate_jobs(spec: Spec, space: SearchSpace = SearchSpace(), first_expert_choice: bool = False) -> Iterator[Spec]:
    """Every layout in ``space`` that passes the job rules, as a full Spec (``first_expert_choice``:
    of an MoE layout's expert TP degrees and rank orders, the first that passes and fits in memory,
    else the first that passes: a staged search's first pass)."""
    return (cand for cand, _, _ in _candidates(spec, space, first_expert_choice, prune=False))


# Memory savers in the order of the work they add (``_dominated``): recompute none does none,
# selective / selective_op / selective_layer recompute part of what full recomputes; ZeRO 1 moves
# the least data, ZeRO-2 reducing once a step the same, after every micro-batch more, ZeRO-3 most.
_RECOMPUTE_WORK = {"none": 0, "selective": 1, "selective_op": 1, "selective_layer": 1, "full": 2}
_ZERO_WORK = {(1, None): 0, (2, None): 1, (2, "per_microbatch"): 2, (3, None): 3}


def _less_work(a: tuple[str, tuple], b: tuple[str, tuple]) -> bool:
    """Whether saver ``a`` ((recompute, (zero, grad_reduce))) does no more recompute and no more ZeRO
    traffic than ``b``, and is not ``b``."""
    (arc, az), (brc, bz) = a, b

    def zero_le(x: tuple, y: tuple) -> bool:  # ZeRO-0 (an all-reduce, nothing sharded) compares with none
        return x == y or (x in _ZERO_WORK and y in _ZERO_WORK and _ZERO_WORK[x] < _ZERO_WORK[y])

    return (arc == brc or _RECOMPUTE_WORK[arc] < _RECOMPUTE_WORK[brc]) and zero_le(az, bz) and a != b


def _dominated(saver: tuple[str, tuple], fitting: list[tuple[str, tuple]]) -> bool:
    """Whether a fitting candidate of the same degrees, micro-batch and expert choice does no more
    recompute and no more ZeRO traffic than ``saver`` ((recompute, (zero, grad_reduce))): that one
    is never slower, so ``saver`` cannot rank above it and is not simulated."""
    return any(_less_work(f, saver) for f in fitting)


def _outneeded(saver: tuple[str, tuple], over_bytes: float, short: list[tuple[tuple, float]]) -> bool:
    """Whether a candidate that does not fit either, of the same degrees, micro-batch and expert
    choice, does no more work than ``saver`` and misses the HBM by no more bytes (``over_bytes``:
    this one's): ``saver`` is no faster and no nearer to fitting (selective recompute under flash
    attention saves nothing over none), so it is not simulated."""
    return any(o <= over_bytes and _less_work(s, saver) for s, o in short)


def _candidates(spec: Spec, space: SearchSpace, first_expert_choice: bool,
                prune: bool = True) -> Iterator[tuple[Spec, bool | None, bool]]:
    """:func:`candidate_jobs` as (spec, its memory verdict where it was taken else None, dominated).

    ``prune``: every candidate's memory verdict is taken, in the order of its memory savers' work,
    and a candidate is marked dominated, not worth simulating, when a candidate of the same
    degrees, micro-batch and expert choice with savers (recompute, ZeRO) of no more work fits
    (:func:`_dominated`) or, where neither fits, misses the HBM by no more bytes
    (:func:`_outneeded`)."""
    job = spec.job
    lay = job.layout
    tokens = lay.tokens_per_step
    # ZeRO-2 both ways: gradients reduced once per step (Llama 3's FSDP; the unsharded accumulation
    # buffer stays) or after every micro-batch (DeepSpeed; sharded gradients, more traffic)
    zeros = [(z, gr) for z in space.zero for gr in ((None, "per_microbatch") if z == 2 else (None,))]
    # a recompute mode the model's rules refuse whatever the layout (torchtitan's per-op policy on
    # an MoE, biased or fp8 model) is not tried layout by layout
    recomputes = [rc for rc in space.recompute if _recompute_allowed(spec, rc)]
    savers = sorted(itertools.product(recomputes, zeros),
                    key=lambda rz: (_RECOMPUTE_WORK.get(rz[0], 9), _ZERO_WORK.get(rz[1], 9))) if prune else \
        list(itertools.product(recomputes, zeros))
    for tp, cp, pp, v, mb, ep in itertools.product(space.tp, space.cp, space.pp, space.virtual_stages,
                                                   space.micro_batch, ep_degrees(spec, space)):
        dp = dp_of(job.gpus, tp * cp * pp)
        if dp is None:
            continue
        if v > 1 and pp == 1:
            continue
        if cp > 1 and lay.seq_len < 8192 * cp // 4:  # CP only pays for long sequences
            continue
        seqs = tokens // lay.seq_len
        if seqs % (dp * mb):
            continue
        own_pipeline = (pp, v) == (lay.pp, lay.virtual_stages)
        layout = dict(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, micro_batch=mb, pp_schedule=schedule_of(job, pp, v),
                      virtual_stages=v, global_batch=seqs, global_batch_tokens=None,
                      # Llama 3's round size N is the job's only for its own pipeline; others use pp
                      pp_round=lay.pp_round if own_pipeline else None,
                      pp_embedding_slots=job.pp_embedding_slots and pp > 1,
                      # the job's uneven stage sizes belong to its own pipeline only
                      **({} if own_pipeline else {"pp_first_stage_layers": None, "pp_last_stage_layers": None}))
        fitting: dict[tuple, list] = {}  # expert choice -> the savers that fit with it
        short: dict[tuple, list] = {}  # expert choice -> (saver, bytes over the HBM) of those that don't
        refused: set[tuple] = set()  # expert choices a rule of the degrees refuses, whatever the savers
        for rc, (z, gr) in savers:
            saver = (rc, (z, gr))
            interval = job.recompute_interval if rc == "selective_layer" else RECOMPUTE_INTERVAL_DEFAULT
            update = {**layout, "recompute": rc, "recompute_interval": interval, "zero": z, "grad_reduce": gr}
            if prune and first_expert_choice and _dominated(saver, fitting.get((), [])):
                # a staged first pass: a fitting layout of the same degrees with any expert choice
                # (the first that fits: this one fits with it too, at no less work)
                for cand, fits, _, _ in _expert_candidates(spec, space, update, (tp, pp, dp), False, refused):
                    yield cand, fits, True
                    break
                continue
            for cand, fits, expert, over in _expert_candidates(spec, space, update, (tp, pp, dp),
                                                               first_expert_choice, refused):
                expert = () if first_expert_choice else expert
                if not prune:
                    yield cand, fits, False
                    continue
                if _dominated(saver, fitting.get(expert, [])):
                    yield cand, fits, True
                    continue
                if fits is None:
                    over = overshoot_bytes(cand)
                    fits = over <= 0
                if not fits and _outneeded(saver, over, short.get(expert, [])):
                    yield cand, fits, True
                    continue
                (fitting.setdefault(expert, []).append(saver) if fits
                 else short.setdefault(expert, []).append((saver, over)))
                yield cand, fits, False


def _recompute_allowed(spec: Spec, recompute: str) -> bool:
    """False when the job rules refuse ``recompute`` for this model and job as such (the refusal
    names ``job.recompute``); a refusal of another field is the layout's, left to each candidate."""
    try:
        check_job(spec.job.model_copy(update={"recompute": recompute}), spec.model, spec.cluster)
    except SpecError as err:
        return err.field != "job.recompute"
    return True


# The job fields of the memory savers a search varies per layout: a rule that refuses a candidate
# under one of these may pass it under another saver; a rule naming any other field is the degrees'.
SAVER_FIELDS = frozenset({"job.recompute", "job.recompute_interval", "job.recompute_modules", "job.zero",
                          "job.grad_reduce"})


def _expert_candidates(spec: Spec, space: SearchSpace, update: dict, degrees: tuple[int, int, int],
                       first_expert_choice: bool, refused: set[tuple] | None = None,
                       ) -> Iterator[tuple[Spec, bool | None, tuple, float | None]]:
    """(spec, memory verdict or None, expert choice, bytes over the usable HBM or None) of one
    layout's expert TP degrees and rank orders that pass the job rules: every one, or with
    ``first_expert_choice`` the first that fits in memory (else the first that passes). ``refused`` (shared by the savers of one layout's
    degrees): the expert choices a rule of the degrees, not of a saver, refused; they are not
    checked again."""
    job = spec.job
    first: tuple[Spec, bool, tuple, float] | None = None
    allocated: dict[int, float] = {}  # by expert TP degree: the rank order moves no allocation
    for expert in expert_choices(spec, space, *degrees):
        key = tuple(sorted(expert.items()))
        if refused is not None and key in refused:
            continue
        try:
            candidate = check_job(job.model_copy(update={**update, **expert}), spec.model, spec.cluster)
        except SpecError as err:
            if refused is not None and err.field not in SAVER_FIELDS:
                refused.add(key)
            continue
        cand = spec.model_copy(update={"job": candidate})
        if not first_expert_choice:
            yield cand, None, key, None
            continue
        etp = candidate.layout.etp
        if etp not in allocated:
            allocated[etp] = memory_per_gpu(cand.model, candidate)[0].total
        over = overshoot_bytes(cand, allocated[etp])
        if over <= 0:
            first = cand, True, key, over
            break
        if first is None:
            first = cand, False, key, over
    if first is not None:
        yield first


def schedule_of(job, pp: int, v: int) -> str:
    """A candidate's pipeline schedule: interleaved with virtual stages; DualPipe for a pipelined
    layout without them when the spec's job runs DualPipe (layouts it cannot run, an odd ``pp``,
    ZeRO-3 or too few micro-batches, fail the job rules and drop out); else 1F1B."""
    if v > 1:
        return "interleaved"
    return "dualpipe" if job.pp_schedule == "dualpipe" and pp > 1 else "1f1b"


def fits_in_memory(spec: Spec, allocated_bytes: float | None = None) -> bool:
    """The memory verdict :func:`teton.engine.step.simulate_step` gives, without the step: the
    allocations (``allocated_bytes`` when already known) fit in the HBM the headroom leaves
    (``teton.workload.headroom``)."""
    return overshoot_bytes(spec, allocated_bytes) <= 0


def overshoot_bytes(spec: Spec, allocated_bytes: float | None = None) -> float:
    """Bytes the allocations (``allocated_bytes`` when already known) exceed the HBM the headroom
    leaves by (<= 0: they fit)."""
    if allocated_bytes is None:
        allocated_bytes = memory_per_gpu(spec.model, spec.job)[0].total
    return allocated_bytes - memory_headroom(spec.job, spec.cluster).usable_bytes


@dataclass(frozen=True)
class RankedLayout:
    """One candidate of a search, as it was simulated: its full spec and its step."""

    spec: Spec
    result: StepResult

    def row(self) -> dict:
        """The search's JSON row: the layout's degrees and choices, the step's figures."""
        j, r = self.spec.job, self.result
        lay = j.layout
        # an MoE layout's expert TP degree and rank order (a dense one's rows keep their keys)
        expert = {"etp": lay.etp, "parallel_order": list(lay.order)} if self.spec.model.experts > 1 else {}
        return {
            "tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep, **expert,
            "virtual_stages": lay.virtual_stages,
            "micro_batch": lay.micro_batch, "recompute": j.recompute,
            "recompute_interval": j.recompute_interval if j.recompute == "selective_layer" else None, "zero": j.zero,
            "grad_reduce": j.grad_reduce_mode,
            "step_time_s": r.step_time_s, "mfu": r.mfu, "mfu_bf16": r.mfu_bf16, "tflops_per_gpu": r.tflops_per_gpu,
            "tokens_per_s": r.tokens_per_s, "memory_per_gpu_bytes": r.memory_per_gpu_bytes,
            "fits_in_memory": r.fits_in_memory, "headroom_bytes": r.headroom_bytes, "breakdown": r.breakdown,
        }


class Ranking(NamedTuple):
    """What :func:`rank_layouts` found: valid layouts, the simulated ones ranked, and how many of the
    valid ones were dominated (a layout of the same degrees with savers of no more work fits, or
    misses the HBM by no more: not simulated)."""

    evaluated: int
    layouts: list[RankedLayout]
    dominated: int = 0


def rank_layouts(spec: Spec, space: SearchSpace = SearchSpace(),
                 progress: Callable[[int, int], None] | None = None,
                 fitting_only: bool = False) -> Ranking:
    """The :class:`Ranking` of ``space``: the simulated layouts sorted by step time, fitting ones first.

    ``fitting_only``: simulate only the layouts that fit in memory (``teton plan``, which keeps no
    other); the count still counts every valid layout. An MoE model's search is staged (module
    docstring); with ``space.prune`` a layout whose recompute and ZeRO stage only add work to a
    layout of the same degrees that fits, or that misses the HBM by no more, is not simulated
    (module docstring). Layouts that tie (same degrees, micro-batch, step time and memory) are
    kept once, the simpler choice (the one the candidates list first: of an MoE layout's rank
    orders, the job's)."""
    with fewer_collections():  # tens of thousands of candidate specs made and dropped (teton.memo)
        staged = spec.model.experts > 1 and space.refine_top is not None
        first, dominated = [], 0
        for c, fits, d in _candidates(spec, space, staged, prune=space.prune):
            dominated += d  # counted, not kept (34K of the DeepSeek-V3 16K-GPU search's 41K)
            if not d:
                first.append((c, fits))
        evaluated, ranked = _simulate(first, progress, fitting_only)
        evaluated += dominated
        if staged:
            seen = {_identity(c.spec) for c in ranked}
            refine = [(c, None) for c in _refinements(spec, space, _sorted(ranked)[:space.refine_top])
                      if _identity(c) not in seen]
            more, extra = _simulate(refine, progress, fitting_only)
            evaluated, ranked = evaluated + more, ranked + extra
        unique, seen_keys = [], set()
        for c in _sorted(ranked):
            lay = c.spec.job.layout
            key = (lay.tp, lay.cp, lay.pp, lay.ep, lay.etp, lay.virtual_stages, lay.micro_batch,
                   round(c.result.step_time_s, 12), round(c.result.memory_per_gpu_bytes))
            if key not in seen_keys:
                seen_keys.add(key)
                unique.append(c)
        return Ranking(evaluated, unique, dominated)


def _simulate(pairs: list[tuple[Spec, bool | None]], progress, fitting_only: bool) -> tuple[int, list[RankedLayout]]:
    """(candidates, the simulated ones): every candidate, or with ``fitting_only`` those that fit
    (a verdict the first pass already took is not taken again)."""
    evaluated = len(pairs)
    candidates = [c for c, fits in pairs if not fitting_only or (fits if fits is not None else fits_in_memory(c))]
    ranked = []
    for i, cand in enumerate(candidates):
        ranked.append(RankedLayout(cand, simulate_step(cand)))
        if progress is not None:
            progress(i + 1, len(candidates))
    return evaluated, ranked


def _sorted(ranked: list[RankedLayout]) -> list[RankedLayout]:
    """Fitting layouts first, each part by step time."""
    return sorted(ranked, key=lambda c: (not c.result.fits_in_memory, c.result.step_time_s))


def _identity(spec: Spec) -> tuple:
    """What makes two candidates the same layout (degrees, order, etp, recompute, ZeRO)."""
    j = spec.job
    return (j.layout, j.recompute, j.recompute_interval, j.zero, j.grad_reduce_mode)


def _refinements(spec: Spec, space: SearchSpace, best: list[RankedLayout]) -> Iterator[Spec]:
    """Every expert TP degree and rank order of each of the ``best`` first-pass layouts."""
    for c in best:
        j = c.spec.job
        lay = j.layout
        one = SearchSpace(tp=(lay.tp,), cp=(lay.cp,), pp=(lay.pp,), virtual_stages=(lay.virtual_stages,),
                          micro_batch=(lay.micro_batch,), recompute=(j.recompute,), zero=(j.zero,), ep=(lay.ep,),
                          etp=space.etp, refine_top=None)
        yield from (x for x in candidate_jobs(spec, one) if x.job.grad_reduce_mode == j.grad_reduce_mode)


def search_layouts(spec: Spec, space: SearchSpace = SearchSpace(),
                   progress: Callable[[int, int], None] | None = None, fitting_only: bool = False) -> dict:
    """Simulate every candidate (:func:`rank_layouts`): ``evaluated`` (valid layouts), ``fitting``
    (rows that fit), ``dominated`` (valid layouts not simulated), ``refined_top`` (an MoE search's
    staged refinement, else None) and the JSON ``rows``, sorted by step time, fitting layouts
    first."""
    evaluated, ranked, dominated = rank_layouts(spec, space, progress, fitting_only)
    rows = [c.row() for c in ranked]
    return {"evaluated": evaluated, "fitting": sum(r["fits_in_memory"] for r in rows),
            "dominated": dominated, "refined_top": space.refine_top if spec.model.experts > 1 else None,
            "rows": rows}
