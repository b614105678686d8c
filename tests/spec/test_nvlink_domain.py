"""The NVLink domain as a topology level: rack-scale domains (GB200 NVL72) join several hosts on
NVLink, and the spec names the domain's size (NVL36 or NVL72?)."""

import numpy as np
import pytest

import teton
from teton.hardware import HOSTS
from teton.hardware.hosts import Host
from teton.hardware.storage import PCIE_D2H_EFFICIENCY, d2h_bytes_s_per_gpu
from teton.network.analytical import AnalyticalCostModel
from teton.placement.mapping import place
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.topology.graph import build_fabric


def _cluster(name: str, **update) -> ClusterSpec:
    return ClusterSpec(**{**CLUSTER_PRESETS[name], **update})


def test_a_rack_of_72_gb200s_is_one_nvlink_domain_of_4_gpu_trays():
    c = _cluster("gb200-nvl72-superpod")
    assert (c.gpus_per_host, c.domain_gpus, c.nics_per_domain) == (4, 72, 72)
    assert _cluster("dgx-b200-superpod").domain_gpus == 8  # an HGX host is its own domain


def test_a_collective_inside_the_domain_runs_on_nvlink_and_one_across_domains_on_the_fabric():
    group = np.arange(72)[None]
    nvl72 = AnalyticalCostModel(_cluster("gb200-nvl72-superpod"))
    nvl36 = AnalyticalCostModel(_cluster("gb200-nvl72-superpod", nvlink_domain_gpus=36))
    assert nvl72.path("all_reduce", group)[0] == "nvls"
    assert nvl36.path("all_reduce", group)[0] == "net"
    size = 1 << 30
    assert nvl72.collective_time("all_reduce", group, size) < nvl36.collective_time("all_reduce", group, size)


def test_the_fabric_graph_has_one_nvswitch_per_domain_and_rails_per_tray():
    f = build_fabric(_cluster("gb200-nvl72-superpod"))
    assert f.domain_gpus == 72 and f.gpus_per_host == 4
    assert int((f.node_kind == 2).sum()) == 9216 // 72  # NVSWITCH_NODE per domain
    a, b = np.array([0, 0, 0, 0]), np.array([71, 4, 72, 576])
    # same domain: NVLink; next rack, same rail: the rail's leaves meet at the SU spine; next SU: core
    assert f.turn_tier(a, b).tolist() == [-1, -1, 1, 2]
    assert f.leaf_of(np.array([0, 4, 1])).tolist() == [0, 0, 1]  # GPU r of every tray on rail r


def test_tp_groups_stay_inside_an_nvl36_domain_under_topology_aware_placement():
    c = _cluster("gb200-nvl72-superpod", nvlink_domain_gpus=36)
    p = place(c, {"tp": 8, "cp": 1, "pp": 4, "dp": 32})
    tp = p.groups("tp")
    assert (tp // 36 == tp[:, :1] // 36).all()
    assert np.unique(p.gpu_of_rank).size == 1024


def test_the_gb200_example_keeps_tp_on_nvlink_and_nvl36_costs_no_more_for_tp8():
    base = teton.simulate("examples/llama3-405b-gb200-nvl72.yaml")
    nvl36 = teton.simulate("examples/llama3-405b-gb200-nvl72.yaml", ["cluster.nvlink_domain_gpus=36"])
    hosts = teton.simulate("examples/llama3-405b-gb200-nvl72.yaml", ["cluster.nvlink_domain_gpus=4"])
    assert base.breakdown["tp_comm"] == pytest.approx(nvl36.breakdown["tp_comm"], rel=1e-9)
    assert hosts.breakdown["tp_comm"] > 3 * base.breakdown["tp_comm"]  # TP 8 over 2 trays: the NICs


@pytest.mark.parametrize(("update", "field"), [
    ({"nvlink_domain_gpus": 70}, "cluster.nvlink_domain_gpus"),  # not whole trays
    ({"nvlink_domain_gpus": 18432}, "cluster.nvlink_domain_gpus"),  # larger than the cluster
])
def test_a_domain_that_does_not_fit_the_cluster_is_refused(update, field):
    with pytest.raises(ValueError, match=f"{field} = {update['nvlink_domain_gpus']}: must"):
        _cluster("gb200-nvl72-superpod", **update)


def test_a_host_domain_must_be_whole_hosts():
    fields = HOSTS["gb200-nvl72"].model_dump()
    with pytest.raises(ValueError, match="nvlink_domain_gpus = 10: must be a multiple of the host's 4 GPUs"):
        Host(**{**fields, "nvlink_domain_gpus": 10})


def test_grace_trays_copy_to_cpu_memory_over_nvlink_c2c_not_pcie():
    gb200 = d2h_bytes_s_per_gpu("gb200-nvl72")
    assert gb200 == pytest.approx(450e9 * PCIE_D2H_EFFICIENCY / 2)
    assert gb200 > 5 * d2h_bytes_s_per_gpu("dgx-b200")


def test_inter_building_fibre_adds_its_latency_to_paths_that_cross_buildings():
    c = _cluster("meta-h100-campus-131k")
    near = AnalyticalCostModel(_cluster("meta-h100-campus-131k", layers=[
        {**layer.model_dump(), "link_latency_us": 0.0} for layer in c.layers]))
    far = AnalyticalCostModel(c)
    across = (np.arange(4) * 32768)[None]  # one GPU in each building
    inside = (np.arange(4) * 4096)[None]  # four pods of one building
    assert far.path("all_reduce", across)[2] - near.path("all_reduce", across)[2] == pytest.approx(20e-6)
    assert far.path("all_reduce", inside)[2] == near.path("all_reduce", inside)[2]


def test_tp_x_cp_blocks_fill_an_nvl72_domain_when_the_cluster_has_room():
    c = _cluster("gb200-nvl72-superpod")
    p = place(c, {"tp": 8, "cp": 8, "pp": 2, "dp": 8})  # 1,024 GPUs: 16 domains of one 64-GPU block
    cp = p.groups("cp")
    assert (cp // 72 == cp[:, :1] // 72).all()
    packed = place(c, {"tp": 8, "cp": 8, "pp": 1, "dp": 144})  # all 9,216 GPUs: no room to leave gaps
    assert np.unique(packed.gpu_of_rank).size == 9216


@pytest.mark.parametrize(("setting", "says"), [
    ("cluster.nvlink_domain_gpus=18432", "cluster.nvlink_domain_gpus = 18432: must divide the cluster's 9,216 GPUs"),
    ("cluster.backend_nic=cx8-800g", "cluster.backend_nic = 'cx8-800g': its 800 Gb/s (100.0 GB/s) exceeds the "
                                     "host's PCIe x16 link"),
    ("cluster.layers.0.span_gpus=0", "cluster.layers.0.span_gpus = 0: must be an integer in 1.."),
    ("cluster.host.gpus=0", "cluster.host.gpus = 0: must be an integer in 1.."),
])
def test_bad_rack_scale_hardware_is_one_line_naming_the_field(cli, setting, says):
    code, out, err = cli("run", "examples/llama3-405b-gb200-nvl72.yaml", "--set", setting)
    assert code == 2 and not out
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_second_fabric_plane_turns_switch_failures_from_interruptions_into_degradations():
    from teton.reliability.goodput import failure_model
    from teton.reliability.rates import job_components
    from teton.spec.reliability import ReliabilitySpec

    one, two = _cluster("dgx-b300-superpod"), _cluster("dgx-b300-superpod", fabric_planes=2)
    a, b = failure_model(one, 4096, ReliabilitySpec()), failure_model(two, 4096, ReliabilitySpec())
    assert a.job_rates_h["network_switch_cable"] > 0 and b.job_rates_h["network_switch_cable"] == 0
    assert a.unexpected_per_h - b.unexpected_per_h == pytest.approx(a.job_rates_h["network_switch_cable"])
    assert job_components(two, 4096).switches == job_components(one, 4096).switches  # still there, counted


def test_a_job_inside_one_nvl72_rack_spans_no_switch():
    from teton.reliability.rates import job_components

    c = _cluster("gb200-nvl72-superpod")
    assert job_components(c, 72).switches == 0 and job_components(c, 144).switches > 0
    assert job_components(c, 72).hosts == 18  # failures stay per tray
