"""The in-situ catalog (``teton/hardware/in_situ_fitted.json``) as a fit writes and reads it.

``teton fit --write-catalog`` fits the bundled training sets and writes, per (stack, GPU family),
the fitted values; per family the prior's centre (what an unseen stack gets); the spreads; the
seen / unseen bands (p10-p90 of leave-one-out and leave-one-stack-out errors), the MoE band (p10-p90
of the MoE rows' out-of-sample errors, each model once: ``teton.validation.moe_band``) and their
nested coverage. A test re-fits and compares (:func:`compare_with_catalog`), so no value is typed in.
A user's ``teton fit RUNS`` is held to the catalog's prior (:func:`catalog_prior`).
"""

from __future__ import annotations

from teton.hardware.in_situ import PARAMETERS, fitted_catalog
from teton.validation.hierarchy import Hyper, group_of
from teton.validation.surrogate import to_z

TRAINING_SETS = "bundled (teton.validation.training + training_set2)"
CATALOG_TOLERANCE = 1e-3  # a fitted value this close (relative) to the catalog's is "the same"


def catalog_entry(result, training_set: str = TRAINING_SETS) -> dict:
    """The ``in_situ_fitted.json`` content of a bundled fit (``result``: a FitResult with LOSO)."""
    from teton.validation.moe_band import moe_band, moe_coverage, moe_errors

    moe_err, models, _ = moe_errors(result)
    stacks: dict[str, dict] = {}
    for cell in dict.fromkeys(result.cells):
        stacks.setdefault(cell[0], {})[cell[1]] = {k: round(v, 6) for k, v in result.values(cell).items()}
    families = sorted({c[1] for c in result.cells})
    prior = {f: {k: round(v, 6) for k, v in result.solution.centre(f).items()} for f in families}
    borrow = {f: lender for f, lender in fitted_catalog().get("borrow", {}).items() if f not in families}
    return {
        "format": 2, "training_set": training_set, "parameters": list(result.keys),
        "stacks": dict(sorted(stacks.items())), "prior": prior,
        "spread": {"sigma": round(result.hyper.sigma, 6), "tau": {k: round(v, 6) for k, v in result.hyper.tau}},
        "band": {"seen": [round(x, 6) for x in result.band("loo")], "unseen": [round(x, 6) for x in result.band("loso")],
                 "moe": [round(x, 6) for x in moe_band(moe_err, models)],
                 "seen_by_family": {f: [round(x, 6) for x in b] for f, b in sorted(result.family_bands().items())},
                 "unseen_by_family": {f: [round(x, 6) for x in b]
                                      for f, b in sorted(result.unseen_family_bands().items())}},
        "coverage": {"seen": round(result.coverage("loo"), 4), "unseen": round(result.coverage("loso"), 4),
                     "moe": round(moe_coverage(moe_err, models), 4),
                     "seen_by_family": _family_coverage(result),
                     "unseen_by_family": _family_coverage(result, unseen=True)},
        "borrow": borrow, "written_by": "teton fit --write-catalog",
    }


def _family_coverage(result, unseen: bool = False) -> dict[str, float]:
    """Nested coverage of the per-family seen (or ``unseen``) bands: every row ("all") and each family's."""
    overall, per = result.unseen_family_coverage() if unseen else result.family_coverage()
    return {"all": round(overall, 4), **{f: round(c, 4) for f, c in sorted(per.items())}}


def write_catalog_file(result, training_set: str = TRAINING_SETS) -> str:
    """Write :func:`catalog_entry` over the package's catalog file; returns the path written."""
    import json
    from importlib import resources
    from pathlib import Path

    from teton.atomic import write_text
    from teton.hardware.in_situ import FITTED_FILE

    target = Path(str(resources.files("teton.hardware").joinpath(FITTED_FILE)))
    write_text(target, json.dumps(catalog_entry(result, training_set), indent=2) + "\n")
    return str(target)


def compare_with_catalog(result) -> list[dict]:
    """Each fitted value (per cell, and each prior centre) beside the catalog's, and whether they
    agree within ``CATALOG_TOLERANCE``."""
    cat = fitted_catalog()
    out = []
    for cell in dict.fromkeys(result.cells):
        held = cat.get("stacks", {}).get(cell[0], {}).get(cell[1], {})
        for k, v in result.values(cell).items():
            out.append(_row(f"{k}[{cell[0]}/{cell[1]}]", v, held.get(k)))
    for f in sorted({c[1] for c in result.cells}):
        held = cat.get("prior", {}).get(f, {})
        for k, v in result.solution.centre(f).items():
            out.append(_row(f"{k}[prior/{f}]", v, held.get(k)))
    return out


def _row(name: str, fitted: float, catalog: float | None) -> dict:
    same = catalog is not None and abs(catalog - fitted) <= CATALOG_TOLERANCE * max(1.0, abs(fitted))
    return {"name": name, "fitted": fitted, "catalog": catalog, "same": same}


def catalog_prior(keys: tuple[str, ...], families):
    """The catalog's across-stack prior for a user's fit of ``keys`` on ``families``
    (``teton.validation.fit.Prior``). A key the catalog has no spread for (one the bundled fit does
    not keep), or one every stack shares (``teton.validation.fit.SHARED``: its catalog spread is
    zero by construction, not a measurement of the user's cluster), gets a weak prior: centred on
    its catalog value (else its burst value) with the widest spread the fit allows. No spread is
    wider than a uniform over the parameter's bounds (``teton.validation.identify.prior_sd``)."""
    from teton.hardware.in_situ import borrowed_from
    from teton.validation.fit import SHARED, Prior, check_keys
    from teton.validation.hierarchy import SIGMA0, TAU_RANGE
    from teton.validation.identify import prior_sd

    keys = check_keys(tuple(keys))
    cat = fitted_catalog()
    spread = cat.get("spread", {})
    tau = spread.get("tau", {})
    centres = {}
    for f in families:
        values = cat.get("prior", {}).get(f) or cat.get("prior", {}).get(borrowed_from(f) or "", {})
        for k in keys:
            centres[(group_of(f, k), k)] = to_z(k, values.get(k, PARAMETERS[k].burst) if k in tau else PARAMETERS[k].burst)
    taus = tuple((k, prior_sd(k, float(tau[k]) if k in tau and k not in SHARED else TAU_RANGE[1])) for k in keys)
    return Prior(centres, Hyper(float(spread.get("sigma", SIGMA0)), taus))
