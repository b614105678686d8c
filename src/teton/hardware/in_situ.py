"""In-situ parameters: what a real training job's kernels get, relative to the burst figures.

The rest of the hardware catalog holds *microbenchmark* constants: a GEMM sweep's maximum, an
attention kernel's benchmark, nccl-tests bus bandwidth. A real job does not run there: its GPUs
sit at their power cap for hours, its collectives start when the last rank arrives and share the
GPU with compute, and eager frameworks leave the GPU idle between kernels. Each parameter below
names one such mechanism, with its physical meaning, a plausible range (the fit's bounds) and its
scope: one value per GPU family, or one for every family.

Their values are **not typed in**: they are the output of ``teton fit`` on the bundled training
set (``teton.validation.training``), written to ``in_situ_fitted.json`` next to this file by
``teton fit --write-catalog``; a test re-fits and compares. ``cluster.efficiency.profile: burst``
turns them all off (every kernel at its microbenchmark figure); a cluster's ``efficiency:``
mapping overrides any of them (``teton fit RUNS --out`` writes such a file).

All candidates are defined here; the fit keeps those in ``teton.validation.fit.KEPT`` (the
others stay at their burst value), chosen on the training set's evidence: ``teton fit
--candidates`` fits each candidate set and shows its leave-one-out errors and residual trends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from teton.memo import cached


@dataclass(frozen=True)
class InSituParameter:
    """One in-situ mechanism: its override key, scope, bounds and the value that means "burst"."""

    key: str
    scope: Literal["family", "global"]
    bounds: tuple[float, float]
    burst: float  # the value under which the mechanism is absent (the microbenchmark figure)
    unit: str
    meaning: str


PARAMETERS: dict[str, InSituParameter] = {p.key: p for p in (
    InSituParameter(
        "tensor_core_in_situ", "family", (0.5, 1.0), 1.0, "fraction of burst",
        "tensor-core throughput of GEMMs and attention kernels inside a training job, as a fraction "
        "of the burst microbenchmark (a short sweep on a cool GPU): sustained clocks at the power cap, "
        "real data, the cuBLAS heuristic's tile choice over the sweep's best"),
    InSituParameter(
        "collective_in_situ", "global", (0.3, 1.0), 1.0, "fraction of nccl-tests busbw",
        "bus bandwidth NCCL collectives reach inside a training job, as a fraction of nccl-tests: "
        "ranks arrive skewed, the kernels share SMs and HBM with compute, messages are cut into the "
        "job's buckets and layers"),
    InSituParameter(
        "attention_in_situ", "family", (0.3, 1.0), 1.0, "fraction of burst",
        "attention kernels' throughput inside a job relative to the tensor-core factor above (flash "
        "attention's benchmark, or the unfused batched GEMMs of Megatron's core attention)"),
    InSituParameter(
        "kernel_gap_s", "global", (0.0, 100e-6), 0.0, "seconds per kernel",
        "idle GPU time per kernel of an eager framework (launch, cross-stream event waits, the tail of "
        "one kernel before the next fills the SMs), which back-to-back microbenchmarks never see"),
    InSituParameter(
        "step_overhead_s", "global", (0.0, 2.0), 0.0, "seconds per step",
        "per-step framework work outside the modelled kernels: data loader, logging, gradient-norm and "
        "loss-scale checks, Python between steps"),
    InSituParameter(
        "gpu_speed_cv", "global", (0.0, 0.05), 0.0, "coefficient of variation",
        "spread of sustained speed between GPUs (chip, cooling, power); a synchronous job is paced by "
        "its slowest of N (``cluster.gpu_speed_cv``)"),
)}

FITTED_FILE = "in_situ_fitted.json"


@cached(1)
def fitted_catalog() -> dict:
    """The catalog's fitted values as ``teton fit --write-catalog`` wrote them: ``values``
    (family | "global" -> key -> value), ``band`` (leave-one-out error range per family and
    ``all``), ``borrow`` (family without training runs -> the family it takes values from),
    ``parameters`` and ``training_set``."""
    return json.loads(resources.files("teton.hardware").joinpath(FITTED_FILE).read_text())


def fitted_values(family: str) -> dict[str, float]:
    """The in-situ values for a GPU family: its own fitted ones and the global ones. A family with
    no training run borrows those of the family named in the catalog's ``borrow`` map (recorded in
    ``teton run``'s notes) and otherwise keeps the burst figures."""
    cat = fitted_catalog()
    values = cat["values"]
    own = values.get(family)
    if own is None:
        own = values.get(cat.get("borrow", {}).get(family, ""), {})
    return {**values.get("global", {}), **own}


def catalog_value(key: str, family: str | None) -> float | None:
    """The catalog's value of one parameter: of ``family`` for a per-family key, the global one
    for ``family=None``; None if the catalog has none."""
    if family is None:
        return fitted_catalog()["values"].get("global", {}).get(key)
    return fitted_values(family).get(key)


def borrowed_from(family: str) -> str | None:
    """The family whose fitted values ``family`` uses, when it has none of its own."""
    cat = fitted_catalog()
    if family in cat["values"]:
        return None
    return cat.get("borrow", {}).get(family)


def band() -> tuple[float, float] | None:
    """(low, high) relative leave-one-out errors of the catalog's fit over the whole training set
    (None if the catalog has none). The whole set's range, not a family's own: three Hopper rows
    from one stack would give a band narrower than a new stack on the same GPU deserves."""
    b = fitted_catalog().get("band", {})
    return tuple(b["all"]) if "all" in b else None
