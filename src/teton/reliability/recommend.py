"""The checkpoint interval to adopt: the optimum, Young/Daly's, the flat region and the practical
interval, among the intervals the storage can sustain.

Offered intervals. Checkpoints fall on step boundaries (whole effective steps), a save must be
durable before the next one starts (the async write *drains*: ``interval + blocking >= save``),
and the storage must sustain the average write rate: ``checkpoint bytes / interval`` at most what
it leaves the job after other jobs' share and the data loader (:mod:`teton.storage.budget`). An
interval shorter than either bound is not offered: not simulated, never recommended.

ETTR against the interval is flat near its optimum (Young 1974: the waste is
``delta / tau + tau / 2M`` to first order, whose minimum is shallow), so a much longer interval
costs little. The *flat region* is the offered intervals whose mean ETTR is within
``reliability.interval_ettr_tolerance_pp`` percentage points of the best; its longest is the
*practical interval*, the one teton recommends and a run uses when no interval is given (fewer
checkpoints: less write traffic on shared storage, fewer files, the same ETTR within tolerance).

Two ways to find it:

* renewal model (every ``goodput``): the closed-form ETTR of :mod:`teton.reliability.renewal`
  (Daly 2006's exponential form; Young's first order ``[tau / c - lambda (tau / 2 + lag tau / c)]
  / (1 + D)`` where ``lambda c`` is small), maximised numerically from Young's ``sqrt(2 delta M)``;
  the flat region's edges solve ``ETTR(tau) = ETTR* - tolerance`` (bisection).
* Monte Carlo (``interval_sweep``): the run simulated at a log grid of offered intervals (common
  random numbers: one seed), extended while its longest is still within tolerance, and each edge
  of the flat region refined by bisection on whole steps between the last interval inside and
  the first outside.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from teton.reliability.montecarlo import MCInputs, MCResult
from teton.reliability.recovery import CheckpointCosts
from teton.reliability.renewal import NO_PROGRESS_ETTR, interruption_rates, renewal_ettr, renewal_optimum_s
from teton.storage.budget import WriteBudget
from teton.units import format_gb_s

HUMAN_INTERVALS_S = (600.0, 1800.0, 3600.0, 3 * 3600.0)  # intervals people pick, added to every sweep
GRID_POINTS = 13  # the sweep's log grid: centre / 16 ... centre x 16
GRID_SPAN = 16.0
MAX_EXTENSIONS = 8  # doublings of the sweep past its longest interval while that is still flat
REFINE_STEPS = 6  # bisections per edge of the flat region (at most)
REFINE_RESOLUTION = 0.02  # stop refining an edge once it is known to 2 %
RENEWAL = "renewal model"  # the method name of a recommendation from the closed form
NO_FAILURES_INTERVAL_S = 1e12  # without unexpected interruptions: effectively never


def on_whole_steps(interval_s: float, step_s: float, min_steps: int) -> float:
    """``interval_s`` rounded to whole steps of ``step_s``, at least ``min_steps`` of them."""
    return max(round(interval_s / step_s), min_steps) * step_s


@dataclass(frozen=True)
class IntervalLimits:
    """What bounds the offered intervals (module docstring), on whole effective steps."""

    step_s: float
    drain_steps: int  # the async write drains before the next save starts
    storage_steps: int  # the storage sustains the average write rate (0: no storage model)
    checkpoint_bytes: float
    budget: WriteBudget | None

    @property
    def min_steps(self) -> int:
        return max(self.drain_steps, self.storage_steps, 1)

    @property
    def min_s(self) -> float:
        return self.min_steps * self.step_s

    @property
    def bound(self) -> str:
        """What sets the shortest offered interval."""
        if self.storage_steps > self.drain_steps:
            return "storage write rate"
        return "async write drain" if self.drain_steps > 1 else "one step"

    def on_steps(self, interval_s: float) -> float:
        return on_whole_steps(interval_s, self.step_s, self.min_steps)

    def write_bytes_s(self, interval_s: float) -> float:
        """The average checkpoint write rate of a checkpoint every ``interval_s``."""
        return self.checkpoint_bytes / interval_s

    def storage_use(self, interval_s: float) -> float | None:
        """The share of the write rate the storage leaves the job that this interval uses."""
        return None if self.budget is None else self.budget.use(self.checkpoint_bytes, interval_s)


def interval_limits(ck: CheckpointCosts, step_s: float) -> IntervalLimits:
    """The bounds for checkpoint costs ``ck`` and effective step ``step_s``."""
    drain = max(math.ceil((ck.save_s - ck.blocking_s) / step_s - 1e-9), 1)
    storage = math.ceil(ck.min_interval_s / step_s - 1e-9) if ck.min_interval_s > 0 else 0
    return IntervalLimits(step_s, drain, storage, ck.checkpoint_bytes, ck.budget)


@dataclass(frozen=True)
class IntervalRecommendation:
    """The checkpoint interval teton recommends (``practical_interval_s``) and how it was found;
    ``to_dict()`` is the ``interval_recommendation`` of ``teton goodput --json``. Intervals are
    seconds of training between checkpoints, on whole steps; ETTRs are means over the runs."""

    practical_interval_s: float  # the longest offered interval within tolerance of the best ETTR
    practical_ettr: float
    optimal_interval_s: float  # the best offered interval
    optimal_ettr: float
    flat_region_s: tuple[float, float]  # the shortest and longest offered intervals within tolerance
    ettr_tolerance_pp: float
    method: str  # "renewal model" or "Monte Carlo sweep"
    young_interval_s: float | None  # None without unexpected interruptions
    daly_interval_s: float | None
    min_interval_s: float  # the shortest offered interval
    min_interval_bound: str  # "storage write rate", "async write drain" or "one step"
    drain_min_interval_s: float
    storage_min_interval_s: float | None  # None without a storage model
    checkpoint_bytes: float
    storage_available_write_bytes_s: float | None  # what the storage leaves the job's checkpoints
    storage_other_jobs_share: float | None
    storage_write_bound: str | None  # "flash endurance" or "storage bandwidth"
    write_bytes_s: float  # the practical interval's average checkpoint write rate
    storage_use: float | None  # ... as a share of what the storage leaves the job
    storage_limits_optimum: bool  # the storage's bound is the best offered interval

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["flat_region_s"] = list(self.flat_region_s)
        return out

    def sentences(self) -> list[str]:
        """The recommendation in words: the interval, why, and what it asks of the storage."""
        lo, hi = self.flat_region_s
        out = [f"checkpoint every {human_s(self.practical_interval_s)}: the longest interval within "
               f"{self.ettr_tolerance_pp:g} pp of the best ETTR ({self.practical_ettr:.2%} against "
               f"{self.optimal_ettr:.2%} at {human_s(self.optimal_interval_s)}; flat from {human_s(lo)} to "
               f"{human_s(hi)}, {self.method})"]
        if self.storage_available_write_bytes_s is not None:
            out.append(f"it writes {format_gb_s(self.write_bytes_s)} on average, {self.storage_use:.1%} of the "
                       f"{format_gb_s(self.storage_available_write_bytes_s)} the storage leaves this job (other "
                       f"jobs {self.storage_other_jobs_share:.0%}, {self.storage_write_bound}); the shortest "
                       f"interval offered is {human_s(self.min_interval_s)} ({self.min_interval_bound})")
        return out


def human_s(seconds: float) -> str:
    """An interval as people say it: seconds under 2 min, minutes under 2 h, else hours."""
    if seconds < 120:
        return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _rates(inp: MCInputs) -> tuple[float, float, float]:
    """(unexpected interruptions per s, outage seconds per second of up-time, durability lag s)."""
    lam, down_u, down_p, lag = interruption_rates(inp)
    return lam, down_u + down_p, lag


def _edge_s(f: Callable[[float], float], inside_s: float, outside_s: float, level: float) -> float:
    """The interval between ``inside_s`` (f >= level) and ``outside_s`` (f < level) where f
    crosses ``level`` (bisection on the log of the interval)."""
    a, b = math.log(inside_s), math.log(outside_s)
    for _ in range(100):
        m = 0.5 * (a + b)
        a, b = (m, b) if f(math.exp(m)) >= level else (a, m)
    return math.exp(a)


def _renewal_region(inp: MCInputs, lim: IntervalLimits, tol: float) -> tuple[float, float, float]:
    """(optimum, shortest, longest) offered intervals within ``tol`` of the best, renewal model."""
    s = lim.step_s
    star = lim.on_steps(renewal_optimum_s(inp, lim.min_s))
    best = max((x for x in (star - s, star, star + s) if x >= lim.min_s - 1e-9), key=lambda x: renewal_ettr(inp, x))
    level = renewal_ettr(inp, best) - tol
    f = lambda x: renewal_ettr(inp, x)  # noqa: E731
    far = best * 2.0
    while f(far) >= level:
        far *= 2.0
    hi = max(math.floor(_edge_s(f, best, far, level) / s + 1e-9) * s, best)
    lo = best
    if f(lim.min_s) >= level:
        lo = lim.min_s
    elif lim.min_s < best:
        lo = min(math.ceil(_edge_s(f, best, lim.min_s, level) / s - 1e-9) * s, best)
    return best, lo, hi


def make_recommendation(lim: IntervalLimits, young_s: float, daly_s: float, tol_pp: float, method: str,
                    optimum: tuple[float, float], region: tuple[float, float], practical_ettr: float
                    ) -> IntervalRecommendation:
    practical = region[1]
    budget = lim.budget
    storage_min = lim.storage_steps * lim.step_s if budget is not None else None
    return IntervalRecommendation(
        practical_interval_s=practical, practical_ettr=practical_ettr, optimal_interval_s=optimum[0],
        optimal_ettr=optimum[1], flat_region_s=region, ettr_tolerance_pp=tol_pp, method=method,
        young_interval_s=young_s if math.isfinite(young_s) else None,
        daly_interval_s=daly_s if math.isfinite(daly_s) else None,
        min_interval_s=lim.min_s, min_interval_bound=lim.bound, drain_min_interval_s=lim.drain_steps * lim.step_s,
        storage_min_interval_s=storage_min, checkpoint_bytes=lim.checkpoint_bytes,
        storage_available_write_bytes_s=budget.available_write_bytes_s if budget is not None else None,
        storage_other_jobs_share=budget.other_jobs_share if budget is not None else None,
        storage_write_bound=budget.bound if budget is not None else None,
        write_bytes_s=lim.write_bytes_s(practical), storage_use=lim.storage_use(practical),
        storage_limits_optimum=lim.bound == "storage write rate" and abs(optimum[0] - lim.min_s) < 1e-9 * lim.min_s)


def recommend_renewal(inp: MCInputs, lim: IntervalLimits, young_s: float, daly_s: float,
                      tol_pp: float) -> IntervalRecommendation:
    """The recommendation from the renewal ETTR (module docstring). Without unexpected
    interruptions every interval is as good as the longest: it is :data:`NO_FAILURES_INTERVAL_S`."""
    if _rates(inp)[0] <= 0:
        far = lim.on_steps(NO_FAILURES_INTERVAL_S)
        e = renewal_ettr(inp, far)
        return make_recommendation(lim, young_s, daly_s, tol_pp, RENEWAL, (far, e), (lim.min_s, far), e)
    best, lo, hi = _renewal_region(inp, lim, tol_pp / 100.0)
    best_ettr, method = renewal_ettr(inp, best), RENEWAL
    if best_ettr <= NO_PROGRESS_ETTR:  # interruptions far more often than any cycle completes
        method += f"; no interval makes progress: an unexpected interruption every {human_s(1.0 / _rates(inp)[0])}"
        lo = hi = best
        best_ettr = 0.0
    return make_recommendation(lim, young_s, daly_s, tol_pp, method, (best, best_ettr),
                               (lo, hi), renewal_ettr(inp, hi) if best_ettr else 0.0)


def sweep_row(interval_s: float, res: MCResult, lim: IntervalLimits) -> dict[str, Any]:
    """One row of the interval sweep: the Monte Carlo's ETTR and wall time at ``interval_s`` and
    what the interval asks of the storage."""
    ettr = res.ettr
    p5, p50, p95 = (float(x) for x in np.percentile(ettr, [5, 50, 95]))
    return {"interval_s": float(interval_s), "interval_h": interval_s / 3600.0,
            "steps": int(round(interval_s / lim.step_s)), "ettr_mean": float(ettr.mean()),
            "ettr_p5": p5, "ettr_p50": p50, "ettr_p95": p95,
            "wall_days_p50": float(np.percentile(res.wall_s, 50) / 86400.0),
            "write_bytes_s": lim.write_bytes_s(interval_s), "storage_use": lim.storage_use(interval_s)}


def sweep_grid_s(lim: IntervalLimits, center_s: float, extra_s: tuple[float, ...] = ()) -> list[float]:
    """The offered intervals a sweep starts from: a log grid from ``center_s`` / 16 to x 16,
    ``HUMAN_INTERVALS_S``, ``extra_s`` and the shortest offered interval, on whole steps."""
    raw = [float(x) for x in np.geomspace(center_s / GRID_SPAN, center_s * GRID_SPAN, GRID_POINTS)]
    return sorted({lim.on_steps(x) for x in (*raw, *HUMAN_INTERVALS_S, *extra_s, lim.min_s)})
