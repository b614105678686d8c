"""EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001) for the scheduler simulation.

When the FIFO head job cannot start, it gets a reservation at the earliest time enough GPUs free
up (the running jobs' ends, exact: each job's speed on its placement is known once it runs). A
later job may start now if it fits and its run time on the GPUs it would get (its ideal run time
times the placement slowdown the scheduler prices before starting it) ends before that time, or
it uses only GPUs the reservation leaves spare; so backfilled jobs never delay the head past its
first reservation. See :mod:`teton.placement.scheduler` for the policies that use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from teton.placement.scheduler import Allocator

# Slurm's sched/backfill tests at most bf_max_job_test jobs per pass (slurm.conf man page,
# SchedulerParameters, default 500); the same cap keeps a long queue from making a pass O(queue).
BACKFILL_DEPTH = 500


def easy_reservation(running: list[tuple[float, int]], n_free: int, gpus: np.ndarray,
                     need: int) -> tuple[float, int]:
    """EASY backfilling's reservation for a head job of ``need`` GPUs: (shadow time s, extra GPUs).

    The shadow time is the earliest end of a running job (``running``: (end s, job) pairs, ends
    exact: each job's speed on its placement is known once it runs) after which ``n_free`` plus
    the GPUs released so far cover ``need``; the extra GPUs are those left over then, which a
    backfilled job may hold past the shadow time without delaying the head.
    """
    ends = np.array([e for e, _ in running])
    order = np.argsort(ends, kind="stable")
    freed = n_free + np.cumsum(gpus[[running[k][1] for k in order]])
    k = int(np.searchsorted(freed, need))
    if k >= len(order):
        return math.inf, 0
    return float(ends[order[k]]), int(freed[k] - need)


def easy_backfill(queue: list[int], now_s: float, running: list[tuple[float, int]], alloc: Allocator,
                  gpus: np.ndarray, ideal_s: np.ndarray, reserved_s: np.ndarray, compact_only: bool,
                  placed: Callable[[int], tuple[np.ndarray, float]],
                  start_job: Callable[[int, float, tuple[np.ndarray, float]], None]) -> list[int]:
    """One EASY backfilling pass behind the queue's head (module docstring): the head gets a
    reservation (its first one is recorded in ``reserved_s``); a job behind it (at most
    ``BACKFILL_DEPTH``) starts now, through ``start_job``, if it fits and its run time on the GPUs
    ``placed`` gives it ends before the reservation, or it uses only GPUs the reservation leaves
    spare. ``compact_only``: a job without a compact placement waits. Returns the jobs still queued."""
    head = queue[0]
    shadow, extra = easy_reservation(running, alloc.n_free, gpus, int(gpus[head]))
    if math.isnan(reserved_s[head]):
        reserved_s[head] = shadow
    kept = [head]
    for pos, i in enumerate(queue[1:], start=1):
        if pos > BACKFILL_DEPTH:
            kept.extend(queue[pos:])
            break
        gi = int(gpus[i])
        # cheap rejections first: no room now, no compact room, or past the reservation on
        # reserved GPUs even at the ideal speed
        if gi > alloc.n_free or (compact_only and not alloc.compact_possible(gi)) or (
                gi > extra and now_s + ideal_s[i] > shadow):
            kept.append(i)
            continue
        where = placed(i)
        past = now_s + ideal_s[i] * where[1] > shadow  # its run time on the GPUs it gets
        if past and gi > extra:
            kept.append(i)
            continue
        if past:
            extra -= gi
        start_job(i, now_s, where)
    return kept
