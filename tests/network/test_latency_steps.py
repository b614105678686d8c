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
    assert model.collective_time("all_gather", groups, 8.0) < 1023 * alpha / 3
    # the flow model's ring phase counts the same network steps
    (phase,) = phases_for("all_gather", groups, 8, algo="ring")
    assert phase.steps == 1023 and phase.net_steps == 127
