"""Rank -> GPU mapping and the communication groups of each parallel axis.

GPU ids follow the physical order of the cluster: host-major (``gpu = host * gpus_per_host +
local``) with hosts numbered rack by rack and pod by pod, so a contiguous id range is a
topology-compact set. A job rank is decomposed over ``parallel_order`` (innermost first, Llama 3:
[TP, CP, PP, DP]): ``rank = tp + TP * (cp + CP * (pp + PP * dp))``. The groups of an axis are the
ranks that differ only in that axis' coordinate.

Expert parallelism follows Megatron-Core (``parallel_state.initialize_model_parallel``, whose two
``RankGenerator`` s decompose the same ranks twice; ``teton.spec.layout`` has the rules). The dense
decomposition above gives ``tp``, ``cp``, ``pp`` and ``dp`` (ep has degree 1 in it). The expert
decomposition splits the ``tp cp dp`` ranks of one pipeline stage (their index in the order without
pp) over ``etp`` (expert tensor parallel), ``ep`` and ``edp`` (expert data parallel), placed where
the order puts tp, ep and dp, with cp folded in: ``groups('ep')`` are the MoE all-to-all groups
(EP 32 over TP 2 x DP 16 with etp 1 spans both TP ranks), ``groups('etp')`` the expert GEMMs' TP
groups and ``groups('edp')`` the ranks that hold the same experts. Without ep in the order, etp is
tp, ep 1 and edp the DP x CP ranks.

Gradients are reduced over the ranks that hold the same weights: ``groups('dp_cp')`` (the DP and
CP coordinates vary) for dense weights and ``groups('edp_cp')`` (the same as ``edp``: CP is
folded in) for expert weights; with CP 1 the first is the DP group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from teton.errors import SpecError
from teton.spec.cluster import ClusterSpec
from teton.spec.layout import BASE_AXES, expert_degrees, expert_order

POLICIES = ("topology-aware", "linear", "random", "fragmented")
# Gradient groups: the ranks holding the same weights. CP ranks hold the same weights as their DP
# peers (CP splits the sequence, not the model), so gradients are reduced, and ZeRO shards, over
# dp x cp (Megatron-Core's data-parallel group "with context parallel"; torchtitan's dp_shard_cp);
# the expert decomposition folds CP into edp already.
GRADIENT_AXES = {"dp_cp": ("dp", "cp"), "edp_cp": ("edp",)}
EXPERT_AXES = ("etp", "ep", "edp")
CP_LEVELS = ("cp_a2a", "cp_p2p")  # a2a+p2p CP's sub-groups of each CP group


@dataclass(frozen=True)
class Placement:
    """Where each rank of a job runs, and the rank groups of each axis (as GPU ids)."""

    gpu_of_rank: np.ndarray  # (ranks,) global GPU ids
    degrees: dict[str, int]  # axis -> degree: tp/cp/pp/dp (+ ep, etp, edp when order names ep)
    order: tuple[str, ...]  # innermost first
    policy: str = "topology-aware"
    _groups: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ranks(self) -> int:
        return int(self.gpu_of_rank.size)

    def _dense_grid(self) -> tuple[np.ndarray, list[str]]:
        """GPU ids with one dimension per axis of the dense decomposition, and those axes
        (outermost first)."""
        axes = [a for a in reversed(self.order) if a != "ep"]
        return self.gpu_of_rank.reshape([self.degrees[a] for a in axes]), axes

    def _expert_grid(self) -> tuple[np.ndarray, list[str]]:
        """GPU ids with dimensions pp and the expert axes of one stage, and those axes (outermost
        first): each stage's ``tp cp dp`` ranks, in rank order, split over etp, ep and edp."""
        grid, axes = self._dense_grid()
        i = axes.index("pp")
        stage = np.moveaxis(grid, i, 0).reshape(self.degrees["pp"], -1)
        exp, inner = expert_degrees(self.degrees), list(reversed(expert_order(self.order)))
        return stage.reshape([self.degrees["pp"], *(exp[a] for a in inner)]), ["pp", *inner]

    def groups(self, axis: str) -> np.ndarray:
        """(n_groups, degree) array of GPU ids; row i is one group, ordered by the axis' coordinate
        (a gradient group of two axes: by rank)."""
        if axis in CP_LEVELS and axis not in self._groups:
            self._groups[axis] = _cp_level_groups(self.groups("cp"), self.degrees["cp_a2a"], axis)
        if axis not in self._groups:
            members = GRADIENT_AXES.get(axis, (axis,))
            if axis in EXPERT_AXES or axis == "edp_cp":
                grid, axes = self._expert_grid()
            elif all(m in BASE_AXES for m in members):
                grid, axes = self._dense_grid()
            else:
                raise SpecError("axis", axis, f"must be one of {', '.join((*BASE_AXES, *EXPERT_AXES, *GRADIENT_AXES))}")
            self._groups[axis] = _grid_groups(grid, axes, members)
        return self._groups[axis]

    def pp_neighbours(self) -> np.ndarray:
        """(n_pairs, 2) GPU ids of consecutive pipeline ranks (stage i -> i+1)."""
        g = self.groups("pp")
        if g.shape[1] < 2:
            return np.empty((0, 2), dtype=np.int64)
        return np.stack([g[:, :-1].ravel(), g[:, 1:].ravel()], axis=1)


def _cp_level_groups(cp_groups: np.ndarray, a2a: int, axis: str) -> np.ndarray:
    """The two levels of a2a+p2p CP in each CP group (Megatron-Core 0.16
    ``parallel_state.create_hierarchical_groups`` with sizes [a2a, cp / a2a]): ``cp_a2a`` groups of
    ``a2a`` consecutive CP ranks, ``cp_p2p`` groups of the ranks ``a2a`` apart."""
    levels = cp_groups.reshape(cp_groups.shape[0], -1, a2a)  # (groups, cp / a2a, a2a)
    if axis == "cp_p2p":
        levels = np.swapaxes(levels, 1, 2)
    return np.ascontiguousarray(levels.reshape(-1, levels.shape[2]))


def _grid_groups(grid: np.ndarray, axes: list[str], members: tuple[str, ...]) -> np.ndarray:
    """(n_groups, size) rows of ``grid`` (one dimension per axis of ``axes``, outermost first)
    whose ``members`` coordinates vary, the others fixed; a row in grid order."""
    pos = sorted(axes.index(a) for a in members)
    moved = np.moveaxis(grid, pos, list(range(grid.ndim - len(pos), grid.ndim)))
    return np.ascontiguousarray(moved.reshape(-1, int(np.prod([grid.shape[i] for i in pos]))))


def free_gpus_in_order(cluster: ClusterSpec, busy: np.ndarray | None = None) -> np.ndarray:
    ids = np.arange(cluster.gpus, dtype=np.int64)
    if busy is not None and np.size(busy):
        ids = np.setdiff1d(ids, np.asarray(busy, dtype=np.int64), assume_unique=False)
    return ids


def check_order(degrees: dict[str, int], order: tuple[str, ...]) -> None:
    """``order`` must be a permutation of tp, cp, pp, dp (optionally with ep); ``etp ep`` must
    divide ``tp cp dp``, the ranks of one pipeline stage (``teton.spec.layout``)."""
    extra = set(order) - {"ep"}
    if len(order) != len(set(order)) or extra != set(BASE_AXES):
        raise SpecError("job.parallel_order", list(order),
                        "must be an ordering of tp, cp, pp, dp (and optionally ep), innermost first")
    missing = [a for a in order if a not in degrees]
    if missing:
        raise SpecError("degrees", missing[0], "every axis of the order needs a degree")
    stage = degrees["tp"] * degrees["cp"] * degrees["dp"]
    etp, ep = degrees.get("etp", degrees["tp"]), degrees.get("ep", 1)
    if stage % (etp * ep):
        raise SpecError("job.ep", ep, f"etp*ep = {etp}*{ep} must divide tp*cp*dp = {stage}")


def pod_span_gpus(cluster: ClusterSpec) -> int:
    """GPUs per pod: the largest fabric domain below the whole cluster (the cluster if none)."""
    below = [layer.span_gpus for layer in cluster.layers if layer.span_gpus < cluster.gpus]
    return max(below) if below else cluster.gpus


def topology_aware_gpus(cluster: ClusterSpec, free: np.ndarray, n: int, block_gpus: int) -> np.ndarray:
    """Minimum-cut choice of ``n`` of the ``free`` GPUs (MAST's AI-zone "minimum cut").

    The job is cut into blocks of ``block_gpus`` GPUs (one copy of the inner, heavy axes: every
    axis but the outermost of the order). A block always sits inside one pod (the top domain
    below the whole cluster), so the heavy axes never cross the oversubscribed pod uplinks.
    Phase 1 packs blocks onto whole free hosts, pods with the most free whole hosts first (the
    fewest pods), racks filled in id order; phase 2 packs the remaining blocks onto the partial
    hosts of each pod (fullest pods first); what still does not fit takes the remaining free GPUs
    in topology order.
    """
    g = cluster.gpus_per_host
    pod = pod_span_gpus(cluster)
    block = max(1, block_gpus)
    fill = np.bincount(free // g, minlength=cluster.hosts)[free // g]
    used = np.zeros(free.size, dtype=bool)
    chosen: list[np.ndarray] = []
    left = n
    for phase in (fill == g, np.ones(free.size, dtype=bool)):
        if left <= 0 or block > pod:
            break
        cand = np.flatnonzero(phase & ~used)
        pods, counts = np.unique(free[cand] // pod, return_counts=True)
        for p in pods[np.lexsort((pods, -counts))]:
            if left <= 0:
                break
            idx = cand[free[cand] // pod == p]
            take = min(idx.size // block * block, -(-left // block) * block, left)
            if take > 0:
                chosen.append(free[idx[:take]])
                used[idx[:take]] = True
                left -= take
    if left > 0:  # leftovers in topology order, so a group spans at most neighbouring pods
        chosen.append(free[~used][:left])
    return np.concatenate(chosen)[:n] if chosen else np.empty(0, dtype=np.int64)


def whole_units_per_span(free: np.ndarray, span: int, unit: int) -> np.ndarray:
    """The free GPUs of each ``span``-GPU domain (ids ``k span ... (k+1) span - 1``) cut to a whole
    number of ``unit``-GPU groups, so that no group of consecutive free GPUs straddles two domains."""
    if unit <= 1 or unit > span:
        return free
    domain = free // span  # free is sorted: each domain's free GPUs are one run
    start = np.flatnonzero(np.r_[True, domain[1:] != domain[:-1]])
    count = np.diff(np.r_[start, free.size])
    pos = np.arange(free.size) - np.repeat(start, count)
    return free[pos < np.repeat(count // unit * unit, count)]


def whole_groups_per_domain(cluster: ClusterSpec, free: np.ndarray, unit: int) -> np.ndarray:
    """The free GPUs of each NVLink domain cut to a whole number of ``unit``-GPU groups (the
    innermost axis', TP's), so that no such group straddles two domains: an NVL36 domain holds four
    TP-8 groups and leaves 4 GPUs idle, as a scheduler that keeps TP on NVLink places them."""
    d = cluster.domain_gpus
    if d == cluster.gpus_per_host:  # one host: its own free-host rules
        return free
    return whole_units_per_span(free, d, unit)


def fabric_aligned(cluster: ClusterSpec, free: np.ndarray, n: int, block_gpus: int) -> np.ndarray:
    """The free GPUs cut so that whole ``block_gpus`` blocks (a copy of the job's inner axes) sit
    inside every fabric domain that can hold one (rack, pod, zone, building: each layer whose span
    is at least a block), smallest domain first, as long as ``n`` GPUs remain: a 112-GPU GB200
    replica then never crosses a zone's or a building's oversubscribed uplinks while whole ones fit."""
    out = free
    for span in sorted({layer.span_gpus for layer in cluster.layers}):
        if block_gpus <= span < cluster.gpus and span % block_gpus:
            cut = whole_units_per_span(out, span, block_gpus)
            if cut.size >= n:
                out = cut
    return out


def domain_aligned(cluster: ClusterSpec, free: np.ndarray, n: int, inner_degrees: list[int],
                   expert_unit: int = 0) -> np.ndarray:
    """The free GPUs cut so that the job's innermost groups stay inside NVLink domains: the largest
    product of the inner axes' degrees (innermost first: TP, TP x CP, ...), or the span of an EP
    group (``expert_unit``: :func:`expert_span`), that fits a domain and still leaves ``n`` GPUs
    (``whole_groups_per_domain``); all of ``free`` if none does."""
    units = {int(u) for u in np.cumprod(inner_degrees or [1])}
    if expert_unit:
        units.add(expert_unit)
    for unit in sorted((u for u in units if u <= cluster.domain_gpus), reverse=True):
        whole = whole_groups_per_domain(cluster, free, unit)
        if whole.size >= n:
            return whole
    return free


def expert_span(degrees: dict[str, int], order: tuple[str, ...]) -> int:
    """The consecutive ranks one EP group spans when EP sits inside DP and PP in the order
    (Megatron's tp-cp-ep-dp-pp: the expert view decomposes a stage's tp cp dp ranks as etp, ep, edp,
    innermost first, so a group is ``etp ep`` consecutive ranks), rounded up to a whole number of
    TP x CP blocks (so that those groups stay whole too); 0 where EP groups are strided (EP outside
    PP) or there is no EP."""
    ep = degrees.get("ep", 1)
    if ep <= 1 or "ep" not in order or order.index("ep") > min(order.index("dp"), order.index("pp")):
        return 0
    inner = degrees["tp"] * degrees["cp"]
    return int(np.lcm(degrees.get("etp", degrees["tp"]) * ep, inner))


def fragmented_order(cluster: ClusterSpec, free: np.ndarray) -> np.ndarray:
    """Free GPUs in the order a scheduler that ignores host boundaries hands them out on a
    half-occupied cluster: the first half of every free host's GPUs, then the second halves
    (a half-occupied cluster where small jobs hold half of each host leaves exactly this)."""
    g = cluster.gpus_per_host
    half = max(1, g // 2)
    key = (free % g) // half * cluster.hosts + free // g
    return free[np.lexsort((free % g, key))]


def place(cluster: ClusterSpec, degrees: dict[str, int], order: tuple[str, ...] = BASE_AXES,
          policy: str = "topology-aware", seed: int = 0, busy: np.ndarray | None = None) -> Placement:
    """Place a job with the given axis degrees on ``cluster`` (``busy``: GPU ids already taken).

    topology-aware: whole free hosts, in blocks that keep all axes but the outermost inside one
      pod, pods with the most free hosts first, racks filled in order (a contiguous, minimum-cut
      block on an empty cluster); partial hosts only when whole ones run out; the innermost
      axes' groups (an MoE job's EP groups too, where EP sits inside DP and PP) never straddle two
      rack-scale NVLink domains, nor a block any fabric domain
      (rack, pod, zone, building) that can hold whole ones, while the free GPUs allow it
      (``domain_aligned``, ``fabric_aligned``).
    linear: the free GPUs in id order, whatever hosts they are on.
    random: free whole hosts in a seeded random order (GPUs of one host stay together).
    fragmented: whatever is free, as a host-oblivious scheduler on a half-occupied cluster hands
      it out: the first half of every free host, then the second halves (see ``fragmented_order``).
    """
    order = tuple(order)
    check_order(degrees, order)
    n = int(np.prod([degrees[a] for a in BASE_AXES]))
    if policy not in POLICIES:
        raise SpecError("placement", policy, f"must be one of {', '.join(POLICIES)}")
    free = free_gpus_in_order(cluster, busy)
    if free.size < n:
        raise SpecError("job.gpus", n, f"only {free.size} free GPUs on cluster {cluster.name}")
    g = cluster.gpus_per_host
    if policy == "linear":
        chosen = free[:n]
    elif policy == "fragmented":
        chosen = fragmented_order(cluster, free)[:n]
    elif policy == "topology-aware":
        inner = [a for a in order if a != "ep"][:-1]
        block_gpus = int(np.prod([degrees[a] for a in inner])) if inner else 1
        aligned = fabric_aligned(cluster, domain_aligned(cluster, free, n, [degrees[a] for a in inner],
                                                         expert_span(degrees, order)), n, block_gpus)
        chosen = topology_aware_gpus(cluster, aligned, n, block_gpus)
    else:  # random: whole free hosts in a seeded random order, then the fullest partial hosts
        hosts, counts = np.unique(free // g, return_counts=True)
        whole = np.random.default_rng(seed).permutation(hosts[counts == g])[: -(-n // g)]
        chosen = (whole[:, None] * g + np.arange(g)).ravel()[:n]
        if chosen.size < n:
            rest = np.setdiff1d(free, chosen)
            fill = np.bincount(rest // g, minlength=cluster.hosts)[rest // g]
            rest = rest[np.lexsort((rest, -fill))]
            chosen = np.concatenate([chosen, rest[: n - chosen.size]])
    return Placement(gpu_of_rank=np.asarray(chosen, dtype=np.int64), degrees=dict(degrees),
                     order=order, policy=policy)
