"""The analytical (alpha-beta) network cost model over a layered fabric.

One question: how long does collective ``op`` of ``size_bytes`` take on ``groups`` (an
(n_groups, n) array of GPU ids), all groups running at once?

Model (NCCL ring algorithms; nccl-tests definitions of algbw / busbw, PERFORMANCE.md):
    t = factor(op, n) * S / busbw + steps(op, n) * alpha
    factor: all_gather / reduce_scatter / all_to_all (n-1)/n, all_reduce 2(n-1)/n, send_recv 1.
Bus bandwidth of a group spread over several hosts, k its fewest members on one host:
    busbw = min(NVLink_bw * e_nvlink,  NIC_bw * e_net * min(k, min_l min_d k D_d / (o_l E_d)))
for every fabric layer l whose domains the group spans more than one of and every such domain d
it has members in: D_d the domain's GPUs, o_l the layer's oversubscription, E_d the ring edges
that leave d, summed over all the groups that cross l there. Derivation: NCCL builds one ring
per NIC, and a host with k of the group's GPUs has k NICs for it (k channels: the host with the
fewest members bounds every ring, so k is that host's count, not the average); NCCL links a ring's
hosts in rank order, so each channel leaves d once per hop of the rank-ordered ring that leaves
it (once for a group whose ranks are contiguous per domain, many times for ranks scattered over
domains), and the group puts k times that many edges across d's uplinks, whose capacity
D_d * NIC / o_l the E_d edges share: r <= NIC * D_d / (o_l E_d), busbw k rings times r. A domain
full of groups of b_l members each (E_d = D_d / b_l * k) gives the
classic NIC * b_l / o_l; a group alone across a pod boundary shares its uplinks with nobody
(the groups of one collective see the fabric alone, and only they).
A point-to-point send (``send_recv`` over pairs: a pipeline boundary, a ring attention step) loads
one direction of each uplink: E_out(d) counts the sends leaving d, E_in(d) those entering it, and a
send runs at NIC * min(D_s / (o_l E_out(s)), D_r / (o_l E_in(r))), at most one NIC.
``concurrent_times``: several sets at once (a pipeline's boundaries in steady state), every set's
groups counted in E.
A group inside one host runs on NVLink (NVLS in-switch reduction for all-reduce where present).
alpha: per network step, the NIC latency plus the switches and cables of a path that turns at the
lowest tier holding the whole group (each switch below the turn passed twice, the turning one once:
``teton.spec.cluster.path_latency_s``);
of a collective's steps only NCCL's tuner's inter-node ones are network steps (``src/graph/
tuning.cc``: a ring's 2 nNodes for an all-reduce, nNodes - 1 otherwise; a tree's or PAT's
logarithmic ones; ``teton.collectives.algorithms.network_steps``), the rest NVLink steps.
steps: n - 1 (2(n - 1) for all-reduce), an all-reduce's capped at 2 ceil(log2 n) (NCCL's trees
when latency dominates), an all-gather's or reduce-scatter's at ceil(log2 n) over one GPU per host
(NCCL's PAT, ``software.nccl_pat``; ``teton.collectives.algorithms.auto_steps``).
all_to_all: the slower of two bottlenecks, in NIC-seconds per byte of S: each GPU's NIC carries
what leaves its host, (n - k) / n (k the group's fewest members on one host), and each domain d of
a layer l the group crosses carries m_d (n - m_d) / n for each group with m_d members in it, over
its D_d / o_l NICs' worth of uplinks (every crossing group's load summed):
t = S / NIC * max((n - k) / n, max_l max_d o_l sum_g m_d (n - m_d) / (n D_d)), busbw (n - 1) / n * S / t.
"""

from __future__ import annotations

import math

import numpy as np

from teton.collectives.algorithms import auto_steps, network_steps
from teton.errors import SpecError, closest
from teton.hardware import cluster_efficiency
from teton.memo import IdentityMemo, ValueMemo
from teton.spec.cluster import ClusterSpec, path_latency_s

OPS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv", "broadcast")
NVLINK_STEP_LATENCY_S = 2e-6  # NCCL intra-node step latency (LL/Simple ~ 1-3 us, nccl-tests small sizes)
_PATHS = ValueMemo(100_000)  # (link, bus factor, alpha, one per host): a pure function of (fabric, op, groups)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests busbw / algbw factor (doc/PERFORMANCE.md)."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op in ("send_recv", "broadcast"):
        return 1.0
    raise SpecError("op", op, closest(op, OPS))


def ring_steps(op: str, n: int) -> int:
    """Latency steps of the ring algorithm: n-1 per all-gather / reduce-scatter phase, two phases
    for all-reduce, one for a point-to-point send; a broadcast's pipelined chain fills in n-1 hops
    before its first chunk reaches the last rank (NCCL's ring broadcast; the flow model's chain)."""
    if op == "all_reduce":
        return 2 * (n - 1)
    if op == "send_recv":
        return 1
    return n - 1


class AnalyticalCostModel:
    """alpha-beta per fabric layer, contention from oversubscription by the ring argument above."""

    fidelity = "analytical"

    def __init__(self, cluster: ClusterSpec, nvls: bool = True, pat: bool = True):
        self.cluster = cluster
        self.gpu = cluster.gpu_spec
        self.eff = cluster_efficiency(self.gpu, cluster.efficiency)
        self.nvls = nvls and self.gpu.nvls
        self.pat = pat
        self.domain_gpus = cluster.domain_gpus
        self.nic_bw = cluster.nic_bytes_s_per_gpu
        self.nic_latency_s = cluster.nic.latency_us * 1e-6
        # the paths (and their cache) depend on the fabric, not on the efficiency figures
        self._key = (cluster.model_dump_json(exclude={"efficiency"}), self.nvls, self.pat)
        self._link_bw = {"nvlink": self.gpu.nvlink_bw_bytes_s * self.eff.busbw_fraction("nvlink"),
                         "nvls": self.gpu.nvlink_bw_bytes_s * self.eff.busbw_fraction("nvls"),
                         "net": self.nic_bw * self.eff.busbw_fraction("net")}
        self._ident = IdentityMemo()  # groups array -> hash of its contents

    def _groups_hash(self, groups: np.ndarray) -> int:
        return self._ident.get((groups,), (), lambda: hash(groups.tobytes()))

    # -- the shape of groups over the topology -------------------------------------------
    @staticmethod
    def _distinct_per_row(ids: np.ndarray) -> np.ndarray:
        s = np.sort(ids, axis=1)
        return 1 + (np.diff(s, axis=1) != 0).sum(axis=1)

    @staticmethod
    def _group_domains(g: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(group, domain, members) of every domain of ``span`` GPUs each group has members in."""
        width = int(g.max()) // span + 1
        rows = np.repeat(np.arange(g.shape[0]), g.shape[1])
        pairs, counts = np.unique(rows * width + (g // span).ravel(), return_counts=True)
        return pairs // width, pairs % width, counts

    def _fewest_per_host(self, g: np.ndarray) -> np.ndarray:
        """(rows,) k: the fewest members each group has on one of its hosts."""
        row_of, _, counts = self._group_domains(g, self.domain_gpus)
        fewest = np.full(g.shape[0], g.shape[1])
        np.minimum.at(fewest, row_of, counts)
        return fewest

    def _uplink_share(self, g: np.ndarray, k: np.ndarray, crossing: np.ndarray, layer) -> np.ndarray:
        """(rows,) each group's NIC-multiple through ``layer``'s uplinks (module docstring:
        min over its domains d of k D_d / (o E_d)); inf for a group that does not cross it."""
        span = layer.span_gpus
        row_of, dom_of, _ = self._group_domains(g, span)
        width = int(dom_of.max()) + 1
        cross = crossing[row_of]
        leaving = self._ring_exits(g, span, row_of, dom_of, width)
        edges = np.bincount(dom_of[cross], weights=(k[row_of] * leaving)[cross], minlength=width)
        gpus = np.minimum(span, self.cluster.gpus - np.arange(width) * span).clip(min=1)
        ratio = np.where(cross & (leaving > 0),
                         k[row_of] * gpus[dom_of] / (layer.oversubscription * np.maximum(edges[dom_of], 1)), np.inf)
        out = np.full(g.shape[0], np.inf)
        np.minimum.at(out, row_of, ratio)
        return out

    @staticmethod
    def _ring_exits(g: np.ndarray, span: int, row_of: np.ndarray, dom_of: np.ndarray, width: int) -> np.ndarray:
        """For every (group, domain) pair of :meth:`_group_domains`: the hops of the group's ring
        that leave that domain. NCCL links a ring's members in rank order (its hosts in the order
        of their ranks), so a group whose ranks alternate between domains leaves each many times;
        a group whose ranks are contiguous per domain leaves each once."""
        dom = g // span
        leave = dom != np.roll(dom, -1, axis=1)
        domains = np.bincount(row_of, minlength=g.shape[0])
        if np.array_equal(leave.sum(axis=1), np.where(domains > 1, domains, 0)):
            return np.ones(row_of.size)  # every group contiguous per domain: one exit each (the usual case)
        rows = np.broadcast_to(np.arange(g.shape[0])[:, None], g.shape)
        counts = np.bincount(rows[leave] * width + dom[leave], minlength=g.shape[0] * width)
        return counts[row_of * width + dom_of].astype(float)

    def busbw(self, op: str, groups: np.ndarray) -> tuple[float, float]:
        """(bus bandwidth bytes/s, per-step latency s) of the slowest group, contention included."""
        link, factor, latency, _, _ = self.path(op, groups)
        return self._bus_bw(link, factor), latency

    def _bus_bw(self, link: str, factor: float) -> float:
        """Bus bandwidth of a path: NVLink (NVLS) inside a host; across hosts ``factor`` NICs' worth,
        never more than NVLink."""
        if link != "net":
            return self._link_bw[link]
        return min(self._link_bw["nvlink"], self._link_bw["net"] * factor)

    def path(self, op: str, groups: np.ndarray) -> tuple[str, float, float, bool, int]:
        """(link, factor, per-network-step latency s, one GPU per host, hosts): where the slowest
        group's collective runs (``nvls`` or ``nvlink`` inside one host, else ``net``), its multiple
        of one NIC's bus bandwidth (contention included), its network steps' latency, whether every
        group has each member on a host of its own (PAT's case) and the most hosts a group spans.
        Independent of the efficiency figures."""
        g = np.atleast_2d(np.asarray(groups))
        n = g.shape[1]
        hosts = self._distinct_per_row(g // self.domain_gpus)
        if hosts.max() == 1:
            if op == "all_reduce" and self.nvls and n > 2:
                return "nvls", 1.0, NVLINK_STEP_LATENCY_S, False, 1
            return "nvlink", 1.0, NVLINK_STEP_LATENCY_S, False, 1
        share, latency = self._row_shares(op, g)
        return "net", float(share.min()), latency, bool((hosts == n).all()), int(hosts.max())

    def _row_shares(self, op: str, g: np.ndarray) -> tuple[np.ndarray, float]:
        """((rows,) each group's multiple of one NIC's bus bandwidth, every row of ``g`` running at
        once; the per-step latency of the tiers the groups cross) -- the module docstring's
        formulas. A point-to-point send (``send_recv`` over pairs) loads one direction of each
        uplink: the sends leaving a domain share its way up, those entering it its way down."""
        n = g.shape[1]
        k = self._fewest_per_host(g)
        share = k.astype(float)
        worst_a2a = (n - k) / n  # an all-to-all's NIC-time per byte of S: what leaves the host
        pairs = op == "send_recv" and n == 2
        turn = len(self.cluster.layers) - 1
        for tier, layer in enumerate(self.cluster.layers):
            domains = self._distinct_per_row(g // layer.span_gpus)
            crossing = domains > 1
            if not crossing.any():
                turn = tier  # paths turn around at this tier
                break
            share = np.minimum(share, self._send_share(g, crossing, layer) if pairs
                               else self._uplink_share(g, k, crossing, layer))
            if op == "all_to_all":
                worst_a2a = np.maximum(worst_a2a, self._a2a_uplink_time(g, crossing, layer))
        latency = self.nic_latency_s + path_latency_s(self.cluster.layers, turn)
        if op == "all_to_all":
            return (n - 1) / n / worst_a2a, latency
        if op == "send_recv":
            share = np.minimum(1.0, share)
        return share, latency

    def _a2a_uplink_time(self, g: np.ndarray, crossing: np.ndarray, layer) -> np.ndarray:
        """(rows,) the all-to-all's time through ``layer``'s uplinks, in NIC-seconds per byte of S:
        the m_d members a group has in domain d send m_d (n - m_d) / n of S out of it, every
        crossing group's summed over d's uplinks (D_d NICs' worth over o_l); a group takes its
        slowest domain (0 for a group that does not cross the layer)."""
        n = g.shape[1]
        row_of, dom_of, m = self._group_domains(g, layer.span_gpus)
        width = int(dom_of.max()) + 1
        cross = crossing[row_of]
        load = np.bincount(dom_of[cross], weights=(m * (n - m) / n)[cross], minlength=width)
        gpus = np.minimum(layer.span_gpus, self.cluster.gpus - np.arange(width) * layer.span_gpus).clip(min=1)
        t = np.where(cross, load[dom_of] * layer.oversubscription / gpus[dom_of], 0.0)
        out = np.zeros(g.shape[0])
        np.maximum.at(out, row_of, t)
        return out

    def _send_share(self, g: np.ndarray, crossing: np.ndarray, layer) -> np.ndarray:
        """(rows,) each send's NIC-multiple through ``layer``'s uplinks, sender ``g[:, 0]`` to
        receiver ``g[:, 1]``: min(D_s / (o E_out(s)), D_r / (o E_in(r))) over the sender's and the
        receiver's domains, E counting the crossing sends that leave (enter) each; inf for a send
        that does not cross the layer."""
        span = layer.span_gpus
        src, dst = g[:, 0] // span, g[:, 1] // span
        width = int(max(src.max(), dst.max())) + 1
        out_edges = np.bincount(src[crossing], minlength=width).clip(min=1)
        in_edges = np.bincount(dst[crossing], minlength=width).clip(min=1)
        gpus = np.minimum(span, self.cluster.gpus - np.arange(width) * span).clip(min=1)
        o = layer.oversubscription
        ratio = np.minimum(gpus[src] / (o * out_edges[src]), gpus[dst] / (o * in_edges[dst]))
        return np.where(crossing, ratio, np.inf)

    def collective_time(self, op: str, groups: np.ndarray, size_bytes: float) -> float:
        """Seconds until the slowest of ``groups`` finishes ``op`` on ``size_bytes`` (nccl-tests S)."""
        if groups.ndim != 2:
            groups = np.atleast_2d(np.asarray(groups))
        n = groups.shape[1]
        if n <= 1 or size_bytes <= 0:
            return 0.0
        return self._time(op, n, self._path_of(op, groups), size_bytes)

    def _path_of(self, op: str, groups: np.ndarray) -> tuple[str, float, float, bool, int]:
        key = (self._key, op, groups.shape, self._groups_hash(groups))
        hit = _PATHS.get(key)
        return hit if hit is not None else _PATHS.put(key, self.path(op, groups))

    def _time(self, op: str, n: int, path: tuple[str, float, float, bool, int], size_bytes: float) -> float:
        link, factor, alpha, one_per_host, hosts = path
        bw = self._bus_bw(link, factor)
        # NCCL switches to (double binary) trees, or PAT, when latency dominates; of the steps, those
        # that cross the network take alpha, the rest an NVLink step (NCCL's tuner: network_steps)
        ring = ring_steps(op, n)
        steps = auto_steps(op, n, ring, one_per_host, self.pat)
        # (inside one host alpha is an NVLink step's, and network_steps counts none)
        net = steps if op in ("send_recv", "all_to_all") else network_steps(op, steps, ring, hosts)
        return bus_factor(op, n) * size_bytes / bw + net * alpha + (steps - net) * NVLINK_STEP_LATENCY_S

    def concurrent_times(self, op: str, group_sets: list[np.ndarray], size_bytes: float) -> np.ndarray:
        """Seconds of ``op`` on each of ``group_sets`` when all of them run at once (a pipeline's
        boundaries, which send together in steady state): each set as :meth:`collective_time`, its
        groups across hosts sharing the uplinks with every other set's (:meth:`_row_shares` over
        them all)."""
        sets = [np.atleast_2d(np.asarray(s)) for s in group_sets]
        paths = [self._path_of(op, s) if s.shape[1] > 1 else None for s in sets]
        net = [i for i, p in enumerate(paths) if p is not None and p[0] == "net"]
        if len(net) > 1 and size_bytes > 0 and len({sets[i].shape[1] for i in net}) == 1:
            for j, worst in zip(net, self._concurrent_shares(op, [sets[i] for i in net]), strict=True):
                link, factor, alpha, one, hosts = paths[j]
                paths[j] = (link, min(factor, worst), alpha, one, hosts)
        return np.array([0.0 if p is None or size_bytes <= 0 else self._time(op, s.shape[1], p, size_bytes)
                         for s, p in zip(sets, paths, strict=True)])

    def _concurrent_shares(self, op: str, sets: list[np.ndarray]) -> tuple[float, ...]:
        """Each set's slowest NIC-multiple with every set's groups counted in the uplink load
        (memoised by value); inf for every set when only non-blocking layers are crossed by sends,
        whose every domain's uplinks carry all that leaves it (one send per GPU and direction)."""
        stacked = np.concatenate(sets)
        if stacked.shape[1] == 2 and op == "send_recv" and not any(
                layer.oversubscription > 1 and (stacked[:, 0] // layer.span_gpus != stacked[:, 1] // layer.span_gpus).any()
                for layer in self.cluster.layers):
            return (math.inf,) * len(sets)
        key = (self._key, "concurrent", op, stacked.shape, hash(stacked.tobytes()), tuple(s.shape[0] for s in sets))
        hit = _PATHS.get(key)
        if hit is None:
            share, _ = self._row_shares(op, stacked)
            worst = np.full(len(sets), np.inf)
            np.minimum.at(worst, np.repeat(np.arange(len(sets)), [s.shape[0] for s in sets]), share)
            hit = _PATHS.put(key, tuple(worst.tolist()))
        return hit
