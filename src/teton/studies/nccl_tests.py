"""An nccl-tests-like sweep of one collective on a cluster (what ``teton collective`` prints).

Rows follow nccl-tests (doc/PERFORMANCE.md): ``algbw = S / t``, ``busbw = algbw * factor`` with
factor 2(n-1)/n for all_reduce, (n-1)/n for all_gather / reduce_scatter / all_to_all, 1 for
send_recv and broadcast; S is the total size (nccl-tests convention); GB/s = 1e9 bytes/s. The
time ``t`` is the analytical alpha-beta model's (:class:`teton.network.AnalyticalCostModel`) or
the flow-level solver's (:class:`teton.network.flow_model.FlowCostModel`: ECMP collisions,
oversubscription, failed links), for one communicator placed on the cluster by a placement policy.
"""

from __future__ import annotations

import numpy as np

from teton.errors import SpecError, closest
from teton.network.cost_model import FIDELITIES
from teton.spec.cluster import ClusterSpec


def default_qps(routing: str) -> int:
    """QPs per connection when none is given: 16 for E-ECMP (spreads a connection over paths), else 1."""
    return 16 if routing == "e-ecmp" else 1


def job_group(cluster: ClusterSpec, gpus: int, placement: str, seed: int) -> np.ndarray:
    """One communicator of ``gpus`` ranks placed by ``placement``: a (1, gpus) array of GPU ids."""
    from teton.placement.mapping import POLICIES, place

    if gpus < 1:
        raise SpecError("gpus", gpus, "must be at least 1")
    if gpus > cluster.gpus:
        raise SpecError("gpus", gpus, f"cluster {cluster.name} has {cluster.gpus} GPUs")
    if "," in placement and all(p.strip() in POLICIES for p in placement.split(",")):
        raise SpecError("policy", placement, "one policy: a collective is timed on one placement")
    if placement not in POLICIES:
        raise SpecError("policy", placement, closest(placement, POLICIES))
    pl = place(cluster, {"tp": 1, "cp": 1, "pp": 1, "dp": gpus}, policy=placement, seed=seed)
    return pl.groups("dp")


def message_sizes(min_bytes: int, max_bytes: int, step_factor: int) -> list[int]:
    """Sizes S from ``min_bytes`` up to ``max_bytes``, each ``step_factor`` times the last (nccl-tests -b -e -f)."""
    sizes = []
    s = min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= step_factor
    return sizes


def collective_sweep(cluster: ClusterSpec, op: str, gpus: int, placement: str = "topology-aware",
                     min_bytes: int = 1 << 20, max_bytes: int = 1 << 30, step_factor: int = 2,
                     routing: str | None = None, qps: int | None = None, algo: str = "auto", fail_links: int = 0,
                     fidelity: str = "flow", seed: int = 0, leaf_uplink_ratio: float | None = None) -> list[dict]:
    """nccl-tests rows (size_bytes, time_s, algbw_gbytes_s, busbw_gbytes_s) for sizes min..max by ``step_factor``."""
    from teton.network.analytical import OPS, AnalyticalCostModel, bus_factor

    if op not in OPS:
        raise SpecError("op", op, closest(op, OPS))
    if fidelity not in FIDELITIES:
        raise SpecError("fidelity", fidelity, closest(fidelity, FIDELITIES))
    if min_bytes < 1:  # sizes grow by step_factor from min_bytes: from 0 they never pass max_bytes
        raise SpecError("min_bytes", min_bytes, "must be at least 1 byte")
    if min_bytes > max_bytes:
        raise SpecError("min_bytes", min_bytes, f"must be at most the largest size ({max_bytes:,} bytes)")
    if step_factor < 2:
        raise SpecError("step_factor", step_factor, "must be an integer >= 2")
    if op == "send_recv" and gpus < 2:
        raise SpecError("gpus", gpus, "send_recv needs at least 2 GPUs")
    groups = job_group(cluster, gpus, placement, seed)
    if fidelity == "flow":
        from teton.network.flow_model import FlowCostModel

        routing = routing or cluster.routing  # the fabric's own
        if qps is None:
            qps = default_qps(routing)
        if leaf_uplink_ratio is not None and not 0.05 <= leaf_uplink_ratio <= 16:
            raise SpecError("leaf_uplink_ratio", leaf_uplink_ratio, "must be between 0.05 and 16")
        model = FlowCostModel(cluster, routing=routing, qps=qps, algo=algo, seed=seed, failed_links=fail_links,
                              leaf_uplink_ratio=leaf_uplink_ratio)
    else:
        model = AnalyticalCostModel(cluster)
    rows = []
    factor = bus_factor(op, gpus) if gpus > 1 else 0.0
    for size in message_sizes(min_bytes, max_bytes, step_factor):
        t = model.collective_time(op, groups, float(size))
        algbw = size / t / 1e9 if t > 0 else 0.0
        rows.append({"size_bytes": int(size), "time_s": t, "algbw_gbytes_s": algbw, "busbw_gbytes_s": algbw * factor})
    return rows
