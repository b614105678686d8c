"""The candidates of a layout search (``teton.sweep.search``): every layout of a
:class:`~teton.sweep.space.SearchSpace` that passes the job rules, with its memory verdict, and
which of them are dominated, not worth simulating.

**Dominance** (``SearchSpace.prune``). Recompute and ZeRO only save memory by adding work:
recompute ``none`` does none, ``selective``, ``selective_op`` and ``selective_layer`` part of what
``full`` recomputes; ZeRO-1 moves the least data, ZeRO-2 reducing once a step as much, after every
micro-batch more, ZeRO-3 the most. So of the layouts with the same degrees, micro-batch and expert
choice, one whose recompute and ZeRO stage both do at least the work of a layout that fits can
never be faster: the candidates take memory verdicts in that order and mark such a layout
dominated; of two that do not fit, likewise the one that also misses the HBM by no fewer bytes
(selective recompute under flash attention saves nothing over none). A rule of the degrees that
refuses an expert choice runs once per layout, and one that refuses the degrees themselves
(:data:`DEGREE_FIELDS`: pp x v over the layers, a batch the micro-batches do not divide) once for
all of the layout's expert choices and savers.

**A staged search's first pass** (``first_expert_choice``) folds EP into the expert choice: each
memory saver of a layout's other degrees is taken at the first expert choice that fits, the
largest EP degree first (then expert TP 1 before tp, the job's rank order first), else at the
choice that misses the HBM by the fewest bytes; a saver is dominated when one of no more work
fits at any choice (there it is not "never slower": a heavier saver may fit at a better EP, which
the search's second pass tries on its best layouts). The largest EP holds the fewest experts' weights, gradients and optimizer
state per GPU, so it fits most often, and it is the same degree for almost every layout: the
dense degrees rank on equal terms (the smallest EP that fits differs from layout to layout, and
a first pass taking it ranked them by their memory). The search then tries every EP degree on
its best layouts (``teton.sweep.search``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import NamedTuple

from teton.errors import SpecError
from teton.spec.job import RECOMPUTE_INTERVAL_DEFAULT, check_job
from teton.spec.layout import dp_of, hierarchical_cp_a2a
from teton.spec.schema import Spec
from teton.sweep.space import SearchSpace, ep_degrees, expert_choices, schedule_of
from teton.workload.headroom import memory_headroom
from teton.workload.memory import memory_per_gpu
from teton.workload.pipeline import balanced_is_uneven

Saver = tuple[str, tuple]  # a memory saver: (recompute, (zero, grad_reduce))


def candidate_jobs(spec: Spec, space: SearchSpace = SearchSpace(), first_expert_choice: bool = False) -> Iterator[Spec]:
    """Every layout in ``space`` that passes the job rules, as a full Spec (``first_expert_choice``:
    of a layout's EP degrees, expert TP degrees and rank orders, the first that passes and fits in
    memory, else the one nearest to fitting: a staged search's first pass, module docstring)."""
    return (cand for cand, _, _ in _candidates(spec, space, first_expert_choice, prune=False))


# Memory savers in the order of the work they add (``_dominated``): recompute none does none,
# selective / selective_op / selective_layer recompute part of what full recomputes; ZeRO 1 moves
# the least data, ZeRO-2 reducing once a step the same, after every micro-batch more, ZeRO-3 most.
_RECOMPUTE_WORK = {"none": 0, "selective": 1, "selective_op": 1, "selective_layer": 1, "full": 2}
_ZERO_WORK = {(1, None): 0, (2, None): 1, (2, "per_microbatch"): 2, (3, None): 3}


def _less_work(a: Saver, b: Saver) -> bool:
    """Whether saver ``a`` ((recompute, (zero, grad_reduce))) does no more recompute and no more ZeRO
    traffic than ``b``, and is not ``b``."""
    (arc, az), (brc, bz) = a, b

    def zero_le(x: tuple, y: tuple) -> bool:  # ZeRO-0 (an all-reduce, nothing sharded) compares with none
        return x == y or (x in _ZERO_WORK and y in _ZERO_WORK and _ZERO_WORK[x] < _ZERO_WORK[y])

    return (arc == brc or _RECOMPUTE_WORK[arc] < _RECOMPUTE_WORK[brc]) and zero_le(az, bz) and a != b


def _dominated(saver: Saver, fitting: list[Saver]) -> bool:
    """Whether a fitting candidate of the same degrees, micro-batch and expert choice does no more
    recompute and no more ZeRO traffic than ``saver`` ((recompute, (zero, grad_reduce))): that one
    is never slower, so ``saver`` cannot rank above it and is not simulated."""
    return any(_less_work(f, saver) for f in fitting)


def _outneeded(saver: Saver, over_bytes: float, short: list[tuple[Saver, float]]) -> bool:
    """Whether a candidate that does not fit either, of the same degrees, micro-batch and expert
    choice, does no more work than ``saver`` and misses the HBM by no more bytes (``over_bytes``:
    this one's): ``saver`` is no faster and no nearer to fitting (selective recompute under flash
    attention saves nothing over none), so it is not simulated."""
    return any(o <= over_bytes and _less_work(s, saver) for s, o in short)


class Choice(NamedTuple):
    """A staged first pass's pick for one saver of a layout (:func:`_first_fit`)."""

    spec: Spec
    fits: bool
    over_bytes: float  # bytes over the usable HBM (<= 0: fits)


def _candidates(spec: Spec, space: SearchSpace, first_expert_choice: bool,
                prune: bool = True) -> Iterator[tuple[Spec, bool | None, bool]]:
    """:func:`candidate_jobs` as (spec, its memory verdict where it was taken else None, dominated).

    ``prune``: every candidate's memory verdict is taken, in the order of its memory savers' work,
    and a candidate is marked dominated, not worth simulating, when a candidate of the same
    degrees, micro-batch and expert choice with savers (recompute, ZeRO) of no more work fits
    (:func:`_dominated`) or, where neither fits, misses the HBM by no more bytes
    (:func:`_outneeded`). ``first_expert_choice``: a staged first pass (module docstring)."""
    job = spec.job
    # ZeRO-2 both ways: gradients reduced once per step (Llama 3's FSDP; the unsharded accumulation
    # buffer stays) or after every micro-batch (DeepSpeed; sharded gradients, more traffic)
    zeros = [(z, gr) for z in space.zero for gr in ((None, "per_microbatch") if z == 2 else (None,))]
    # a recompute mode the model's rules refuse whatever the layout (torchtitan's per-op policy on
    # an MoE, biased or fp8 model) is not tried layout by layout
    recomputes = [rc for rc in space.recompute if _recompute_allowed(spec, rc)]
    savers = sorted(itertools.product(recomputes, zeros),
                    key=lambda rz: (_RECOMPUTE_WORK.get(rz[0], 9), _ZERO_WORK.get(rz[1], 9))) if prune else \
        list(itertools.product(recomputes, zeros))
    eps = ep_degrees(spec, space)
    for degrees, layout in _layouts(spec, space, (None,) if first_expert_choice else eps):
        refused: set[tuple] = set()  # expert choices a rule of the degrees refuses, whatever the savers
        updates = ((saver, {**layout, "recompute": saver[0], "zero": saver[1][0], "grad_reduce": saver[1][1],
                            # the job's modules go with selective recompute only (a job rule)
                            "recompute_modules": job.recompute_modules if saver[0] == "selective" else None,
                            "recompute_interval": job.recompute_interval if saver[0] == "selective_layer"
                            else RECOMPUTE_INTERVAL_DEFAULT}) for saver in savers)
        if first_expert_choice:
            yield from _first_pass(spec, space, updates, degrees, eps, refused, prune)
        else:
            yield from _every_choice(spec, space, updates, degrees, refused, prune)


def _layouts(spec: Spec, space: SearchSpace, eps: tuple) -> Iterator[tuple[tuple[int, int, int], dict]]:
    """((tp, pp, dp), the job update) of every degree and micro-batch in ``space`` at each of
    ``eps`` (None: EP left to the expert choice) that divides the GPUs and the batch; a CP layout
    at each of ``space.cp_algo`` (a layout of its own: dominance is judged within it), a2a+p2p
    with its all-to-all groups in the NVLink domain (``spec.layout.hierarchical_cp_a2a``; none: not tried);
    and each of those again with a balanced pipeline split where :func:`_balanced_variant` says so
    (a layout of its own too)."""
    for degrees, layout in _degree_layouts(spec, space, eps):
        variants = [layout]
        if layout["cp"] > 1 and space.cp_algo:
            variants = []
            for algo in space.cp_algo:
                a2a = (hierarchical_cp_a2a(spec.model, layout["tp"], layout["cp"], spec.cluster.domain_gpus)
                       if algo == "a2a+p2p" else None)
                if algo != "a2a+p2p" or a2a:
                    variants.append({**layout, "cp_algo": algo, "cp_a2a": a2a})
        balanced = _balanced_variant(spec, layout)
        for one in variants:
            yield degrees, one
            if balanced:
                yield degrees, {**one, "pp_split": "balanced"}


def _balanced_variant(spec: Spec, layout: dict) -> bool:
    """Whether a layout of one chunk per rank is also tried with ``job.pp_split: balanced`` (the
    end stages sized to even out the ranks' FLOPs, as Megatron-Core's uneven pipeline lets a user
    do): where that split differs from the even one and the layout does not keep the job's own
    stage sizes or embedding slots."""
    keeps_own = "pp_first_stage_layers" not in layout and (
        spec.job.pp_first_stage_layers is not None or spec.job.pp_last_stage_layers is not None
        or spec.job.pp_layout is not None)
    return (layout["virtual_stages"] == 1 and layout["pp"] > 2 and not layout["pp_embedding_slots"]
            and not keeps_own and balanced_is_uneven(spec.model, layout["pp"], spec.job.layout.seq_len,
                                   layout["pp_schedule"] == "dualpipe"))


def _degree_layouts(spec: Spec, space: SearchSpace, eps: tuple) -> Iterator[tuple[tuple[int, int, int], dict]]:
    """:func:`_layouts` at the job's own CP algorithm."""
    job = spec.job
    lay = job.layout
    tokens = lay.tokens_per_step
    for tp, cp, pp, v, mb, ep in itertools.product(space.tp, space.cp, space.pp, space.virtual_stages,
                                                   space.micro_batch, eps):
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
        yield (tp, pp, dp), dict(
            tp=tp, cp=cp, pp=pp, dp=dp, **({} if ep is None else {"ep": ep}), micro_batch=mb,
            pp_schedule=schedule_of(job, pp, v), pp_split="even", virtual_stages=v, global_batch=seqs,
            global_batch_tokens=None,
            # Llama 3's round size N is the job's only for its own pipeline; others use pp
            pp_round=lay.pp_round if own_pipeline else None,
            pp_embedding_slots=job.pp_embedding_slots and pp > 1,
            # the job's uneven stage sizes belong to its own pipeline only
            **({} if own_pipeline else {"pp_first_stage_layers": None, "pp_last_stage_layers": None,
                                        "pp_layout": None}))


def _every_choice(spec: Spec, space: SearchSpace, updates, degrees: tuple[int, int, int], refused: set[tuple],
                  prune: bool) -> Iterator[tuple[Spec, bool | None, bool]]:
    """Every saver's every expert choice of one layout (:func:`_candidates`)."""
    fitting: dict[tuple, list[Saver]] = {}  # expert choice -> the savers that fit with it
    short: dict[tuple, list[tuple[Saver, float]]] = {}  # expert choice -> (saver, bytes over the HBM) of those that don't
    for saver, update in updates:
        for cand, expert in _expert_candidates(spec, space, update, degrees, refused):
            if not prune:
                yield cand, None, False
            elif _dominated(saver, fitting.get(expert, [])):
                yield cand, None, True
            else:
                over = overshoot_bytes(cand)
                if over > 0 and _outneeded(saver, over, short.get(expert, [])):
                    yield cand, False, True
                    continue
                (fitting.setdefault(expert, []).append(saver) if over <= 0
                 else short.setdefault(expert, []).append((saver, over)))
                yield cand, over <= 0, False


def _first_pass(spec: Spec, space: SearchSpace, updates, degrees: tuple[int, int, int], eps: tuple[int, ...],
                refused: set[tuple], prune: bool) -> Iterator[tuple[Spec, bool | None, bool]]:
    """Each saver of one layout at its first expert choice that fits, else at the one nearest to
    fitting; pruned, a saver is dominated when one of no more work fits at any expert choice
    (module docstring: a staged search's first pass)."""
    choices = [(e, tuple(sorted(e.items()))) for e in expert_choices(spec, space, *degrees, eps=eps)]
    fitting: list[Saver] = []  # savers that fit at some expert choice
    short: list[tuple[Saver, float]] = []  # (saver, bytes over the HBM) of those that fit at none
    for saver, update in updates:
        if prune and _dominated(saver, fitting):
            cand = next((c for c in (_checked(spec, update, e, refused, k) for e, k in choices) if c), None)
            if cand is not None:  # counted as a layout, not simulated
                yield cand, None, True
            continue
        pick = _first_fit(spec, update, choices, refused)
        if pick is None:
            continue
        if prune and not pick.fits and _outneeded(saver, pick.over_bytes, short):
            yield pick.spec, False, True
        else:
            (fitting.append(saver) if pick.fits else short.append((saver, pick.over_bytes)))
            yield pick.spec, pick.fits, False


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


# The job fields whose rules read only the layout's degrees, micro-batch and batch (not the expert
# choice, not a saver): a refusal naming one refuses every candidate of the layout.
DEGREE_FIELDS = frozenset({"job.dp", "job.tp", "job.cp", "job.cp_a2a", "job.pp", "job.virtual_stages", "job.seq_len",
                           "job.micro_batch",
                           "job.global_batch", "job.global_batch_tokens", "job.pp_round", "job.pp_first_stage_layers",
                           "job.pp_last_stage_layers", "job.pp_layout"})
WHOLE_LAYOUT = "whole layout"  # the mark in ``refused`` of a layout a degree rule refuses


def _checked(spec: Spec, update: dict, expert: dict, refused: set | None, key: tuple) -> Spec | None:
    """The candidate of ``update`` with ``expert`` (whose key is ``key``) if it passes the job
    rules, else None. ``refused`` remembers a degree rule's refusal: of the expert choice, or of the
    whole layout (:data:`DEGREE_FIELDS`); a saver rule's is not remembered."""
    if refused is not None and (key in refused or WHOLE_LAYOUT in refused):
        return None
    try:
        candidate = check_job(spec.job.model_copy(update={**update, **expert}), spec.model, spec.cluster)
    except SpecError as err:
        if refused is not None and err.field not in SAVER_FIELDS:
            refused.add(WHOLE_LAYOUT if err.field in DEGREE_FIELDS else key)
        return None
    return spec.model_copy(update={"job": candidate})


def _expert_candidates(spec: Spec, space: SearchSpace, update: dict, degrees: tuple[int, int, int],
                       refused: set[tuple] | None = None) -> Iterator[tuple[Spec, tuple]]:
    """(spec, expert choice) of one layout's expert TP degrees and rank orders that pass the job
    rules. ``refused`` (shared by the savers of one layout's degrees): the expert choices a rule of
    the degrees, not of a saver, refused; they are not checked again."""
    for expert in expert_choices(spec, space, *degrees):
        key = tuple(sorted(expert.items()))
        cand = _checked(spec, update, expert, refused, key)
        if cand is not None:
            yield cand, key


def _first_fit(spec: Spec, update: dict, choices: list[tuple[dict, tuple]], refused: set[tuple]) -> Choice | None:
    """One saver's pick in a staged first pass: the first of ``choices`` ((expert choice, its key):
    EP descending, then expert TP and order, :func:`expert_choices`) that passes the job rules and
    fits, else the one that misses the HBM by the fewest bytes; None when none passes."""
    nearest: Choice | None = None
    allocated: dict[tuple[int, int], float] = {}  # by (ep, etp): the rank order moves only the headroom
    for expert, key in choices:
        cand = _checked(spec, update, expert, refused, key)
        if cand is None:
            continue
        lay = cand.job.layout
        if (lay.ep, lay.etp) not in allocated:
            allocated[lay.ep, lay.etp] = memory_per_gpu(cand.model, cand.job)[0].total
        over = overshoot_bytes(cand, allocated[lay.ep, lay.etp])
        if over <= 0:
            return Choice(cand, True, over)
        if nearest is None or over < nearest.over_bytes:
            nearest = Choice(cand, False, over)
    return nearest


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
