"""A collective's latency as NCCL's tuner counts it (``src/graph/tuning.cc``): only the ring's
inter-node steps (2 nNodes for an all-reduce, nNodes - 1 otherwise) and a tree's logarithmic ones
cross the network; the rest are NVLink steps. Every step had been charged the slowest hop's
network latency: an 8-byte all-gather over 24,576 GPUs took half a second."""

import numpy as np
import pytest

from teton.collectives.algorithms import network_steps, phases_for
from teton.network.analytical import NVLINK_STEP_LATENCY_S, AnalyticalCostModel


def test_network_steps_follow_nccls_ring_and_tree_counts():
    assert network_steps("all_gather", 1023, 1023, hosts=128) == 127  # nNodes - 1 of n - 1
    assert network_steps("all_reduce", 2046, 2046, hosts=128) == 256  # 2 nNodes
    assert network_steps("all_reduce", 20, 2046, hosts=128) == 14  # a tree: 2 ceil(log2 nNodes)
    assert network_steps("all_gather", 7, 7, hosts=1) == 0  # inside one host
    assert network_steps("all_reduce", 2, 2, hosts=2) == 2  # capped at the steps


def test_a_small_all_gather_pays_network_latency_only_where_the_ring_leaves_a_host(roce):
    model = AnalyticalCostModel(roce)
    groups = np.arange(1024)[None, :]  # 128 hosts of 8 GPUs, ring in rank order
    path = model.path("all_gather", groups)
    alpha, hosts = path[2], path[4]
    assert hosts == 128
    expect = 127 * alpha + (1023 - 127) * NVLINK_STEP_LATENCY_S
    assert model.collective_time("all_gather", groups, 8.0) == pytest.approx(expect, rel=1e-3)
    assert model.collective_time("all_gather", groups, 8.0) < 1023 * alpha / 2
    # the flow model's ring phase counts the same network steps
    (phase,) = phases_for("all_gather", groups, 8, algo="ring")
    assert phase.steps == 1023 and phase.net_steps == 127


def test_a_path_passes_the_switch_it_turns_at_once(roce):
    """Meta's RoCE cluster: RTSW 1 us, CTSW and ATSW 4 us, NIC 2 us. A path inside a rack passes
    its RTSW once; one turning at the pod passes RTSW, CTSW, RTSW (2 + 1 + 4 + 1 = 8 us, not the
    12 that charges the CTSW twice); at the cluster RTSW, CTSW, ATSW, CTSW, RTSW (16 us). Both
    network models take the same figure, and cable propagation counts both ways."""
    from teton.spec.cluster import path_latency_s
    from teton.topology.graph import build_fabric

    layers = roce.layers
    assert [path_latency_s(layers, t) * 1e6 for t in range(3)] == pytest.approx([1.0, 6.0, 14.0])
    model = AnalyticalCostModel(roce)
    rack, pod, cluster = np.arange(16)[None, :], np.arange(64)[None, :], np.arange(0, 24576, 3072)[None, :]
    assert [model.path("all_gather", g)[2] * 1e6 for g in (rack, pod, cluster)] == pytest.approx([3.0, 8.0, 16.0])
    fabric = build_fabric(roce)
    assert fabric.path_latency_s(np.array([0, 1, 2])) * 1e6 == pytest.approx([3.0, 8.0, 16.0])
    far = roce.model_copy(update={"layers": [layers[0], layers[1], layers[2].model_copy(update={"link_latency_us": 50.0})]})
    assert path_latency_s(far.layers, 2) * 1e6 == pytest.approx(14.0 + 2 * 50.0)
