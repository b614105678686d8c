"""A cluster scheduler simulation: a job trace on a shared cluster, event by event.

Policies (all serve jobs in arrival order):
  fifo            - strict FIFO: the head job starts as soon as enough GPUs are free; nothing
                    overtakes it. GPUs are handed out first-fit in id order (``linear``), whatever
                    hosts they are on.
  backfill        - FIFO + EASY backfilling (Lifka 1995; Mu'alem & Feitelson 2001): when the head
                    job cannot start, it gets a reservation at the earliest time enough GPUs free
                    up (the running jobs' expected ends: their speed on their placement is known
                    once they run); a later job may start now if it fits and its run time on the
                    GPUs it would get (its ideal run time, the user's estimate, times the
                    placement slowdown the scheduler prices before starting it) ends before that
                    time, or it uses only GPUs the reservation leaves spare. So backfilled jobs
                    never delay the head past its first reservation (``reserved_s``). Same
                    first-fit GPU choice as fifo.
  topology-aware  - the backfill queue with topology-aware packing: a job that fits in a host
                    goes to the fullest host it fits in (best fit); a larger job takes whole free
                    hosts from the smallest rack / pod / ... that holds it (best fit at the lowest
                    possible layer, MAST's "minimum cut" into AI zones), racks with the most free
                    hosts first inside it. Only the head job may take partial hosts when whole ones
                    run out (so nothing starves); a backfill candidate that would not get a compact
                    placement (one host, or whole hosts) is not started and waits for one.

A job's run time is its ideal run time (trace ``duration_s``, or tokens / tokens-per-step x the
ideal step time) times its placement slowdown from ``cost.SlowdownModel`` (step time on its
actual GPUs / on the ideal placement, by the network cost model; cached per job shape and
placement structure). Backfill decisions use the ideal run time times the slowdown on the GPUs
the candidate would get (the run time the simulation will give it), so reservations hold.

Reports: GPU utilisation over time (time-weighted), queueing delay percentiles, fragmentation
(time-weighted share of free GPUs that sit on partly used hosts), per-job placement slowdown,
jobs finished, the reservations backfill made and kept; ``schedule_notes`` explains a comparison
whose makespan or slowdown goes against the expected order (the makespan is one job's end).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from teton.errors import SpecError
from teton.placement.backfill import easy_backfill
from teton.placement.cost import JobShape, SlowdownModel, default_layout, trace_job_shape
from teton.placement.mapping import pod_span_gpus
from teton.placement.schedule_metrics import percentiles, utilisation_figures
from teton.placement.traces import Trace, TraceIssue, model_for_size
from teton.spec.cluster import ClusterSpec

SCHEDULER_POLICIES = ("fifo", "backfill", "topology-aware")


class Allocator:
    """Free GPUs of a cluster and the two ways of handing them out."""

    def __init__(self, cluster: ClusterSpec):
        self.cluster = cluster
        self.g = cluster.gpus_per_host
        self.hosts = cluster.hosts
        self.free = np.ones(cluster.gpus, dtype=bool)
        self.host_free = np.full(self.hosts, self.g, dtype=np.int64)
        self.n_free = cluster.gpus
        # hosts per domain of each fabric layer below the whole cluster, lowest first
        self.spans_hosts = [layer.span_gpus // self.g for layer in cluster.layers if layer.span_gpus < cluster.gpus]

    def take(self, gpus: np.ndarray) -> None:
        if gpus.size != np.unique(gpus).size or not self.free[gpus].all():
            raise RuntimeError("scheduler bug: allocating a GPU that is not free")
        self.free[gpus] = False
        np.subtract.at(self.host_free, gpus // self.g, 1)
        self.n_free -= gpus.size

    def release(self, gpus: np.ndarray) -> None:
        self.free[gpus] = True
        np.add.at(self.host_free, gpus // self.g, 1)
        self.n_free += gpus.size

    def first_fit(self, n: int) -> np.ndarray:
        return np.flatnonzero(self.free)[:n]

    def _gpus_of_hosts(self, hosts: np.ndarray) -> np.ndarray:
        return (hosts[:, None] * self.g + np.arange(self.g)).ravel()

    def _best_host(self, n: int, exclude: np.ndarray | None = None) -> int | None:
        room = self.host_free.copy()
        if exclude is not None and exclude.size:
            room[exclude] = 0
        ok = np.flatnonzero(room >= n)
        if ok.size == 0:
            return None
        return int(ok[np.argmin(room[ok])])

    def packed(self, n: int) -> np.ndarray:
        """Topology-aware best-fit choice of ``n`` free GPUs (module docstring)."""
        g = self.g
        if n < g:
            h = self._best_host(n)
            if h is not None:
                return h * g + np.flatnonzero(self.free[h * g:(h + 1) * g])[:n]
            return self._spread(n)
        need, rem = divmod(n, g)
        whole = self.host_free == g
        if int(whole.sum()) < need:
            return self._spread(n)
        counts = [np.add.reduceat(whole, np.arange(0, self.hosts, s)) for s in self.spans_hosts]
        chosen_layer = len(counts)  # the whole cluster
        domain = 0
        for li, cnt in enumerate(counts):
            fits = np.flatnonzero(cnt >= need)
            if fits.size:
                chosen_layer, domain = li, int(fits[np.argmin(cnt[fits])])
                break
        cand = np.flatnonzero(whole)
        if chosen_layer < len(counts):
            span = self.spans_hosts[chosen_layer]
            cand = cand[cand // span == domain]
        keys = [cand]
        for li in range(chosen_layer):  # lower layers: the domains with most free hosts first
            dom = cand // self.spans_hosts[li]
            keys += [dom, -counts[li][dom]]
        hosts = cand[np.lexsort(keys)][:need]
        if hosts.size < need:
            return self._spread(n)
        out = self._gpus_of_hosts(hosts)
        if rem:
            h = self._best_host(rem, exclude=hosts)
            if h is None:
                return self._spread(n)
            out = np.concatenate([out, h * g + np.flatnonzero(self.free[h * g:(h + 1) * g])[:rem]])
        return out

    def _spread(self, n: int) -> np.ndarray:
        """Not enough whole hosts: free GPUs of the emptiest hosts first (fewest hosts touched)."""
        ids = np.flatnonzero(self.free)
        hf = self.host_free[ids // self.g]
        return ids[np.lexsort((ids, -hf))][:n]

    def compact_possible(self, n: int) -> bool:
        """Would ``packed(n)`` find a compact placement: one host, or whole free hosts?"""
        if n < self.g:
            return bool((self.host_free >= n).any())
        need, rem = divmod(n, self.g)
        whole = int((self.host_free == self.g).sum())
        if rem == 0:
            return whole >= need
        return whole >= need + 1 or (whole >= need and bool(((self.host_free >= rem) & (self.host_free < self.g)).any()))

    def fragmentation(self) -> float:
        """Share of the free GPUs that sit on partly used hosts."""
        if self.n_free == 0:
            return 0.0
        return 1.0 - float((self.host_free == self.g).sum() * self.g) / self.n_free


@dataclass(frozen=True)
class ScheduleResult:
    """One policy's run of a trace (:func:`simulate_schedule`): the run's figures, and per job
    (in arrival order) its start, end, placement slowdown, pods and hosts spanned."""

    policy: str
    cluster: str
    jobs: int
    finished: int
    skipped: tuple[TraceIssue, ...]
    makespan_s: float
    utilisation_mean: float  # over the whole run (first arrival to last completion)
    utilisation_arrivals: float  # over the arrival window (first to last arrival): the loaded regime
    utilisation_series: tuple[tuple[float, float], ...]  # (time s, mean busy fraction in the bin)
    queue_delay_s: dict[str, float]
    slowdown: dict[str, float]
    fragmentation_mean: float
    job_ids: tuple[str, ...] = field(repr=False)
    start_s: np.ndarray = field(repr=False)
    end_s: np.ndarray = field(repr=False)
    job_slowdown: np.ndarray = field(repr=False)
    pods_spanned: np.ndarray = field(repr=False)
    reserved_s: np.ndarray = field(repr=False)  # backfill: a head job's first reservation, else NaN
    hosts_spanned: np.ndarray = field(repr=False)
    cache: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self, include_jobs: bool = False) -> dict:
        d = {
            "policy": self.policy, "cluster": self.cluster, "jobs": self.jobs, "jobs_finished": self.finished,
            "jobs_skipped": len(self.skipped), "makespan_s": self.makespan_s,
            "utilisation_mean": self.utilisation_mean, "utilisation_arrivals": self.utilisation_arrivals,
            "queue_delay_s": self.queue_delay_s,
            "slowdown": self.slowdown, "fragmentation_mean": self.fragmentation_mean,
            "utilisation_series": [list(p) for p in self.utilisation_series],
            "cache": self.cache, "wall_s": self.wall_s,
            "reservations": self.reservations(), "last_job": self.last_job(),
        }
        if include_jobs:
            d["per_job"] = [{"job_id": j, "start_s": float(s), "end_s": float(e), "slowdown": float(x),
                             "pods_spanned": int(p), "hosts_spanned": int(h),
                             "reserved_s": None if math.isnan(r) else float(r)}
                            for j, s, e, x, p, h, r in zip(self.job_ids, self.start_s, self.end_s, self.job_slowdown,
                                                           self.pods_spanned, self.hosts_spanned, self.reserved_s,
                                                           strict=True)]
        return d

    def reservations(self) -> dict[str, int]:
        """Head jobs that got a backfill reservation, and how many started after it (0 expected)."""
        made = ~np.isnan(self.reserved_s)
        late = self.start_s[made] - self.reserved_s[made] > 1e-9 * np.maximum(1.0, np.abs(self.reserved_s[made]))
        return {"held": int(made.sum()), "delayed": int(late.sum())}

    def last_job(self) -> dict | None:
        """The job that finishes last (its end is the makespan): id, start, end, ideal run time,
        slowdown and the hosts it spanned."""
        if not len(self.job_ids) or np.isnan(self.end_s).all():
            return None
        i = int(np.nanargmax(self.end_s))
        return {"job_id": self.job_ids[i], "start_s": float(self.start_s[i]), "end_s": float(self.end_s[i]),
                "ideal_s": float((self.end_s[i] - self.start_s[i]) / self.job_slowdown[i]),
                "slowdown": float(self.job_slowdown[i]), "hosts_spanned": int(self.hosts_spanned[i])}


def schedule_notes(results: list[ScheduleResult], rel_tol: float = 1e-3) -> list[str]:
    """Explanations for a comparison against FIFO whose makespan or mean placement slowdown goes
    the unexpected way for a backfilling policy. The makespan is the end of one job, the last to
    finish, so a single long job on a poor placement decides it."""
    fifo = next((r for r in results if r.policy == "fifo"), None)
    if fifo is None:
        return []
    notes = []
    for r in results:
        if r.policy == "fifo":
            continue
        res, last = r.reservations(), r.last_job()
        if r.makespan_s > fifo.makespan_s * (1 + rel_tol) and last is not None:
            notes.append(
                f"{r.policy}'s makespan ({r.makespan_s / 3600:.1f} h) is longer than fifo's "
                f"({fifo.makespan_s / 3600:.1f} h): it is the end of the last job to finish, {last['job_id']} "
                f"(ideal run time {last['ideal_s'] / 3600:.1f} h), which ran {last['slowdown']:.2f}x slower on the "
                f"{last['hosts_spanned']} host(s) it got; head-job reservations kept: "
                f"{res['held'] - res['delayed']} of {res['held']}")
        if r.slowdown["mean"] > fifo.slowdown["mean"] * (1 + rel_tol):
            notes.append(
                f"{r.policy}'s mean placement slowdown ({r.slowdown['mean']:.3f}) is worse than fifo's "
                f"({fifo.slowdown['mean']:.3f}): it starts jobs in the gaps fifo leaves idle, where the free GPUs "
                "sit on partly used hosts")
    return notes


def _shape_of(job, cluster: ClusterSpec) -> JobShape:
    model = job.model or model_for_size(job.gpus)
    if job.tp or job.pp:
        tp, pp = job.tp or 1, job.pp or 1
        return trace_job_shape(model, job.gpus, tp, pp)
    return default_layout(model, job.gpus, cluster.gpus_per_host)


def admissible_jobs(trace: Trace, cluster: ClusterSpec) -> tuple[list, list[TraceIssue]]:
    """The trace's jobs that fit on ``cluster``, in arrival order (ties by job id), and the trace's
    issues plus one for each job larger than the cluster (skipped)."""
    skipped = list(trace.issues)
    jobs = []
    for j in trace.jobs:
        if j.gpus > cluster.gpus:
            skipped.append(TraceIssue(0, f"job {j.job_id}: gpus = {j.gpus} exceeds the cluster's {cluster.gpus}"))
            continue
        jobs.append(j)
    jobs.sort(key=lambda j: (j.arrival_s, j.job_id))
    return jobs, skipped


def ideal_run_times_s(jobs: list, shapes: list[JobShape], sm: SlowdownModel) -> np.ndarray:
    """Each job's ideal run time: the trace's ``duration_s``, else its steps (tokens / tokens per
    step, rounded up) x the step time on the ideal placement."""
    ideal_s = np.empty(len(jobs))
    for i, (j, sh) in enumerate(zip(jobs, shapes, strict=True)):
        if j.duration_s is not None:
            ideal_s[i] = j.duration_s
        else:
            est = sm.ideal(sh)
            ideal_s[i] = math.ceil(j.tokens / sh.layout.tokens_per_step) * est.step_s
    return ideal_s


@dataclass(frozen=True)
class JobRecords:
    """Per-job outcomes of a schedule (NaN until set); the arrays are filled in as jobs start."""

    start_s: np.ndarray
    end_s: np.ndarray
    slowdown: np.ndarray
    reserved_s: np.ndarray  # backfill: the first reservation a blocked head job got
    pods: np.ndarray
    hosts: np.ndarray

    @classmethod
    def empty(cls, n: int) -> JobRecords:
        """Records of ``n`` jobs, none started."""
        return cls(start_s=np.full(n, np.nan), end_s=np.full(n, np.nan), slowdown=np.full(n, np.nan),
                   reserved_s=np.full(n, np.nan), pods=np.zeros(n, dtype=np.int64), hosts=np.zeros(n, dtype=np.int64))


def simulate_schedule(trace: Trace, cluster: ClusterSpec, policy: str = "fifo", fidelity: str = "analytical",
                      progress: Callable[[int, int], None] | None = None, series_bins: int = 200) -> ScheduleResult:
    """Run ``trace`` on ``cluster`` under ``policy``; see the module docstring for the model.

    Event by event (arrivals and job ends): ended jobs free their GPUs, arrivals join the queue,
    the FIFO head starts while it fits, then (not ``fifo``) one EASY backfilling pass."""
    if policy not in SCHEDULER_POLICIES:
        raise SpecError("policy", policy, f"must be one of {', '.join(SCHEDULER_POLICIES)}")
    t_wall = time.perf_counter()
    jobs, skipped = admissible_jobs(trace, cluster)
    n = len(jobs)
    sm = SlowdownModel(cluster, fidelity)
    shapes = [_shape_of(j, cluster) for j in jobs]
    gpus = np.array([j.gpus for j in jobs], dtype=np.int64)
    arrival = np.array([j.arrival_s for j in jobs], dtype=float)
    ideal_s = ideal_run_times_s(jobs, shapes, sm)
    rec = JobRecords.empty(n)
    pod_span = pod_span_gpus(cluster)
    alloc = Allocator(cluster)
    held: dict[int, np.ndarray] = {}
    running: list[tuple[float, int]] = []  # heap of (end time, job)
    queue: list[int] = []
    nxt = done = 0
    ev_t, ev_busy, ev_frag = [], [], []
    choose = alloc.packed if policy == "topology-aware" else alloc.first_fit

    def placed(i: int) -> tuple[np.ndarray, float]:
        """The GPUs job ``i`` would get now and its slowdown on them."""
        chosen = choose(int(gpus[i]))
        return chosen, (sm.slowdown(shapes[i], chosen) if gpus[i] > 1 else 1.0)

    def start_job(i: int, now: float, where: tuple[np.ndarray, float] | None = None) -> None:
        """Start job ``i`` at ``now`` on ``where`` (else ``placed(i)``): it ends after ideal x slowdown."""
        chosen, s = where if where is not None else placed(i)
        alloc.take(chosen)
        held[i] = chosen
        rec.slowdown[i] = s
        rec.start_s[i] = now
        rec.end_s[i] = now + ideal_s[i] * s
        rec.pods[i] = np.unique(chosen // pod_span).size
        rec.hosts[i] = np.unique(chosen // cluster.gpus_per_host).size
        heapq.heappush(running, (rec.end_s[i], i))

    while nxt < n or queue or running:
        t_arr = arrival[nxt] if nxt < n else math.inf
        t_end = running[0][0] if running else math.inf
        t = min(t_arr, t_end)
        while running and running[0][0] <= t:
            _, i = heapq.heappop(running)
            alloc.release(held.pop(i))
            done += 1
        while nxt < n and arrival[nxt] <= t:
            queue.append(nxt)
            nxt += 1
        # schedule: FIFO head first, then (EASY) backfill behind a reservation for the head
        while queue and gpus[queue[0]] <= alloc.n_free:
            start_job(queue.pop(0), t)
        if policy != "fifo" and queue and alloc.n_free > 0:
            queue = easy_backfill(queue, t, running, alloc, gpus, ideal_s, rec.reserved_s,
                                  policy == "topology-aware", placed, start_job)
        ev_t.append(t)
        ev_busy.append(cluster.gpus - alloc.n_free)
        ev_frag.append(alloc.fragmentation())
        if progress is not None:
            progress(done, n)
    figures = utilisation_figures(ev_t, ev_busy, ev_frag, cluster.gpus, float(arrival[0]) if n else 0.0,
                                  float(arrival[-1]) if n else 0.0, series_bins)
    multi = gpus > 1
    wall = time.perf_counter() - t_wall
    return ScheduleResult(
        policy=policy, cluster=cluster.name, jobs=n, finished=done, skipped=tuple(skipped), **figures,
        queue_delay_s=percentiles(rec.start_s - arrival), slowdown=percentiles(rec.slowdown[multi]) | {
            "mean_all_jobs": float(rec.slowdown.mean()) if n else 0.0},
        job_ids=tuple(j.job_id for j in jobs), start_s=rec.start_s, end_s=rec.end_s, job_slowdown=rec.slowdown,
        pods_spanned=rec.pods, reserved_s=rec.reserved_s, hosts_spanned=rec.hosts,
        cache={"hits": sm.hits, "misses": sm.misses}, wall_s=wall)
