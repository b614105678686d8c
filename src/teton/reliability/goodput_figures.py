"""The figures ``goodput`` reports from its Monte Carlo result, as frozen groups.

Each function turns the runs of :func:`teton.reliability.montecarlo.simulate_runs` (and the
models that fed them) into one group of the result (:class:`teton.reliability.goodput.
GoodputResult`), whose fields are the result's JSON keys in the order it lists them:
interruptions, ETTR and time to train, the checkpoint interval, energy and cost. Percentiles are
over the Monte Carlo runs (``{"p5", "p50", "p95", "mean"}``); "mean" figures are run means. An
optimum or MTBI that does not exist (no unexpected interruptions) is None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from teton.reliability.energy import PowerModel
from teton.reliability.montecarlo import MCResult
from teton.reliability.planes import PlaneLoss
from teton.reliability.rates import CAUSES
from teton.reliability.recommend import IntervalRecommendation
from teton.reliability.recovery import CheckpointCosts, pg_init_s
from teton.spec.reliability import ReliabilitySpec

if TYPE_CHECKING:
    from collections.abc import Callable

    from teton.reliability.goodput import FailureModel
    from teton.reliability.sweep import IntervalRun


class Figures:
    """A group of result keys: ``to_dict()`` gives its fields, in order, as they are."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class InterruptionFigures(Figures):
    unexpected_interruptions: float
    unexpected_interruptions_mc: dict[str, float]
    planned_interruptions: float
    unexpected_per_day: float
    mtbi_h: float | None
    interruptions_by_cause: dict[str, float]
    interruptions_by_category: dict[str, float]
    interruptions_by_category_percentiles: dict[str, dict[str, float]]


@dataclass(frozen=True)
class TimeFigures(Figures):
    ettr: float
    ettr_percentiles: dict[str, float]
    goodput: float
    wall_days: dict[str, float]
    time_to_train_days: float | None
    time_to_train_percentiles: dict[str, float] | None
    ideal_days: float | None
    gpu_hours: float
    ideal_gpu_hours: float | None
    tokens_trained: dict[str, float]
    finished_fraction: float | None
    lost_gpu_hours: dict[str, float]
    lost_gpu_hours_by_kind: dict[str, float]


@dataclass(frozen=True)
class CheckpointFigures(Figures):
    checkpoint_interval_s: float
    young_interval_s: float | None
    young_daly_interval_s: float | None
    checkpoint_save_s: float
    checkpoint_blocking_s: float
    checkpoint_restore_s: float
    checkpoint_source: str
    storage_min_interval_s: float | None
    checkpoint_interval_source: str
    downtime_s_by_cause: dict[str, float]
    pg_init_s: float
    pg_init: str
    spare_hosts: int


@dataclass(frozen=True)
class EnergyFigures(Figures):
    energy_mwh: float
    energy_mwh_percentiles: dict[str, float]
    power_train_mw: float
    power_idle_mw: float
    power_swing_mw: float
    power_swing_peak_mw: float
    cost_usd: float
    cost_usd_percentiles: dict[str, float]


def percentiles(x: np.ndarray) -> dict[str, float]:
    """p5 / p50 / p95 and the mean of a per-run figure."""
    p5, p50, p95 = np.percentile(x, [5, 50, 95])
    return {"p5": float(p5), "p50": float(p50), "p95": float(p95), "mean": float(np.mean(x))}


def unexpected_rate_multiplier(fm: FailureModel, infant: Callable[[np.ndarray], np.ndarray] | None,
                               exposure_h: float) -> float:
    """The factor infant mortality raises the unexpected-interruption rate by over a run of
    ``exposure_h``: the hardware causes' hazard multiplier averaged over the run (2,001 points),
    weighted by the hardware share of the unexpected rate; 1 without infant mortality."""
    if infant is None:
        return 1.0
    mult_hw = float(np.mean(infant(np.linspace(0.0, exposure_h * 3600.0, 2001))))
    hw = sum(fm.job_rates_h[c.key] for c in CAUSES if c.hardware)
    return (fm.unexpected_per_h + hw * (mult_hw - 1.0)) / fm.unexpected_per_h if fm.unexpected_per_h else 1.0


def interruption_figures(fm: FailureModel, res: MCResult,
                         infant: Callable[[np.ndarray], np.ndarray] | None) -> InterruptionFigures:
    """Interruptions per run: expected (the job's rates x the mean wall time, the unexpected ones
    raised by infant mortality), as drawn by the Monte Carlo (while the job is up), and the drawn
    means by cause and by category; the unexpected rate per day and the MTBI."""
    exposure_h = float(np.mean(res.wall_s / 3600.0))
    mult = unexpected_rate_multiplier(fm, infant, exposure_h)
    counts_mean = res.counts.mean(axis=0)
    by_cause = {c.key: float(counts_mean[i]) for i, c in enumerate(CAUSES)}
    by_category: dict[str, float] = {}
    for i, c in enumerate(CAUSES):
        by_category[c.category] = by_category.get(c.category, 0.0) + float(counts_mean[i])
    unexp = res.counts[:, [i for i, c in enumerate(CAUSES) if not c.planned]].sum(axis=1)
    cat_pct = {cat: percentiles(res.counts[:, [i for i, c in enumerate(CAUSES) if c.category == cat]].sum(axis=1)
                                .astype(float)) for cat in by_category}
    return InterruptionFigures(
        unexpected_interruptions=fm.unexpected_per_h * mult * exposure_h,
        unexpected_interruptions_mc=percentiles(unexp.astype(float)),
        planned_interruptions=fm.planned_per_h * exposure_h,
        unexpected_per_day=fm.unexpected_per_h * 24.0 * mult, mtbi_h=finite_or_none(fm.mtbi_h / mult),
        interruptions_by_cause=by_cause, interruptions_by_category=by_category,
        interruptions_by_category_percentiles=cat_pct,
    )


def time_figures(res: MCResult, gpus: int, steps: int | None, step_time_s: float, effective_step_time_s: float,
                 tokens_per_step: float, slowdown: float) -> TimeFigures:
    """ETTR (useful training / wall time), goodput (ETTR / the diurnal and straggler ``slowdown``),
    time to train (token budget: ``steps`` given) against the failure-free ``steps x step time``,
    tokens trained, and the GPU-hours lost by kind: re-done work, recovery, the wait for a spare
    host, checkpoint blocking and the steps' diurnal / straggler stretch (``slow_steps``: with a
    token budget the kinds add up to the GPU-hours beyond the failure-free ones)."""
    ettr = res.ettr
    useful_tokens = res.useful_s / effective_step_time_s * tokens_per_step
    ideal_s = (steps * step_time_s) if steps is not None else None
    ttt = res.wall_s / 86400.0 if steps is not None else None
    return TimeFigures(
        ettr=float(np.mean(ettr)), ettr_percentiles=percentiles(ettr),
        goodput=float(np.mean(ettr) / slowdown),
        wall_days=percentiles(res.wall_s / 86400.0),
        time_to_train_days=float(np.median(ttt)) if ttt is not None else None,
        time_to_train_percentiles=percentiles(ttt) if ttt is not None else None,
        ideal_days=ideal_s / 86400.0 if ideal_s is not None else None,
        gpu_hours=float(np.mean(res.wall_s)) * gpus / 3600.0,
        ideal_gpu_hours=ideal_s * gpus / 3600.0 if ideal_s is not None else None,
        tokens_trained=percentiles(useful_tokens),
        finished_fraction=float(res.finished.mean()) if steps is not None else None,
        lost_gpu_hours=percentiles((res.wall_s - res.useful_s) * gpus / 3600.0),
        lost_gpu_hours_by_kind={
            "lost_work": float(np.mean(res.lost_work_s)) * gpus / 3600.0,
            "recovery": float(np.mean(res.down_s - res.spare_wait_s)) * gpus / 3600.0,
            "spare_wait": float(np.mean(res.spare_wait_s)) * gpus / 3600.0,
            "checkpoint_blocking": float(np.mean(res.checkpoint_s)) * gpus / 3600.0,
            # the diurnal and straggler stretch of every step (the useful time beyond its step time)
            "slow_steps": float(np.mean(res.useful_s)) * (1.0 - 1.0 / slowdown) * gpus / 3600.0},
    )


def checkpoint_figures(iv: IntervalRun, ck: CheckpointCosts, downtime_s: dict[str, float],
                       cfg: ReliabilitySpec, gpus: int, spares: int) -> CheckpointFigures:
    """The checkpoint interval used, where it came from (given, the storage's sustained write
    rate, or the practical interval) and the Young and Daly optima beside it; the checkpoint's
    save, blocking and restore times; the recovery downtime by cause, process-group init and the
    spare hosts."""
    rec = iv.recommendation
    return CheckpointFigures(
        checkpoint_interval_s=iv.chosen_s, young_interval_s=rec.young_interval_s,
        young_daly_interval_s=rec.daly_interval_s,
        checkpoint_save_s=ck.save_s, checkpoint_blocking_s=ck.blocking_s,
        checkpoint_restore_s=ck.restore_s, checkpoint_source=ck.source,
        storage_min_interval_s=ck.min_interval_s or None,
        checkpoint_interval_source=iv.source,
        downtime_s_by_cause=downtime_s, pg_init_s=pg_init_s(cfg, gpus), pg_init=cfg.pg_init,
        spare_hosts=spares,
    )


def energy_figures(pm: PowerModel, energy_mwh: np.ndarray, cost_usd: np.ndarray) -> EnergyFigures:
    """Facility energy and cost per run (mean and percentiles), and the facility power training,
    idle, and the swing when every GPU stops at once (:mod:`teton.reliability.energy`)."""
    return EnergyFigures(
        energy_mwh=float(np.mean(energy_mwh)), energy_mwh_percentiles=percentiles(energy_mwh),
        power_train_mw=pm.it_train_w * pm.pue / 1e6, power_idle_mw=pm.it_idle_w * pm.pue / 1e6,
        power_swing_mw=pm.swing_mw, power_swing_peak_mw=pm.swing_peak_mw,
        cost_usd=float(np.mean(cost_usd)), cost_usd_percentiles=percentiles(cost_usd),
    )


@dataclass(frozen=True)
class RunFigures(Figures):
    """The run asked and the step it is made of: sizes, length, Monte Carlo runs and seed, step
    time (and where it came from), effective step time and tokens per step."""

    gpus: int
    hosts: int
    switch_equivalents: float
    mode: str  # "tokens" (a token budget) or "days" (a fixed run length)
    tokens: float | None
    days: float | None
    runs: int
    seed: int
    step_time_s: float
    step_time_source: str
    effective_step_time_s: float
    tokens_per_step: float
    steps: int | None


@dataclass(frozen=True)
class GoodputResult:
    """What :func:`teton.reliability.goodput` answers, in groups; ``to_dict()`` is the JSON the
    ``teton goodput --json`` prints (the groups' keys flattened, in this order).

    ``interval_sweep``: one row per interval simulated (empty unless asked); ``interval``: the
    checkpoint interval teton recommends (``interval.practical_interval_s``), the optimum, Young /
    Daly's and the flat region, by the renewal model or from the sweep (:mod:`teton.reliability.recommend`);
    ``time_to_train_samples_days``: every run's time to train (asked with ``samples`` on a token
    budget, else None)."""

    run: RunFigures
    interruptions: InterruptionFigures
    time: TimeFigures
    checkpoint: CheckpointFigures
    energy: EnergyFigures
    interval_sweep: tuple[dict[str, float], ...]
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    interval: IntervalRecommendation
    planes: PlaneLoss
    time_to_train_samples_days: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def mc_optimal_interval_s(self) -> float | None:
        """The sweep's interval with the best mean ETTR (None without a sweep)."""
        return self._best_row()["interval_s"] if self.interval_sweep else None

    @property
    def mc_optimal_ettr(self) -> float | None:
        return self._best_row()["ettr_mean"] if self.interval_sweep else None

    def _best_row(self) -> dict[str, float]:
        return max(self.interval_sweep, key=lambda r: (r["ettr_mean"], -r["interval_s"]))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.run.to_dict(), **self.interruptions.to_dict(), **self.time.to_dict(),
                               **self.checkpoint.to_dict(), **self.energy.to_dict(), **self.planes.to_dict(),
                               "interval_recommendation": self.interval.to_dict(),
                               "interval_sweep": [dict(r) for r in self.interval_sweep]}
        if self.interval_sweep:  # the sweep's best row
            out["mc_optimal_interval_s"] = self.mc_optimal_interval_s
            out["mc_optimal_ettr"] = self.mc_optimal_ettr
        if self.time_to_train_samples_days is not None:
            out["time_to_train_samples_days"] = self.time_to_train_samples_days
        out["assumptions"] = list(self.assumptions)
        out["warnings"] = list(self.warnings)
        return out
