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

An MoE search is staged (``SearchSpace.refine_top``) in three passes:

1. every other degree, micro-batch and memory saver, each saver at the first expert choice that
   fits, the largest EP degree first (then etp 1 before tp, the job's order first), else at the
   one nearest to fitting (``teton.sweep.candidates``): a layout is counted once, not once per
   EP degree;
2. the best ``refine_top`` layouts (fitting ones first) at every EP degree, each with the memory
   savers not dominated there, at their first expert TP degree that fits: EP trades the experts'
   memory and GEMM shapes against all-to-alls over more GPUs;
3. the best ``refine_top`` layouts so far at every expert TP degree and rank order, which move the
   EP group's placement and the expert GEMMs' shape, not the dense degrees' ranking.

Passes 2 and 3 simulate only layouts that fit when the best so far fits (one that does not ranks
below it). The best layouts of each pass hold the best of the whole space in the cases tested (``tests/sweep``);
``refine_top=None`` searches every combination (DeepSeek-V3 on 16K GPUs: 19x the layouts, the same
fastest ten).
**Dominated layouts are not simulated** (``SearchSpace.prune``; ``teton.sweep.candidates``): of the
layouts with the same degrees, micro-batch and expert choice, one whose recompute and ZeRO stage
only add work to one that fits, or that misses the HBM by no fewer bytes than one that does not.
``--exhaustive`` simulates them too.
Rows carry ``mfu`` (against the job's precision peak)
and ``mfu_bf16`` (against the bf16 peak, what tables show as "MFU"); the ranking is by step time.

The global batch (tokens per step), sequence length, GPU count, model and cluster stay fixed;
the search varies how the job is laid out. Invalid layouts (a degree that doesn't divide heads,
an interleaved schedule whose micro-batch count isn't a multiple of pp, ...) are skipped by the
same rules ``teton run`` reports as errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from teton.engine.result import StepResult
from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.memo import fewer_collections
from teton.spec import as_spec
from teton.spec.schema import Spec
from teton.sweep.candidates import _candidates, candidate_jobs, fits_in_memory
from teton.sweep.space import SearchSpace, ep_degrees, search_space

__all__ = ["RankedLayout", "Ranking", "SearchSpace", "candidate_jobs", "ep_degrees", "rank_layouts", "search_layouts",
           "search_space"]


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
            "tp": lay.tp, "cp": lay.cp, "cp_algo": j.cp_algo, **({"cp_a2a": j.cp_a2a} if j.cp_a2a else {}),
            "pp": lay.pp, "dp": lay.dp, "ep": lay.ep, **expert,
            "virtual_stages": lay.virtual_stages, "pp_schedule": j.pp_schedule, "pp_split": j.pp_split,
            "micro_batch": lay.micro_batch, "recompute": j.recompute,
            "recompute_modules": None if j.recompute_modules is None else list(j.recompute_modules),
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


def _checked_request(spec, space) -> tuple[Spec, SearchSpace]:
    """The spec (a Spec, a spec file's path or a mapping: ``teton.spec.as_spec``) and the space of
    a search call; a space that is not a :class:`SearchSpace` is a one-line error."""
    if not isinstance(space, SearchSpace):
        raise SpecError("space", type(space).__name__, "a teton.sweep.space.SearchSpace (search_space() builds one "
                        "from --tp / --pp style strings)")
    return as_spec(spec), space


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
    spec, space = _checked_request(spec, space)
    with fewer_collections():  # tens of thousands of candidate specs made and dropped (teton.memo)
        staged = spec.model.experts > 1 and space.refine_top is not None
        first, dominated, seen = [], 0, set()  # seen: every candidate counted, simulated or not
        for c, fits, d in _candidates(spec, space, staged, prune=space.prune):
            dominated += d  # counted, not kept
            if staged:
                seen.add(_identity(c))
            if not d:
                first.append((c, fits))
        evaluated, ranked = _simulate(first, progress, fitting_only)
        evaluated += dominated
        for refinements in ((_ep_refinements, _refinements) if staged else ()):
            best = _sorted(ranked)[:space.refine_top]
            refine, skipped = [], 0
            for c, fits, d in refinements(spec, space, best):
                if _identity(c) in seen:  # simulated already, or proposed by another of the best
                    continue
                seen.add(_identity(c))
                if d:
                    skipped += 1  # dominated at its EP degree: counted, not simulated
                else:
                    refine.append((c, fits))
            # a refinement that does not fit ranks below every layout that does
            more, extra = _simulate(refine, progress, fitting_only or bool(best and best[0].result.fits_in_memory))
            evaluated, ranked, dominated = evaluated + more + skipped, ranked + extra, dominated + skipped
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
    """What makes two candidates the same layout (degrees, order, etp, CP algorithm, recompute, ZeRO)."""
    j = spec.job
    return (j.layout, j.cp_algo, j.recompute, j.recompute_interval, j.zero, j.grad_reduce_mode)


def _one_layout(c: RankedLayout, space: SearchSpace, **choices) -> SearchSpace:
    """The space of ``c``'s degrees and micro-batch alone, with ``choices`` (the EP degrees, expert
    TP degrees and memory savers a refinement tries): the space's own expert TP degrees unless given."""
    lay = c.spec.job.layout
    return SearchSpace(**{"tp": (lay.tp,), "cp": (lay.cp,), "pp": (lay.pp,), "virtual_stages": (lay.virtual_stages,),
                          "micro_batch": (lay.micro_batch,), "etp": space.etp,
                          "cp_algo": (c.spec.job.cp_algo,) if space.cp_algo else None, "refine_top": None, **choices})


def _ep_refinements(spec: Spec, space: SearchSpace,
                    best: list[RankedLayout]) -> Iterator[tuple[Spec, bool | None, bool]]:
    """(spec, fits, dominated) of each of the ``best`` first-pass layouts at every EP degree of the
    space: there, each memory saver at its first expert choice that fits, marked dominated where one
    of no more work fits at that EP (module docstring: pass 2)."""
    for c in best:
        for ep in ep_degrees(spec, space):
            one = _one_layout(c, space, ep=(ep,), recompute=space.recompute, zero=space.zero)
            yield from _candidates(spec, one, True)


def _refinements(spec: Spec, space: SearchSpace, best: list[RankedLayout]) -> Iterator[tuple[Spec, None, bool]]:
    """Every expert TP degree and rank order of each of the ``best`` layouts (module docstring: pass 3)."""
    for c in best:
        j = c.spec.job
        one = _one_layout(c, space, ep=(j.layout.ep,), recompute=(j.recompute,), zero=(j.zero,))
        yield from ((x, None, False) for x in candidate_jobs(spec, one) if x.job.grad_reduce_mode == j.grad_reduce_mode)


def search_layouts(spec: Spec, space: SearchSpace = SearchSpace(),
                   progress: Callable[[int, int], None] | None = None, fitting_only: bool = False) -> dict:
    """Simulate every candidate (:func:`rank_layouts`): ``evaluated`` (valid layouts), ``fitting``
    (rows that fit), ``dominated`` (valid layouts not simulated), ``refined_top`` (an MoE search's
    staged refinement, else None) and the JSON ``rows``, sorted by step time, fitting layouts
    first."""
    spec, space = _checked_request(spec, space)
    evaluated, ranked, dominated = rank_layouts(spec, space, progress, fitting_only)
    rows = [c.row() for c in ranked]
    return {"evaluated": evaluated, "fitting": sum(r["fits_in_memory"] for r in rows),
            "dominated": dominated, "refined_top": space.refine_top if spec.model.experts > 1 else None,
            "rows": rows}
