"""In-situ values per (software stack, GPU family), tied together by an across-stack prior.

Model. Runs are grouped into cells c = (stack, family). For each in-situ key k, cell c has its own
value ``z_ck = log theta_ck`` (``teton.validation.surrogate``), drawn around a centre ``m_gk`` of its
prior group g (the GPU family for a per-family key such as ``tensor_core_in_situ``, one global
group for a global key such as ``collective_in_situ``) with across-stack spread ``tau_k``; a run's
log step time misses its measurement by a scatter ``sigma``. The fit is the posterior mode,

    min  sum_i ((log t_i(z_c(i)) - log T_i) / sigma)^2  +  sum_ck ((z_ck - m_g(c)k) / tau_k)^2

over the cells' values (within each parameter's bounds) and the centres (flat prior), by
trust-region least squares with the exact Jacobian of the surrogates. A stack with many runs
follows its runs, one with few is pulled towards the centre, and a stack with none (``unknown``, a
custom stack) *is* the centre, with the spread ``tau`` as its uncertainty: the "prior across stacks".

``sigma`` and ``tau`` are estimated from the data by expectation-maximisation (the random-effects
updates ``tau_k^2 = mean_c((z_ck - m)^2 + var_ck)``, corrected for the centres' degrees of freedom,
and ``sigma^2 = RSS / (n - effective parameters)``), each clamped to a plausible range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from teton.hardware.in_situ import PARAMETERS
from teton.validation.surrogate import Surrogates, from_z, to_z, z_bounds

SIGMA_RANGE, TAU_RANGE = (0.003, 0.3), (0.01, 0.5)
SHARED_TAU = 1e-3  # the spread of a key every stack shares (``Hyper.initial(shared=...)``): no deviation
SIGMA0, TAU0 = 0.03, 0.1
EM_ITERATIONS, EM_TOLERANCE = 30, 1e-4


@dataclass(frozen=True)
class Hyper:
    """Per-run scatter ``sigma`` and per-key across-stack spread ``tau`` (log units)."""

    sigma: float
    tau: tuple[tuple[str, float], ...]

    def tau_of(self, key: str) -> float:
        return dict(self.tau)[key]

    shared: tuple[str, ...] = ()  # keys with one value for every stack of a prior group

    @classmethod
    def initial(cls, keys, shared: tuple[str, ...] = ()) -> Hyper:
        return cls(SIGMA0, tuple((k, SHARED_TAU if k in shared else TAU0) for k in keys), tuple(shared))


def group_of(family: str, key: str) -> str:
    """The prior group of a cell's value of ``key``: its family, or ``global``."""
    return family if PARAMETERS[key].scope == "family" else "global"


@dataclass
class Solution:
    """A fitted posterior mode: cell values and centres (z), per-cell posterior covariance."""

    keys: tuple[str, ...]
    cells: list[tuple[str, str]]
    cell_z: dict[tuple[tuple[str, str], str], float]
    centre_z: dict[tuple[str, str], float]
    cov: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    rss: float = 0.0
    edf: float = 0.0

    def values(self, cell: tuple[str, str]) -> dict[str, float]:
        """The in-situ values (theta) of ``cell``; a cell without runs takes its groups' centres."""
        centre = self.centre(cell[1])
        return {k: from_z(k, self.cell_z[(cell, k)]) if (cell, k) in self.cell_z else centre[k] for k in self.keys}

    def centre(self, family: str) -> dict[str, float]:
        """The prior's centre for ``family``; a family no cell informs takes the mean of the other
        families' centres (what is known of GPUs in general)."""
        out = {}
        for k in self.keys:
            z = self.centre_z.get((group_of(family, k), k))
            if z is None:
                others = [v for (g, key), v in self.centre_z.items() if key == k]
                z = float(np.mean(others)) if others else _mid(k)
            out[k] = from_z(k, z)
        return out

    def sd(self, cell: tuple[str, str]) -> dict[str, float]:
        """Posterior standard deviation of each of the cell's z values."""
        c = self.cov.get(cell)
        return {k: float(math.sqrt(max(c[j, j], 0.0))) if c is not None else math.nan for j, k in enumerate(self.keys)}


def _mid(key: str) -> float:
    lo, hi = z_bounds(key)
    return 0.5 * (lo + hi)


def fit(cells_of_runs: list[tuple[str, str]], log_measured: np.ndarray, sur: Surrogates, hyper: Hyper,
        fixed_centres: dict[tuple[str, str], float] | None = None, x0: Solution | None = None) -> Solution:
    """The posterior mode for these runs (their cells ``cells_of_runs``); ``fixed_centres``: hold the
    centres (a user's few-shot fit against the catalog's prior), else fit them too. A centre none
    of the runs informs is held at its key's burst value (:func:`_uninformed`)."""
    from scipy.optimize import least_squares

    keys = sur.keys
    cells = list(dict.fromkeys(cells_of_runs))
    cell_index = {c: i for i, c in enumerate(cells)}
    groups = sorted({(group_of(c[1], k), k) for c in cells for k in keys})
    fixed_centres = {**_uninformed(cells_of_runs, sur, groups), **(fixed_centres or {})}
    free = [g for g in groups if not fixed_centres or g not in fixed_centres]
    K, C = len(keys), len(cells)
    n_cell_vars = C * K
    run_cell = np.array([cell_index[c] for c in cells_of_runs])
    tau = np.array([hyper.tau_of(k) for k in keys])
    prior_group = [[groups.index((group_of(c[1], k), k)) for k in keys] for c in cells]

    def unpack(x):
        z = x[:n_cell_vars].reshape(C, K)
        m = {g: (fixed_centres[g] if fixed_centres and g in fixed_centres else x[n_cell_vars + free.index(g)])
             for g in groups}
        return z, m

    def residuals(x):
        z, m = unpack(x)
        data = (sur.log_step(z[run_cell]) - log_measured) / hyper.sigma
        prior = np.array([(z[c, j] - m[groups[prior_group[c][j]]]) / tau[j] for c in range(C) for j in range(K)])
        return np.concatenate([data, prior])

    def jacobian(x):
        z, _ = unpack(x)
        n = len(log_measured)
        jac = np.zeros((n + n_cell_vars, n_cell_vars + len(free)))
        grad = sur.gradient(z[run_cell]) / hyper.sigma
        for i in range(n):
            jac[i, run_cell[i] * K:(run_cell[i] + 1) * K] = grad[i]
        for c in range(C):
            for j in range(K):
                row = n + c * K + j
                jac[row, c * K + j] = 1.0 / tau[j]
                g = groups[prior_group[c][j]]
                if g in free:
                    jac[row, n_cell_vars + free.index(g)] = -1.0 / tau[j]
        return jac

    lo = np.array([z_bounds(k)[0] for _ in cells for k in keys] + [z_bounds(g[1])[0] for g in free])
    hi = np.array([z_bounds(k)[1] for _ in cells for k in keys] + [z_bounds(g[1])[1] for g in free])
    start = []
    for c in cells:
        for k in keys:
            guess = x0.cell_z.get((c, k)) if x0 else None
            if guess is None:
                g = (group_of(c[1], k), k)
                guess = fixed_centres.get(g) if fixed_centres and g in fixed_centres else (
                    x0.centre_z.get(g) if x0 and g in x0.centre_z else _mid(k))
            start.append(guess)
    start += [x0.centre_z.get(g, _mid(g[1])) if x0 else _mid(g[1]) for g in free]
    x_start = np.clip(np.array(start, dtype=float), lo + 1e-9, hi - 1e-9)
    sol = least_squares(residuals, x_start, jac=jacobian, bounds=(lo, hi), method="trf", xtol=1e-10, ftol=1e-12,
                        gtol=1e-10, max_nfev=500)
    z, m = unpack(sol.x)
    # the held centres belong to the solution too: a cell of a family no fitted run informs takes its
    # own family's centre, not the mean of the centres the runs happened to touch
    out = Solution(keys, cells, {(c, k): float(z[i, j]) for i, c in enumerate(cells) for j, k in enumerate(keys)},
                   {**(fixed_centres or {}), **{g: float(v) for g, v in m.items()}})
    _posterior(out, z, run_cell, log_measured, sur, hyper)
    return out


def _uninformed(cells_of_runs: list[tuple[str, str]], sur: Surrogates,
                groups: list[tuple[str, str]]) -> dict[tuple[str, str], float]:
    """Prior groups (centre group, key) on none of whose runs the key acts (an NVFP4 factor of a
    GPU family without fp4 tensor cores: the surrogates are flat in it), held at the key's burst
    value: no run informs them, and a free centre would drift along the flat direction."""
    mid = np.array([[_mid(k) for k in sur.keys]] * len(cells_of_runs))
    acts = np.abs(sur.gradient(mid)) > 1e-9  # (runs, keys)
    out = {}
    for g in groups:
        j = sur.keys.index(g[1])
        if not any(acts[i, j] for i, c in enumerate(cells_of_runs) if group_of(c[1], g[1]) == g[0]):
            lo, hi = z_bounds(g[1])
            out[g] = float(np.clip(to_z(g[1], PARAMETERS[g[1]].burst), lo, hi))
    return out


def _posterior(out: Solution, z: np.ndarray, run_cell: np.ndarray, log_measured: np.ndarray, sur: Surrogates,
               hyper: Hyper) -> None:
    """Per-cell posterior covariance (Gauss-Newton, centres held), the data's RSS (log units) and
    the effective number of cell parameters the data determine."""
    keys = out.keys
    grad = sur.gradient(z[run_cell])
    resid = sur.log_step(z[run_cell]) - log_measured
    tau2 = np.array([hyper.tau_of(k) ** 2 for k in keys])
    edf = 0.0
    for ci, c in enumerate(out.cells):
        g = grad[run_cell == ci]
        data = g.T @ g / hyper.sigma ** 2
        cov = np.linalg.inv(data + np.diag(1.0 / tau2))
        out.cov[c] = cov
        edf += float(np.trace(data @ cov))
    out.rss, out.edf = float(resid @ resid), edf


def estimate_hyper(cells_of_runs, log_measured: np.ndarray, sur: Surrogates, hyper: Hyper | None = None,
                   shared: tuple[str, ...] = ()) -> tuple[Solution, Hyper]:
    """(posterior mode, sigma and tau) by expectation-maximisation from ``hyper`` (default: 0.03, 0.1;
    the ``shared`` keys held at one value per prior group)."""
    keys = sur.keys
    hyper = hyper or Hyper.initial(keys, shared)
    sol = None
    for _ in range(EM_ITERATIONS):
        sol = fit(cells_of_runs, log_measured, sur, hyper, x0=sol)
        n = len(log_measured)
        sigma = math.sqrt(sol.rss / max(1.0, n - sol.edf - len(sol.centre_z)))
        taus = []
        for j, k in enumerate(keys):
            if k in hyper.shared:
                taus.append((k, SHARED_TAU))
                continue
            dev = [(sol.cell_z[(c, k)] - sol.centre_z[(group_of(c[1], k), k)]) ** 2 + sol.cov[c][j, j]
                   for c in sol.cells]
            n_groups = len({group_of(c[1], k) for c in sol.cells})
            dof = len(dev) / (len(dev) - n_groups) if len(dev) > n_groups else 1.0
            taus.append((k, float(np.clip(math.sqrt(np.mean(dev) * dof), *TAU_RANGE))))
        new = Hyper(float(np.clip(sigma, *SIGMA_RANGE)), tuple(taus), hyper.shared)
        converged = abs(new.sigma - hyper.sigma) < EM_TOLERANCE and all(
            abs(a - b) < EM_TOLERANCE for (_, a), (_, b) in zip(new.tau, hyper.tau, strict=True))
        hyper = new
        if converged:
            break
    return fit(cells_of_runs, log_measured, sur, hyper, x0=sol), hyper
