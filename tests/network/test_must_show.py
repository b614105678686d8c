"""The issue's "Must show" items, each as a test (figures in the docstrings are from these runs)."""

import numpy as np
import pytest

from teton.cli.collective import sweep
from teton.hardware import efficiency_for
from teton.network.flow_model import FlowCostModel
from teton.report.network_plots import plot_placement_study
from teton.studies.network import pinning_study, placement_study, roofline_busbw


def test_8_gpus_all_gather_runs_at_nvlink_peak_times_nccl_efficiency(roce):
    eff = efficiency_for(roce.gpu_spec)
    rows = sweep("meta-roce-24k", "all_gather", 8, min_bytes=2**30, max_bytes=2**30)
    peak = roce.gpu_spec.nvlink_bw_bytes_s * eff.nccl_nvlink / 1e9  # 450 GB/s x 0.80
    assert rows[0]["busbw_gbytes_s"] == pytest.approx(peak, rel=0.02)


def test_3072_gpus_in_one_pod_reach_90_percent_at_large_messages(roce):
    eff = efficiency_for(roce.gpu_spec)
    rows = sweep("meta-roce-24k", "all_gather", 3072, placement="topology-aware", min_bytes=2**38,
                 max_bytes=2**38)
    per_gpu_nic = roce.nic_bytes_s_per_gpu * eff.nccl_net / 1e9
    # the ring's bus bandwidth per GPU: 8 NICs per host, NVLink-capped (min(360, 8 x 46) GB/s)
    ideal = min(roce.gpu_spec.nvlink_bw_bytes_s * eff.nccl_nvlink / 1e9, 8 * per_gpu_nic)
    assert rows[0]["busbw_gbytes_s"] >= 0.9 * ideal
    assert rows[0]["busbw_gbytes_s"] >= 0.9 * per_gpu_nic


def test_blog_allgather_picture(roce, tmp_path):
    """Plain ECMP, 1 QP, random placement spreads far below 90 %; topology-aware + E-ECMP 16 QPs
    stays >= 90 % (6 seeded jobs of 64-2,048 GPUs on a half-busy 24K cluster)."""
    names = ("random placement, ECMP 1 QP", "topology-aware, E-ECMP 16 QPs")
    res = placement_study(roce, trials=6, seed=0, series=names)
    bad = np.asarray(res["normalized_busbw"][names[0]])
    good = np.asarray(res["normalized_busbw"][names[1]])
    assert bad.min() < 0.6 and bad.max() - bad.min() > 0.1  # well below 90 % and spread
    assert good.min() >= 0.9
    out = tmp_path / "fig.png"
    plot_placement_study(res, str(out))
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_e_ecmp_16_qps_beats_ecmp_on_an_all_reduce_spanning_pods(roce):
    """128 GPUs (16 hosts) across the pod 0 / pod 1 boundary: ECMP 1 QP ~ 184 GB/s busbw, E-ECMP
    16 QPs ~ 360 GB/s (+96 %) with seed 0."""
    g = np.arange(3072 - 64, 3072 + 64)[None]
    ecmp = roofline_busbw(FlowCostModel(roce, routing="ecmp", qps=1), "all_reduce", g)
    eecmp = roofline_busbw(FlowCostModel(roce, routing="e-ecmp", qps=16), "all_reduce", g)
    assert eecmp / ecmp - 1 >= 0.10


def test_path_pinning_with_half_filled_racks_is_slower_than_e_ecmp(roce):
    res = pinning_study(roce, racks=64, seed=0)["normalized_busbw"]
    assert res["full racks, pinned 1 QP"] >= 0.95  # pinning is fine when racks are whole
    assert res["half-filled racks (2 jobs), pinned 1 QP"] < res["half-filled racks (2 jobs), e-ecmp 16 QP"]
    assert res["half-filled racks (2 jobs), pinned 1 QP"] < 0.7 * res["full racks, pinned 1 QP"]


def test_infiniband_adaptive_routing_shows_no_ecmp_collapse(ib):
    # 8 data-parallel-like groups of 256 (one GPU per host, every local GPU busy): full injection load
    groups = np.arange(2048).reshape(256, 8).T
    small = np.arange(16)[None]
    ideal = roofline_busbw(FlowCostModel(ib, routing="adaptive"), "all_reduce", small[:, ::8])
    adaptive = roofline_busbw(FlowCostModel(ib, routing="adaptive"), "all_reduce", groups)
    ecmp = roofline_busbw(FlowCostModel(ib, routing="ecmp", qps=1), "all_reduce", groups)
    assert adaptive >= 0.97 * ideal
    assert ecmp < 0.7 * adaptive


def test_rtsw_under_subscription_masks_ecmp_collisions(roce):
    """Every GPU of every rack in a ring of its own whose every hop leaves the rack: 1:1 RTSW
    uplinks are fully loaded and E-ECMP hash imbalance costs ~ 40 %; doubling the uplinks (Meta's
    SIGCOMM'24 phase 2, 2:1) brings it back near the small-cluster figure."""
    groups = np.arange(4096).reshape(32, 128).T  # 128 rings of 32 GPUs, 16 hosts apart (Llama 3 DP)
    one = roofline_busbw(FlowCostModel(roce, routing="e-ecmp"), "all_gather", groups)
    two = roofline_busbw(FlowCostModel(roce, routing="e-ecmp", leaf_uplink_ratio=2.0), "all_gather", groups)
    ideal = roofline_busbw(FlowCostModel(roce, routing="adaptive"), "all_gather", groups)
    assert one < 0.8 * ideal
    assert two >= 0.85 * ideal and two > one
