"""A fabric plane down: the slower steps until its repair.

Model
-----
On a multi-plane fabric (``cluster.fabric_planes`` = P >= 2) a switch or cable failure does not
stop the job (:mod:`teton.reliability.rates`): NCCL carries on over the other planes (NVIDIA DGX
B300 SuperPOD reference architecture, network fabrics: "a plane failure halves bandwidth instead
of aborting the job"; on a fabric of one plane per NIC, as DeepSeek-V3's eight-plane fat tree, a
flow for the lost plane crosses NVLink to a NIC of another plane first: Liu et al., "Insights into
DeepSeek-V3", arXiv 2505.09343, Sec. 5). It does slow the job down until the part is replaced:

* A **tier-0** failure (a leaf switch, or a cable between it and the NICs) takes one plane away
  from every GPU under that switch: their scale-out bandwidth drops to (P-1)/P of the NICs' rate.
  A synchronous job moves at the pace of its slowest ranks (every ring and tree of a collective
  passes through them), so the whole step runs as it would with every NIC at (P-1)/P:
  ``degraded_step = step(NIC rate x (P-1)/P)``, simulated by the same engine (an upper bound for a
  job whose collectives could route around the degraded ranks; a balanced spread of the lost
  plane's traffic over the others, the lower bound of what PXN forwarding gets).
* An **upper-tier** failure removes one of a plane's many spine or core uplinks (one of
  ``planes`` x ``switches`` paths): its cost is within the step model's noise and is not charged.

Tier-0 failures arrive as Table 5's network switch / cable rate per switch-equivalent times the
job's tier-0 switches (``ComponentCounts.switches_by_tier``), ``lambda`` per hour, and each keeps
its plane down for ``reliability.plane_repair_h`` hours (ASSUMPTION: nothing is published on
switch or optic replacement times; the default is one working shift). The failures outstanding at
a random instant are Poisson with mean ``lambda x repair`` (an M/G/infinity queue), so the share of
time with at least one plane down somewhere in the job is ``1 - exp(-lambda x repair)``. Two
failures on different planes under the same GPUs would isolate them (an interruption): second
order, not modelled. The run's steps stretch mean-field, as diurnal variation does
(:mod:`teton.reliability.goodput`)::

    stretch = 1 + share x (degraded_step / step - 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from teton.reliability.rates import ComponentCounts

SWITCH_CAUSE = "network_switch_cable"


@dataclass(frozen=True)
class PlaneLoss:
    """What plane failures cost a run on a ``planes``-plane fabric (module docstring)."""

    planes: int
    failures_per_day: float  # tier-0 switch / cable failures in the job's fabric
    degraded_share: float  # share of the run's time with a plane down somewhere in the job
    degraded_step_ratio: float | None  # step with one plane down / full step; None: not simulated

    @property
    def stretch(self) -> float:
        """The mean-field factor on every step (1 on one plane or without a simulated ratio)."""
        if self.degraded_step_ratio is None:
            return 1.0
        return 1.0 + self.degraded_share * (self.degraded_step_ratio - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {"fabric_planes": self.planes, "plane_failures_per_day": self.failures_per_day,
                "plane_degraded_share": self.degraded_share, "plane_degraded_step_ratio": self.degraded_step_ratio,
                "plane_step_stretch": self.stretch}


def degraded_plane_spec(spec: Any) -> Any:
    """``spec`` with the backend NIC at (P-1)/P of its rate: every GPU with one of its ``P`` fabric
    planes down (the pace of the slowest ranks, module docstring)."""
    cluster = spec.cluster
    p = cluster.fabric_planes
    nic = cluster.nic
    slower = nic.model_copy(update={"name": f"{nic.name} ({p - 1} of {p} planes)", "gbps": nic.gbps * (p - 1) / p})
    return spec.model_copy(update={"cluster": cluster.model_copy(update={"backend_nic": slower})})


def tier0_failures_per_h(counts: ComponentCounts, rates_per_component_h: dict[str, float]) -> float:
    """Tier-0 (leaf) switch and cable failures per hour in the job's fabric."""
    if not counts.switches_by_tier:
        return 0.0
    return rates_per_component_h[SWITCH_CAUSE] * counts.switches_by_tier[0][1]


def plane_loss(spec: Any, counts: ComponentCounts, rates_per_component_h: dict[str, float], repair_h: float,
               step_time_s: float, simulate: Callable[[Any], Any] | None,
               step_simulated: bool) -> PlaneLoss:
    """The :class:`PlaneLoss` of ``spec``'s job. ``simulate(spec)`` (the engine's step simulator)
    gives the degraded step; its ratio to the full step applies to ``step_time_s``: the ratio of
    two simulations when the step time was given, else the degraded step over ``step_time_s``
    (``step_simulated``). Without ``simulate`` the ratio is None and nothing is charged."""
    planes = spec.cluster.fabric_planes
    if planes < 2:
        return PlaneLoss(planes, 0.0, 0.0, None)
    per_h = tier0_failures_per_h(counts, rates_per_component_h)
    share = -math.expm1(-per_h * repair_h)
    ratio = None
    if simulate is not None and per_h > 0.0:
        full_s = step_time_s if step_simulated else float(simulate(spec).step_time_s)
        ratio = float(simulate(degraded_plane_spec(spec)).step_time_s) / full_s
    return PlaneLoss(planes, per_h * 24.0, share, ratio)
