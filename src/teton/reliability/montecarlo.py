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

import math
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


@dataclass(frozen=True)
class _Timeline:
    """The constants of one Monte Carlo (module docstring): the checkpoint cycle, the job's
    interruption rates and where a run ends."""

    tau: float  # training per checkpoint cycle (interval_s)
    blocking_s: float
    cycle_s: float  # c = tau + blocking_s
    lag_s: float  # a checkpoint is durable save_s - blocking_s after its pause ends
    rates: np.ndarray  # (C,) interruption rate by cause at reference age, per s
    hardware: np.ndarray  # (C,) bool
    total_rate: float  # sum of the rates at reference age
    infant_applies: bool  # an infant-mortality multiplier and hardware causes to apply it to
    hardware_rate: float  # the hardware causes' rate at reference age (0 when infant mortality does not apply)
    cum_cause: np.ndarray | None  # cumulative share of each cause in the total rate
    horizon_s: float  # the fixed run length; inf for a token budget
    work_s: float  # the token budget's training; inf for a fixed length
    wall_cap_s: float  # the run's wall-clock cut-off


def _timeline(inp: MCInputs) -> _Timeline:
    """The Monte Carlo constants of ``inp``. A run that cannot finish (restart costs >> MTBI) is
    cut off at 1,000 x its failure-free time (``wall_cap_s``)."""
    tau, b = float(inp.interval_s), float(inp.blocking_s)
    rates = np.asarray(inp.rates_per_s, dtype=float)
    hw = np.asarray(inp.hardware, dtype=bool)
    total_rate0 = rates.sum()
    horizon = np.inf if inp.horizon_s is None else float(inp.horizon_s)
    work = np.inf if inp.work_s is None else float(inp.work_s)
    wall_cap = horizon if np.isfinite(horizon) else 1000.0 * (work + b * work / tau + inp.save_s) + 1e6
    hw_any = inp.infant is not None and bool(hw.any())
    return _Timeline(
        tau=tau, blocking_s=b, cycle_s=tau + b, lag_s=max(float(inp.save_s) - b, 0.0), rates=rates, hardware=hw,
        total_rate=total_rate0, infant_applies=hw_any, hardware_rate=rates[hw].sum() if hw_any else 0.0,
        cum_cause=np.cumsum(rates) / total_rate0 if total_rate0 > 0 else None,
        horizon_s=horizon, work_s=work, wall_cap_s=wall_cap)


def _up_time_to_finish(tl: _Timeline, remaining_s: np.ndarray, save_s: float) -> np.ndarray:
    """Up-time a run still needs to finish its token budget: the ``remaining_s`` of training, a
    checkpoint pause after every full interval but the last, and the final save; inf for a fixed
    run length."""
    n_mid = np.maximum(np.ceil(remaining_s / tl.tau) - 1.0, 0.0) if np.isfinite(tl.work_s) else None
    return remaining_s + tl.blocking_s * n_mid + save_s if n_mid is not None else np.full(remaining_s.size, np.inf)


def _candidate_interruptions(tl: _Timeline, infant: Callable[[np.ndarray], np.ndarray] | None, cur: np.ndarray,
                             t0: np.ndarray, e: np.ndarray, ua: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The next interruption of each run by thinning: a candidate after up-time ``cur + e / lam``,
    ``lam`` the total rate at the run's current age (segment start ``t0`` + ``cur``; hardware causes
    scaled by the infant-mortality multiplier), accepted with probability lam(candidate) / lam
    (uniform ``ua``). Returns (candidate up-times, accepted)."""
    if tl.infant_applies:
        m_now = infant(t0 + cur)
        lam = tl.total_rate + tl.hardware_rate * (m_now - 1.0)
    else:
        lam = np.full(cur.size, tl.total_rate)
    with np.errstate(divide="ignore"):
        cand = cur + np.where(lam > 0, e / lam, np.inf)
    if tl.infant_applies:
        m_c = infant(t0 + cand)
        lam_c = tl.total_rate + tl.hardware_rate * (m_c - 1.0)
        accept = ua * lam <= lam_c
    else:
        accept = np.ones(cur.size, dtype=bool)
    return cand, accept


def _interruption_causes(tl: _Timeline, infant: Callable[[np.ndarray], np.ndarray] | None, t_fail: np.ndarray,
                         uc: np.ndarray) -> np.ndarray:
    """The cause of each interruption at wall time ``t_fail``: drawn (uniform ``uc``) in proportion
    to the causes' rates then, hardware causes scaled by the infant-mortality multiplier."""
    if tl.infant_applies:
        mult = np.where(tl.hardware[None, :], infant(t_fail)[:, None], 1.0)
        w = np.cumsum(tl.rates[None, :] * mult, axis=1)
        cause = (w < (uc * w[:, -1])[:, None]).sum(axis=1)
    else:
        cause = np.searchsorted(tl.cum_cause, uc, side="right")
    return np.minimum(cause, tl.rates.size - 1)


def _kept_at_interruption(tl: _Timeline, u: np.ndarray,
                          planned: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training, checkpoint pause and training kept in a segment interrupted after up-time ``u``:
    the training up to the last durable checkpoint is kept, the rest is lost; planned maintenance
    checkpoints first and keeps all of it."""
    tr, bl = _trained(u, tl.tau, tl.cycle_s)
    n_dur = np.maximum(np.floor((u - tl.lag_s) / tl.cycle_s), 0.0)
    return tr, bl, np.where(planned, tr, np.minimum(n_dur * tl.tau, tr))


class _SparePools:
    """Each run's pool of ``spares`` hosts (at most 4,096 followed; none: every swap waits for a
    repair): a host swapped out at an interruption returns to the pool ``repair_s`` after."""

    def __init__(self, runs: int, spares: int, repair_s: float):
        self.n_pool = int(min(max(spares, 0), 4096))
        self.pool = np.zeros((runs, self.n_pool)) if self.n_pool else None  # return time of each spare
        self.n_swaps = np.zeros(runs, dtype=np.int64)
        self.repair_s = repair_s

    def wait_s(self, j: np.ndarray, swap: np.ndarray, t_fail: np.ndarray) -> np.ndarray:
        """Wait for a spare host of runs ``j`` interrupted at ``t_fail`` (0 where no host is swapped)."""
        wait = np.zeros(j.size)
        if swap.any():
            k = j[swap]
            tf = t_fail[swap]
            if self.pool is None:
                wait[swap] = self.repair_s
            else:
                # Swaps happen in time order, so the spare that frees up first is always the one
                # taken ``n_pool`` swaps ago: the pool is a ring buffer of return times.
                slot = self.n_swaps[k] % self.n_pool
                wait[swap] = np.maximum(self.pool[k, slot] - tf, 0.0)
                self.pool[k, slot] = tf + self.repair_s
                self.n_swaps[k] += 1
        return wait


@dataclass
class _RunState:
    """Each run's accumulators and current segment, updated in place one step at a time."""

    wall: np.ndarray
    useful: np.ndarray
    train: np.ndarray
    ckpt: np.ndarray
    down: np.ndarray
    wait: np.ndarray
    counts: np.ndarray  # (R, C) interruptions by cause
    seg_start: np.ndarray  # wall time the current segment (up-time since restart) began
    cur: np.ndarray  # up-time already survived in this segment (thinning candidates)
    active: np.ndarray
    finished: np.ndarray

    @classmethod
    def start(cls, runs: int, n_causes: int) -> _RunState:
        """``runs`` runs at wall time 0, up, with nothing accumulated."""
        z = np.zeros(runs)
        return cls(wall=z.copy(), useful=z.copy(), train=z.copy(), ckpt=z.copy(), down=z.copy(), wait=z.copy(),
                   counts=np.zeros((runs, n_causes), dtype=np.int64), seg_start=z.copy(), cur=z.copy(),
                   active=np.ones(runs, dtype=bool), finished=np.zeros(runs, dtype=bool))

    def add_segment(self, j: np.ndarray, train_s: np.ndarray, pause_s: np.ndarray, useful_s: np.ndarray) -> None:
        """Add an ended segment's training, checkpoint pause and kept training to runs ``j``."""
        self.train[j] += train_s
        self.ckpt[j] += pause_s
        self.useful[j] += useful_s

    def end(self, j: np.ndarray, wall_s: np.ndarray, finished: bool) -> None:
        """Runs ``j`` end at ``wall_s``; ``finished``: their token budget is durable."""
        self.wall[j] = wall_s
        self.active[j] = False
        if finished:
            self.finished[j] = True

    def restart(self, j: np.ndarray, t_fail: np.ndarray, dt: np.ndarray, wait: np.ndarray, end_s: float) -> None:
        """Runs ``j`` are down ``dt`` plus ``wait`` for a spare from ``t_fail``, then start a new
        segment; a run whose restart falls at or past ``end_s`` ends there instead."""
        self.down[j] += dt + wait
        self.wait[j] += wait
        self.seg_start[j] = t_fail + dt + wait
        self.cur[j] = 0.0
        over = self.seg_start[j] >= end_s
        if over.any():
            jj = j[over]
            extra = self.seg_start[jj] - end_s
            self.down[jj] -= extra
            # the end of the run cuts the outage from its end: restart and restore first
            # (counted with dt), then the wait for a spare
            self.wait[jj] -= np.clip(extra - dt[over], 0.0, wait[over])
            self.wall[jj] = end_s
            self.active[jj] = False

    def result(self) -> MCResult:
        """The runs' totals."""
        return MCResult(wall_s=self.wall, useful_s=self.useful, train_s=self.train, checkpoint_s=self.ckpt,
                        down_s=self.down, spare_wait_s=self.wait, counts=self.counts, finished=self.finished)


def _seconds(x: float) -> str:
    return f"{x:,.0f} s" if x >= 10 else f"{x:.3g} s"


def _check_progress(inp: MCInputs, max_steps: int) -> None:
    """Refuse, before simulating, a run whose expected interruptions exceed ``max_steps`` (one per
    Monte Carlo step): its wall time (training over the renewal model's ETTR,
    :mod:`teton.reliability.renewal`, at most the wall cap) over the mean time from one
    interruption to the next (up-time and downtime); one whose checkpoint pause or interval
    rivals the time between interruptions."""
    from teton.reliability.renewal import renewal_ettr

    if inp.work_s is None:
        return
    rate = float(np.sum(inp.rates_per_s))
    if rate <= 0:
        return
    ettr = renewal_ettr(inp, inp.interval_s)
    wall_s = min(inp.work_s / ettr if ettr > 0 else math.inf, _timeline(inp).wall_cap_s)
    if wall_s / (1.0 / rate + float(np.sum(inp.rates_per_s * inp.downtime_s)) / rate) < max_steps:
        return
    unexpected = max(float(np.sum(inp.rates_per_s[~inp.planned])), 1e-300)
    cycle = (f"a checkpoint every {inp.interval_s:,.0f} s of training pausing {_seconds(inp.blocking_s)} (durable "
             f"after {inp.save_s:,.0f} s) against an unexpected interruption every {1.0 / unexpected:,.0f} s makes "
             f"almost no progress (ETTR {ettr:.2g})")
    if inp.blocking_s * unexpected > 0.1:
        raise SpecError("reliability.checkpoint_blocking_s", round(inp.blocking_s, 6), cycle + ": shorten the "
                        "pause (faster storage, async checkpoints) or lower the failure rates")
    raise SpecError("checkpoint_interval_s", round(inp.interval_s, 3), cycle + ": checkpoint more often (--interval; "
                    "a storage that sustains it: storage.servers) or lower the failure rates")


def simulate_runs(inp: MCInputs, runs: int, seed: int, progress: Callable[[int, int], None] | None = None,
                  max_steps: int = 200_000) -> MCResult:
    """Vectorised Monte Carlo of ``runs`` independent runs (deterministic in ``seed``), one
    interruption per run and step (the model: module docstring). ``progress(done, runs)`` after
    each step: the runs that have ended."""
    if (inp.work_s is None) == (inp.horizon_s is None):
        raise ValueError("give exactly one of work_s, horizon_s")
    _check_progress(inp, max_steps)
    rng = np.random.default_rng(seed)
    tl = _timeline(inp)
    end_s = min(tl.horizon_s, tl.wall_cap_s)
    st = _RunState.start(runs, len(inp.rates_per_s))
    spares = _SparePools(runs, inp.spares, inp.repair_s)
    for _step in range(max_steps):
        idx = np.flatnonzero(st.active)
        if idx.size == 0:
            break
        e = rng.standard_exponential(runs)[idx]
        ua = rng.random(runs)[idx]
        uc = rng.random(runs)[idx]
        remaining = tl.work_s - st.useful[idx]
        need = _up_time_to_finish(tl, remaining, inp.save_s)
        t0 = st.seg_start[idx]
        cand, accept = _candidate_interruptions(tl, inp.infant, st.cur[idx], t0, e, ua)
        done = np.isfinite(need) & (cand >= need)
        cut = ~done & (t0 + cand >= tl.horizon_s) | ((t0 + np.minimum(cand, need)) >= tl.wall_cap_s) & ~done
        fail = ~done & ~cut & accept
        skip = ~done & ~cut & ~accept
        st.cur[idx[skip]] = cand[skip]

        # finished: the remaining work and the final save complete before the next interruption
        if done.any():
            j = idx[done]
            tr, bl = _trained(need[done] - inp.save_s, tl.tau, tl.cycle_s)
            st.add_segment(j, tr, bl + inp.save_s, remaining[done])
            st.end(j, st.seg_start[j] + need[done], finished=True)
        # cut at the horizon (or the cap): training in flight is kept
        if cut.any():
            j = idx[cut]
            u = np.maximum(np.minimum(end_s - st.seg_start[j], need[cut]), 0.0)
            tr, bl = _trained(u, tl.tau, tl.cycle_s)
            st.add_segment(j, tr, bl, np.minimum(tr, remaining[cut]))
            st.end(j, st.seg_start[j] + u, finished=False)
        # interrupted: work since the last durable checkpoint lost, down, maybe waiting for a spare
        if fail.any():
            j = idx[fail]
            u = cand[fail]
            t_fail = st.seg_start[j] + u
            cause = _interruption_causes(tl, inp.infant, t_fail, uc[fail])
            st.counts[j, cause] += 1
            is_planned = inp.planned[cause]
            st.add_segment(j, *_kept_at_interruption(tl, u, is_planned))
            dt = inp.downtime_s[cause] + np.where(is_planned, inp.save_s, 0.0)
            st.restart(j, t_fail, dt, spares.wait_s(j, inp.replaces_host[cause], t_fail), end_s)
        if progress is not None:
            progress(runs - int(st.active.sum()), runs)
    if st.active.any():
        raise SpecError("reliability", f"{int(st.active.sum())} of {runs} runs",
                        f"still running after {max_steps:,} Monte Carlo steps (one interruption each): "
                        "shorten the run (its days or tokens) or lower the failure rates")
    return st.result()
