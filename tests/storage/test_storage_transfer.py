"""The many-writer transfer model: fair-share fluid, stragglers, caps -- hand cases."""

from __future__ import annotations

import numpy as np
import pytest

from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.spec.storage import storage_system
from teton.storage import transfer
from teton.storage.transfer import fair_share_fluid, writer_slowdowns

CLUSTER = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])


def test_fluid_equal_share_no_ceilings():
    f = fair_share_fluid(np.array([1.0, 3.0]), np.array([1e9, 1e9]), cap=2.0)
    # both at 1 until t=1, then the second alone at 2 for its last 2 bytes: done at t=2 = total/cap
    assert f.time_s == pytest.approx(2.0)
    assert f.saturated_s == pytest.approx(2.0)


def test_fluid_ceiling_makes_a_tail():
    f = fair_share_fluid(np.array([1.0, 3.0]), np.array([10.0, 1.5]), cap=2.0)
    # phase 1: lambda = 1 for both (sum 2 = cap) until t=1; phase 2: writer 2 alone at its
    # ceiling 1.5 for 2 bytes -> 4/3 s more. Storage busy until t=1, tail 4/3 s.
    assert f.time_s == pytest.approx(1 + 2 / 1.5)
    assert f.saturated_s == pytest.approx(1.0)
    assert f.peak_rate_bytes_s == pytest.approx(2.0)


def test_fluid_water_filling_with_slow_writer():
    # cap 3, ceilings 0.5, 10, 10: slow one at 0.5, the two others at 1.25 each
    f = fair_share_fluid(np.array([1.0, 2.5, 2.5]), np.array([0.5, 10.0, 10.0]), cap=3.0)
    # t=2: all three finish together (0.5*2 = 1, 1.25*2 = 2.5)
    assert f.time_s == pytest.approx(2.0)


def test_fluid_many_writers_classes_keep_the_slowest():
    rng = np.random.default_rng(1)
    b = rng.uniform(1, 2, 5000)
    u = rng.uniform(0.5, 1.5, 5000)
    f = fair_share_fluid(b, u, cap=1e9)  # never saturated: everyone at its ceiling
    assert f.time_s == pytest.approx((b / u).max())
    assert f.median_finish_s == pytest.approx(np.median(b / u), rel=0.05)
    g = fair_share_fluid(b, u, cap=100.0)
    assert g.time_s >= max(b.sum() / 100.0, (b / u).max()) * (1 - 1e-9)


def test_slowdowns_mean_one_and_seeded():
    s = writer_slowdowns(200_000, 0.2, seed=3)
    assert s.mean() == pytest.approx(1.0, abs=0.005)
    assert np.array_equal(s, writer_slowdowns(200_000, 0.2, seed=3))
    assert not np.array_equal(s[:10], writer_slowdowns(10, 0.2, seed=4))
    assert np.all(writer_slowdowns(5, 0.0, 0) == 1)


def test_few_writers_are_client_bound_many_are_storage_bound():
    s = storage_system({"base": "tectonic-llama3", "writer_jitter_sigma": 0.0})
    one_host = transfer(s, CLUSTER, np.full(8, 1e9), np.zeros(8, int))
    fuse_host = 1 / (1 / 5e9 + 15e-6 / 2**20)  # FUSE ceiling with its per-request overhead
    assert one_host.bottleneck == "fuse_client"
    assert one_host.time_s == pytest.approx(8e9 / fuse_host + 100e-6)
    many = transfer(s, CLUSTER, np.full(16384, 1e9), np.arange(16384) // 8)
    assert many.bottleneck == "server_nic"
    assert many.aggregate_s == pytest.approx(16384e9 / s.peak_write_bytes_s())


def test_reads_have_no_write_amplification():
    s = storage_system({"base": "tectonic-llama3", "writer_jitter_sigma": 0.0})
    w = transfer(s, CLUSTER, np.full(16384, 1e9), np.arange(16384) // 8, "write")
    r = transfer(s, CLUSTER, np.full(16384, 1e9), np.arange(16384) // 8, "read")
    assert r.caps_bytes_s["server_nic"] == pytest.approx(w.caps_bytes_s["server_nic"] * 15 / 9)


def test_local_tier_is_per_host_flash():
    s = storage_system("local-nvme")
    t = transfer(s, CLUSTER, np.full(4, 4.2e9), np.zeros(4, int), metadata=False)
    # one host: 8 drives x 4.2 GB/s shared by 4 writers
    assert t.bottleneck == "ssd"
    assert t.time_s == pytest.approx(4 * 4.2e9 / (8 * 4.2e9) + 10e-6)


def test_empty_transfer():
    s = storage_system("tectonic-llama3")
    assert transfer(s, CLUSTER, np.zeros(3), np.zeros(3, int)).time_s == 0
