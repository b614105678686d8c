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

from teton.memo import ValueMemo

# value | lower_bound | upper_bound (a published "at least" / "up to") | check (the model was
# derived from this figure: reported, but kept out of the mean error)
KINDS = ("value", "lower_bound", "upper_bound", "check")
PREDICTIONS = ("burst", "in_sample", "loo", "loso")
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
    # the predictions of a training-set row (None for the other cases)
    burst: float | None = None
    in_sample: float | None = None
    loo: float | None = None
    loso: float | None = None  # leave-one-stack-out: the stack unseen (its prior's centre)
    stack: str = ""  # the row's software stack (training-set rows)

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
            d.update({f"error_{w}": self.error_of(w) for w in PREDICTIONS if getattr(self, w) is not None})
        return d


_FITS = ValueMemo(4)  # calibration (sorted overrides, or None) -> the fit


def training_fit(calibration: tuple | None = None, progress=None):
    """The fit on the bundled training sets (both), memoised by ``calibration`` (validate's cases
    share it); ``progress(done, total)`` while it runs."""
    from teton.validation.fit import fit_runs

    hit = _FITS.get(calibration)
    if hit is None:
        runs = all_training_runs()
        if calibration:
            runs = tuple(_calibrated(r, dict(calibration)) for r in runs)
        hit = _FITS.put(calibration, fit_runs(runs, pairs=tuple((a, b) for _, a, b, _ in all_ratio_pairs()),
                                              progress=progress))
    return hit


def all_ratio_pairs() -> list[tuple[str, str, str, float]]:
    """The step-time ratios both training sets check (set 1's, and set 2's precision / recipe pairs)."""
    from teton.validation.training import ratio_pairs
    from teton.validation.training_set2 import precision_pairs

    return [*ratio_pairs(), *precision_pairs()]


def all_training_runs() -> tuple:
    """Every run of both training sets (set 1: Llama 3 Table 4, Korthikanti Table 5; set 2)."""
    from teton.validation.training import training_runs
    from teton.validation.training_set2 import training_runs_2

    return (*training_runs(), *training_runs_2())


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
    """A predicted step time in the run's published metric (a throughput scales as 1 / step)."""
    return step_s if run.metric == "step_time_s" else run.published * run.step_time_s / step_s


def _default_step_s(run) -> float:
    from teton.engine.step import simulate_step

    return simulate_step(run.spec).step_time_s


def step_rows(names: tuple[str, ...], calibration: dict | None = None, case_of=None) -> list[ValidationRow]:
    """The training-set rows of the runs whose names start with one of ``names`` (``case_of(run)``:
    the case a row is listed under; default the name's part before ':'), with their ratio rows."""
    fit = training_fit(tuple(sorted(calibration.items())) if calibration else None)
    rows, steps = [], {}
    source = {r.name: r.source for r in fit.runs}
    for i, run in enumerate(fit.runs):
        preds = {w: getattr(fit, f"{w}_s")[i] for w in PREDICTIONS}
        steps[run.name] = (run.step_time_s, preds["burst"], preds["in_sample"], _default_step_s(run))
        if not run.name.startswith(names):
            continue
        case = case_of(run) if case_of else run.name.split(":")[0]
        metric = run.name.split(": ", 1)[1] if ": " in run.name else run.name
        rows.append(ValidationRow(
            case, f"{run.metric} ({metric})", run.published, _in_metric(run, steps[run.name][3]),
            run.tolerance, run.source, run.note, stack=fit.cells[i][0],
            **{w: _in_metric(run, v) for w, v in preds.items()}))
    runs = {r.name: r for r in fit.runs}
    for label, a, b, tol in all_ratio_pairs():
        if not a.startswith(names):
            continue
        (ma, ba, ia, da), (mb, bb, ib, db) = steps[a], steps[b]
        la, lb = fit.pair_loo_s[(a, b)]  # leave-pair-out: a fit that saw neither run
        case = case_of(runs[a]) if case_of else a.split(":")[0]
        rows.append(ValidationRow(case, RATIO_PREFIX + label, ma / mb, da / db, tol, source[a],
                                  "leave-one-out column: both runs held out of the fit",
                                  burst=ba / bb, in_sample=ia / ib, loo=la / lb))
    return rows


def training_set2() -> list[ValidationRow]:
    """Training set 2's judged rows, one case per source (``teton.validation.training_set2``)."""
    from teton.validation.training_set2 import SOURCE_NAMES, published_rows

    source_of = {r.id: r.source for r in published_rows()}
    prefixes = tuple(r.id for r in published_rows() if r.id[0] in "abcdefh")
    return step_rows(prefixes, case_of=lambda run: f"Training set 2, {source_of[run.name]}: "
                     f"{SOURCE_NAMES[source_of[run.name]]}")


def training_set2_moe() -> list[ValidationRow]:
    """Training set 2's MoE rows (``training_set2.PREDICTED``), predicted with the catalog's in-situ
    values (fitted on the dense rows), each against its stack's values: no held-out columns, as
    they are not part of the fit."""
    from teton.validation.training_set2 import moe_runs_2

    return [ValidationRow("Training set 2, MoE rows (predicted, not in the fit)", f"{run.metric} ({run.name})",
                          run.published, _in_metric(run, _default_step_s(run)), run.tolerance, run.source, run.note,
                          stack=run.spec.job.software.name) for run in moe_runs_2()]


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
    "training-set-2": training_set2,
    "training-set-2-moe": training_set2_moe,
    "meta-network-claims": meta_network_claims,
    "tectonic-llama3-storage": tectonic_llama3_storage,
    "llama3-405b-54-days": llama3_405b_54_days,
}
# cases whose predictions use the GPU efficiency catalog, and so accept measured overrides
CALIBRATED_CASES = {"llama3-405b-table4", "korthikanti-2022-table5"}
FIT_CASES = {"llama3-405b-table4", "korthikanti-2022-table5", "training-set-2"}  # the cases the fit judges


def all_cases() -> dict[str, Callable[..., list[ValidationRow]]]:
    """Every case, by name, in the order ``teton validate`` prints them."""
    return CASES


def run_validation(names: list[str] | None = None, progress: Callable[[str, int, int], None] | None = None,
                   calibration: dict[str, float] | None = None) -> dict:
    """All (or the named) cases: rows, mean absolute relative error per prediction, count within
    tolerance; with a training-set case also the fit's per-stack summary, bands and coverage, and
    the training-set-2 rows teton does not judge (and why) and the training sets' weak- and
    strong-scaling series (``validation.weak_scaling``); with the MoE case the MoE rows' band and its coverage per model
    (``validation.moe_band``). ``progress(what, done, total)``."""
    rows: list[ValidationRow] = []
    todo = [(n, fn) for n, fn in all_cases().items() if not names or n in names]
    key = tuple(sorted(calibration.items())) if calibration else None
    if any(n in FIT_CASES for n, _ in todo):  # fitted first, with its own progress; the cases share it
        training_fit(key, None if progress is None else
                     lambda done, total: progress("fitting the in-situ parameters", done, total))
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
        fit = training_fit(key)
        out["training_set"] = fit_summary(fit, fitted)
        out["stacks"] = stack_summary(fit)
        out["fit"] = fit.parameter_rows()
        out["notes"] = list(fit.notes)
    if any(n == "training-set-2-moe" for n, _ in todo):
        from teton.validation.moe_band import moe_summary

        out["moe"] = moe_summary(training_fit(key))
    if not names or "training-set-2" in names:
        from teton.validation.weak_scaling import strong_scaling_table, weak_scaling_table

        out["not_judged"] = not_judged_rows()
        out["weak_scaling"] = weak_scaling_table()
        out["strong_scaling"] = strong_scaling_table()
    return out


def fit_summary(fit, fitted: list[ValidationRow]) -> dict:
    """Mean and max absolute error per prediction over the judged rows, the bands, their coverage."""
    out = {"rows": len(fitted)}
    for w in PREDICTIONS:
        errs = [abs(e) for e in (r.error_of(w) for r in fitted) if e is not None and not math.isnan(e)]
        out[f"mean_abs_error_{w}"] = sum(errs) / len(errs) if errs else 0.0
        out[f"max_abs_error_{w}"] = max(errs) if errs else 0.0
    for w, name in (("loo", "seen"), ("loso", "unseen")):
        out[f"band_{name}"] = list(fit.band(w))
        out[f"coverage_{name}"] = fit.coverage(w)
    families, (cov_all, cov) = fit.family_bands(), fit.family_coverage()
    out["band_seen_by_family"] = {f: list(b) for f, b in families.items()}
    out["coverage_seen_by_family"] = {"all": cov_all, **cov}
    ucov_all, ucov = fit.unseen_family_coverage()
    out["band_unseen_by_family"] = {f: list(b) for f, b in fit.unseen_family_bands().items()}
    out["coverage_unseen_by_family"] = {"all": ucov_all, **ucov}
    out["spread"] = {"sigma": fit.hyper.sigma, **{f"tau_{k}": v for k, v in fit.hyper.tau}}
    return out


def stack_summary(fit) -> list[dict]:
    """One row per (stack, family): runs, fitted values, leave-one-out and leave-one-stack-out
    mean / max absolute errors, and the share of its rows inside their nested bands (the seen band:
    its GPU family's, built from the family's other configurations; the unseen band: its family's,
    built from the other stacks)."""
    import numpy as np

    from teton.validation import bands

    out = []
    loo, loso = fit.errors("loo"), fit.errors("loso")
    configs, stacks, fams = [r.config for r in fit.runs], [c[0] for c in fit.cells], [c[1] for c in fit.cells]
    for cell in dict.fromkeys(fit.cells):
        idx = [i for i, c in enumerate(fit.cells) if c == cell]
        # the seen band a job of the cell gets: its GPU family's, from the family's other configurations
        others_cfg = [i for i in range(len(fit.runs))
                      if fams[i] == cell[1] and configs[i] not in {configs[j] for j in idx}]
        others_stack = [i for i in range(len(fit.runs)) if stacks[i] != cell[0]]
        lo, hi = bands.family_band(loo[others_cfg], [configs[i] for i in others_cfg], fit.hyper.sigma)
        fam_others = [i for i in others_stack if fams[i] == cell[1]]
        pooled = bands.band(loso[others_stack], fit.weights("loso")[others_stack])
        ulo, uhi = (bands.widened_band(loso[fam_others], [stacks[i] for i in fam_others], pooled)
                    if fam_others else pooled)
        out.append({"stack": cell[0], "family": cell[1], "rows": len(idx),
                    "values": fit.values(cell),
                    "loo_mean_abs": float(np.mean(np.abs(loo[idx]))), "loo_max_abs": float(np.max(np.abs(loo[idx]))),
                    "loso_mean_abs": float(np.mean(np.abs(loso[idx]))),
                    "loso_max_abs": float(np.max(np.abs(loso[idx]))),
                    "inside_seen_band": float(np.mean((loo[idx] >= lo) & (loo[idx] <= hi))),
                    "inside_unseen_band": float(np.mean((loso[idx] >= ulo) & (loso[idx] <= uhi)))})
    return out


def not_judged_rows() -> list[dict]:
    """Training set 2's rows teton does not judge, each with its status and reason."""
    from teton.validation.training_set2 import JUDGED, published_rows, row_status

    out = []
    for r in published_rows():
        status, reason = row_status(r)
        if status != JUDGED:
            out.append({"id": r.id, "source": r.source, "system": r.system, "model": r.model,
                        "precision": r.precision, "status": status, "reason": reason})
    return out
