"""What a spec's step needs before it is simulated, memoised: its network cost model, where its
ranks sit on the cluster, and the point-to-point transfer time across each pipeline boundary.

Each is a pure function of (parts of) the spec, cached by value so that thousands of layouts of
one job on one cluster build each cost model and placement once.
"""

from __future__ import annotations

import numpy as np

from teton.memo import IdentityMemo, ValueMemo
from teton.network.cost_model import CostModel, cost_model
from teton.placement import Placement, place
from teton.spec.schema import Spec


class InSituCost:
    """A network cost model's collectives as a training job sees them.

    The cost models answer with nccl-tests times (the burst figure: ``teton collective`` and the
    network studies use them as they are); inside a job a collective takes ``t / c`` with ``c``
    the in-situ ``collective_in_situ`` (``teton.hardware.in_situ``: skewed arrival of the ranks,
    SMs and HBM shared with compute, the job's message sizes), latency and bandwidth terms alike.
    """

    def __init__(self, base: CostModel, factor: float):
        self.base, self.factor = base, float(factor)
        self.fidelity = getattr(base, "fidelity", "analytical")

    def collective_time(self, op: str, groups: np.ndarray, size_bytes: float) -> float:
        return self.base.collective_time(op, groups, size_bytes) / self.factor

    def concurrent_times(self, op: str, group_sets: list[np.ndarray], size_bytes: float) -> np.ndarray:
        return self.base.concurrent_times(op, group_sets, size_bytes) / self.factor

    def __getattr__(self, name: str):
        return getattr(self.base, name)


_IN_SITU_COST = IdentityMemo(256)


def in_situ_cost(cost: CostModel, factor: float) -> CostModel:
    """``cost`` as a job sees it (``InSituCost``), memoised so one base model keeps one wrapper
    (the engine's identity-keyed caches then hit); ``cost`` itself when the factor is 1."""
    if factor == 1.0 or isinstance(cost, InSituCost):
        return cost
    return _IN_SITU_COST.get((cost,), (float(factor),), lambda: InSituCost(cost, factor))


def make_cost_model(spec: Spec) -> CostModel:
    """The network cost model the spec asks for (analytical, or flow on the explicit fabric), as
    the job's collectives see it (``in_situ_cost``)."""
    from teton.hardware import cluster_efficiency

    eff = cluster_efficiency(spec.cluster.gpu_spec, spec.cluster.efficiency, spec.job.software.name)
    return in_situ_cost(network_cost_model(spec), eff.collective_in_situ)


def network_cost_model(spec: Spec) -> CostModel:
    """The network cost model the spec asks for, answering with nccl-tests (burst) times."""
    net = spec.network
    pat = spec.job.software.nccl_pat
    key = (cluster_key(spec.cluster), net.model_dump_json(), spec.seed if net.fidelity == "flow" else 0, pat)
    hit = _COST_MODELS.get(key)
    if hit is None:
        hit = _COST_MODELS.put(key, cost_model(spec.cluster, net.fidelity, routing=spec.routing,
                                               qps=net.qps_per_connection, seed=spec.seed, nvls=net.nvls, pat=pat))
    return hit


_COST_MODELS = ValueMemo(64)
_PP_PAIRS = IdentityMemo(256)
_P2P = IdentityMemo(1024)
_CLUSTER_KEYS = IdentityMemo(1024)


def pp_transfer_times(placement: Placement, cost, nbytes: float, v: int) -> np.ndarray:
    """(p,) seconds to send ``nbytes`` across each pipeline boundary (the last: the interleaved
    wrap-around, 0 for 1F1B), every boundary sending at once as they do in the schedule's steady
    state (the cost model's ``concurrent_times``: boundaries whose sends cross the same uplinks
    share them); memoised per placement, cost model and size."""

    def times() -> np.ndarray:
        pairs = pp_boundary_pairs(placement)
        used = pairs if v > 1 else pairs[:-1]
        out = np.zeros(len(pairs))
        if used:
            out[:len(used)] = cost.concurrent_times("send_recv", used, nbytes)
        out.flags.writeable = False
        return out

    return _P2P.get((placement, cost), (float(nbytes), v > 1), times)


def pp_boundary_pairs(placement: Placement) -> list[np.ndarray]:
    """(n_pipelines, 2) GPU ids for each boundary r -> r+1 (the last: back to rank 0), memoised."""

    def pairs() -> list[np.ndarray]:
        g = placement.groups("pp")
        p = g.shape[1]
        return [np.ascontiguousarray(np.stack([g[:, r], g[:, (r + 1) % p]], axis=1)) for r in range(p)]

    return _PP_PAIRS.get((placement,), (), pairs)


_PLACEMENTS = ValueMemo(256)


def cluster_key(cluster) -> str:
    """A value key for a (frozen) cluster spec, memoised by identity."""
    return _CLUSTER_KEYS.get((cluster,), (), cluster.model_dump_json)


def placement_key(cluster) -> str:
    """A value key for where ranks can sit on a cluster: everything but its efficiency figures
    (which a fit varies run after run), memoised by identity."""
    return _PLACEMENT_KEYS.get((cluster,), (), lambda: cluster.model_dump_json(exclude={"efficiency"}))


_PLACEMENT_KEYS = IdentityMemo(1024)


def default_placement(spec: Spec) -> Placement:
    """The spec's placement on an empty cluster (memoised: a pure function of the spec's fields)."""
    j, lay = spec.job, spec.job.layout
    key = (placement_key(spec.cluster), tuple(lay.degrees.items()), lay.order, j.placement, spec.seed)
    hit = _PLACEMENTS.get(key)
    if hit is None:
        hit = _PLACEMENTS.put(key, place(spec.cluster, lay.degrees, lay.order, j.placement, spec.seed))
    return hit
