"""Network studies: the AllGather placement study of Meta's GenAI blog and path pinning (SIGCOMM'24).

Meta (Building Meta's GenAI Infrastructure, 2024) reports AllGather bandwidth normalised to
0-100: a small cluster reaches 90 %+ out of the box, a large one ranges from 10 % to 90 %
unoptimised, and a topology-aware scheduler plus routing / NCCL changes bring it back to 90 %+.
``placement_study`` re-enacts that on the explicit fabric: jobs of random size land on a cluster
whose hosts are partly busy (seeded), either scattered by a scheduler that ignores the topology
with plain ECMP and one QP per connection, or placed topology-aware with E-ECMP and 16 QPs.
Normalised bandwidth = the job's bus bandwidth at roofline sizes (the bandwidth term only) over
the bus bandwidth of the same collective on two hosts under one leaf switch (the "small
cluster": no ECMP choice, no oversubscription).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from teton.network.analytical import bus_factor
from teton.network.flow_model import FlowCostModel
from teton.placement.compare import neighbour_groups
from teton.placement.mapping import place
from teton.spec.cluster import ClusterSpec

SERIES = {
    "random placement, ECMP 1 QP": ("random", "ecmp", 1),
    "random placement, E-ECMP 4 QPs": ("random", "e-ecmp", 4),
    "random placement, E-ECMP 16 QPs": ("random", "e-ecmp", 16),
    "topology-aware, ECMP 1 QP": ("topology-aware", "ecmp", 1),
    "topology-aware, E-ECMP 16 QPs": ("topology-aware", "e-ecmp", 16),
}


def roofline_busbw(model: FlowCostModel, op: str, groups: np.ndarray) -> float:
    """Bus bandwidth (bytes/s) of the bandwidth term alone (large-message limit)."""
    per_byte = sum(p.per_byte_s for p in model.plan(op, groups))
    return bus_factor(op, groups.shape[1]) / per_byte


def placement_study(cluster: ClusterSpec, trials: int = 16, seed: int = 0, job_gpus=(64, 128, 256, 512, 1024, 2048),
                    busy_fraction: float = 0.5, op: str = "all_gather",
                    series: tuple[str, ...] | None = None, neighbours: bool = False,
                    progress: Callable[[int, int], None] | None = None) -> dict:
    """Normalised AllGather bus bandwidth of ``trials`` random jobs per series (module docstring).

    ``neighbours``: the busy hosts are not idle but other jobs of 128 GPUs
    (:func:`teton.placement.compare.neighbour_groups`), each all-reducing all the time over the
    same fabric (a worst case for sharing: every neighbour communicates at once), placed by the
    series' own policy: compact under topology-aware placement (the whole system optimised, as
    Meta's "after" case), scattered under random placement. ``progress(done, total)`` after each
    (trial, series) bandwidth."""

    names = tuple(series or SERIES)
    rng = np.random.default_rng(seed)
    g = cluster.gpus_per_host
    small = np.arange(min(2 * g, cluster.layers[0].span_gpus))[None]
    ideal = roofline_busbw(FlowCostModel(cluster, routing="ecmp", qps=1), op, small)
    out: dict = {"cluster": cluster.name, "op": op, "ideal_busbw_gbytes_s": ideal / 1e9, "job_gpus": [],
                 "neighbours": neighbours,
                 "normalized_busbw": {n: [] for n in names}}
    total = trials * len(names)
    done = 0
    if progress is not None:
        progress(0, total)
    for t in range(trials):
        gpus = int(rng.choice(job_gpus))
        n_busy = int(busy_fraction * cluster.hosts)
        busy_hosts = rng.choice(cluster.hosts, n_busy, replace=False)
        busy = (busy_hosts[:, None] * g + np.arange(g)).ravel()
        out["job_gpus"].append(gpus)
        for name in names:
            policy, routing, qps = SERIES[name]
            pl = place(cluster, {"tp": 1, "cp": 1, "pp": 1, "dp": gpus}, policy=policy,
                       seed=seed * 1000 + t, busy=busy)
            background = ((("all_reduce", neighbour_groups(busy, g, seed * 1000 + t,
                                                            compact=policy == "topology-aware")),)
                          if neighbours else ())
            model = FlowCostModel(cluster, routing=routing, qps=qps, seed=seed * 1000 + t, background=background)
            out["normalized_busbw"][name].append(roofline_busbw(model, op, pl.groups("dp")) / ideal)
            done += 1
            if progress is not None:
                progress(done, total)
    return out


def pinning_study(cluster: ClusterSpec, racks: int = 64, seed: int = 0, op: str = "all_gather") -> dict:
    """Path pinning vs E-ECMP with full and half-filled racks (SIGCOMM'24 §5.1).

    Full racks: one job on ``racks`` whole racks, topology-aware. Half-filled: two jobs share the
    same racks, one host each (which host is seeded per rack), and the second job's ring visits
    its racks in a seeded random order -- a fragmented allocation. Pinning routes by destination
    slice, so two hosts of a rack sending to the same slices of different racks share uplinks.
    Returns normalised bus bandwidth (as ``placement_study``) per case and routing.
    """
    rng = np.random.default_rng(seed)
    g = cluster.gpus_per_host
    hosts_per_rack = cluster.layers[0].span_gpus // g
    slot = rng.integers(0, hosts_per_rack, racks)
    base = np.arange(racks) * hosts_per_rack
    job_a = ((base + slot)[:, None] * g + np.arange(g)).ravel()
    job_b = ((base + (slot + 1) % hosts_per_rack)[rng.permutation(racks)][:, None] * g + np.arange(g)).ravel()
    cases = {"full racks": np.arange(racks * hosts_per_rack * g)[None],
             "half-filled racks (2 jobs)": np.stack([job_a, job_b])}
    small = np.arange(min(2 * g, cluster.layers[0].span_gpus))[None]
    ideal = roofline_busbw(FlowCostModel(cluster, routing="ecmp", qps=1), op, small)
    out: dict = {"cluster": cluster.name, "op": op, "racks": racks, "normalized_busbw": {}}
    for case, groups in cases.items():
        for routing, qps in (("pinned", 1), ("e-ecmp", 16), ("ecmp", 1)):
            model = FlowCostModel(cluster, routing=routing, qps=qps, seed=seed)
            out["normalized_busbw"][f"{case}, {routing} {qps} QP"] = roofline_busbw(model, op, groups) / ideal
    return out


PINNING_RACKS = 64  # racks of the pinning study's job (SIGCOMM'24 §5.1 scale) where the cluster has them


def pinning_racks(cluster: ClusterSpec) -> int:
    """Racks for the pinning study: 64, or as many whole first-layer switch domains as the cluster has."""
    from teton.errors import SpecError

    racks = min(PINNING_RACKS, cluster.gpus // cluster.layers[0].span_gpus)
    if racks < 2:
        raise SpecError("cluster", cluster.name, "the pinning study needs at least 2 racks (first-layer "
                        f"switch domains of {cluster.layers[0].span_gpus} GPUs)")
    return racks
