"""Bundled validation cases: published measurements vs teton's predictions.

The step-time cases are the training set (``teton.validation.training``): each row shows three
predictions that are never mixed - **burst** (microbenchmark constants only), **in-sample** (the
in-situ parameters fitted on the whole training set, which the catalog holds) and
**leave-one-out** (fitted without that row) - and is judged on the leave-one-out one. Ratio
rows check what the training set says about *relative* predictions (8K -> 16K GPUs, selective vs
full recompute). The other cases (memory, network, storage, reliability) have one prediction,
from the catalogs as they are; no constant is fitted to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from teton.memo import cached

# value | lower_bound | upper_bound (a published "at least" / "up to") | check (the model was
# derived from this figure: reported, but kept out of the mean error)
KINDS = ("value", "lower_bound", "upper_bound", "check")
PREDICTIONS = ("burst", "in_sample", "loo")
RATIO_PREFIX = "ratio: "


@dataclass(frozen=True)
class ValidationRow:
    case: str
    metric: str
    published: float
    predicted: float  # the default prediction (the catalog's in-situ values for the step-time rows)
    tolerance: float  # acceptance band as a relative error
    source: str
    note: str = ""
    kind: str = "value"
    # the three predictions of a training-set row (None for the other cases)
    burst: float | None = None
    in_sample: float | None = None
    loo: float | None = None

    @property
    def error(self) -> float:
        return (self.predicted - self.published) / self.published

    def error_of(self, which: str) -> float | None:
        value = getattr(self, which)
        return None if value is None else (value - self.published) / self.published

    @property
    def judged(self) -> float:
        """The prediction the band is judged on: leave-one-out where there is one."""
        return self.loo if self.loo is not None else self.predicted

    @property
    def within(self) -> bool:
        err = (self.judged - self.published) / self.published
        if self.kind == "lower_bound":
            return err >= -self.tolerance
        if self.kind == "upper_bound":
            return err <= self.tolerance
        return abs(err) <= self.tolerance

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(error=self.error, within_tolerance=self.within)
        if self.loo is not None:
            d.update({f"error_{w}": self.error_of(w) for w in PREDICTIONS})
        return d


@cached(4)
def training_fit(calibration: tuple | None = None):
    """The fit on the bundled training set (memoised: validate's cases share it)."""
    from teton.validation.fit import fit_runs
    from teton.validation.training import ratio_pairs, training_runs

    runs = training_runs()
    if calibration:
        runs = tuple(_calibrated(r, dict(calibration)) for r in runs)
    return fit_runs(runs, pairs=tuple((a, b) for _, a, b, _ in ratio_pairs()))


def _calibrated(run, overrides: dict):
    """A run with measured microbenchmark overrides (``teton validate --calibration``) on its
    cluster, for the GPU family they were measured on (Hopper)."""
    if run.family != "hopper":
        return run
    from dataclasses import replace

    cluster = run.spec.cluster
    eff = {**cluster.efficiency, **overrides}
    spec = run.spec.model_copy(update={"cluster": cluster.model_copy(update={"efficiency": eff})})
    note = "; ".join(filter(None, [run.note, "efficiencies measured: " + ", ".join(
        f"{k}={v:.3g}" for k, v in sorted(overrides.items()))]))
    return replace(run, spec=spec, note=note)


def _in_metric(run, step_s: float) -> float:
    """A predicted step time in the run's published metric."""
    return step_s if run.metric == "step_time_s" else run.published * run.step_time_s / step_s


def _default_step_s(run) -> float:
    from teton.engine.step import simulate_step

    return simulate_step(run.spec).step_time_s


def step_rows(names: tuple[str, ...], calibration: dict | None = None) -> list[ValidationRow]:
    """The training-set rows of the runs whose names start with one of ``names``, with their
    ratio rows."""
    from teton.validation.training import ratio_pairs

    fit = training_fit(tuple(sorted(calibration.items())) if calibration else None)
    rows, steps = [], {}
    source = {r.name: r.source for r in fit.runs}
    for i, run in enumerate(fit.runs):
        steps[run.name] = (run.step_time_s, fit.burst_s[i], fit.in_sample_s[i], fit.loo_s[i], _default_step_s(run))
        if not run.name.startswith(names):
            continue
        case = run.name.split(":")[0]
        rows.append(ValidationRow(
            case, f"{run.metric} ({run.name.split(': ', 1)[1]})", run.published, _in_metric(run, steps[run.name][4]),
            run.tolerance, run.source, run.note, burst=_in_metric(run, fit.burst_s[i]),
            in_sample=_in_metric(run, fit.in_sample_s[i]), loo=_in_metric(run, fit.loo_s[i])))
    for label, a, b, tol in ratio_pairs():
        if not a.startswith(names):
            continue
        (ma, ba, ia, _, da), (mb, bb, ib, _, db) = steps[a], steps[b]
        la, lb = fit.pair_loo_s[(a, b)]  # leave-pair-out: a fit that saw neither run
        rows.append(ValidationRow(a.split(":")[0], RATIO_PREFIX + label, ma / mb, da / db, tol, source[a],
                                  "leave-one-out column: both runs held out of the fit",
                                  burst=ba / bb, in_sample=ia / ib, loo=la / lb))
    return rows


def llama3_table4(calibration: dict | None = None) -> list[ValidationRow]:
    """Table 4's rows on ``meta-roce-24k`` (TFLOPs/GPU), optionally with measured microbenchmark
    efficiencies (``calibration``: ``cluster.efficiency`` overrides, e.g. from ``teton calibrate``)."""
    return step_rows(("Llama 3 405B Table 4",), calibration)


def korthikanti_table5(calibration: dict | None = None) -> list[ValidationRow]:
    """Korthikanti et al. 2022 Table 5: iteration times, full vs SP + selective recompute."""
    return step_rows(("Korthikanti 2022 Table 5",), calibration)


def korthikanti_figure1() -> list[ValidationRow]:
    from teton.validation.training import korthikanti_memory_rows

    return [ValidationRow(**r) for r in korthikanti_memory_rows()]


def meta_network_claims() -> list[ValidationRow]:
    from teton.validation.network_cases import meta_network_claims as rows

    return [ValidationRow(**r) for r in rows()]


def tectonic_llama3_storage() -> list[ValidationRow]:
    from teton.validation.storage_cases import tectonic_llama3_rows as rows

    return [ValidationRow(**r) for r in rows()]


def llama3_405b_54_days() -> list[ValidationRow]:
    from teton.validation.reliability_cases import llama3_54_days as rows

    return [ValidationRow(**r) for r in rows()]


CASES: dict[str, Callable[..., list[ValidationRow]]] = {
    "llama3-405b-table4": llama3_table4,
    "korthikanti-2022-table5": korthikanti_table5,
    "korthikanti-2022-figure1": korthikanti_figure1,
    "meta-network-claims": meta_network_claims,
    "tectonic-llama3-storage": tectonic_llama3_storage,
    "llama3-405b-54-days": llama3_405b_54_days,
}
# cases whose predictions use the GPU efficiency catalog, and so accept measured overrides
CALIBRATED_CASES = {"llama3-405b-table4", "korthikanti-2022-table5"}


def all_cases() -> dict[str, Callable[..., list[ValidationRow]]]:
    """Every case, by name, in the order ``teton validate`` prints them."""
    return CASES


def run_validation(names: list[str] | None = None, progress: Callable[[str, int, int], None] | None = None,
                   calibration: dict[str, float] | None = None) -> dict:
    """All (or the named) cases: rows, mean absolute relative error per prediction, count within
    tolerance. ``progress(case, done, total)`` is called before each case runs."""
    rows: list[ValidationRow] = []
    todo = [(n, fn) for n, fn in all_cases().items() if not names or n in names]
    for i, (name, fn) in enumerate(todo):
        if progress is not None:
            progress(name, i, len(todo))
        rows.extend(fn(calibration) if calibration and name in CALIBRATED_CASES else fn())
    values = [r for r in rows if r.kind == "value"]  # bounds have no point estimate to miss

    def mean_abs(get, among=values) -> float:
        errs = [abs(e) for e in map(get, among) if e is not None and not math.isnan(e)]
        return sum(errs) / len(errs) if errs else 0.0

    fitted = [r for r in values if r.loo is not None and not r.metric.startswith(RATIO_PREFIX)]
    out = {
        "rows": [r.as_dict() for r in rows],
        "mean_abs_error": mean_abs(lambda r: (r.judged - r.published) / r.published),
        "within_tolerance": sum(r.within for r in rows),
        "total": len(rows),
    }
    if fitted:
        fit = training_fit(tuple(sorted(calibration.items())) if calibration else None)
        out["training_set"] = {f"mean_abs_error_{w}": mean_abs(lambda r, w=w: r.error_of(w), fitted)
                               for w in PREDICTIONS}
        out["training_set"]["rows"] = len(fitted)
        out["fit"] = {p.name: v for p, v in zip(fit.parameters, fit.values, strict=True)}
    return out
