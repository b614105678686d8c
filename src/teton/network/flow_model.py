"""Flow-level network cost model: collectives as max-min fair flows on the explicit fabric.

Same question as ``AnalyticalCostModel``: how long does ``op`` of ``size_bytes`` (nccl-tests S)
take on ``groups`` (an (n_groups, n) array of GPU ids), all groups running at once? Answer:

1. ``teton.collectives.phases_for`` turns the collective on every group into phases of flows
   (pipelined ring channels, tree pairs, pairwise exchanges ...), all groups in the same phase.
2. With ``routing="e-ecmp"`` every hop that leaves a host is striped over ``qps`` QPs
   (NCCL_IB_QPS_PER_CONNECTION), each hashed on its own and carrying 1/qps of the flow's rate
   (NCCL round-robins its data over the QPs, so they progress together: one flow, weighted
   crossings); ``teton.network.routing.Router`` maps every hop to links (ECMP hash, pinning or
   ideal spraying).
3. ``teton.network.maxmin.complete`` gives every flow its max-min fair rate, retires flows as they
   finish and re-solves (flows finishing within 2 % of the earliest retire together, at most 32
   solves; measured: the 16K-GPU data-parallel rings need 15 solves either way, and 10,000 random
   flows on the 24K fabric give the same last and median finish with 32 solves as with the 549 of
   an exact run); a phase lasts until its last flow ends.
4. time = sum over phases of (last finish + latency): the phase's network steps (NCCL's tuner's
   count, ``collectives.algorithms.network_steps``) at alpha, the slowest hop's latency, the rest
   at an NVLink step's
   (NIC + the switches of a path turning at the top tier crossed, each below the turn twice and
   the turning one once; 2 us per NVLink step, as the analytical
   model).

Calibration shared with the analytical model (``teton.hardware.efficiency_for``): nccl-tests bus
bandwidth is a fraction ``e`` of the line rate because of protocol and chunking overheads on every
byte on the wire, so every link's capacity is derated by that fraction -- NVLink links by
``nccl_nvlink`` (``nccl_nvls`` in an NVLS phase), PCIe / NIC / switch links by ``nccl_net``. On an
uncontended fabric the flow model therefore reproduces busbw = line rate x e, and everything
below that comes from the fabric: ECMP collisions, oversubscription, failed links.

Flows scale with S (every byte count is proportional to it) and rates do not depend on S, so a
collective is solved once per (op, groups) and its time is ``per_byte * S + latency`` for any S.
Groups entirely inside hosts share no links across hosts: one host per distinct local pattern is
solved (SPMD symmetry) -- 2,048 tensor-parallel groups of 8 cost one 8-GPU solve.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from teton.collectives import ALGOS, Phase, phases_for
from teton.collectives.algorithms import NCCL_CHANNELS_PER_NIC
from teton.errors import SpecError, closest
from teton.hardware import cluster_efficiency
from teton.network.analytical import NVLINK_STEP_LATENCY_S, OPS
from teton.network.maxmin import complete
from teton.network.routing import ROUTINGS, Router, flow_key
from teton.network.sharp import SHARP_SWITCHES, has_sharp, sharp_flows
from teton.spec.cluster import ClusterSpec
from teton.topology.graph import NVLINK, build_fabric

FLOW_ALGOS = (*ALGOS, "sharp")  # sharp: in-network all-reduce on InfiniBand switches (network.sharp)
MAX_SUBHOPS = 20_000_000  # ~ 3 GB of routed paths: a guard against all-to-all on huge groups


@dataclass(frozen=True)
class PhaseResult:
    flows: int  # flows after QP splitting
    crossings: int  # flow-link crossings solved
    events: int  # max-min solves (completion events)
    per_byte_s: float  # seconds per byte of S until the last flow ends
    latency_s: float  # steps * alpha


def _check_hops(hops: int, what: str) -> None:
    """Refuse more QP hops in one phase than :data:`MAX_SUBHOPS` (a guard on memory and time)."""
    if hops > MAX_SUBHOPS:
        raise SpecError("groups", f"{hops:,} QP hops in one {what}",
                        f"the flow model handles up to {MAX_SUBHOPS:,}; use fewer QPs, smaller groups or fidelity analytical")


def phase_latency_s(phase: Phase, alpha: float) -> float:
    """A phase's latency: its network steps (``Phase.net_steps``, NCCL's tuner's count; all of
    them where unset) at ``alpha``, the slowest hop's latency, the rest at an NVLink step's."""
    net = phase.steps if phase.net_steps is None else min(phase.net_steps, phase.steps)
    return net * alpha + (phase.steps - net) * NVLINK_STEP_LATENCY_S


class FlowCostModel:
    """Collective times from max-min fair flows on the explicit fabric (module docstring)."""

    fidelity = "flow"

    def __init__(self, cluster: ClusterSpec, routing: str | None = None, qps: int = 16, algo: str = "auto",
                 seed: int = 0, failed_links: int = 0, leaf_uplink_ratio: float | None = None,
                 channels_per_nic: int = NCCL_CHANNELS_PER_NIC, background: tuple = (), nvls: bool = True,
                 pat: bool = True):
        routing = routing or cluster.routing  # the fabric's own
        if routing not in ROUTINGS:
            raise SpecError("routing", routing, closest(routing, ROUTINGS))
        if algo not in FLOW_ALGOS:
            raise SpecError("algo", algo, closest(algo, FLOW_ALGOS))
        if algo == "sharp" and not has_sharp(cluster):
            raise SpecError("algo", algo, f"cluster {cluster.name} has no SHARP-capable switches "
                            f"({', '.join(sorted(SHARP_SWITCHES))})")
        if not isinstance(qps, int | np.integer) or qps < 1 or qps > 1024:
            raise SpecError("qps", qps, "must be an integer from 1 to 1024")
        if channels_per_nic < 1:
            raise SpecError("channels_per_nic", channels_per_nic, "must be at least 1")
        self.cluster = cluster
        self.channels_per_nic = int(channels_per_nic)
        # other jobs' collectives, (op, groups) each, that keep the fabric busy while ours run
        self.background = tuple((op, np.atleast_2d(np.asarray(g, dtype=np.int64))) for op, g in background)
        self._background_phase: Phase | None = None
        self.routing, self.qps, self.algo, self.seed = routing, int(qps), algo, int(seed)
        self.fabric = build_fabric(cluster, leaf_uplink_ratio)
        self.router = Router(self.fabric, routing, int(seed), int(failed_links))
        self.gpu = cluster.gpu_spec
        self.eff = cluster_efficiency(self.gpu, cluster.efficiency)
        self.nvls = self.gpu.nvls and nvls  # network.nvls: False turns NVLink SHARP off
        self.pat = pat  # software.nccl_pat: NCCL's PAT latency for all-gather / reduce-scatter of one GPU per host
        # QP subflows are hashed apart only when the switches hash the QP (E-ECMP); with plain ECMP
        # or pinning all QPs of a connection share one path, and spraying already spreads ideally.
        self.split = self.qps if routing == "e-ecmp" else 1
        nvl = self.router.link_layer == NVLINK
        raw = self.router.capacity_bytes_s
        self._cap = raw * np.where(nvl, self.eff.busbw_fraction("nvlink"), self.eff.busbw_fraction("net"))
        self._cap_nvls = raw * np.where(nvl, self.eff.busbw_fraction("nvls"), self.eff.busbw_fraction("net"))
        self._cache: dict[tuple, list[PhaseResult]] = {}
        self._phase_cache: dict[tuple, PhaseResult] = {}

    # -- one phase -----------------------------------------------------------------------
    def solve_phase(self, phase: Phase) -> PhaseResult:
        """Solve one phase (cached on its flows: all-gather, reduce-scatter and all-reduce rings of
        the same groups share one solve -- bytes are normalised, times scale with them)."""
        scale = float(phase.flow_bytes.max())
        key = (phase.nvls, hash(phase.hop_src.tobytes()), hash(phase.hop_dst.tobytes()),
               hash(phase.hop_conn.tobytes()), hash(phase.flow_ptr.tobytes()),
               hash((phase.flow_bytes / scale).round(12).tobytes()))
        hit = self._phase_cache.get(key)
        if hit is None:
            hit = self._phase_cache[key] = self._solve_phase(replace(phase, flow_bytes=phase.flow_bytes / scale,
                                                                     steps=1))
        return replace(hit, per_byte_s=hit.per_byte_s * scale, latency_s=phase_latency_s(phase, hit.latency_s))

    def neighbour_phase(self) -> Phase | None:
        """The other jobs' traffic as one phase: the first phase of each background collective
        (ring channels), merged; None without background."""
        if not self.background:
            return None
        if self._background_phase is None:
            gph = self.fabric.domain_gpus
            parts = [phases_for(op, g, gph, "ring", False, self.channels_per_nic)[0] for op, g in self.background]
            offsets = np.cumsum([0] + [q.hop_src.size for q in parts[:-1]])
            self._background_phase = Phase(
                np.concatenate([q.hop_src for q in parts]), np.concatenate([q.hop_dst for q in parts]),
                np.concatenate([q.hop_conn for q in parts]),
                np.concatenate([[0]] + [q.flow_ptr[1:] + o for q, o in zip(parts, offsets, strict=True)]),
                np.concatenate([q.flow_bytes for q in parts]), np.concatenate([q.flow_group for q in parts]), 1, False)
        return self._background_phase

    def _solve_phase(self, phase: Phase) -> PhaseResult:
        finish, events, crossings, alpha = self._finish_times(phase)
        return PhaseResult(int(phase.flow_bytes.size), crossings, events, float(finish.max()),
                           phase_latency_s(phase, alpha))

    def _finish_times(self, phase: Phase) -> tuple[np.ndarray, int, int, float]:
        """(each of the phase's own flows' finish time s, max-min solves, flow-link crossings,
        the slowest hop's latency s), the neighbours' traffic beside them."""
        gph = self.fabric.domain_gpus
        n_own = int(phase.flow_bytes.size)
        bg = self.neighbour_phase()
        if bg is not None and not (phase.hop_src // gph != phase.hop_dst // gph).any():
            bg = None  # ours stay on NVLink inside hosts: no link to share with the neighbours
        if bg is not None:  # neighbours' flows run all along: far more bytes than ours
            hops = phase.hop_src.size
            phase = replace(phase, hop_src=np.concatenate([phase.hop_src, bg.hop_src]),
                            hop_dst=np.concatenate([phase.hop_dst, bg.hop_dst]),
                            hop_conn=np.concatenate([phase.hop_conn, bg.hop_conn]),
                            flow_ptr=np.concatenate([phase.flow_ptr, bg.flow_ptr[1:] + hops]),
                            flow_bytes=np.concatenate([phase.flow_bytes,
                                                       np.full(bg.flow_bytes.size, 1e6 * phase.flow_bytes.max())]))
        src, dst, conn = phase.hop_src, phase.hop_dst, phase.hop_conn
        # stripe every hop that leaves a host over the connection's QPs: sub-hop q is hashed with
        # its QP number and carries 1/N of the flow's rate (NCCL round-robins data over its QPs)
        n_sub = np.where(src // gph != dst // gph, self.split, 1)
        _check_hops(int(n_sub.sum()), "phase")
        if self.split > 1:
            rep = np.repeat(np.arange(src.size), n_sub)
            first = np.repeat(np.cumsum(n_sub) - n_sub, n_sub)
            q = np.arange(rep.size) - first
            src, dst, conn = src[rep], dst[rep], conn[rep] * self.split + q
            sub_ptr = np.concatenate([[0], np.cumsum(n_sub)])[phase.flow_ptr]
            share = 1.0 / n_sub[rep]
        else:
            sub_ptr, share = phase.flow_ptr, np.ones(src.size)
        hop_ptr, links, tier = self.router.route(src, dst, flow_key(src, dst, conn))
        weight = np.repeat(share, np.diff(hop_ptr))
        finish, events = complete(hop_ptr[sub_ptr], links, self._cap_nvls if phase.nvls else self._cap,
                                  phase.flow_bytes, weight=weight)
        alpha = np.where(tier < 0, NVLINK_STEP_LATENCY_S, self.fabric.path_latency_s(tier)).max()
        return finish[:n_own], events, int(links.size), float(alpha)

    def _solve_sharp(self, groups: np.ndarray) -> PhaseResult:
        indptr, links, weight, nbytes, top = sharp_flows(self.router, groups)
        finish, events = complete(indptr, links, self._cap, nbytes, weight=weight)
        alpha = float(self.fabric.path_latency_s(np.array([top]))[0])
        return PhaseResult(int(nbytes.size), int(links.size), events, float(finish.max()), 2 * alpha)

    # -- a collective --------------------------------------------------------------------
    def _algo_for(self, op: str, intra: bool, n: int) -> str:
        if self.algo in ("auto", "sharp") and intra and op == "all_reduce" and self.nvls and n > 2:
            return "nvls"
        return "auto" if self.algo == "sharp" else self.algo  # sharp inside a host: NVLink as auto

    def _representatives(self, groups: np.ndarray) -> np.ndarray:
        """For groups each inside one host: one host per distinct local pattern (exact: hosts share
        no links on the way GPU -> NVSwitch -> GPU)."""
        gph = self.fabric.domain_gpus
        host = groups[:, 0] // gph
        order = np.argsort(host, kind="stable")
        host_sorted = host[order]
        starts = np.flatnonzero(np.r_[True, host_sorted[1:] != host_sorted[:-1]])
        ends = np.r_[starts[1:], host_sorted.size]
        seen: dict[bytes, np.ndarray] = {}
        local = groups[order] % gph
        for s, e in zip(starts, ends, strict=True):
            k = local[s:e].tobytes() + bytes([e - s])
            if k not in seen:
                seen[k] = order[s:e]
        return np.concatenate(list(seen.values()))

    def plan(self, op: str, groups: np.ndarray) -> list[PhaseResult]:
        """Solved phases of ``op`` on ``groups`` (cached; independent of the message size)."""
        if op not in OPS:
            raise SpecError("op", op, closest(op, OPS))
        groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
        if groups.size and (groups.min() < 0 or groups.max() >= self.fabric.n_gpus):
            raise SpecError("groups", f"GPU ids {groups.min()}..{groups.max()}",
                            f"must lie in 0..{self.fabric.n_gpus - 1} on {self.cluster.name}")
        key = (op, groups.shape, hash(groups.tobytes()))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        n = groups.shape[1]
        gph = self.fabric.domain_gpus
        intra = bool((groups // gph == groups[:, :1] // gph).all())
        if intra and groups.shape[0] > 1:
            groups = groups[self._representatives(groups)]
        if self.algo == "sharp" and op != "all_reduce":
            raise SpecError("algo", "sharp", f"in-network reduction is for all_reduce, not {op}")
        if self.algo == "sharp" and not intra:
            result = [self._solve_sharp(groups)]
            self._cache[key] = result
            return result
        if op == "all_to_all" and not intra:  # its n (n - 1) flows a group, before they are built
            _check_hops(groups.shape[0] * n * (n - 1) * self.split, "all-to-all")
        phases = phases_for(op, groups, gph, self._algo_for(op, intra, n), self.nvls, self.channels_per_nic, self.pat)
        result = [self.solve_phase(p) for p in phases]
        self._cache[key] = result
        return result

    def collective_time(self, op: str, groups: np.ndarray, size_bytes: float) -> float:
        """Seconds until the slowest of ``groups`` finishes ``op`` on ``size_bytes`` (nccl-tests S)."""
        groups = np.atleast_2d(np.asarray(groups))
        if groups.shape[1] <= 1 or size_bytes <= 0:
            return 0.0
        return float(sum(p.per_byte_s * size_bytes + p.latency_s for p in self.plan(op, groups)))

    def concurrent_times(self, op: str, group_sets: list[np.ndarray], size_bytes: float) -> np.ndarray:
        """Seconds of a point-to-point ``send_recv`` on each of ``group_sets`` when all of them run
        at once (a pipeline's boundaries, which send together in steady state): the sends of every
        set across hosts as one phase of max-min fair flows, each set done when its last flow ends,
        plus its own latency. Other ops, or sets inside hosts, as :meth:`collective_time` alone."""
        sets = [np.atleast_2d(np.asarray(s, dtype=np.int64)) for s in group_sets]
        out = np.array([self.collective_time(op, s, size_bytes) for s in sets])
        gph = self.fabric.domain_gpus
        net = [i for i, s in enumerate(sets) if s.shape[1] == 2 and (s[:, 0] // gph != s[:, 1] // gph).any()]
        if op != "send_recv" or len(net) < 2 or size_bytes <= 0:
            return out
        stacked = np.concatenate([sets[i] for i in net])
        key = ("concurrent", op, stacked.shape, hash(stacked.tobytes()), tuple(sets[i].shape[0] for i in net))
        worst = self._cache.get(key)
        if worst is None:
            (phase,) = phases_for(op, stacked, gph, "auto", self.nvls, self.channels_per_nic, self.pat)
            finish = self._finish_times(phase)[0]
            owner = np.repeat(np.arange(len(net)), [sets[i].shape[0] for i in net])[phase.flow_group]
            worst = np.zeros(len(net))
            np.maximum.at(worst, owner, finish)
            self._cache[key] = worst
        for j, i in enumerate(net):
            latency = sum(p.latency_s for p in self.plan(op, sets[i]))
            out[i] = max(out[i], worst[j] * size_bytes + latency)
        return out
