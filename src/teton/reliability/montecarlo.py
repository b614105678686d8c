"""Monte Carlo of a whole training run: training, checkpoints, interruptions, recovery.

The timeline of one run is a renewal process. After each (re)start the job trains in cycles of
``interval_s`` of training followed by ``blocking_s`` of checkpoint pause; checkpoint ``j`` is
durable ``save_s`` after it began, i.e. at ``j*c + (save_s - blocking_s)`` with
``c = interval_s + blocking_s``. Interruptions arrive as a Poisson process over the job's
up-time with rate ``sum_c lambda_c`` (hardware causes scaled by the infant-mortality multiplier,
sampled by thinning). At an interruption after up-time ``u``:

- training since the last durable checkpoint is lost (re-done later); planned maintenance
  instead checkpoints first (``save_s`` more downtime) and loses nothing;
- the job is down for ``downtime_c`` (:mod:`teton.reliability.recovery`) plus, for causes that
  swap a host, the wait for a spare: a pool of ``spares`` hosts, each failed host returning
  to it ``repair_s`` after it failed;
- no interruptions are drawn while the job is down (second order; see Daly 2006 for the term).

The run ends when ``work_s`` of training is durable (token budget; a final save is paid) or at
``horizon_s`` (fixed length; the training in flight at the horizon counts as useful). Every run
is advanced one interruption per numpy step, so 1,000 runs cost a few hundred vector steps.
ETTR = useful training time / wall-clock time (LLAMA3 §3.3.4's "effective training time").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from teton.errors import SpecError


@dataclass(frozen=True)
class MCInputs:
    rates_per_s: np.ndarray  # (C,) job interruption rate by cause at reference age
    downtime_s: np.ndarray  # (C,) fixed downtime by cause
    hardware: np.ndarray  # (C,) bool: infant mortality applies
    planned: np.ndarray  # (C,) bool
    replaces_host: np.ndarray  # (C,) bool
    interval_s: float
    blocking_s: float
    save_s: float
    work_s: float | None = None  # training seconds to make durable (token-budget mode)
    horizon_s: float | None = None  # wall-clock length (fixed-length mode)
    spares: int = 1 << 30
    repair_s: float = 72 * 3600.0
    infant: Callable[[np.ndarray], np.ndarray] | None = None  # hazard multiplier at time t_s


@dataclass(frozen=True)
class MCResult:
    wall_s: np.ndarray  # (R,)
    useful_s: np.ndarray  # training kept
    train_s: np.ndarray  # all training incl. re-done work
    checkpoint_s: np.ndarray  # checkpoint blocking
    down_s: np.ndarray  # recovery downtime incl. spare waits
    spare_wait_s: np.ndarray
    counts: np.ndarray  # (R, C) interruptions by cause
    finished: np.ndarray  # (R,) bool

    @property
    def lost_work_s(self) -> np.ndarray:
        return self.train_s - self.useful_s

    @property
    def ettr(self) -> np.ndarray:
        return self.useful_s / np.maximum(self.wall_s, 1e-300)


def _trained(u: np.ndarray, tau: float, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Training and checkpoint-pause seconds in the first ``u`` seconds of up-time."""
    k = np.floor(u / c)
    r = u - k * c
    return k * tau + np.minimum(r, tau), k * (c - tau) + np.maximum(r - tau, 0.0)


def simulate_runs(inp: MCInputs, runs: int, seed: int, progress: Callable[[float], None] | None = None,
                  max_steps: int = 200_000) -> MCResult:
    """Vectorised Monte Carlo of ``runs`` independent runs (deterministic in ``seed``)."""
    if (inp.work_s is None) == (inp.horizon_s is None):
        raise ValueError("give exactly one of work_s, horizon_s")
    rng = np.random.default_rng(seed)
    tau, b = float(inp.interval_s), float(inp.blocking_s)
    c = tau + b
    lag = max(float(inp.save_s) - b, 0.0)
    n_causes = len(inp.rates_per_s)
    rates = np.asarray(inp.rates_per_s, dtype=float)
    hw = np.asarray(inp.hardware, dtype=bool)
    total_rate0 = rates.sum()
    horizon = np.inf if inp.horizon_s is None else float(inp.horizon_s)
    work = np.inf if inp.work_s is None else float(inp.work_s)
    # A run that cannot finish (restart costs >> MTBI) is cut off at 1,000 x its failure-free time.
    wall_cap = horizon if np.isfinite(horizon) else 1000.0 * (work + b * work / tau + inp.save_s) + 1e6

    z = np.zeros(runs)
    wall, useful, train, ckpt, down, wait_total = z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy()
    counts = np.zeros((runs, n_causes), dtype=np.int64)
    seg_start = z.copy()  # wall time the current segment (up-time since restart) began
    cur = z.copy()  # up-time already survived in this segment (thinning candidates)
    active = np.ones(runs, dtype=bool)
    finished = np.zeros(runs, dtype=bool)
    n_pool = int(min(max(inp.spares, 0), 4096))
    pool = np.zeros((runs, n_pool)) if n_pool else None
    n_swaps = np.zeros(runs, dtype=np.int64)
    hw_any = inp.infant is not None and bool(hw.any())
    hw_rate0 = rates[hw].sum() if hw_any else 0.0
    cum_cause = np.cumsum(rates) / total_rate0 if total_rate0 > 0 else None

    for _step in range(max_steps):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        e = rng.standard_exponential(runs)[idx]
        ua = rng.random(runs)[idx]
        uc = rng.random(runs)[idx]
        remaining = work - useful[idx]
        n_mid = np.maximum(np.ceil(remaining / tau) - 1.0, 0.0) if np.isfinite(work) else None
        need = remaining + b * n_mid + inp.save_s if n_mid is not None else np.full(idx.size, np.inf)
        t0 = seg_start[idx]
        if hw_any:
            m_now = inp.infant(t0 + cur[idx])
            lam = total_rate0 + hw_rate0 * (m_now - 1.0)
        else:
            lam = np.full(idx.size, total_rate0)
        with np.errstate(divide="ignore"):
            cand = cur[idx] + np.where(lam > 0, e / lam, np.inf)
        done = np.isfinite(need) & (cand >= need)
        cut = ~done & (t0 + cand >= horizon) | ((t0 + np.minimum(cand, need)) >= wall_cap) & ~done
        if hw_any:
            m_c = inp.infant(t0 + cand)
            lam_c = total_rate0 + hw_rate0 * (m_c - 1.0)
            accept = ua * lam <= lam_c
        else:
            accept = np.ones(idx.size, dtype=bool)
        fail = ~done & ~cut & accept
        skip = ~done & ~cut & ~accept
        cur[idx[skip]] = cand[skip]

        # finished: the remaining work and the final save complete before the next interruption
        if done.any():
            j = idx[done]
            tr, bl = _trained(need[done] - inp.save_s, tau, c)
            train[j] += tr
            ckpt[j] += bl + inp.save_s
            useful[j] += remaining[done]
            wall[j] = seg_start[j] + need[done]
            active[j] = False
            finished[j] = True
        # cut at the horizon (or the cap): training in flight is kept
        if cut.any():
            j = idx[cut]
            u = np.minimum(np.minimum(horizon, wall_cap) - seg_start[j], need[cut])
            u = np.maximum(u, 0.0)
            tr, bl = _trained(u, tau, c)
            train[j] += tr
            ckpt[j] += bl
            useful[j] += np.minimum(tr, remaining[cut])
            wall[j] = seg_start[j] + u
            active[j] = False
        if not fail.any():
            if progress is not None:
                progress(1.0 - active.mean())
            continue
        j = idx[fail]
        u = cand[fail]
        t_fail = seg_start[j] + u
        if hw_any:
            mult = np.where(hw[None, :], inp.infant(t_fail)[:, None], 1.0)
            w = np.cumsum(rates[None, :] * mult, axis=1)
            cause = (w < (uc[fail] * w[:, -1])[:, None]).sum(axis=1)
        else:
            cause = np.searchsorted(cum_cause, uc[fail], side="right")
        cause = np.minimum(cause, n_causes - 1)
        counts[j, cause] += 1
        tr, bl = _trained(u, tau, c)
        is_planned = inp.planned[cause]
        n_dur = np.maximum(np.floor((u - lag) / c), 0.0)
        kept = np.where(is_planned, tr, np.minimum(n_dur * tau, tr))
        train[j] += tr
        ckpt[j] += bl
        useful[j] += kept
        dt = inp.downtime_s[cause] + np.where(is_planned, inp.save_s, 0.0)
        swap = inp.replaces_host[cause]
        wait = np.zeros(j.size)
        if swap.any():
            k = j[swap]
            tf = t_fail[swap]
            if pool is None:
                wait[swap] = inp.repair_s
            else:
                # Swaps happen in time order, so the spare that frees up first is always the one
                # taken ``n_pool`` swaps ago: the pool is a ring buffer of return times.
                slot = n_swaps[k] % n_pool
                wait[swap] = np.maximum(pool[k, slot] - tf, 0.0)
                pool[k, slot] = tf + inp.repair_s
                n_swaps[k] += 1
        down[j] += dt + wait
        wait_total[j] += wait
        seg_start[j] = t_fail + dt + wait
        cur[j] = 0.0
        over = seg_start[j] >= min(horizon, wall_cap)
        if over.any():
            jj = j[over]
            extra = seg_start[jj] - min(horizon, wall_cap)
            down[jj] -= extra
            # the end of the run cuts the outage from its end: restart and restore first
            # (counted with dt), then the wait for a spare
            wait_total[jj] -= np.clip(extra - dt[over], 0.0, wait[over])
            wall[jj] = min(horizon, wall_cap)
            active[jj] = False
        if progress is not None:
            progress(1.0 - active.mean())
    if active.any():
        raise SpecError("reliability", f"{int(active.sum())} of {runs} runs",
                        f"still running after {max_steps:,} Monte Carlo steps (one interruption each): "
                        "shorten the run (--days / --tokens) or lower the failure rates")
    return MCResult(wall_s=wall, useful_s=useful, train_s=train, checkpoint_s=ckpt, down_s=down,
                    spare_wait_s=wait_total, counts=counts, finished=finished)
