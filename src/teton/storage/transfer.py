"""Many writers (or readers) moving bytes to (from) a storage system at once.

Model. Writer w on host h(w) moves b_w bytes. The aggregate rate is capped by every stage on the
path; each cap is a user-byte rate:
    ssd             = share * servers * ssds * ssd_bw / amp          (write; amp = 1 for read)
    server_nic      = share * servers * nic_goodput / amp
    frontend_fabric = hosts * frontend_nics * nic_bw * goodput / frontend_oversubscription
                      minus traffic already on it (e.g. the data loader during an async upload)
    <client>_client = hosts * 1 / (1/client_bw + op_overhead/op_bytes)   (FUSE / NFS client)
(for the local tier the servers are the hosts themselves and there is no network stage).
``share`` is what other jobs leave of the storage servers, 1 - ``other_jobs_share``
(:mod:`teton.storage.budget`); the client side (frontend, client) is the job's own.
C = min(caps); the named bottleneck is the argmin.

Straggler tail: each writer also has its own ceiling u_w: its host's client ceiling (on the local
tier, its host's flash) split between the writers on that host, times the host's seeded
mean-one log-normal slowdown s_h ~ LogNormal(-sigma^2/2, sigma) (a slow client host: FUSE daemon,
CPU or NIC contention; sigma = ``writer_jitter_sigma``, an ASSUMPTION to calibrate from measured
per-host write times; 0 turns stragglers off). C is shared
max-min fairly (water filling: every active writer gets min(u_w, lambda), sum = C) and rates are
re-solved each time a class of writers finishes (:func:`fair_share_fluid`). The transfer is done
when the slowest writer is; ``saturated_s`` is how long C ran flat out and ``tail_s`` the time
after that, or after half the writers had finished if that is later (C never saturated: writers at
their own ceilings), in which only stragglers were still writing. Without jitter and with equal writers
T = total / C exactly. Metadata: ``ops_per_file`` per file plus ``ops_per_chunk`` Block-layer ops per chunk,
against the metadata service rate (per host on the local tier), overlapped with the data:
    T = max(T_fluid, metadata_ops / metadata_rate) + one request latency.
The bottleneck named is ``metadata`` when that takes longest; the writers' own ceiling
(``<client>_client``, or ``frontend_fabric`` / ``ssd`` when that is the per-host limit) when the
slowest writer's solo time b_w / u_w is T (it ran at its ceiling throughout: a larger shared stage
would not finish sooner); else the shared stage (argmin of the caps) when C ran flat out for at
least half of T, the writers' own ceiling otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from teton.hardware import storage as hw
from teton.spec.cluster import ClusterSpec
from teton.spec.storage import StorageSystem


@dataclass(frozen=True)
class Transfer:
    """The outcome of one many-writer transfer."""

    direction: str
    total_bytes: float
    writers: int
    hosts: int
    time_s: float
    delivered_bw_bytes_s: float
    bottleneck: str
    caps_bytes_s: dict[str, float] = field(default_factory=dict)
    aggregate_s: float = 0.0  # total / C
    slowest_writer_s: float = 0.0  # when the last writer finishes (fair-share fluid model)
    median_writer_s: float = 0.0  # when half the writers have finished
    metadata_s: float = 0.0
    metadata_ops: float = 0.0
    saturated_s: float = 0.0  # how long the shared stage ran flat out; the rest is the straggler tail
    peak_rate_bytes_s: float = 0.0  # aggregate rate while every writer is active
    # what caps that rate: the shared stage (argmin of the caps) when it reaches it, else the
    # writers' own ceiling (``bottleneck`` names what sets the finish time instead)
    rate_bottleneck: str = ""

    @property
    def tail_s(self) -> float:
        """The straggler tail: how long the slowest writer keeps writing after the shared stage
        stopped running flat out or, where it never did (writers at their own ceilings) or stopped
        earlier, after half the writers had finished: ``slowest - max(saturated, median)``."""
        return max(0.0, self.slowest_writer_s - max(self.saturated_s, self.median_writer_s))

    def to_dict(self) -> dict:
        return {
            "direction": self.direction, "total_bytes": self.total_bytes, "writers": self.writers,
            "hosts": self.hosts, "time_s": self.time_s, "delivered_bw_bytes_s": self.delivered_bw_bytes_s,
            "bottleneck": self.bottleneck, "caps_bytes_s": dict(self.caps_bytes_s),
            "aggregate_s": self.aggregate_s, "slowest_writer_s": self.slowest_writer_s,
            "median_writer_s": self.median_writer_s, "metadata_s": self.metadata_s,
            "metadata_ops": self.metadata_ops, "saturated_s": self.saturated_s, "tail_s": self.tail_s,
            "peak_rate_bytes_s": self.peak_rate_bytes_s, "rate_bottleneck": self.rate_bottleneck,
        }


def frontend_bytes_s_per_host(cluster: ClusterSpec) -> float:
    """A GPU host's frontend NIC goodput toward storage, after frontend oversubscription."""
    h = cluster.host_spec
    nic = h.frontend_nic_spec
    return h.frontend_nics * nic.bytes_s * hw.tcp_goodput_fraction() / cluster.frontend_oversubscription


def writer_slowdowns(n: int, sigma: float, seed: int) -> np.ndarray:
    """Mean-one log-normal per-writer speed factors (deterministic for a seed)."""
    if sigma <= 0 or n == 0:
        return np.ones(n)
    rng = np.random.default_rng(seed)
    return rng.lognormal(mean=-0.5 * sigma * sigma, sigma=sigma, size=n)


def transfer(system: StorageSystem, cluster: ClusterSpec, writer_bytes: np.ndarray, writer_host: np.ndarray,
             direction: str = "write", files_per_writer: float = 1.0, extra_files: int = 0,
             seed: int = 0, frontend_busy_bytes_s: float = 0.0, metadata: bool = True,
             storage_share: float = 1.0) -> Transfer:
    """Time for writers ``writer_bytes`` (on hosts ``writer_host``) to write or read at once.

    Writers with zero bytes are ignored. ``extra_files``: files written once (a coordinator's
    index). ``frontend_busy_bytes_s``: other traffic on the frontend in the same direction.
    ``metadata=False``: streaming from files already open (no metadata ops at all).
    ``storage_share``: the share of the storage servers' bandwidth this job gets (module docstring).
    """
    b = np.asarray(writer_bytes, dtype=float)
    h = np.asarray(writer_host, dtype=np.int64)
    keep = b > 0
    b, h = b[keep], h[keep]
    total = float(b.sum())
    if total == 0:
        return Transfer(direction, 0.0, 0, 0, 0.0, 0.0, "none")
    uniq, inv, per_host = np.unique(h, return_inverse=True, return_counts=True)
    n_hosts = int(uniq.size)
    local = system.kind == "local"
    amp = system.write_amplification if direction == "write" else 1.0
    flash = system.server_flash_write_bytes_s if direction == "write" else system.server_flash_read_bytes_s
    servers = n_hosts if local else system.servers
    caps: dict[str, float] = {"ssd": storage_share * servers * flash / amp}
    host_cap = system.client_bytes_s_per_host()
    host_cap_name = f"{system.client}_client"
    if local:
        if storage_share * flash / amp < host_cap:
            host_cap, host_cap_name = storage_share * flash / amp, "ssd"
    else:
        caps["server_nic"] = storage_share * servers * system.nic_goodput_bytes_s / amp
        fe_full = frontend_bytes_s_per_host(cluster)
        fe_host = max(fe_full - frontend_busy_bytes_s / n_hosts, 1e-9 * fe_full)  # what other traffic leaves
        caps["frontend_fabric"] = n_hosts * fe_host
        if fe_host < host_cap:
            host_cap, host_cap_name = fe_host, "frontend_fabric"
    if np.isfinite(system.client_bytes_s_per_host()):
        caps[f"{system.client}_client"] = n_hosts * system.client_bytes_s_per_host()
    agg_name = min(caps, key=caps.get)
    aggregate_s = total / caps[agg_name]

    cap = caps[agg_name]
    u = host_cap / per_host[inv] if np.isfinite(host_cap) else np.full(b.size, cap)
    u = u * writer_slowdowns(n_hosts, system.writer_jitter_sigma, seed)[inv]
    fluid = fair_share_fluid(b, u, cap)

    chunks = system.metadata_ops_per_chunk * np.ceil(b / system.chunk_bytes).sum()
    ops = b.size * files_per_writer * system.metadata_ops_per_file + float(chunks) \
        + extra_files * system.metadata_ops_per_file
    meta_rate = system.metadata_ops_s * (n_hosts if local else 1)
    metadata_s = ops / meta_rate if metadata else 0.0
    ops = ops if metadata else 0.0

    time_s = max(fluid.time_s, metadata_s) + system.op_latency_us * 1e-6
    slowest_solo_s = float((b / u).max())
    if metadata_s >= fluid.time_s:
        name = "metadata"
    elif fluid.time_s <= slowest_solo_s * (1 + 1e-6):
        name = host_cap_name  # the slowest writer ran at its own ceiling throughout: more servers would not help
    elif fluid.saturated_s >= fluid.time_s - fluid.saturated_s:
        name = agg_name  # most of the time the shared stage runs flat out
    else:
        name = host_cap_name  # most of the time is writers held by their own (client-side) ceilings
    return Transfer(direction, total, int(b.size), n_hosts, time_s, total / time_s, name, caps,
                    aggregate_s, fluid.time_s, fluid.median_finish_s, metadata_s, float(ops),
                    fluid.saturated_s, fluid.peak_rate_bytes_s,
                    agg_name if fluid.peak_rate_bytes_s >= cap * (1 - 1e-9) else host_cap_name)


@dataclass(frozen=True)
class Fluid:
    time_s: float  # when the last writer finishes
    saturated_s: float  # when the shared capacity stops being fully used (0 if never)
    median_finish_s: float
    peak_rate_bytes_s: float


def _classes(b: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group writers into flow classes by solo time b/u: 16 equal bins over the fastest half, then
    bins halving toward the slow tail down to single writers (the tail is kept exact)."""
    order = np.argsort(b / u, kind="stable")
    w = b.size
    cuts = {0, w}
    cuts.update(int(x) for x in np.linspace(0, w // 2, 17))
    k = 1
    while w >> k:
        cuts.add(w - (w >> k))
        k += 1
    cuts.update(range(max(0, w - 8), w))
    edges = np.array(sorted(cuts))
    n = np.diff(edges)
    bs, us = b[order], u[order]
    sum_b = np.add.reduceat(bs, edges[:-1])
    sum_t = np.add.reduceat(bs / us, edges[:-1])
    keep = n > 0
    n, sum_b, sum_t = n[keep], sum_b[keep], sum_t[keep]
    return n.astype(float), sum_b / n, sum_b / sum_t  # count, bytes per writer, ceiling (keeps mean solo time)


def fair_share_fluid(b: np.ndarray, u: np.ndarray, cap: float) -> Fluid:
    """Max-min fair sharing of ``cap`` among writers with ceilings ``u``, until all ``b`` are moved.

    At every instant each active writer gets min(u_w, lambda) with sum = cap (water filling), or
    its ceiling when the ceilings don't fill cap; rates change when a class of writers finishes.
    Writers are aggregated into flow classes (:func:`_classes`).
    """
    n, rem, uc = _classes(np.asarray(b, float), np.asarray(u, float))
    active = rem > 0
    t = sat = peak = 0.0
    finish = np.zeros(n.size)
    while active.any():
        ua, na = uc[active], n[active]
        if float((na * ua).sum()) <= cap:
            x = ua
            saturated = False
        else:
            o = np.argsort(ua)
            us, ns = ua[o], na[o]
            below = np.concatenate([[0.0], np.cumsum(ns * us)[:-1]])
            above = np.cumsum(ns[::-1])[::-1]
            lam = (cap - below) / above
            j = int(np.argmax(lam <= us))
            x = np.minimum(ua, lam[j])
            saturated = True
        peak = max(peak, float((na * x).sum()))
        idx = np.flatnonzero(active)
        ratio = rem[idx] / x
        dt = float(ratio.min())
        t += dt
        if saturated:
            sat = t
        rem[idx] -= x * dt
        ended = idx[ratio <= dt * (1 + 1e-9)]
        rem[ended] = 0.0
        finish[ended] = t
        active[ended] = False
    order = np.argsort(finish)
    cum = np.cumsum(n[order])
    median = float(finish[order][np.searchsorted(cum, cum[-1] / 2)])
    return Fluid(t, sat, median, peak)
