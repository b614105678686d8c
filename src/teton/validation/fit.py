"""``teton fit``: in-situ parameters per (software stack, GPU family), with honest held-out errors.

The model and the fit are :mod:`teton.validation.hierarchy`'s: each cell (stack, family) has its
own values, tied to an across-stack prior whose centre and spread the bundled training sets give;
the fits run on per-run surrogates (:mod:`teton.validation.surrogate`), and every prediction
reported here is an exact simulation at the fitted values. Predictions, never mixed:

* **burst**: every in-situ parameter at its burst value (microbenchmarks only);
* **in-sample**: the values fitted on every run;
* **leave-one-out**: refitted without the run's configuration (repeat measurements of one job
  are held out together), so a stack seen in training is judged on runs the fit did not see;
* **leave-one-stack-out**: refitted without the run's whole stack, predicted with the prior's
  centre: how teton does on a stack it has never seen (``unknown``);
* **leave-pair-out**: both runs of a checked ratio held out.

A band is the p10-p90 of such errors (:mod:`teton.validation.bands`): leave-one-out for a seen
stack, leave-one-stack-out for an unseen one; its coverage is measured nested (each configuration
or stack against a band built without it).

A user's runs (``teton fit RUNS``) are fitted against the catalog's prior (its centres and spreads held),
so three runs calibrate a stack without claiming more than they show: a parameter they do not pin down
stays near the prior (and is reported so), one not fitted at the catalog's value; one configuration,
with no run to hold out, gets the catalog's band."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from teton.errors import SpecError
from teton.hardware.in_situ import PARAMETERS
from teton.validation import bands
from teton.validation.hierarchy import Hyper, Solution, estimate_hyper, fit, group_of
from teton.validation.identify import IDENTIFIED, analyse, interval95, joint_covariance
from teton.validation.predict import catalog_rest, predict_s, run_spec  # noqa: F401 - the fit's predictions
from teton.validation.run_checks import check_burst_bound, loose_parameter_notes, user_run_notes
from teton.validation.runs import MeasuredRun
from teton.validation.surrogate import (
    HeldSurrogates,
    Surrogates,
    build_surrogates,
    from_z,
    surrogate_error,
    to_z,
)

# The parameters teton keeps, per (stack, family), on the training sets' evidence (``teton fit
# --candidates``; docs/fidelity.md): tensor-core throughput (prior per GPU family), collective
# bandwidth, the MXFP8 and NVFP4 GEMMs' and cuDNN attention's throughput (one value each for every
# stack: the collective and MXFP8 one for every family too) inside a job, relative to the
# microbenchmarks. A kernel's factor acts on the runs of that kernel alone
# (``engine.compute.in_situ_acts_on``), so a run's surrogate varies at most four of them.
KEPT = ("tensor_core_in_situ", "collective_in_situ", "mxfp8_gemm_in_situ", "nvfp4_gemm_in_situ",
        "cudnn_attention_in_situ")
MAX_PARAMETERS = 5
# keys every stack shares (one value per prior group, no per-stack deviation), on the evidence
SHARED: tuple[str, ...] = ("collective_in_situ", "mxfp8_gemm_in_situ", "nvfp4_gemm_in_situ", "cudnn_attention_in_situ")


def check_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    from teton.errors import closest

    for k in keys:
        if k not in PARAMETERS:
            raise SpecError("params", k, closest(k, PARAMETERS))
    if not keys or len(keys) > MAX_PARAMETERS or len(set(keys)) != len(keys):
        raise SpecError("params", ",".join(keys), f"one to {MAX_PARAMETERS} distinct in-situ parameters")
    return keys


@dataclass(frozen=True)
class Prior:
    """The across-stack prior a user's fit is held to: centres (z, per prior group and key) and
    the spreads, as the catalog holds them."""

    centres: dict[tuple[str, str], float]
    hyper: Hyper


@dataclass(frozen=True)
class FitResult:
    """Fitted in-situ values per cell and the predictions of every run (seconds)."""

    runs: tuple[MeasuredRun, ...]
    keys: tuple[str, ...]
    cells: tuple[tuple[str, str], ...]  # (stack, family) of each run
    solution: Solution
    hyper: Hyper
    burst_s: tuple[float, ...]
    in_sample_s: tuple[float, ...]
    loo_s: tuple[float, ...]
    loso_s: tuple[float, ...] | None = None  # bundled fits only (a user's runs are one stack)
    pair_loo_s: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    surrogate_miss: float = 0.0
    surrogates: Surrogates | None = field(default=None, repr=False, compare=False)  # for further studies
    held_to_prior: bool = False  # a user's fit against the catalog's prior
    # a user's fit, per cell: the keys held at their prior (not identified by the runs) and their values
    held: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    identifiability: tuple = ()  # a user's fit, per cell: teton.validation.identify.Identifiability
    # a user's fit, per cell: the posterior covariance (z units) of every key in ``keys`` order
    covariance: dict[tuple[str, str], np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    # a user's fit, per cell: the catalog's values of the keys not fitted (held there; in the cluster file)
    fixed: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)

    def errors(self, which: str) -> np.ndarray:
        """Relative step-time errors (predicted / measured - 1) of ``burst``, ``in_sample``, ``loo``
        or ``loso``."""
        pred = np.array(getattr(self, f"{which}_s"))
        return pred / np.array([r.step_time_s for r in self.runs]) - 1.0

    def weights(self, which: str) -> np.ndarray:
        """Row weights of a band: one per configuration (leave-one-out) or per stack (leave-one-stack-out)."""
        keys = [r.config for r in self.runs] if which != "loso" else [c[0] for c in self.cells]
        return bands.inverse_counts(keys)

    def band(self, which: str = "loo") -> tuple[float, float]:
        """(p10, p90) of the ``which`` errors, weighted (:meth:`weights`). A user's fit of fewer than
        ``bands.MIN_EMPIRICAL`` configurations takes a normal band around its mean held-out error,
        its spread shrunk towards the catalog's per-run scatter (``bands.small_sample_band``), each
        layout family counted once: runs that differ only in data-parallel size cannot show how
        other layouts scatter. One configuration (:attr:`catalog_banded`) takes the catalog's band."""
        if self.held_to_prior and which == "loo":
            from teton.validation.identify import layout_family

            if self.catalog_banded:
                return bands.catalog_seen_band([c[1] for c in self.cells], any(r.spec.model.has_moe for r in self.runs),
                                               self.hyper.sigma)
            families = [layout_family(r) for r in self.runs]
            if len(set(families)) < bands.MIN_EMPIRICAL:
                return bands.small_sample_band(self.errors("loo"), bands.inverse_counts(families), self.hyper.sigma,
                                               len(set(families)))
        return bands.band(self.errors(which), self.weights(which))

    @property
    def catalog_banded(self) -> bool:
        """A user's fit of one configuration: no run to hold out, so its band is the catalog's."""
        return self.held_to_prior and len({r.config for r in self.runs}) < 2

    def coverage(self, which: str = "loo") -> float:
        """Share of rows inside a band built without their configuration (``loo``) or stack (``loso``)."""
        units = [r.config for r in self.runs] if which != "loso" else [c[0] for c in self.cells]
        return bands.nested_coverage(self.errors(which), self.weights(which), units)

    def family_bands(self) -> dict[str, tuple[float, float]]:
        """Per GPU family, the (p10, p90) of its rows' leave-one-out errors: the seen-stack band a
        job on that family gets (``bands.family_band``; a family's scatter is its own: Blackwell's
        held-out errors spread about twice Hopper's)."""
        fams = [c[1] for c in self.cells]
        configs = [r.config for r in self.runs]
        errors = self.errors("loo")
        return {f: bands.family_band(errors[[i for i, g in enumerate(fams) if g == f]],
                                     [configs[i] for i, g in enumerate(fams) if g == f], self.hyper.sigma)
                for f in dict.fromkeys(fams)}

    def family_coverage(self) -> tuple[float, dict[str, float]]:
        """(all rows, per family) share of rows inside their family's band built without their
        configuration (``bands.nested_family_coverage``)."""
        return bands.nested_family_coverage(self.errors("loo"), [r.config for r in self.runs],
                                            [c[1] for c in self.cells], self.hyper.sigma)

    def unseen_family_bands(self) -> dict[str, tuple[float, float]]:
        """Per GPU family, the band a job of an unseen stack on it gets: the pooled leave-one-stack-out
        band widened to the family's own (``bands.widened_band``)."""
        fams, stacks, errors = [c[1] for c in self.cells], [c[0] for c in self.cells], self.errors("loso")
        pooled = self.band("loso")
        rows = {f: [i for i, g in enumerate(fams) if g == f] for f in dict.fromkeys(fams)}
        return {f: bands.widened_band(errors[idx], [stacks[i] for i in idx], pooled) for f, idx in rows.items()}

    def unseen_family_coverage(self) -> tuple[float, dict[str, float]]:
        """(all rows, per family) share of each stack's rows inside its family's unseen band built
        without the stack (``bands.nested_unseen_coverage``)."""
        return bands.nested_unseen_coverage(self.errors("loso"), self.weights("loso"), [c[0] for c in self.cells],
                                            [c[1] for c in self.cells])

    def values(self, cell: tuple[str, str]) -> dict[str, float]:
        """Every key's value in ``cell``: fitted, or held at its prior (a user's unidentified key)."""
        merged = {**self.held.get(cell, {}), **self.solution.values(cell)}
        return {k: merged[k] for k in self.keys if k in merged}

    def overrides(self, family: str) -> dict[str, float]:
        """The ``cluster.efficiency`` keys of a user's fit for its (one) cell on ``family``: the
        values of ``keys`` and the catalog's of the others (``fixed``)."""
        cell = next(c for c in self.cells if c[1] == family)
        return {**self.values(cell), **self.fixed.get(cell, {})}

    def parameter_rows(self) -> list[dict]:
        """One row per (cell, key): value, posterior 95 % interval, prior centre, identified (and,
        for a user's fit, held at the prior or not, and why)."""
        if self.identifiability:
            return [row for ident in self.identifiability for row in self._user_rows(ident)]
        out = []
        for cell in dict.fromkeys(self.cells):
            vals, sd = self.values(cell), self.solution.sd(cell)
            centre = self.solution.centre(cell[1])
            for k in self.keys:
                s = sd[k]
                out.append({**self._row(cell, k, vals[k], interval95(k, to_z(k, vals[k]), s), centre[k]),
                            "identified": bool(s < IDENTIFIED * self.hyper.tau_of(k))})
        return out

    def _row(self, cell, key: str, value: float, ci: list[float], prior: float) -> dict:
        return {"name": f"{key}[{cell[0]}/{cell[1]}]", "key": key, "stack": cell[0], "family": cell[1],
                "value": value, "ci95": ci, "prior": prior, "bounds": list(PARAMETERS[key].bounds),
                "runs": sum(c == cell for c in self.cells), "meaning": PARAMETERS[key].meaning}

    def _user_rows(self, ident) -> list[dict]:
        cell, vals, cov = ident.cell, self.values(ident.cell), self.covariance[ident.cell]
        centre = self.solution.centre(cell[1])
        out = []
        for j, k in enumerate(self.keys):
            v = ident.verdict(k)
            held = k in self.held.get(cell, {})
            ci = interval95(k, to_z(k, vals[k]), math.sqrt(max(cov[j, j], 0.0)))
            out.append({**self._row(cell, k, vals[k], ci, self.held[cell][k] if held else centre[k]),
                        "identified": v.identified, "held": held, "reason": v.reason, "sd_ratio": v.sd_ratio})
        return out

    def as_dict(self) -> dict:
        kinds = [w for w in ("burst", "in_sample", "loo", "loso") if getattr(self, f"{w}_s") is not None]
        errs = {w: self.errors(w) for w in kinds}
        rows = []
        for j, (r, cell) in enumerate(zip(self.runs, self.cells, strict=True)):
            row = {"name": r.name, "stack": cell[0], "family": cell[1], "metric": r.metric, "published": r.published,
                   "measured_step_time_s": r.step_time_s, "source": r.source, "note": r.note, "config": r.config}
            for w in kinds:
                row[f"{w}_s"] = float(getattr(self, f"{w}_s")[j])
                row[f"error_{w}"] = float(errs[w][j])
            rows.append(row)
        summary = {w: {"mean_abs_error": float(np.mean(np.abs(e))), "max_abs_error": float(np.max(np.abs(e)))}
                   for w, e in errs.items()}
        for w in ("loo", "loso"):
            if w in errs:
                summary[w].update(band=list(self.band(w)), coverage=self.coverage(w),
                                  band_source="catalog" if w == "loo" and self.catalog_banded else "held-out errors")
        return {"parameters": self.parameter_rows(), "rows": rows, "summary": summary,
                "spread": {"sigma": self.hyper.sigma, **{f"tau_{k}": v for k, v in self.hyper.tau}},
                "surrogate_max_miss": self.surrogate_miss, "notes": list(self.notes),
                "identifiability": [i.to_dict() for i in self.identifiability]}


def fit_runs(runs, keys: tuple[str, ...] = KEPT, progress=None, pairs: tuple[tuple[str, str], ...] = (),
             prior: Prior | None = None, stack: str | None = None, shared: tuple[str, ...] | None = None,
             fit_all: bool = False) -> FitResult:
    """Fit ``keys`` per (stack, family) to ``runs``: the bundled way (centres and spreads from the
    runs, leave-one-stack-out too) or, with ``prior``, a user's (held to the catalog's prior;
    ``stack`` names the stack the runs are, else each run's own). A user's fit keeps only the keys
    the runs identify (:mod:`teton.validation.identify`) and holds the others at their prior (the
    stack's catalog values where it has them), unless ``fit_all``. ``pairs``: run names whose
    step-time ratio is checked leave-pair-out. ``progress(done, total)``."""
    runs = tuple(runs)
    if not runs:
        raise SpecError("runs", 0, "at least one measured run")
    keys = check_keys(tuple(keys))
    cells = tuple((stack or r.stack, r.family) for r in runs)
    n_groups = len({r.config for r in runs})
    stacks = list(dict.fromkeys(c[0] for c in cells))
    steps = len(runs) + n_groups + (len(stacks) if prior is None else 0) + len(pairs)
    bar = _Progress(progress, steps)
    burst = predict_s(runs, [{} for _ in runs])
    check_burst_bound(runs, burst, prior.hyper.sigma if prior is not None else None)  # a user's runs only
    rest = catalog_rest(runs, cells, keys) if prior is not None else {}  # a user's: the others at the catalog's
    sur = build_surrogates(runs, keys, progress=bar.grids, base=[rest.get(c, {}) for c in cells])
    logm = np.log([r.step_time_s for r in runs])
    notes: list[str] = []
    user = _UserFit(runs, cells, logm, sur, prior, fit_all) if prior is not None else None
    if user is None:
        sol, hyper = estimate_hyper(list(cells), logm, sur, shared=tuple(k for k in (SHARED if shared is None else shared)
                                                                        if k in keys))
        fixed, fit_sur, held_values = None, sur, {}
    else:
        hyper, fixed, sol, fit_sur, held_values = prior.hyper, dict(prior.centres), *user.solve(notes)
    held = _HeldOut(runs, cells, logm, fit_sur, hyper, fixed, sol,
                    {c: {**v, **held_values.get(c, {})} for c, v in rest.items()} or held_values)
    in_sample = predict_s(runs, [held.values(sol, c) for c in cells])
    loo = held.leave_out(lambda r: r.config, notes, bar.step)
    loso = held.leave_stack_out(bar.step) if prior is None else None
    pair_loo = held.pairs(pairs, bar.step)
    result = FitResult(runs, keys, cells, sol, hyper, tuple(map(float, burst)), tuple(map(float, in_sample)),
                       tuple(map(float, loo)), None if loso is None else tuple(map(float, loso)), pair_loo,
                       (), surrogate_error(sur), sur, prior is not None, held_values,
                       user.identifiability if user else (), user.covariance(sol, held_values) if user else {}, rest)
    notes.extend(user_run_notes(result) if user is not None else loose_parameter_notes(result, cells))
    if result.surrogate_miss > 0.01:
        notes.append(f"the fit's surrogate misses a run's simulated step by up to {result.surrogate_miss * 100:.1f} % "
                     "on its grid; the reported predictions are exact simulations")
    return replace(result, notes=tuple(dict.fromkeys(notes)))


class _UserFit:
    """A user's fit against the catalog's prior: every key fitted first, what the runs identify
    per cell (:func:`teton.validation.identify.analyse`), then the identified keys refitted with
    the others held at the stack's catalog value or the prior's centre."""

    def __init__(self, runs, cells, logm, sur: Surrogates, prior: Prior, fit_all: bool):
        self.runs, self.cells, self.logm, self.sur, self.prior, self.fit_all = runs, cells, logm, sur, prior, fit_all
        self.identifiability: tuple = ()

    def _jac(self, cell, z: dict[str, float]) -> np.ndarray:
        idx = [i for i, c in enumerate(self.cells) if c == cell]
        point = np.tile([z[k] for k in self.sur.keys], (len(idx), 1))
        return self.sur.subset(idx).gradient(point)

    def solve(self, notes: list[str]):
        """(solution, surrogates it was fitted on, held values per cell)."""
        keys, hyper, fixed = self.sur.keys, self.prior.hyper, dict(self.prior.centres)
        tau = dict(hyper.tau)
        full = fit(list(self.cells), self.logm, self.sur, hyper, fixed)
        idents = []
        for cell in dict.fromkeys(self.cells):
            z = {k: full.cell_z[(cell, k)] for k in keys}
            runs = [r for r, c in zip(self.runs, self.cells, strict=True) if c == cell]
            idents.append(analyse(cell, runs, self._jac(cell, z), keys, tau, hyper.sigma, full.cov[cell]))
        self.identifiability = tuple(idents)
        kept = keys if self.fit_all else tuple(k for k in keys if all(k in i.fitted for i in idents))
        for i in idents:
            for v in i.verdicts:
                if not v.identified:
                    what = ("fitted anyway (fit_all): it moves only as far as the prior lets it" if self.fit_all
                            else "held at " + _held_source(i.cell, v.key))
                    notes.append(f"{v.key} is not identified by the runs of {i.cell[0]}/{i.cell[1]} (see "
                                 f"identifiability); {what}")
        if kept == keys:
            return full, self.sur, {}
        held = {c: {k: from_z(k, _held_z(c, k, fixed)) for k in keys if k not in kept} for c in dict.fromkeys(self.cells)}
        held_z = np.array([[math.nan if k in kept else to_z(k, held[c][k]) for k in keys] for c in self.cells])
        sub = HeldSurrogates(self.sur, kept, held_z)
        if not kept:
            empty = Solution((), list(dict.fromkeys(self.cells)), {}, {}, {c: np.zeros((0, 0)) for c in self.cells})
            return empty, sub, held
        return fit(list(self.cells), self.logm, sub, hyper, fixed), sub, held

    def covariance(self, sol: Solution, held: dict) -> dict:
        """Per cell, the posterior covariance of every key at the final values
        (:func:`teton.validation.identify.joint_covariance`)."""
        out = {}
        for cell in dict.fromkeys(self.cells):
            theta = {**held.get(cell, {}), **sol.values(cell)}
            z = {k: to_z(k, theta[k]) for k in self.sur.keys}
            out[cell] = joint_covariance(self._jac(cell, z), self.sur.keys, dict(self.prior.hyper.tau),
                                         self.prior.hyper.sigma)
        return out


def _stack_value(cell, key: str) -> float | None:
    from teton.hardware.in_situ import fitted_catalog

    return fitted_catalog().get("stacks", {}).get(cell[0], {}).get(cell[1], {}).get(key)


def _held_z(cell, key: str, fixed: dict) -> float:
    """z of a held key: the stack's catalog value on the family where it has one, else the prior's centre."""
    own = _stack_value(cell, key)
    return to_z(key, own) if own is not None else fixed[(group_of(cell[1], key), key)]


def _held_source(cell, key: str) -> str:
    own = _stack_value(cell, key)
    return (f"the catalog's value for {cell[0]} on {cell[1]} ({own:.4g})" if own is not None
            else "the across-stack prior's centre")


class _Progress:
    """``progress(done, total)`` over the fit's stages: the surrogate grids (one per run), then one
    step per held-out refit."""

    def __init__(self, callback, total: int):
        self.callback, self.total, self.done = callback, total, 0

    def grids(self, done: int, _total: int) -> None:
        self.done = done - 1
        self.step()

    def step(self) -> None:
        self.done += 1
        if self.callback is not None:
            self.callback(min(self.done, self.total), self.total)


class _HeldOut:
    """The held-out refits of one fit (warm-started from the full fit, same spreads); ``held``: per
    cell, the keys a user's fit holds at their prior."""

    def __init__(self, runs, cells, logm, sur, hyper: Hyper, fixed, full: Solution, held: dict | None = None):
        self.runs, self.cells, self.logm, self.sur, self.hyper, self.fixed, self.full = (
            runs, cells, logm, sur, hyper, fixed, full)
        self.held = held or {}

    def values(self, sol: Solution, cell) -> dict[str, float]:
        return {**self.held.get(cell, {}), **sol.values(cell)}

    def refit(self, keep: list[int]) -> Solution:
        if not self.sur.keys:
            return self.full
        return fit([self.cells[i] for i in keep], self.logm[keep], self.sur.subset(keep), self.hyper, self.fixed,
                   x0=self.full)

    def leave_out(self, unit_of, notes: list[str], step) -> np.ndarray:
        """Each run predicted by a fit without its unit (configuration); a run alone in its cell
        is predicted from the centre."""
        out = np.full(len(self.runs), math.nan)
        units = [unit_of(r) for r in self.runs]
        if len(set(units)) == 1:
            notes.append("one configuration only: its leave-one-out prediction is the prior's centre")
        for u in dict.fromkeys(units):
            idx = [i for i, x in enumerate(units) if x == u]
            keep = [i for i in range(len(self.runs)) if units[i] != u]
            sol = self.refit(keep) if keep else None
            vals = [self._values(sol, self.cells[i]) for i in idx]
            out[idx] = predict_s([self.runs[i] for i in idx], vals)
            step()
        return out

    def leave_stack_out(self, step) -> np.ndarray:
        """Each run predicted from the centre of a fit without its whole stack."""
        out = np.full(len(self.runs), math.nan)
        for s in dict.fromkeys(c[0] for c in self.cells):
            idx = [i for i, c in enumerate(self.cells) if c[0] == s]
            keep = [i for i, c in enumerate(self.cells) if c[0] != s]
            sol = self.refit(keep) if keep else None
            out[idx] = predict_s([self.runs[i] for i in idx], [self._centre(sol, self.cells[i]) for i in idx])
            step()
        return out

    def pairs(self, pairs, step) -> dict[tuple[str, str], tuple[float, float]]:
        names = [r.name for r in self.runs]
        out = {}
        for a, b in pairs:
            ia, ib = names.index(a), names.index(b)
            drop = {self.runs[ia].config, self.runs[ib].config}
            keep = [i for i, r in enumerate(self.runs) if r.config not in drop]
            sol = self.refit(keep) if keep else None
            pa, pb = predict_s([self.runs[ia], self.runs[ib]], [self._values(sol, self.cells[ia]),
                                                                 self._values(sol, self.cells[ib])])
            out[(a, b)] = (float(pa), float(pb))
            step()
        return out

    def _values(self, sol: Solution | None, cell) -> dict[str, float]:
        if sol is not None and any((cell, k) in sol.cell_z for k in self.sur.keys):
            return self.values(sol, cell)
        return self._centre(sol, cell)

    def _centre(self, sol: Solution | None, cell) -> dict[str, float]:
        held = self.held.get(cell, {})
        if self.fixed is not None:
            return {**held, **{k: from_z(k, self.fixed[(group_of(cell[1], k), k)]) for k in self.sur.keys}}
        return {**held, **(sol or self.full).centre(cell[1])}
