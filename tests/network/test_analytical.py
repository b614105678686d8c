"""alpha-beta network model: nccl-tests factors, NVLink, NIC, oversubscription."""

import numpy as np
import pytest

from teton.network.analytical import AnalyticalCostModel, bus_factor
from teton.placement import place
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec


def test_bus_factors():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == 7 / 8
    assert bus_factor("send_recv", 2) == 1


def test_intra_host_all_gather_runs_at_nvlink_times_efficiency(roce):
    m = AnalyticalCostModel(roce)
    bw, _ = m.busbw("all_gather", np.arange(8)[None, :])
    assert bw == pytest.approx(roce.gpu_spec.nvlink_bw_bytes_s * m.eff.nccl_nvlink)


def test_one_gpu_per_host_ring_runs_at_nic_rate_inside_a_pod(roce):
    m = AnalyticalCostModel(roce)
    groups = (np.arange(128) * 8)[None, :]  # 128 hosts in one pod
    bw, _ = m.busbw("all_gather", groups)
    assert bw == pytest.approx(roce.nic_bytes_s_per_gpu * m.eff.nccl_net)


def test_sparse_groups_across_pods_pay_the_oversubscription(roce):
    """16,384 GPUs' DP groups of 8, one member in each of the 8 pods: each pod's 2,048 ring edges
    (one per group, one NIC per member's host) share its uplinks, 3,072 / 7 NICs' worth."""
    m = AnalyticalCostModel(roce)
    p = place(roce, {"tp": 8, "cp": 16, "pp": 16, "dp": 8})
    groups = p.groups("dp")
    assert np.unique(groups[0] // 3072).size == 8
    bw, _ = m.busbw("all_gather", groups)
    edges_per_pod = groups.shape[0]
    assert bw == pytest.approx(roce.nic_bytes_s_per_gpu * m.eff.nccl_net * 3072 / (7 * edges_per_pod))


def test_a_group_alone_across_a_pod_boundary_shares_its_uplinks_with_nobody(roce):
    """One TP group of 8 split 4 + 4 over the edge of a 1:7 pod runs as it does inside the rack
    (the flow model agrees); it had paid the pod's full oversubscription, 6.7x the time."""
    from teton.network.cost_model import cost_model

    m = AnalyticalCostModel(roce)
    straddling, inside = np.arange(3072 - 4, 3072 + 4)[None, :], np.arange(4, 12)[None, :]
    assert m.busbw("all_reduce", straddling)[0] == m.busbw("all_reduce", inside)[0]
    flow = cost_model(roce, "flow")
    assert m.collective_time("all_reduce", straddling, 2**28) == pytest.approx(
        flow.collective_time("all_reduce", straddling, 2**28), rel=0.01)


def test_the_host_with_fewest_members_bounds_the_rings(roce):
    """8 + 1 over two hosts: the lone GPU's one NIC carries every ring (1 NIC's worth, as the flow
    model finds), not the average of 4.5 members per host."""
    m = AnalyticalCostModel(roce)
    bw, _ = m.busbw("all_reduce", np.arange(9)[None, :])
    assert bw == pytest.approx(roce.nic_bytes_s_per_gpu * m.eff.nccl_net)


def test_time_is_alpha_plus_beta(roce):
    m = AnalyticalCostModel(roce)
    g = np.arange(8)[None, :]
    t1, t2 = m.collective_time("all_gather", g, 1e6), m.collective_time("all_gather", g, 2e6)
    bw, alpha = m.busbw("all_gather", g)
    assert t2 - t1 == pytest.approx(7 / 8 * 1e6 / bw)
    assert t1 == pytest.approx(7 / 8 * 1e6 / bw + 7 * alpha)


def test_cluster_efficiency_overrides_reach_the_network_model():
    base = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])
    slow = ClusterSpec(**{**CLUSTER_PRESETS["meta-roce-24k"], "efficiency": {"nccl_nvlink": 0.4}})
    g = np.arange(8)[None, :]
    assert AnalyticalCostModel(slow).collective_time("all_gather", g, 1e9) > 1.9 * (
        AnalyticalCostModel(base).collective_time("all_gather", g, 1e9) - 7 * 2e-6)


def test_unknown_efficiency_override_is_a_spec_error():
    from teton.errors import SpecError
    from teton.spec import load_spec

    with pytest.raises(SpecError, match="cluster.efficiency.gemm_bf61"):
        load_spec({"cluster": {"base": "meta-roce-24k", "efficiency": {"gemm_bf61": 0.7}}, "model": "llama3-8b",
                   "job": {"gpus": 8}})


def test_a_scattered_ring_leaves_its_domain_at_every_rank_order_hop_that_does(roce):
    """NCCL links a ring's hosts in rank order: a 16,384-GPU ring over hosts placed at random
    crosses the 1:7 pod spine at most of its hops, where a pod-contiguous ring crosses it once per
    pod. The analytical model had priced both as contiguous (358 GB/s busbw; the flow model 86)."""

    from teton.network.flow_model import FlowCostModel

    rng = np.random.default_rng(0)
    hosts = rng.permutation(roce.hosts)[:2048]
    scattered = (hosts[:, None] * 8 + np.arange(8)).ravel()[None, :]
    ordered = np.sort(scattered, axis=1)
    model = AnalyticalCostModel(roce)
    fast, slow = (model.busbw("all_reduce", g)[0] for g in (ordered, scattered))
    assert slow < fast / 3
    flow = FlowCostModel(roce, routing="adaptive")
    t_flow = flow.collective_time("all_reduce", scattered, 16e9)
    assert model.collective_time("all_reduce", scattered, 16e9) == pytest.approx(t_flow, rel=0.1)


@pytest.mark.parametrize("gpus", [72, 128])
def test_an_all_to_all_across_an_oversubscribed_spine_takes_its_slower_bottleneck(gpus):
    """One pod plus one host (72 GPUs of 64-GPU pods at 1:7) had read a third of the flow model's
    busbw from the average members per domain (on the 24K cluster: 13 against 44 GB/s); its time is
    the slower of the NICs' share and each domain's uplinks, its m_d members there sending
    m_d (n - m_d) / n of S out over D_d / o."""
    from teton.network.flow_model import FlowCostModel

    layers = [{"name": "rack", "switch": "rtsw", "span_gpus": 16, "oversubscription": 1.0, "hop_latency_us": 1.0},
              {"name": "pod", "switch": "ctsw", "span_gpus": 64, "oversubscription": 7.0, "hop_latency_us": 4.0},
              {"name": "cluster", "switch": "atsw", "span_gpus": 256, "oversubscription": 1.0, "hop_latency_us": 4.0}]
    small = ClusterSpec(**{**CLUSTER_PRESETS["meta-roce-24k"], "name": "small-pods", "hosts": 32, "layers": layers})
    g = np.arange(gpus)[None, :]
    analytical = AnalyticalCostModel(small).collective_time("all_to_all", g, 64e9)
    flow = FlowCostModel(small, routing="adaptive").collective_time("all_to_all", g, 64e9)
    assert analytical == pytest.approx(flow, rel=0.02)
