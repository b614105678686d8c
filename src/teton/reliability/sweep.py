"""The Monte Carlo interval sweep: ETTR at every offered interval of a log grid, the grid
extended while its longest interval is still within tolerance of the best, and the flat region's
edges refined by bisection on whole steps (:mod:`teton.reliability.recommend` has the model).

Every interval is simulated with the same seed (common random numbers), so the differences
between intervals are the interval's, not the draws'. Each result is kept by its step count: the
run at the recommended interval is one of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from teton.reliability.montecarlo import MCInputs, MCResult, simulate_runs
from teton.reliability.recommend import (
    MAX_EXTENSIONS,
    REFINE_RESOLUTION,
    REFINE_STEPS,
    IntervalLimits,
    IntervalRecommendation,
    make_recommendation,
    on_whole_steps,
    recommend_renewal,
    sweep_grid_s,
    sweep_row,
)
from teton.units import format_gb_s


class IntervalSweep:
    """Monte Carlo runs of ``inp`` at intervals of whole steps, simulated once each."""

    def __init__(self, inp: MCInputs, lim: IntervalLimits, runs: int, seed: int,
                 tick: Callable[[int], None] | None = None):
        self.inp, self.lim, self.runs, self.seed, self.tick = inp, lim, runs, seed, tick
        self.results: dict[int, MCResult] = {}

    def at(self, steps: int) -> MCResult:
        """The runs at ``steps`` steps between checkpoints (never fewer than the shortest offered)."""
        steps = max(int(steps), self.lim.min_steps)
        if steps not in self.results:
            base = len(self.results) * self.runs
            sub = None if self.tick is None else (lambda done, _: self.tick(base + done))
            self.results[steps] = simulate_runs(replace(self.inp, interval_s=steps * self.lim.step_s), self.runs,
                                                self.seed, sub)
        return self.results[steps]

    def ettr(self, steps: int) -> float:
        return float(self.at(steps).ettr.mean())

    def steps_of(self, interval_s: float) -> int:
        return int(round(self.lim.on_steps(interval_s) / self.lim.step_s))

    def flat_block(self, level_below_best: float) -> tuple[int, int, int]:
        """(best, shortest, longest) step counts of the contiguous simulated intervals around the
        best whose ETTR is within ``level_below_best`` of it."""
        keys = sorted(self.results)
        e = {k: self.ettr(k) for k in keys}
        best = max(keys, key=lambda k: (e[k], -k))
        level = e[best] - level_below_best
        i = j = keys.index(best)
        while j + 1 < len(keys) and e[keys[j + 1]] >= level:
            j += 1
        while i > 0 and e[keys[i - 1]] >= level:
            i -= 1
        return best, keys[i], keys[j]

    def refine(self, inside: int, outside: int, level: float) -> None:
        """Bisect between ``inside`` (ETTR >= level) and ``outside`` (below) on whole steps."""
        for _ in range(REFINE_STEPS):
            lo, hi = sorted((inside, outside))
            if hi - lo <= 1 or hi <= lo * (1.0 + REFINE_RESOLUTION):
                return
            mid = (inside + outside) // 2
            if self.ettr(mid) >= level:
                inside = mid
            else:
                outside = mid

    def rows(self) -> list[dict]:
        return [sweep_row(k * self.lim.step_s, self.results[k], self.lim) for k in sorted(self.results)]


def sweep_budget(lim: IntervalLimits, center_s: float, extra_s: tuple[float, ...]) -> int:
    """The most intervals :func:`recommend_by_sweep` simulates (for a progress total)."""
    return len(sweep_grid_s(lim, center_s, extra_s)) + MAX_EXTENSIONS + 2 * REFINE_STEPS


def recommend_by_sweep(sw: IntervalSweep, young_s: float, daly_s: float, tol_pp: float, center_s: float,
                       extra_s: tuple[float, ...] = ()) -> IntervalRecommendation:
    """The recommendation from the Monte Carlo (module docstring) on ``sw``'s runs."""
    tol = tol_pp / 100.0
    for x in sweep_grid_s(sw.lim, center_s, extra_s):
        sw.at(sw.steps_of(x))
    for _ in range(MAX_EXTENSIONS):
        _, _, hi = sw.flat_block(tol)
        if hi < max(sw.results):
            break
        sw.at(hi * 2)
    best, lo, hi = sw.flat_block(tol)
    level = sw.ettr(best) - tol
    keys = sorted(sw.results)
    if hi < keys[-1]:
        sw.refine(hi, keys[keys.index(hi) + 1], level)
    if lo > keys[0]:
        sw.refine(lo, keys[keys.index(lo) - 1], level)
    best, lo, hi = sw.flat_block(tol)
    s = sw.lim.step_s
    return make_recommendation(sw.lim, young_s, daly_s, tol_pp, "Monte Carlo sweep", (best * s, sw.ettr(best)),
                           (lo * s, hi * s), sw.ettr(hi))


@dataclass(frozen=True)
class IntervalRun:
    """The interval a run uses, where it comes from, the recommendation beside it, the Monte
    Carlo at it and, with a sweep, every interval simulated."""

    chosen_s: float
    source: str  # "given", "storage sustained write rate" or "practical interval (<method>)"
    recommendation: IntervalRecommendation
    result: MCResult
    sweep_rows: tuple[dict, ...]
    warnings: tuple[str, ...]


def given_interval_warning(lim: IntervalLimits, given_s: float) -> list[str]:
    """A warning when a given interval is shorter than the storage sustains."""
    b = lim.budget
    if b is None or lim.storage_steps * lim.step_s <= given_s * (1 + 1e-9):
        return []
    return [f"checkpoint interval {given_s:,.0f} s (used) writes {format_gb_s(lim.write_bytes_s(given_s))} on "
            f"average, more than the {format_gb_s(b.available_write_bytes_s)} the storage leaves this job "
            f"(other jobs {b.other_jobs_share:.0%}, data loading {format_gb_s(b.data_loading_bytes_s)}; "
            f"{b.bound}): the shortest interval it sustains is {lim.storage_steps * lim.step_s:,.0f} s"]


def run_intervals(inp: MCInputs, lim: IntervalLimits, given_s: float | None, young_s: float, daly_s: float,
                  tol_pp: float, runs: int, seed: int, sweep: bool,
                  progress: Callable[[int, int], None] | None = None) -> IntervalRun:
    """The recommendation (renewal model, or the Monte Carlo sweep's with ``sweep``), the interval
    the run uses (``given_s`` on whole steps, at least the drain; else the practical interval) and
    the Monte Carlo at it; ``progress(done, total)`` counts every run simulated."""
    first = recommend_renewal(inp, lim, young_s, daly_s, tol_pp)
    failures = math.isfinite(daly_s)
    center = daly_s if failures else first.practical_interval_s
    extra = (first.practical_interval_s,) + ((given_s,) if given_s else ())
    total = runs * (1 + (sweep_budget(lim, center, extra) if sweep else 0))
    tick = None if progress is None else (lambda done: progress(min(done, total), total))
    sw = IntervalSweep(inp, lim, runs, seed, tick)
    rec = first
    if sweep and failures:
        rec = recommend_by_sweep(sw, young_s, daly_s, tol_pp, center, extra)
    elif sweep:
        for x in sweep_grid_s(lim, center, extra):
            sw.at(sw.steps_of(x))
    if given_s:
        chosen = on_whole_steps(given_s, lim.step_s, lim.drain_steps)
        source, warnings = "given", given_interval_warning(lim, chosen)
        if abs(chosen - given_s) > 1e-6 * given_s:
            drained = given_s < chosen and lim.drain_steps > 1 and lim.drain_steps * lim.step_s >= chosen * (1 - 1e-9)
            why = "raised to the asynchronous save's drain" if drained else "on whole steps"
            source = f"given {given_s:,.6g} s, {why}"
    else:
        chosen, warnings = rec.practical_interval_s, []
        source = "storage sustained write rate" if rec.storage_limits_optimum else f"practical interval ({rec.method})"
    k = int(round(chosen / lim.step_s))
    if k in sw.results:
        res = sw.results[k]
    else:
        base = len(sw.results) * runs
        res = simulate_runs(replace(inp, interval_s=chosen), runs, seed,
                            None if tick is None else (lambda done, _: tick(base + done)))
    if progress is not None:
        progress(total, total)
    return IntervalRun(chosen, source, rec, res, tuple(sw.rows()), tuple(warnings))
