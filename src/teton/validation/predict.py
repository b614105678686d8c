"""A measured run's prediction with given in-situ values: its spec on the burst profile with those
values on top (what every fit evaluates), simulated exactly."""

from __future__ import annotations

import numpy as np

from teton.hardware.efficiency import microbenchmark_overrides
from teton.spec import Spec
from teton.validation.runs import MeasuredRun


def run_spec(run: MeasuredRun, values: dict[str, float]) -> Spec:
    """The run's spec on the burst profile with ``values`` (in-situ key -> value) on top; its
    cluster's own microbenchmark overrides are kept."""
    cluster = run.spec.cluster
    eff = {**microbenchmark_overrides(cluster.efficiency), "profile": "burst",
           **{k: v for k, v in values.items() if k != "gpu_speed_cv"}}
    update = {"efficiency": eff, "gpu_speed_cv": values.get("gpu_speed_cv", cluster.gpu_speed_cv)}  # a cluster field
    return run.spec.model_copy(update={"cluster": cluster.model_copy(update=update)})


def predict_s(runs, values: list[dict[str, float]]) -> np.ndarray:
    """Exact predicted step time of each run with its own in-situ values (others at burst)."""
    from teton.engine.step import simulate_step

    return np.array([simulate_step(run_spec(r, v)).step_time_s for r, v in zip(runs, values, strict=True)])


def catalog_rest(runs, cells, keys: tuple[str, ...]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (stack, family) cell of ``runs``, the catalog's in-situ values of the parameters a user's
    fit of ``keys`` leaves out: what ``teton run`` would use for them on the cell's GPU and stack
    (``teton.hardware.in_situ.gpu_in_situ_values``: the stack's own, else the family's prior). The
    fit holds them there, and the calibrated cluster file carries them, so that a file of a few
    fitted values does not put the others at their burst value."""
    from teton.hardware.in_situ import gpu_in_situ_values

    out: dict[tuple[str, str], dict[str, float]] = {}
    for r, cell in zip(runs, cells, strict=True):
        if cell not in out:
            values = gpu_in_situ_values(r.spec.cluster.gpu_spec, cell[0])
            out[cell] = {k: float(v) for k, v in values.items() if k not in keys}
    return out
