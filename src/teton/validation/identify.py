"""What a user's runs can and cannot tell about the in-situ parameters: identifiability from the fit.

A fit of K parameters to n runs of one cell (stack, GPU family) is the posterior mode under the
catalog's prior. Around it the model is linear: run i's log step time moves by ``J_ik`` per unit of
parameter k (``z_k``: log of a fraction of burst, or seconds; :mod:`teton.validation.surrogate`),
its measurement scatters by ``sigma`` and the prior gives each parameter a spread ``s0_k`` (the
catalog's across-stack spread, never wider than a uniform over the parameter's bounds,
``(hi - lo) / sqrt(12)``). In prior units the runs' information is ``F = A^T A`` with
``A = J diag(s0) / sigma``, and along an eigenvector of F with eigenvalue lambda the posterior
variance is ``1 / (1 + lambda)`` of the prior's (the Laplace approximation; Bates & Watts 1988,
*Nonlinear Regression Analysis and Its Applications*, ch. 2, and Raue et al. 2009, "Structural
and practical identifiability analysis", Bioinformatics 25:1923, for the practical criterion):

* a set of parameters is **identified** when every direction of it is pinned down: its smallest
  eigenvalue exceeds ``1 / IDENTIFIED^2 - 1`` (posterior sd under ``IDENTIFIED`` x the prior's in
  every direction, so its 95 % intervals cannot reach across its bounds);
* the parameters are taken in the order given (tensor-core value first) and each is kept while the
  kept set stays identified (:func:`analyse`); the others are *held* at their prior (the stack's
  catalog values where it has them) and say why: the runs barely depend on it (its own information
  is below the threshold), or its effect on these runs is proportional to a kept one's (the
  correlation of the two columns of J across runs, near +-1 when every run shares one layout
  family: they differ only in data-parallel size, so compute and communication keep one ratio);
* the **condition number** of A is the ratio of its largest to smallest singular value: large
  when the runs fix a combination of the parameters but not each one (over the parameters that act
  on the runs at all: an MXFP8 factor does nothing to bf16 runs, which is no confounding).

The posterior covariance of all K parameters (held ones keep their prior spread, correlated with
the fitted ones through the runs) is what a calibrated cluster carries into its band
(:func:`joint_covariance`; ``teton.engine.band``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from teton.hardware.in_situ import PARAMETERS
from teton.validation.surrogate import z_bounds

IDENTIFIED = 0.5  # pinned down: posterior sd under this x the prior's, in every direction
MIN_INFORMATION = 1.0 / IDENTIFIED ** 2 - 1.0
CONFOUNDED_R = 0.95  # |correlation| of two parameters' effects across runs above which the runs cannot separate them


def prior_sd(key: str, tau: float) -> float:
    """The prior's spread of ``key`` (z units): ``tau``, at most a uniform over its bounds."""
    lo, hi = z_bounds(key)
    return min(float(tau), (hi - lo) / math.sqrt(12.0))


def layout_family(run) -> str:
    """What a run's layout family is: its model, precision, parallel degrees but data-parallel,
    sequence, micro-batch and recompute (runs of one family differ only in DP size and batch)."""
    job = run.spec.job
    lay = job.layout
    return (f"{run.spec.model.name} tp{lay.tp} cp{lay.cp} pp{lay.pp} ep{lay.ep} seq {lay.seq_len} "
            f"mb {lay.micro_batch} {job.precision} recompute {job.recompute}")


@dataclass(frozen=True)
class Verdict:
    """One parameter: identified by the runs or held at its prior, and why."""

    key: str
    identified: bool
    held: bool  # not fitted: kept at its prior / the stack's catalog value
    reason: str  # "" when identified
    sd_ratio: float  # posterior sd / prior sd when every parameter is fitted
    information: float  # the runs' information about it alone, in prior units (lambda)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Identifiability:
    """What one cell's runs pin down: per parameter a verdict, the correlation of the parameters'
    effects across the runs, and the condition number of the prior-scaled Jacobian."""

    cell: tuple[str, str]
    keys: tuple[str, ...]
    fitted: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    correlation: tuple[tuple[float, ...], ...]
    condition: float
    runs: int
    families: tuple[str, ...]

    def verdict(self, key: str) -> Verdict:
        return next(v for v in self.verdicts if v.key == key)

    def to_dict(self) -> dict:
        return {"stack": self.cell[0], "family": self.cell[1], "keys": list(self.keys), "fitted": list(self.fitted),
                "parameters": [v.to_dict() for v in self.verdicts],
                "effect_correlation": [list(r) for r in self.correlation],
                "condition_number": self.condition, "runs": self.runs, "layout_families": list(self.families)}


NO_EFFECT = 1e-6  # log step-time change over a prior sd below which a parameter does not act on a run


def _min_eig(a: np.ndarray, cols: list[int]) -> float:
    if not cols:
        return math.inf
    sub = a[:, cols]
    return float(np.linalg.eigvalsh(sub.T @ sub).min())


def _correlation(jac: np.ndarray) -> np.ndarray:
    """Cosine of each pair of columns of J: how alike two parameters move the runs (+-1: in one ratio)."""
    norms = np.linalg.norm(jac, axis=0)
    safe = np.where(norms > 0, norms, 1.0)
    r = (jac.T @ jac) / np.outer(safe, safe)
    return np.where(np.outer(norms, norms) > 0, r, 0.0)


def analyse(cell, runs, jac: np.ndarray, keys: tuple[str, ...], tau: dict[str, float], sigma: float,
            cov: np.ndarray) -> Identifiability:
    """The identifiability of ``keys`` from one cell's ``runs``: ``jac`` (runs x keys) the
    derivative of their log step times with respect to z at the fit, ``cov`` the posterior
    covariance with every key fitted (module docstring)."""
    s0 = np.array([prior_sd(k, tau[k]) for k in keys])
    a = jac * s0 / sigma
    fitted: list[int] = []
    for j in range(len(keys)):
        if _min_eig(a, [*fitted, j]) > MIN_INFORMATION:
            fitted.append(j)
    corr = _correlation(jac)
    families = tuple(dict.fromkeys(layout_family(r) for r in runs))
    # a parameter that does not act on any of these runs (an MXFP8 factor for bf16 runs) is held
    # with that reason and left out of the condition number, which measures confounding
    acts = [j for j in range(len(keys)) if float(np.max(np.abs(jac[:, j]), initial=0.0)) * s0[j] > NO_EFFECT]
    sub = a[:, acts]
    singular = np.linalg.svd(sub, compute_uv=False) if sub.size else np.zeros(0)
    full = np.zeros(len(acts) or 1)
    full[:len(singular)] = singular
    condition = float(full.max() / full.min()) if full.min() > 0 else math.inf
    verdicts = []
    for j, k in enumerate(keys):
        info = float(a[:, j] @ a[:, j])
        ratio = float(math.sqrt(max(cov[j, j], 0.0)) / s0[j])
        reason = "" if j in fitted else _reason(j, keys, jac, a, corr, fitted, runs, families, s0, sigma)
        verdicts.append(Verdict(k, j in fitted, j not in fitted, reason, ratio, info))
    return Identifiability(tuple(cell), tuple(keys), tuple(keys[j] for j in fitted), tuple(verdicts),
                           tuple(tuple(float(x) for x in row) for row in corr), condition, len(runs), families)


def _reason(j, keys, jac, a, corr, fitted, runs, families, s0, sigma) -> str:
    info = float(a[:, j] @ a[:, j])
    if info <= MIN_INFORMATION:
        moves = float(np.max(np.abs(jac[:, j]))) * s0[j]
        if moves <= NO_EFFECT:
            return "it does not act on these runs (none runs the kernels it scales): held at its prior"
        return (f"the runs barely depend on it: over its prior spread it moves their step time by "
                f"{math.expm1(moves) * 100:.1f} % at most, against a per-run scatter of {sigma * 100:.1f} % "
                f"({len(runs)} run{'s' if len(runs) != 1 else ''})")
    others = [i for i in (fitted or range(len(keys))) if i != j]
    if not others:
        return "the runs do not pin it down on its own"
    partner = max(others, key=lambda i: abs(corr[j, i]))
    r = float(corr[j, partner])
    if len(runs) == 1:
        why = "one run"
    elif len(families) == 1:
        why = f"all {len(runs)} runs share one layout family ({families[0]}; only data-parallel size and batch differ)"
    else:
        why = f"the runs' {len(families)} layout families move them alike"
    tie = (f"its effect on the runs is proportional to {keys[partner]}'s (correlation {r:+.3f})"
           if abs(r) >= CONFOUNDED_R else f"its effect overlaps {keys[partner]}'s (correlation {r:+.3f})")
    return f"{why}: {tie}, so the runs fix one combination of the two, not each"


def joint_covariance(jac: np.ndarray, keys: tuple[str, ...], tau: dict[str, float], sigma: float) -> np.ndarray:
    """Posterior covariance (z units) of every key under the runs and the prior (Gauss-Newton):
    ``(J^T J / sigma^2 + diag(1 / s0^2))^-1``; a key the runs do not inform keeps its prior spread."""
    s0 = np.array([prior_sd(k, tau[k]) for k in keys])
    return np.linalg.inv(jac.T @ jac / sigma ** 2 + np.diag(1.0 / s0 ** 2))


def interval95(key: str, z: float, sd: float) -> list[float]:
    """The 95 % interval of a value (z ± 1.96 sd back in the parameter's units), clipped to its bounds."""
    from teton.validation.surrogate import from_z

    lo, hi = PARAMETERS[key].bounds
    return [max(lo, from_z(key, z - 1.96 * sd)), min(hi, from_z(key, z + 1.96 * sd))]
