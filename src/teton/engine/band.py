"""A calibrated cluster's band widened by the uncertainty of its fitted parameters, for this job.

``teton fit RUNS --cluster-out`` writes, besides the band of its held-out errors (``band_low`` /
``band_high``: how far runs scatter about the fit), the posterior covariance C of the in-situ values
(``sd_<key>``, ``corr_<a>__<b>``, in z units: the log of a fraction of burst, seconds for a
duration; ``teton.validation.identify``). A job's log step time moves by ``g_k`` per unit of z_k,
so the parameters' uncertainty adds a normal term of sd ``s = sqrt(g^T C g)`` (the delta method).
``g`` is measured on the job itself: one more simulation per parameter, its value moved by one
posterior sd (at least ``STEP_Z``) up, or down where that would leave its bounds: a secant over
the scale of the uncertainty, not a tangent, because overlap makes a step's time kinked in its
parameters (a collective hidden under compute at 1.0 is exposed at 0.7). A job like the calibration runs moves the parameters
in the combination the runs pinned down and gets almost nothing; a job of another layout family
also feels the combination they did not (a collective value held at its prior, say).

The two terms add in quadrature in log space about the band's centre: with ``a, b = log(1 + lo),
log(1 + hi)``, the half-width ``(b - a) / 2`` becomes ``sqrt(((b - a) / 2)^2 + (Z_90 s)^2)``.
"""

from __future__ import annotations

import math

from teton.engine.compute import in_situ_acts_on
from teton.hardware.efficiency import BAND_KEYS, cluster_efficiency, is_uncertainty_key, parameter_uncertainty
from teton.hardware.in_situ import PARAMETERS

STEP_Z = 0.01  # the smallest secant step (z units: 1 % of a fraction; seconds for a duration)
Z_90 = 1.2816  # the standard normal's 90th percentile (a p10-p90 band)


def _moved(key: str, value: float, sd: float) -> tuple[float, float]:
    """(moved value, its step in z): ``sd`` (at least ``STEP_Z``) up in z, or down where up leaves
    the bounds (clipped to them)."""
    lo, hi = PARAMETERS[key].bounds
    h = max(sd, STEP_Z)
    if PARAMETERS[key].burst > 0:  # a fraction of burst: z = log(theta)
        up = value * math.exp(h)
        moved = up if up <= hi else max(lo, value * math.exp(-h))
        return moved, math.log(moved / value)
    moved = value + h if value + h <= hi else max(lo, value - h)
    return moved, moved - value


def _with_value(spec, key: str, value: float):
    """``spec`` with one in-situ value replaced and the fit's band and uncertainty keys dropped."""
    cluster = spec.cluster
    eff = {k: v for k, v in cluster.efficiency.items() if k not in BAND_KEYS and not is_uncertainty_key(k)}
    update = {"gpu_speed_cv": value} if key == "gpu_speed_cv" else {"efficiency": {**eff, key: value}}
    if key == "gpu_speed_cv":
        update["efficiency"] = eff
    return spec.model_copy(update={"cluster": cluster.model_copy(update=update)})


def parameter_sd(spec, step_s: float, simulate) -> float | None:
    """The sd of the job's log step time from its cluster's parameter uncertainty (module
    docstring); None when the cluster carries none. ``simulate(spec) -> step seconds``."""
    found = parameter_uncertainty(spec.cluster.efficiency)
    if found is None:
        return None
    keys, cov = found
    cluster = spec.cluster
    eff = cluster_efficiency(cluster.gpu_spec, cluster.efficiency, spec.job.software.name)
    grad = []
    for key in keys:
        value = float(cluster.gpu_speed_cv if key == "gpu_speed_cv" else getattr(eff, key))
        moved, dz = _moved(key, value, math.sqrt(max(cov[len(grad)][len(grad)], 0.0)))
        acts = dz and in_situ_acts_on(key, spec.job)  # a parameter that cannot act: no simulation
        grad.append((math.log(simulate(_with_value(spec, key, moved))) - math.log(step_s)) / dz if acts else 0.0)
    var = sum(grad[i] * cov[i][j] * grad[j] for i in range(len(keys)) for j in range(len(keys)))
    return math.sqrt(max(var, 0.0))


def widened(step_s: float, low_s: float, high_s: float, sd: float) -> tuple[float, float]:
    """(low, high) step seconds of a band ``low_s .. high_s`` with a log-normal term of sd ``sd`` added."""
    a, b = math.log(step_s / high_s), math.log(step_s / low_s)  # log(1 + e) at the band's two ends
    mid, half = 0.5 * (a + b), math.hypot(0.5 * (b - a), Z_90 * sd)
    return step_s / math.exp(mid + half), step_s / math.exp(mid - half)
