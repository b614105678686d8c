"""Notes for ``teton fit``: the parameters its runs leave loose, and, for a user's runs, what
they say that a fit alone would hide.

A fit to a user's runs answers whatever the runs ask; these checks name the runs whose values
would make its answer misleading:

* a run teton's memory model says does not fit on its GPUs (its layout is likely not the one
  that ran: a missing recompute or offload setting, a different micro-batch);
* runs of one configuration (the same spec) whose measured step times disagree by more than
  :data:`REPEAT_SPREAD` (a typo, or two different configurations under one spec);
* a fitted parameter on its physical bound (``PARAMETERS[key].bounds``): the runs ask for
  kernels faster (or slower) than the hardware's burst figures allow, as a mistyped time does.

And one check is an error (:func:`check_burst_bound`): a run measured faster than its burst-only
prediction (every in-situ value at its peak microbenchmark figure, the fastest step teton can
predict) by more than :data:`BURST_SCATTER` times the catalog's per-run scatter: no in-situ value
can explain it, and fitting it would drag every value onto its bound and the band past 100 %.
"""

from __future__ import annotations

from teton.engine.step import simulate_step
from teton.validation.identify import IDENTIFIED

BURST_SCATTER = 2.0  # sigmas (the catalog's per-run scatter, log units) a run may be faster than burst
REPEAT_SPREAD = 0.2  # repeats of one configuration farther apart than this (max / min - 1) are named
BOUND_TOLERANCE = 1e-3  # a value this close (relative) to a bound counts as on it


def check_burst_bound(runs, burst_s, sigma: float | None) -> None:
    """Refuse (one line naming the run, its time and its burst bound) a run measured faster than
    ``exp(-BURST_SCATTER x sigma)`` times its burst-only prediction ``burst_s`` (module docstring);
    no check without ``sigma`` (the bundled fit)."""
    import math

    from teton.errors import SpecError

    if sigma is None:
        return
    floor = math.exp(-BURST_SCATTER * sigma)
    for r, burst in zip(runs, burst_s, strict=True):
        if r.step_time_s < floor * burst:
            implied = "" if r.metric == "step_time_s" else f" (a step of {r.step_time_s:.4g} s)"
            raise SpecError(f"{r.name}.{r.metric}", r.published, f"measured{implied} {(1 - r.step_time_s / burst) * 100:.0f} % "
                            f"faster than teton's burst-only prediction for it, {burst:.4g} s (every in-situ value at "
                            f"its peak microbenchmark figure; the fastest step teton can predict, the catalog's per-run "
                            f"scatter allowing {(1 - floor) * 100:.0f} % below it): no in-situ value can explain it; "
                            "check the measured time and that the spec is the job that ran")


def user_run_notes(result) -> list[str]:
    """Notes on ``result``'s runs and fitted values (module docstring), each naming its run or
    parameter."""
    notes = []
    for r in result.runs:
        step = simulate_step(r.spec)
        if not step.fits_in_memory:
            notes.append(f"run {r.name}: teton's memory model says it does not fit ({step.memory_per_gpu_bytes / 2**30:.1f} "
                         f"GiB of {step.usable_hbm_bytes / 2**30:.1f} GiB usable); check its layout, recompute and "
                         "offload settings: its time is fitted all the same")
    by_spec: dict[str, list] = {}
    for r in result.runs:
        by_spec.setdefault(r.spec.model_dump_json(), []).append(r)
    for same in by_spec.values():
        times = [r.step_time_s for r in same]
        if len(same) > 1 and max(times) > (1 + REPEAT_SPREAD) * min(times):
            notes.append(f"runs {', '.join(r.name for r in same)} are one configuration measured at "
                         f"{min(times):.4g} to {max(times):.4g} s: check them (the fit splits the difference)")
    for cell, fixed in result.fixed.items():
        if fixed:
            notes.append(f"not fitted for {cell[0]}/{cell[1]}, held at the catalog's values: "
                         + ", ".join(f"{k} = {v:.4g}" for k, v in fixed.items()))
    if result.catalog_banded:
        notes.append("one configuration: no run to hold out, so the band is the catalog's for a seen stack on the "
                     "runs' GPU family, about the calibrated point")
    for p in result.parameter_rows():
        low, high = p["bounds"]
        for side, bound in (("lower", low), ("upper", high)):
            if p.get("identified", True) and abs(p["value"] - bound) <= BOUND_TOLERANCE * max(abs(bound), 1e-9):
                notes.append(f"{p['name']} fitted to its {side} bound {bound:g}: the runs ask for more than "
                             "the hardware's burst figures allow (a mistyped step time?)")
    return notes


def loose_parameter_notes(result, cells) -> list[str]:
    """The bundled fit's notes: each parameter the runs do not pin down, with the stack / GPU cells
    where it stays near the across-stack prior."""
    loose: dict[str, list[str]] = {}
    for p in result.parameter_rows():
        if not p["identified"]:
            loose.setdefault(p["key"], []).append(f"{p['stack']}/{p['family']}")
    return [f"{key}: the runs do not pin it down for {len(where)} of {len(set(cells))} stack/GPU cells "
            f"({', '.join(where)}): there it stays near the across-stack prior (posterior sd over "
            f"{IDENTIFIED:g} x the prior's spread)" for key, where in loose.items()]
