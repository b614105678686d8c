"""The network cost model interface, and the one factory that builds either fidelity.

Every consumer (the step engine, placement comparisons, the cluster scheduler's slowdown model,
checkpoint restores, the collective sweep) prices a collective through ``CostModel``:

- ``analytical``: alpha-beta over the cluster's fabric layers (``teton.network.analytical``);
- ``flow``: max-min fair flows on the explicit switch graph (``teton.network.flow_model``).

Both answer with nccl-tests (burst) times; the engine wraps them in the in-situ view a training
job sees (``teton.engine.prepare.in_situ_cost``).
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

from teton.errors import SpecError
from teton.spec.cluster import ClusterSpec

FIDELITIES = ("analytical", "flow")


class CostModel(Protocol):
    """Seconds for one collective ``op`` over each row of ``groups`` (GPU ids), ``size_bytes``
    per rank as nccl-tests counts it; the groups run concurrently and the slowest sets the time."""

    fidelity: str

    def collective_time(self, op: str, groups: np.ndarray, size_bytes: float) -> float: ...

    def concurrent_times(self, op: str, group_sets: list[np.ndarray], size_bytes: float) -> np.ndarray:
        """Seconds of ``op`` on each of ``group_sets`` when every set runs at the same time."""
        ...


def cost_model(cluster: ClusterSpec, fidelity: Literal["analytical", "flow"] | str = "analytical", *,
               routing: str | None = None, qps: int = 16, seed: int = 0, nvls: bool = True, pat: bool = True) -> CostModel:
    """The cost model of ``fidelity`` on ``cluster``: ``nvls`` switches NVLink SHARP (where the GPU has
    it) and ``pat`` NCCL's PAT latency (all-gather / reduce-scatter over one GPU per host) in either;
    ``routing`` (None: the fabric's own, ``cluster.routing``), ``qps`` (per connection) and ``seed``
    (ECMP hashing) are the flow model's."""
    if fidelity == "analytical":
        from teton.network.analytical import AnalyticalCostModel

        return AnalyticalCostModel(cluster, nvls=nvls, pat=pat)
    if fidelity == "flow":
        from teton.network.flow_model import FlowCostModel  # heavy: numba kernels, fabric graph

        return FlowCostModel(cluster, routing=routing, qps=qps, seed=seed, nvls=nvls, pat=pat)
    raise SpecError("fidelity", fidelity, "must be analytical or flow")
