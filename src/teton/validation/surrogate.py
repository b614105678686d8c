"""A smooth stand-in for each run's simulated step time as a function of its in-situ values.

A fit evaluates every run's prediction hundreds of times (the full fit, one refit per held-out
configuration and per held-out stack, the few-shot study); a simulation takes milliseconds, so the
fits run on a surrogate instead, and every prediction teton *reports* is an exact simulation at the
fitted values (``teton.validation.predict``).

Model. In-situ parameter k enters as ``z_k = log(theta_k)`` (a fraction of the burst figure) or
``theta_k`` itself (a duration, whose burst value is 0), scaled to ``u_k in [-1, 1]`` over its
physical bounds. For each run, ``log t(theta)`` is simulated on a grid over the parameters that
can act on it (``engine.compute.in_situ_acts_on``: not the MXFP8 factor on a bf16 run), ``GRID``
points along each (three along a kernel's own factor), and fitted by least squares with a
polynomial of total degree ``DEGREE`` in ``u``, in which a parameter that cannot act is 0; the
step is a sum of terms in ``1 / theta`` with a few ``max`` kinks (overlap), which such a polynomial
follows to a fraction of a percent. :func:`surrogate_error` reports the largest miss on the grid.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from teton.hardware.in_situ import PARAMETERS
from teton.memo import cached

GRID = {1: 9, 2: 7, 3: 5, 4: 4, 5: 4}  # grid points per parameter, by how many parameters act on the run
DEGREE = {1: 6, 2: 4, 3: 3, 4: 3, 5: 3}  # total degree, by the number of parameters fitted
# A kernel's own factor (a recipe's GEMMs, cuDNN's attention) scales a few ops' time, almost
# log-linearly: three points and a quadratic along it carry it, where GRID's density would multiply
# the simulations of every run it acts on
FACTOR_POINTS = 3


def transformed(key: str) -> bool:
    """True for a fraction of burst (fitted in log space), False for a duration (linear)."""
    return PARAMETERS[key].burst > 0


def to_z(key: str, theta: float) -> float:
    return math.log(theta) if transformed(key) else float(theta)


def from_z(key: str, z: float) -> float:
    return math.exp(z) if transformed(key) else float(z)


def z_bounds(key: str) -> tuple[float, float]:
    lo, hi = PARAMETERS[key].bounds
    return to_z(key, lo), to_z(key, hi)


def _unit(keys: tuple[str, ...], z: np.ndarray, acting: np.ndarray | None) -> np.ndarray:
    """z (..., K) scaled to [-1, 1] over each parameter's bounds; 0 where ``acting`` (..., K) is
    False: a parameter that cannot act on the run drops out of its polynomial."""
    lo = np.array([z_bounds(k)[0] for k in keys])
    hi = np.array([z_bounds(k)[1] for k in keys])
    u = 2.0 * (np.asarray(z) - lo) / (hi - lo) - 1.0
    return u if acting is None else np.where(acting, u, 0.0)


def _factor(key: str) -> bool:
    """Whether ``key`` is one kernel's own factor (``engine.compute.KERNEL_FACTORS``)."""
    from teton.engine.compute import KERNEL_FACTORS

    return key in KERNEL_FACTORS


@cached(64)
def _exponents(keys: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Monomials up to the total degree; a kernel factor's power at most ``FACTOR_POINTS - 1``."""
    top = DEGREE[len(keys)]
    caps = [min(top, FACTOR_POINTS - 1) if _factor(k) else top for k in keys]
    return [e for e in itertools.product(*(range(c + 1) for c in caps)) if sum(e) <= top]


def features(keys: tuple[str, ...], z: np.ndarray, acting: np.ndarray | None = None) -> np.ndarray:
    """(..., F) monomials of the scaled parameters up to the total degree."""
    u = _unit(keys, z, acting)
    return np.stack([np.prod(u ** np.array(e), axis=-1) for e in _exponents(tuple(keys))], axis=-1)


def feature_gradient(keys: tuple[str, ...], z: np.ndarray, acting: np.ndarray | None = None) -> np.ndarray:
    """(..., F, K) derivative of :func:`features` with respect to z (0 along a parameter that does
    not act)."""
    u = _unit(keys, z, acting)
    scale = np.array([2.0 / (z_bounds(k)[1] - z_bounds(k)[0]) for k in keys])
    scale = scale if acting is None else np.where(acting, scale, 0.0)
    out = []
    for e in _exponents(tuple(keys)):
        e = np.array(e)
        cols = []
        for j in range(len(keys)):
            if e[j] == 0:
                cols.append(np.zeros(u.shape[:-1]))
                continue
            d = e.copy()
            d[j] -= 1
            cols.append(e[j] * np.prod(u ** d, axis=-1) * scale[..., j])
        out.append(np.stack(cols, axis=-1))
    return np.stack(out, axis=-2)


def grid(keys: tuple[str, ...], acting: np.ndarray) -> np.ndarray:
    """(P, K) grid points in z of a run on which the parameters ``acting`` (K,) act: ``GRID`` points
    by their number along each (``FACTOR_POINTS`` along a kernel factor), a parameter that does not
    act held at its burst value."""
    g = GRID[max(int(np.sum(acting)), 1)]
    axes = [np.linspace(*z_bounds(k), FACTOR_POINTS if _factor(k) else g) if a
            else np.array([to_z(k, PARAMETERS[k].burst)]) for k, a in zip(keys, acting, strict=True)]
    return np.array(list(itertools.product(*axes)))


def fit_coefficients(keys: tuple[str, ...], points: np.ndarray, log_step: np.ndarray,
                     acting: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """(polynomial coefficients, largest absolute miss on the grid in log units) of one run."""
    phi = features(keys, points, acting)
    coef, *_ = np.linalg.lstsq(phi, log_step, rcond=None)
    return coef, float(np.max(np.abs(phi @ coef - log_step)))


def acting_keys(run, keys: tuple[str, ...]) -> np.ndarray:
    """(K,) which of ``keys`` can change ``run``'s step (``engine.compute.in_situ_acts_on``)."""
    from teton.engine.compute import in_situ_acts_on

    return np.array([in_situ_acts_on(k, run.spec.job) for k in keys])


def simulate_grid(run, keys: tuple[str, ...], points: np.ndarray, base: dict[str, float] | None = None) -> np.ndarray:
    """log step time of ``run`` at every grid point (exact simulations), the in-situ values of
    ``base`` (key -> value; others at burst) beneath the point's."""
    from teton.engine.step import simulate_step
    from teton.validation.predict import run_spec

    return np.array([math.log(simulate_step(run_spec(run, {**(base or {}), **{k: from_z(k, z) for k, z in zip(
        keys, pt, strict=True)}})).step_time_s) for pt in points])


class Surrogates:
    """Per-run polynomial surrogates of ``log t(z)`` for one parameter set; ``acting`` (n, K): which
    parameters act on each run (the others drop out of its polynomial)."""

    def __init__(self, keys: tuple[str, ...], coefficients: np.ndarray, misses: np.ndarray,
                 acting: np.ndarray | None = None):
        self.keys, self.coefficients, self.misses = keys, coefficients, misses
        self.acting = np.ones(coefficients.shape[:1] + (len(keys),), bool) if acting is None else acting

    def log_step(self, z: np.ndarray) -> np.ndarray:
        """(n,) log step times of every run at its own parameters ``z`` (n, K)."""
        return np.einsum("nf,nf->n", features(self.keys, z, self.acting), self.coefficients)

    def gradient(self, z: np.ndarray) -> np.ndarray:
        """(n, K) derivative of each run's log step time with respect to its own z."""
        return np.einsum("nfk,nf->nk", feature_gradient(self.keys, z, self.acting), self.coefficients)

    def subset(self, index) -> Surrogates:
        return Surrogates(self.keys, self.coefficients[index], self.misses[index], self.acting[index])


class HeldSurrogates:
    """Surrogates over a subset ``keys`` of ``base``'s, the other keys held at per-run values
    (``held_z``: runs x base keys, NaN where a key is fitted): what a fit of the identified
    parameters alone optimises on (``teton.validation.identify``)."""

    def __init__(self, base: Surrogates, keys: tuple[str, ...], held_z: np.ndarray):
        self.base, self.keys, self.held_z = base, tuple(keys), np.asarray(held_z, float)
        self.misses = base.misses
        self._free = [base.keys.index(k) for k in self.keys]

    def _full(self, z: np.ndarray) -> np.ndarray:
        out = self.held_z.copy()
        out[:, self._free] = np.asarray(z, float).reshape(len(out), len(self._free))
        return out

    def log_step(self, z: np.ndarray) -> np.ndarray:
        return self.base.log_step(self._full(z))

    def gradient(self, z: np.ndarray) -> np.ndarray:
        return self.base.gradient(self._full(z))[:, self._free]

    def subset(self, index) -> HeldSurrogates:
        return HeldSurrogates(self.base.subset(index), self.keys, self.held_z[index])


_GRID_TASK: dict = {}


def _grid_task(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(acting, grid points, log step times) of run ``i``."""
    run, keys, base = _GRID_TASK["runs"][i], _GRID_TASK["keys"], _GRID_TASK["base"]
    acting = acting_keys(run, keys)
    points = grid(keys, acting)
    return acting, points, simulate_grid(run, keys, points, base[i] if base else None)


def build_surrogates(runs, keys: tuple[str, ...], progress=None, base: list[dict] | None = None) -> Surrogates:
    """The runs' surrogates, each run's grid over the parameters that act on it (:func:`grid`),
    simulated on two processes where the platform forks (each run's grid is independent and
    deterministic: the results are a serial run's). ``base``: per run, in-situ values held beneath
    ``keys`` (a user's fit of some parameters holds the others at the catalog's values)."""
    from teton.validation.parallel import map_forked

    _GRID_TASK.update(runs=runs, keys=keys, base=base)
    try:
        grids = map_forked(_grid_task, range(len(runs)), progress)
    finally:
        _GRID_TASK.clear()
    fits = [fit_coefficients(keys, points, logs, acting) for acting, points, logs in grids]
    return Surrogates(keys, np.array([c for c, _ in fits]), np.array([m for _, m in fits]),
                      np.array([a for a, _, _ in grids]))


def surrogate_error(s: Surrogates) -> float:
    """The largest relative miss of any run's surrogate on its grid."""
    return float(np.expm1(np.max(s.misses))) if len(s.misses) else 0.0
