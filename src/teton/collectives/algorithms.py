"""Collective algorithms as phases of flows over GPU pairs (no routing here: hops are GPU -> GPU).

A ``Phase`` is a set of flows that run together; the phases of one collective run one after the
other. A flow is a chain of hops that moves at one rate (a pipelined NCCL ring channel: every hop
forwards what the previous one delivered, so the chain runs at its slowest hop) or a single hop.
Byte counts are per byte of the nccl-tests size S (``bytes = flow_bytes * S``).

Algorithms (NCCL; Thakur, Rabenseifner & Gropp 2005 for recursive halving/doubling):
* ``ring`` -- ``channels_per_nic`` rings per NIC of a host (NCCL's channels): channel c enters each
  host on GPU (c mod k)'s NIC, visits the local members on NVLink and leaves through the same NIC (rail-aligned, PXN,
  NCCL >= 2.12), so each inter-host hop is NIC c -> NIC c of the next host in rank order. Every hop
  of a channel carries factor * S / C (factor (n-1)/n for all-gather / reduce-scatter, 2(n-1)/n
  for all-reduce). A group inside one host is one NVLink ring.
* ``tree`` -- NCCL's double binary tree over hosts (two complementary binary trees, each moving
  half the data; reduce up then broadcast down, pipelined), per channel, with an NVLink chain
  inside each host.
* ``rhd`` -- recursive halving (reduce-scatter) then doubling (all-gather), log2 n sequential
  steps of pairwise exchanges; non-power-of-two all-reduce folds the extra ranks first.
* ``hierarchical`` -- reduce-scatter on NVLink inside each host, the fabric collective among the
  k same-local-index GPUs of the hosts (S/k each), all-gather on NVLink.
* ``nvls`` -- NVLink SHARP all-reduce inside a host: every GPU streams through its NVSwitch port;
  the flow carries the nccl-tests bus bytes 2(n-1)/n * S on the GPU's NVLink up and down links.
* ``all_to_all`` -- every pair exchanges S/n at once; ``send_recv`` -- member i sends S to i+1
  (a pair: 0 -> 1 only, the pipeline-parallel direction); ``broadcast`` -- the ring without the
  hop back into the root, S per hop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from teton.errors import SpecError

ALGOS = ("auto", "ring", "tree", "rhd", "hierarchical", "nvls")
# NCCL duplicates the rings / trees its topology search finds when intra-node bandwidth is high
# (src/graph/search.cc, ncclTopoCompute: "Duplicate channels" when bwIntra >= 25 GB/s), so on
# NVLink hosts every NIC carries two channels, each its own connection (own QPs, own 5-tuple).
NCCL_CHANNELS_PER_NIC = 2
# Channels of a collective inside one NVSwitch host: NCCL's NVLS default (NCCL_NVLS_NCHANNELS =
# 16, NCCL 2.17-2.21 environment-variable docs); its ring channels on 8-GPU NVSwitch hosts are of
# the same order.
NCCL_NVLINK_CHANNELS = 16


def nccl_channels(groups: np.ndarray, gpus_per_host: int, nics_per_host: int) -> int:
    """Channels NCCL runs for a collective on ``groups``; every rank runs one CTA per channel
    (src/enqueue.cc: the kernel's grid is nChannels), each holding an SM for the collective.

    Inside one host: ``NCCL_NVLINK_CHANNELS``. Across hosts: ``NCCL_CHANNELS_PER_NIC`` per NIC
    that the group's GPUs of a host use (one NIC per GPU on rail-optimised hosts), as the ring
    builder below assumes.
    """
    row = np.atleast_2d(np.asarray(groups))[0]
    _, per_host = np.unique(row // gpus_per_host, return_counts=True)
    if per_host.size == 1:
        return NCCL_NVLINK_CHANNELS
    return NCCL_CHANNELS_PER_NIC * int(min(per_host.min(), nics_per_host))


@dataclass(frozen=True)
class Phase:
    """Flows that run at once. Flow f is hops ``flow_ptr[f]:flow_ptr[f+1]`` of (hop_src, hop_dst)."""

    hop_src: np.ndarray
    hop_dst: np.ndarray
    hop_conn: np.ndarray  # connection (channel / step) number, part of the ECMP 5-tuple
    flow_ptr: np.ndarray
    flow_bytes: np.ndarray  # bytes per byte of S
    flow_group: np.ndarray
    steps: int  # sequential latency steps of this phase
    nvls: bool = False  # NVLink links run at the NVLS efficiency
    # of ``steps``, those that cross the network (:func:`network_steps`); None: every step takes
    # the phase's slowest hop's latency
    net_steps: int | None = None

    @property
    def n_flows(self) -> int:
        return int(self.flow_bytes.size)


class _Builder:
    """Accumulates flows (chains of hops) for one phase."""

    def __init__(self):
        self.src: list[np.ndarray] = []
        self.dst: list[np.ndarray] = []
        self.conn: list[np.ndarray] = []
        self.lens: list[np.ndarray] = []
        self.bytes: list[np.ndarray] = []
        self.group: list[np.ndarray] = []

    def flow(self, src, dst, conn: int, nbytes: float, group: int) -> None:
        """One chain of hops src[i] -> dst[i] moving at one rate."""
        src = np.asarray(src, dtype=np.int64).ravel()
        if src.size == 0:
            return
        self.src.append(src)
        self.dst.append(np.asarray(dst, dtype=np.int64).ravel())
        self.conn.append(np.full(src.size, conn, dtype=np.int64))
        self.lens.append(np.array([src.size]))
        self.bytes.append(np.array([nbytes], dtype=np.float64))
        self.group.append(np.array([group]))

    def singles(self, src, dst, conn, nbytes, group) -> None:
        """Many one-hop flows at once (arrays broadcast to src's shape)."""
        src = np.asarray(src, dtype=np.int64).ravel()
        if src.size == 0:
            return
        n = src.size
        self.src.append(src)
        self.dst.append(np.asarray(dst, dtype=np.int64).ravel())
        self.conn.append(np.broadcast_to(np.asarray(conn, dtype=np.int64), (n,)).copy())
        self.lens.append(np.ones(n, dtype=np.int64))
        self.bytes.append(np.broadcast_to(np.asarray(nbytes, dtype=np.float64), (n,)).copy())
        self.group.append(np.broadcast_to(np.asarray(group, dtype=np.int64), (n,)).copy())

    def phase(self, steps: int, nvls: bool = False, net_steps: int | None = None) -> Phase | None:
        if not self.lens:
            return None
        lens = np.concatenate(self.lens)
        ptr = np.zeros(lens.size + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        return Phase(np.concatenate(self.src), np.concatenate(self.dst), np.concatenate(self.conn), ptr,
                     np.concatenate(self.bytes), np.concatenate(self.group), int(steps), nvls,
                     None if net_steps is None else int(net_steps))


def _hosts(row: np.ndarray, gph: int) -> list[np.ndarray] | np.ndarray:
    """Members of a group per host (``gph``: an NVLink domain's GPUs): hosts in rank order of first
    appearance, members sorted; an (hosts, k) array when every host holds k members."""
    host = row // gph
    _, first, inverse = np.unique(host, return_index=True, return_inverse=True)
    appearance = np.argsort(np.argsort(first))[inverse.ravel()]
    members = row[np.lexsort((row, appearance))]
    counts = np.bincount(appearance)
    if (counts == counts[0]).all():
        return members.reshape(counts.size, counts[0])
    return np.split(members, np.cumsum(counts)[:-1])


def _ring_chains(row: np.ndarray, gph: int, drop_wrap: bool = False,
                 dup: int = NCCL_CHANNELS_PER_NIC) -> list[tuple[np.ndarray, np.ndarray]]:
    """Hops (src, dst) of each ring channel of one group (see the module docstring)."""
    per_host = _hosts(row, gph)
    if len(per_host) == 1:
        m = per_host[0]
        src, dst = m, np.roll(m, -1)
        return [(src[:-1], dst[:-1]) if drop_wrap else (src, dst)]
    channels = min(len(m) for m in per_host) * dup
    if isinstance(per_host, np.ndarray):
        return _even_ring_chains(per_host, channels, drop_wrap)
    return _uneven_ring_chains(per_host, channels, drop_wrap)


def _uneven_ring_chains(per_host: list[np.ndarray], channels: int,
                        drop_wrap: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``_ring_chains`` for hosts holding different numbers of members: channel ``c`` enters each
    host on its member ``c mod k``, visits the others on NVLink and leaves for the next host."""
    chains = []
    for c in range(channels):
        src, dst = [], []
        entries = [m[c % len(m)] for m in per_host]
        for hi, m in enumerate(per_host):
            k = len(m)
            if k > 1:
                order = np.roll(m, -(c % k))
                src += [order[:-1], order[-1:]]  # NVLink forward, then PXN back to the NIC's GPU
                dst += [order[1:], order[:1]]
            if drop_wrap and hi == len(per_host) - 1:
                continue
            src.append(np.array([entries[hi]]))
            dst.append(np.array([entries[(hi + 1) % len(per_host)]]))
        chains.append((np.concatenate(src), np.concatenate(dst)))
    return chains


def _even_ring_chains(members: np.ndarray, channels: int, drop_wrap: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``_ring_chains`` for k members on each of h hosts (an (h, k) array), vectorised: per host
    and channel, k - 1 NVLink hops forward, the PXN hop back to the NIC's GPU, then the hop to the
    next host's entry GPU, in the same order as the general loop."""
    h, k = members.shape
    chains = []
    for c in range(channels):
        order = np.roll(members, -(c % k), axis=1)
        entries = members[:, c % k]
        inter_src, inter_dst = entries[:, None], np.roll(entries, -1)[:, None]
        if k > 1:
            src = np.concatenate([order[:, :-1], order[:, -1:], inter_src], axis=1)
            dst = np.concatenate([order[:, 1:], order[:, :1], inter_dst], axis=1)
        else:
            src, dst = inter_src, inter_dst
        src, dst = src.ravel(), dst.ravel()
        if drop_wrap:
            src, dst = src[:-1], dst[:-1]
        chains.append((src, dst))
    return chains


def _ring(builder: _Builder, row: np.ndarray, gph: int, factor: float, group: int, conn0: int = 0,
          drop_wrap: bool = False, dup: int = NCCL_CHANNELS_PER_NIC) -> None:
    chains = _ring_chains(row, gph, drop_wrap, dup)
    for c, (src, dst) in enumerate(chains):
        builder.flow(src, dst, conn0 + c, factor / len(chains), group)


def _tree(builder: _Builder, row: np.ndarray, gph: int, group: int, dup: int) -> None:
    per_host = _hosts(row, gph)
    h = len(per_host)
    channels = min(len(m) for m in per_host) * dup
    pos = np.arange(h)
    for c in range(channels):
        nic = np.array([m[c % len(m)] for m in per_host])
        for t in range(2):
            node = pos if t == 0 else h - 1 - pos  # tree 2 mirrors tree 1: leaves become interior
            child = np.flatnonzero(node > 0)
            parent_node = (node[child] - 1) // 2
            parent = parent_node if t == 0 else h - 1 - parent_node
            src = [nic[child], nic[parent]]  # reduce up, broadcast down
            dst = [nic[parent], nic[child]]
            for m in per_host:  # intra-host chain to the NIC GPU and back
                if len(m) > 1:
                    order = np.roll(m, -(c % len(m)))
                    src += [order[1:], order[:-1]]
                    dst += [order[:-1], order[1:]]
            builder.flow(np.concatenate(src), np.concatenate(dst), 2 * c + t, 0.5 / channels, group)


def _rhd_phases(groups: np.ndarray, op: str) -> list[Phase]:
    n = groups.shape[1]
    p = 1 << (n.bit_length() - 1)
    if p != n and op != "all_reduce":
        raise SpecError("algo", "rhd", f"{op} needs a power-of-two group for recursive halving/doubling (n={n})")
    log = p.bit_length() - 1
    phases: list[Phase] = []
    rank = np.arange(p)

    gidx = np.repeat(np.arange(groups.shape[0]), p)

    def exchange(dist: int, nbytes: float, conn: int) -> Phase:
        b = _Builder()
        b.singles(groups[:, :p].ravel(), groups[:, rank ^ dist].ravel(), conn, nbytes, gidx)
        return b.phase(1)

    def fold(forward: bool) -> Phase:
        b = _Builder()
        hi, lo = groups[:, p:n].ravel(), groups[:, 0:n - p].ravel()
        g = np.repeat(np.arange(groups.shape[0]), n - p)
        b.singles(hi if forward else lo, lo if forward else hi, 99, 1.0, g)
        return b.phase(1)

    if p != n:
        phases.append(fold(True))
    if op in ("all_reduce", "reduce_scatter"):
        for s in range(log):
            phases.append(exchange(p >> (s + 1), 1.0 / (2 ** (s + 1)), s))
    if op in ("all_reduce", "all_gather"):
        for s in range(log):
            dist = 1 << s
            phases.append(exchange(dist, dist / p, log + s))
    if p != n:
        phases.append(fold(False))
    return phases


def auto_steps(op: str, n: int, ring_steps: int, one_per_host: bool, pat: bool) -> int:
    """Latency steps NCCL's tuner gets for ``op`` over ``n`` ranks where latency dominates, from
    the ring's ``ring_steps``: an all-reduce's capped at ``2 ceil(log2 n)`` (double binary trees);
    an all-gather's or reduce-scatter's at ``ceil(log2 n)`` with ``pat`` when each rank sits in an
    NVLink domain (host) of its own (NCCL 2.23's PAT, Parallel Aggregated Trees, for one GPU per
    node: a logarithmic number of network steps; ASSUMPTION: at the ring's bus bandwidth, so PAT
    only cuts latency); any other op keeps the ring's."""
    if n <= 2:
        return ring_steps
    if op == "all_reduce":
        return min(ring_steps, 2 * math.ceil(math.log2(n)))
    if pat and one_per_host and op in ("all_gather", "reduce_scatter"):
        return min(ring_steps, math.ceil(math.log2(n)))
    return ring_steps


def network_steps(op: str, steps: int, ring_steps: int, hosts: int) -> int:
    """Of a collective's ``steps`` latency steps over ``hosts`` hosts (NVLink domains), those that
    cross the network, as NCCL's tuner counts them (``src/graph/tuning.cc``, ``ncclTopoTuneModel``:
    a ring's latency is ``(nsteps - nInterSteps) intraLat + nInterSteps interLat``, ``nInterSteps``
    = 2 nNodes for an all-reduce, nNodes - 1 for the others; a tree's ``2 log2(nNodes)`` of its
    steps are inter-node): the rest are NVLink steps. ``steps`` below ``ring_steps`` is a tree (an
    all-reduce) or PAT (an all-gather / reduce-scatter, one GPU per host): its logarithmic steps
    over the hosts."""
    if hosts <= 1:
        return 0
    if steps < ring_steps:
        net = 2 * math.ceil(math.log2(hosts)) if op == "all_reduce" else math.ceil(math.log2(hosts))
    else:
        net = 2 * hosts if op == "all_reduce" else hosts - 1
    return min(steps, max(net, 1))


def max_hosts(groups: np.ndarray, gpus_per_host: int) -> int:
    """The most hosts (NVLink domains) one row of ``groups`` spans."""
    h = np.sort(np.atleast_2d(groups) // gpus_per_host, axis=1)
    return int((1 + (np.diff(h, axis=1) != 0).sum(axis=1)).max())


def phases_for(op: str, groups: np.ndarray, gpus_per_host: int, algo: str = "ring",
               nvls: bool = False, channels_per_nic: int = NCCL_CHANNELS_PER_NIC, pat: bool = False) -> list[Phase]:
    """The phases of collective ``op`` (nccl-tests size semantics) on every row of ``groups``;
    ``channels_per_nic`` rings (or tree pairs) per NIC of a host; ``pat``: NCCL's PAT latency for
    an ``auto`` all-gather or reduce-scatter of one GPU per host (:func:`auto_steps`)."""
    dup = channels_per_nic
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    m, n = groups.shape
    if n <= 1:
        return []
    gph = gpus_per_host
    intra = bool((groups // gph == (groups[:, :1] // gph)).all())
    if algo == "nvls":
        if not (nvls and intra and op == "all_reduce"):
            raise SpecError("algo", algo, "nvls needs an all_reduce inside one host of a GPU with NVLink SHARP")
        b = _Builder()
        b.singles(groups.ravel(), groups.ravel(), 0, 2.0 * (n - 1) / n, np.repeat(np.arange(m), n))
        # latency: the analytical model's all-reduce convention, 2 ceil(log2 n) NVLink steps
        return [b.phase(min(2 * (n - 1), 2 * math.ceil(math.log2(n))), nvls=True)]
    if op == "all_to_all":
        b = _Builder()
        i, j = np.nonzero(~np.eye(n, dtype=bool))
        b.singles(groups[:, i].ravel(), groups[:, j].ravel(), 0, 1.0 / n, np.repeat(np.arange(m), i.size))
        return [b.phase(n - 1)]
    if op == "send_recv":
        b = _Builder()
        i = np.array([0]) if n == 2 else np.arange(n)
        j = (i + 1) % n
        b.singles(groups[:, i].ravel(), groups[:, j].ravel(), 0, 1.0, np.repeat(np.arange(m), i.size))
        return [b.phase(1)]
    hosts = max_hosts(groups, gph)
    if op == "broadcast":
        b = _Builder()
        for gi, row in enumerate(groups):
            _ring(b, row, gph, 1.0, gi, drop_wrap=True, dup=dup)
        return [b.phase(n - 1, net_steps=network_steps(op, n - 1, n - 1, hosts))]
    factor = {"all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_reduce": 2.0 * (n - 1) / n}.get(op)
    if factor is None:
        raise SpecError("op", op, "unknown collective")
    ring_steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    if algo in ("ring", "auto") or (algo == "hierarchical" and intra):
        b = _Builder()
        for gi, row in enumerate(groups):
            _ring(b, row, gph, factor, gi, dup=dup)
        steps = ring_steps
        if algo == "auto":  # NCCL's tuner takes trees (PAT) when latency-bound
            on = np.sort(groups // gph, axis=1)
            steps = auto_steps(op, n, ring_steps, bool((on[:, 1:] != on[:, :-1]).all()), pat)
        return [b.phase(steps, net_steps=network_steps(op, steps, ring_steps, hosts))]
    if algo == "tree":
        if op != "all_reduce":
            raise SpecError("algo", algo, "NCCL trees are for all_reduce only")
        b = _Builder()
        for gi, row in enumerate(groups):
            _tree(b, row, gph, gi, dup)
        hosts = len(_hosts(groups[0], gph))
        return [b.phase(2 * max(1, math.ceil(math.log2(max(hosts, 2)))) + 2 * (n // hosts - 1))]
    if algo == "rhd":
        return _rhd_phases(groups, op)
    if algo == "hierarchical":
        return _hierarchical(op, groups, gph, dup)
    raise SpecError("algo", algo, f"must be one of {', '.join(ALGOS)}")


def _hierarchical(op: str, groups: np.ndarray, gph: int, dup: int) -> list[Phase]:
    per = [_hosts(row, gph) for row in groups]
    k = min(len(m) for hosts in per for m in hosts)
    if any(len(m) != k for hosts in per for m in hosts):
        raise SpecError("algo", "hierarchical", "needs the same number of group members on every host")
    h = len(per[0])
    n = h * k
    intra_rs, fabric, intra_ag = _Builder(), _Builder(), _Builder()
    for gi, hosts in enumerate(per):
        for m in hosts:
            if k > 1:
                intra_rs.flow(m, np.roll(m, -1), 0, (k - 1) / k, gi)
                intra_ag.flow(m, np.roll(m, -1), 0, (k - 1) / k, gi)
        for j in range(k):
            row = np.array([m[j] for m in hosts])
            if op == "all_reduce":
                _ring(fabric, row, gph, 2.0 * (h - 1) / h / k, gi, conn0=j * dup, dup=dup)
            else:  # all_gather / reduce_scatter: (h-1) shards of S/n per hop
                _ring(fabric, row, gph, (h - 1) / n, gi, conn0=j * dup, dup=dup)
    fab_steps = 2 * (h - 1) if op == "all_reduce" else h - 1
    out = []
    if op in ("all_reduce", "reduce_scatter"):
        out.append(intra_rs.phase(k - 1))
    out.append(fabric.phase(fab_steps))
    if op in ("all_reduce", "all_gather"):
        out.append(intra_ag.phase(k - 1))
    return [p for p in out if p is not None]
