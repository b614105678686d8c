"""``teton fit``: the in-situ parameters fitted to measured runs, with leave-one-out errors.

Model. Run i on GPU family f has measured step time T_i and teton's prediction t_i(theta) with
every microbenchmark constant as catalogued and the in-situ parameters theta (per-family ones for
f, plus the global ones; ``teton.hardware.in_situ``). The fit minimises

    sum_i (log t_i(theta) - log T_i)^2     subject to each parameter's physical bounds

(relative errors, so a 1 s run and a 90 s run weigh alike), by trust-region reflective least
squares (``scipy.optimize.least_squares``) over the parameters scaled to [0, 1] by their bounds.
Confidence intervals are the Gauss-Newton ones, ``s^2 (J^T J)^-1`` at the optimum with
``s^2 = RSS / (n - k)``, times Student's t for n - k degrees of freedom; a parameter the runs do
not constrain (singular direction, or n <= k) is reported as not identified.

Three predictions per run, never mixed: **burst** (every in-situ parameter at its burst value),
**in-sample** (the parameters fitted on all runs), **leave-one-out** (the parameters refitted on
every run but this one: the honest estimate of the error on a run the fit has not seen). A
parameter whose family has no run left when one is held out keeps the catalog's value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from teton.errors import SpecError
from teton.hardware.efficiency import microbenchmark_overrides
from teton.hardware.in_situ import PARAMETERS, catalog_value
from teton.spec import Spec
from teton.validation.runs import MeasuredRun

# The parameters teton keeps, on the training set's evidence (``teton fit --candidates``; the
# reasons are in docs/fidelity.md): the tensor-core factor alone leaves trends with pp, GPU count,
# model size and the memory / communication shares; with the collective factor none is left and
# every ratio holds. attention_in_situ (per family) is not identified on Hopper and loses a ratio
# out of sample; step_overhead_s and gpu_speed_cv fit to ~0; kernel_gap_s (9 us) gains 0.15 points
# of leave-one-out error but would charge eager gaps to compiled / CUDA-graph stacks as well.
KEPT = ("tensor_core_in_situ", "collective_in_situ")
MAX_PER_FAMILY, MAX_GLOBAL = 2, 2


@dataclass(frozen=True)
class FitParameter:
    """One fitted value: an in-situ key, for one GPU family (or ``None``: every family)."""

    key: str
    family: str | None

    @property
    def name(self) -> str:
        return self.key if self.family is None else f"{self.key}[{self.family}]"

    @property
    def bounds(self) -> tuple[float, float]:
        return PARAMETERS[self.key].bounds

    def applies_to(self, run: MeasuredRun) -> bool:
        return self.family is None or self.family == run.family


def parameters_for(runs: list[MeasuredRun] | tuple[MeasuredRun, ...], keys: tuple[str, ...] = KEPT
                   ) -> tuple[FitParameter, ...]:
    """The parameters ``keys`` give for these runs: each per-family key once per family present."""
    for k in keys:
        if k not in PARAMETERS:
            from teton.errors import closest

            raise SpecError("--params", k, closest(k, PARAMETERS))
    scoped = [k for k in keys if PARAMETERS[k].scope == "family"]
    glob = [k for k in keys if PARAMETERS[k].scope == "global"]
    if len(scoped) > MAX_PER_FAMILY or len(glob) > MAX_GLOBAL:
        raise SpecError("--params", ",".join(keys),
                        f"at most {MAX_PER_FAMILY} per GPU family and {MAX_GLOBAL} global parameters")
    families = sorted({r.family for r in runs})
    return (*(FitParameter(k, f) for k in scoped for f in families), *(FitParameter(k, None) for k in glob))


def run_spec(run: MeasuredRun, values: dict[str, float]) -> Spec:
    """The run's spec on the burst profile with ``values`` (in-situ key -> value) on top; its
    cluster's own microbenchmark overrides are kept."""
    cluster = run.spec.cluster
    eff = {**microbenchmark_overrides(cluster.efficiency), "profile": "burst", **{k: v for k, v in values.items() if k != "gpu_speed_cv"}}
    update = {"efficiency": eff, "gpu_speed_cv": values.get("gpu_speed_cv", cluster.gpu_speed_cv)}  # a cluster field
    return run.spec.model_copy(update={"cluster": cluster.model_copy(update=update)})


def predict_s(runs, params: tuple[FitParameter, ...], x: np.ndarray | list[float]) -> np.ndarray:
    """Predicted step time of every run with the parameters at ``x`` (others at burst)."""
    from teton.engine.step import simulate_step

    out = np.empty(len(runs))
    for i, run in enumerate(runs):
        values = {p.key: float(v) for p, v in zip(params, x, strict=True) if p.applies_to(run)}
        out[i] = simulate_step(run_spec(run, values)).step_time_s
    return out


def _to_unit(params, x) -> np.ndarray:
    return np.array([(v - p.bounds[0]) / (p.bounds[1] - p.bounds[0]) for p, v in zip(params, x, strict=True)])


def _from_unit(params, u) -> np.ndarray:
    return np.array([p.bounds[0] + ui * (p.bounds[1] - p.bounds[0]) for p, ui in zip(params, u, strict=True)])


def least_squares_fit(runs, params, x0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, residuals, Jacobian in natural units) of the bounded log-step-time fit."""
    from scipy.optimize import least_squares

    meas = np.log([r.step_time_s for r in runs])

    def residuals(u: np.ndarray) -> np.ndarray:
        return np.log(predict_s(runs, params, _from_unit(params, u))) - meas

    # a fresh fit starts mid-range, not from the catalog, so that re-fitting checks the catalog
    u0 = np.full(len(params), 0.5) if x0 is None else np.clip(_to_unit(params, x0), 1e-6, 1 - 1e-6)
    sol = least_squares(residuals, u0, bounds=(0.0, 1.0), diff_step=1e-4, xtol=1e-7, ftol=1e-8, gtol=1e-8,
                        max_nfev=200)
    scale = np.array([p.bounds[1] - p.bounds[0] for p in params])
    return _from_unit(params, sol.x), sol.fun, sol.jac / scale


def confidence_intervals(x: np.ndarray, res: np.ndarray, jac: np.ndarray, params) -> tuple[list, list]:
    """95 % Gauss-Newton intervals, and whether each parameter is identified by the runs."""
    from scipy.stats import t as student_t

    n, k = jac.shape
    if n <= k:
        return [(math.nan, math.nan)] * k, [False] * k
    s2 = float(res @ res) / (n - k)
    u, sv, vt = np.linalg.svd(jac, full_matrices=False)
    tiny = sv < max(sv.max(), 1e-300) * 1e-6
    inv = np.where(tiny, 0.0, 1.0 / np.where(tiny, 1.0, sv) ** 2)
    cov = (vt.T * inv) @ vt * s2
    tq = float(student_t.ppf(0.975, n - k))
    half = tq * np.sqrt(np.maximum(np.diag(cov), 0.0))
    identified = [not bool(np.any(tiny & (np.abs(vt[:, j]) > 1e-3))) for j in range(k)]
    cis = []
    for j, p in enumerate(params):
        lo, hi = p.bounds
        cis.append((max(lo, x[j] - half[j]), min(hi, x[j] + half[j])) if identified[j] else (math.nan, math.nan))
    return cis, identified


@dataclass(frozen=True)
class FitResult:
    """Fitted in-situ parameters and the three predictions of every run (seconds)."""

    runs: tuple[MeasuredRun, ...]
    parameters: tuple[FitParameter, ...]
    values: tuple[float, ...]
    ci95: tuple[tuple[float, float], ...]
    identified: tuple[bool, ...]
    burst_s: tuple[float, ...]
    in_sample_s: tuple[float, ...]
    loo_s: tuple[float, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    # leave-pair-out: (run a, run b) -> both predicted by parameters fitted without either, the
    # out-of-sample check of a ratio between two runs
    pair_loo_s: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def errors(self, which: str) -> np.ndarray:
        """Relative step-time errors (predicted / measured - 1) of ``burst``, ``in_sample`` or ``loo``."""
        pred = np.array(getattr(self, f"{which}_s"))
        return pred / np.array([r.step_time_s for r in self.runs]) - 1.0

    def value(self, name: str) -> float:
        return self.values[[p.name for p in self.parameters].index(name)]

    def overrides(self, family: str) -> dict[str, float]:
        """The ``cluster.efficiency`` keys this fit sets for a cluster of ``family``."""
        return {p.key: float(v) for p, v in zip(self.parameters, self.values, strict=True)
                if p.family in (None, family)}

    def band(self, family: str | None = None) -> tuple[float, float]:
        """(min, max) leave-one-out relative errors, over this family's runs (or all runs)."""
        err = self.errors("loo")
        sel = [e for r, e in zip(self.runs, err, strict=True) if family is None or r.family == family]
        sel = sel or list(err)
        return float(min(sel)), float(max(sel))

    def as_dict(self) -> dict:
        errs = {w: self.errors(w) for w in ("burst", "in_sample", "loo")}
        return {
            "parameters": [{"name": p.name, "key": p.key, "family": p.family, "value": v, "ci95": list(ci),
                            "identified": ok, "bounds": list(p.bounds), "meaning": PARAMETERS[p.key].meaning}
                           for p, v, ci, ok in zip(self.parameters, self.values, self.ci95, self.identified,
                                                   strict=True)],
            "rows": [{"name": r.name, "family": r.family, "metric": r.metric, "published": r.published,
                      "measured_step_time_s": r.step_time_s, "burst_s": b, "in_sample_s": i, "loo_s": o,
                      "error_burst": float(errs["burst"][j]), "error_in_sample": float(errs["in_sample"][j]),
                      "error_loo": float(errs["loo"][j]), "source": r.source, "note": r.note}
                     for j, (r, b, i, o) in enumerate(zip(self.runs, self.burst_s, self.in_sample_s, self.loo_s,
                                                          strict=True))],
            "summary": {w: {"mean_abs_error": float(np.mean(np.abs(e))), "max_abs_error": float(np.max(np.abs(e)))}
                        for w, e in errs.items()},
            "notes": list(self.notes),
        }


def _held_out(runs, params, x, held: list[int], notes: list[str]) -> np.ndarray:
    """Predictions of the runs ``held`` by the parameters refitted on all the others (a parameter
    no remaining run informs keeps the catalog's value)."""
    rest = tuple(r for i, r in enumerate(runs) if i not in held)
    free = tuple(p for p in params if any(p.applies_to(r) for r in rest))
    values = {}
    if free:
        xi, _, _ = least_squares_fit(rest, free, np.array([v for p, v in zip(params, x, strict=True) if p in free]))
        values = dict(zip(free, xi, strict=True))
    for p in params:
        if p not in values:
            cat = catalog_value(p.key, p.family)
            values[p] = cat if cat is not None else PARAMETERS[p.key].burst
            notes.append(f"{', '.join(runs[i].name for i in held)}: no other run informs {p.name}; held out, "
                         f"it keeps the catalog's {values[p]:.4g}")
    return predict_s([runs[i] for i in held], params, [values[p] for p in params])


_REFIT: dict = {}  # what forked refit workers read (runs, parameters, the full fit's values)


def _refit_task(held: list[int]) -> tuple[np.ndarray, list[str]]:
    notes: list[str] = []
    r = _REFIT
    return _held_out(r["runs"], r["params"], r["x"], held, notes), notes


def _refits(runs, params, x, held: list[list[int]], progress) -> list[tuple[np.ndarray, list[str]]]:
    """The held-out refits, on two processes where the platform forks (each refit is independent
    and deterministic, so the results are those of a serial run, in order)."""
    import multiprocessing as mp
    import os

    total = len(held)
    workers = min(2, os.cpu_count() or 1, total)
    if progress is not None:
        progress(0, total)
    _REFIT.update(runs=runs, params=params, x=x)
    try:
        if workers < 2 or "fork" not in mp.get_all_start_methods():
            out = []
            for i, h in enumerate(held):
                out.append(_refit_task(h))
                if progress is not None:
                    progress(i + 1, total)
            return out
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_ignore_sigint)
        try:
            futures = [pool.submit(_refit_task, h) for h in held]
            out = []
            for i, f in enumerate(futures):
                out.append(f.result())
                if progress is not None:
                    progress(i + 1, total)
            pool.shutdown()
            return out
        except BaseException:  # Ctrl-C or a failed refit: stop the workers, don't wait for them
            for proc in list(getattr(pool, "_processes", {}).values()):
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    finally:
        _REFIT.clear()


def _ignore_sigint() -> None:
    """Refit workers leave Ctrl-C to the parent, which stops them."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def fit_runs(runs: list[MeasuredRun] | tuple[MeasuredRun, ...], keys: tuple[str, ...] = KEPT,
             progress=None, pairs: tuple[tuple[str, str], ...] = ()) -> FitResult:
    """Fit ``keys`` to ``runs``; burst, in-sample and leave-one-out predictions of every run, and
    leave-pair-out predictions of the ``pairs`` (run names) whose ratio is checked.

    ``progress(done, total)`` is called as the refits finish."""
    runs = tuple(runs)
    if not runs:
        raise SpecError("runs", 0, "at least one measured run")
    params = parameters_for(runs, keys)
    x, res, jac = least_squares_fit(runs, params)
    cis, identified = confidence_intervals(x, res, jac, params)
    burst = predict_s(runs, (), [])
    in_sample = predict_s(runs, params, x)
    loo = np.full(len(runs), math.nan)
    notes: list[str] = []
    names = [r.name for r in runs]
    if len(runs) == 1:
        notes.append(f"{runs[0].name}: the only run, no leave-one-out prediction")
    held = [[i] for i in range(len(runs))] if len(runs) > 1 else []
    held += [[names.index(a), names.index(b)] for a, b in pairs] if len(runs) > 2 else []
    results = _refits(runs, params, x, held, progress)
    pair_loo = {}
    for h, (pred, refit_notes) in zip(held, results, strict=True):
        notes += refit_notes
        if len(h) == 1:
            loo[h[0]] = pred[0]
        else:
            pair_loo[(names[h[0]], names[h[1]])] = (float(pred[0]), float(pred[1]))
    for p, ok in zip(params, identified, strict=True):
        if not ok:
            notes.append(f"{p.name} is not identified by these runs (no confidence interval)")
    return FitResult(runs, params, tuple(float(v) for v in x), tuple(cis), tuple(identified),
                     tuple(float(v) for v in burst), tuple(float(v) for v in in_sample),
                     tuple(float(v) for v in loo), tuple(dict.fromkeys(notes)), pair_loo)


def catalog_entry(result: FitResult, training_set: str) -> dict:
    """The ``in_situ_fitted.json`` content for a fit on the bundled training set."""
    from teton.hardware.in_situ import fitted_catalog

    values: dict[str, dict[str, float]] = {}
    for p, v in zip(result.parameters, result.values, strict=True):
        values.setdefault(p.family or "global", {})[p.key] = round(float(v), 6)
    band = {f: [round(x, 6) for x in result.band(f)] for f in sorted({r.family for r in result.runs})}
    band["all"] = [round(x, 6) for x in result.band()]
    return {"training_set": training_set, "parameters": [p.name for p in result.parameters],
            "values": values, "band": band, "borrow": fitted_catalog().get("borrow", {}),
            "written_by": "teton fit --write-catalog"}


def write_catalog_file(result: FitResult, training_set: str) -> str:
    """Write :func:`catalog_entry` over the package's ``in_situ_fitted.json`` (``teton fit
    --write-catalog``); returns the path written."""
    import json
    from importlib import resources
    from pathlib import Path

    from teton.atomic import write_text
    from teton.hardware.in_situ import FITTED_FILE

    target = Path(str(resources.files("teton.hardware").joinpath(FITTED_FILE)))
    write_text(target, json.dumps(catalog_entry(result, training_set), indent=2) + "\n")
    return str(target)


CATALOG_TOLERANCE = 1e-3  # a fitted value this close (relative) to the catalog's is "the same"


def compare_with_catalog(result: FitResult) -> list[dict]:
    """Each fitted value beside the catalog's, and whether they agree within ``CATALOG_TOLERANCE``
    (what ``teton fit`` on the bundled set reports; ``--write-catalog`` regenerates the catalog)."""
    out = []
    for p, v in zip(result.parameters, result.values, strict=True):
        cat = catalog_value(p.key, p.family)
        out.append({"name": p.name, "fitted": v, "catalog": cat,
                    "same": cat is not None and abs(cat - v) <= CATALOG_TOLERANCE * max(1.0, abs(v))})
    return out
