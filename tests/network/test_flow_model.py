import numpy as np
import pytest

from teton.errors import SpecError
from teton.hardware import efficiency_for
from teton.network.analytical import AnalyticalCostModel
from teton.network.flow_model import FlowCostModel
from teton.studies.network import roofline_busbw

GIB = 2**30

UNCONTENDED = [
    ("all_gather", np.arange(8)[None]),  # NVLink
    ("reduce_scatter", np.arange(8)[None]),
    ("all_reduce", np.arange(8)[None]),  # NVLS
    ("all_reduce", np.arange(4)[None]),
    ("all_gather", np.arange(16)[None]),  # two hosts under one RTSW
    ("all_reduce", np.arange(16)[None]),
    ("all_reduce", np.arange(0, 64, 8)[None]),  # one GPU per host, 4 racks
    ("send_recv", np.array([[0, 8], [1, 9]])),
    ("all_to_all", np.arange(16)[None]),
    ("broadcast", np.arange(16)[None]),
    ("all_gather", np.arange(2048).reshape(256, 8)),  # 256 TP groups at once: NVLink only
]


@pytest.mark.parametrize("routing", ["e-ecmp", "adaptive"])
@pytest.mark.parametrize("op,groups", UNCONTENDED)
def test_flow_agrees_with_analytical_when_uncontended(roce, routing, op, groups):
    flow = FlowCostModel(roce, routing=routing)
    ana = AnalyticalCostModel(roce)
    # small sizes check the latency terms too (a broadcast's pipelined chain pays its n - 1 hops in both)
    for size in (16 * 2**20, GIB):
        assert flow.collective_time(op, groups, size) == pytest.approx(ana.collective_time(op, groups, size),
                                                                       rel=0.05)


def test_adaptive_agrees_on_a_whole_pod_and_across_pods(roce):
    flow = FlowCostModel(roce, routing="adaptive")
    ana = AnalyticalCostModel(roce)
    for groups in (np.arange(3072)[None], np.arange(0, 24576, 8)[None]):
        for op in ("all_gather", "all_reduce"):
            assert flow.collective_time(op, groups, 64 * GIB) == pytest.approx(
                ana.collective_time(op, groups, 64 * GIB), rel=0.05)


def test_fidelity_attribute_and_zero_cases(roce):
    m = FlowCostModel(roce)
    assert m.fidelity == "flow"
    assert m.collective_time("all_reduce", np.arange(1)[None], GIB) == 0.0
    assert m.collective_time("all_reduce", np.arange(8)[None], 0) == 0.0


def test_times_are_linear_in_size_plus_latency(roce):
    m = FlowCostModel(roce, routing="ecmp", qps=1)
    g = np.arange(0, 512, 8)[None]
    t1, t2, t4 = (m.collective_time("all_reduce", g, s * GIB) for s in (1, 2, 4))
    assert t4 - t2 == pytest.approx(2 * (t2 - t1), rel=1e-9)


def test_spmd_shortcut_equals_the_full_solve(roce):
    m = FlowCostModel(roce)
    groups = np.arange(64).reshape(16, 4)  # two groups per host on 8 hosts
    fast = m.collective_time("all_gather", groups, GIB)
    reps = m._representatives(groups)
    assert reps.size == 2  # one host pattern solved
    from teton.collectives import phases_for

    full = sum(m.solve_phase(p).per_byte_s for p in phases_for("all_gather", groups, 8, "auto", True))
    assert fast == pytest.approx(full * GIB + m.plan("all_gather", groups)[0].latency_s, rel=1e-9)


def test_contention_between_groups_shows(roce):
    # 8 groups each spanning two pods through the 1:7 aggregation layer, all at once, vs one alone
    m = FlowCostModel(roce, routing="adaptive")
    hosts = np.arange(0, 3072, 8 * 16)[:24]  # one GPU on every 16th host of pod 0 ...
    one = np.concatenate([hosts, hosts + 3072])[None]
    many = np.concatenate([one + 8 * k for k in range(16)])  # 16 such groups share the pod uplinks
    assert roofline_busbw(m, "all_reduce", many) <= roofline_busbw(m, "all_reduce", one) * (1 + 1e-9)


@pytest.mark.parametrize("algo", ["ring", "tree", "rhd", "hierarchical"])
def test_algorithms_run_and_stay_below_the_hardware(roce, algo):
    m = FlowCostModel(roce, routing="adaptive", algo=algo)
    eff = efficiency_for(roce.gpu_spec)
    g = np.arange(64)[None]
    bw = roofline_busbw(m, "all_reduce", g)
    ceiling = 8 * roce.nic_bytes_s_per_gpu * eff.nccl_net * 1.1  # ring/tree: ~ 8 NICs per host
    assert 0.1 * ceiling < bw < ceiling


def test_rhd_needs_a_power_of_two_for_all_gather(roce):
    m = FlowCostModel(roce, algo="rhd")
    with pytest.raises(SpecError):
        m.collective_time("all_gather", np.arange(12)[None], GIB)
    assert m.collective_time("all_reduce", np.arange(12)[None], GIB) > 0  # folds the extra ranks


def test_failed_links_never_speed_things_up(roce):
    g = np.arange(0, 8192, 8)[None]
    base = FlowCostModel(roce, routing="adaptive").collective_time("all_gather", g, GIB)
    hurt = FlowCostModel(roce, routing="adaptive", failed_links=5000, seed=1).collective_time("all_gather", g, GIB)
    assert hurt >= base * (1 - 1e-9)
    m = FlowCostModel(roce, routing="e-ecmp", failed_links=200, seed=2)
    assert np.isfinite(m.collective_time("all_reduce", g, GIB))


@pytest.mark.parametrize("kw", [dict(routing="ospf"), dict(algo="magic"), dict(qps=0), dict(failed_links=-1),
                                dict(failed_links=10**9)])
def test_bad_arguments_are_spec_errors(roce, kw):
    with pytest.raises(SpecError):
        FlowCostModel(roce, **kw)


def test_unknown_op_and_out_of_range_gpus(roce):
    m = FlowCostModel(roce)
    with pytest.raises(SpecError):
        m.collective_time("all_gatherz", np.arange(8)[None], GIB)
    with pytest.raises(SpecError):
        m.collective_time("all_gather", np.array([[0, 10**6]]), GIB)


def test_sharp_in_network_all_reduce_beats_the_ring_on_infiniband(ib, roce):
    g = np.arange(512)[None]
    ring = roofline_busbw(FlowCostModel(ib, routing="adaptive"), "all_reduce", g)
    sharp = roofline_busbw(FlowCostModel(ib, routing="adaptive", algo="sharp"), "all_reduce", g)
    # NICs carry S/k once each way instead of 2(n-1)/n S / k: NVLink (reduce-scatter + all-gather
    # on the same ports) becomes the bound: 2 x 360 / (2 x 7/8) ~ 411 GB/s vs the ring's 360
    assert sharp > 1.1 * ring
    assert sharp <= 2 * roce.gpu_spec.nvlink_bw_bytes_s  # never above the NVLink ports
    one_host = FlowCostModel(ib, algo="sharp").collective_time("all_reduce", np.arange(8)[None], GIB)
    assert one_host == pytest.approx(FlowCostModel(ib).collective_time("all_reduce", np.arange(8)[None], GIB))
    with pytest.raises(SpecError):
        FlowCostModel(roce, algo="sharp")  # Ethernet switches: no in-network reduction
    with pytest.raises(SpecError):
        FlowCostModel(ib, algo="sharp").collective_time("all_gather", g, GIB)


def test_neighbours_traffic_shares_the_fabric(roce):
    import numpy as np

    from teton.network.flow_model import FlowCostModel
    from teton.placement.compare import neighbour_groups
    from teton.studies.network import roofline_busbw

    g = roce.gpus_per_host
    # our job: 8 hosts spread over 8 racks of pod 0; neighbours: 256 more hosts of the same pod,
    # shuffled into 16-host jobs all-reducing across the pod's CTSW layer all the time
    ours_hosts = np.arange(8) * 24
    ours = (ours_hosts[:, None] * g + np.arange(g)).ravel()[None]
    busy = np.setdiff1d(np.arange(384), ours_hosts)[:256]
    busy_gpus = (busy[:, None] * g + np.arange(g)).ravel()
    jobs = neighbour_groups(busy_gpus, g)
    assert jobs.shape == (16, 16 * g) and not np.isin(jobs, ours).any()
    assert np.array_equal(np.sort(jobs.ravel()), np.sort(busy_gpus))  # whole hosts, every busy one
    alone = roofline_busbw(FlowCostModel(roce, routing="ecmp", qps=1), "all_gather", ours)
    same = roofline_busbw(FlowCostModel(roce, routing="ecmp", qps=1, background=()), "all_gather", ours)
    crowded = roofline_busbw(FlowCostModel(roce, routing="ecmp", qps=1, background=(("all_reduce", jobs),)),
                             "all_gather", ours)
    assert same == alone  # no neighbours, the same solve
    assert crowded < alone  # neighbours' flows take a share of the links ours cross


def test_network_nvls_false_turns_nvls_off_in_the_flow_model_too():
    """``network.nvls: false`` reaches both fidelities: an intra-host all-reduce on H100 then runs
    as a ring over NVLink, not NVLink SHARP, in the flow model as in the analytical one."""
    import numpy as np

    from teton.network.cost_model import cost_model
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    cluster = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])
    host = np.arange(8)[None, :]
    on, off = (cost_model(cluster, "flow", nvls=v) for v in (True, False))
    assert on.nvls and not off.nvls
    t_on, t_off = (m.collective_time("all_reduce", host, 256 * 2**20) for m in (on, off))
    a_on, a_off = (cost_model(cluster, "analytical", nvls=v).collective_time("all_reduce", host, 256 * 2**20)
                   for v in (True, False))
    assert t_on != t_off and a_on != a_off
    assert (t_on < t_off) == (a_on < a_off)  # NVLS changes the time the same way in both models


def test_an_all_to_all_too_large_to_route_is_refused_before_its_flows_are_built(roce):
    """16,384 GPUs' all-to-all is 268M flows: the guard ran after building them (a numpy
    ArrayMemoryError traceback under a memory limit, 18 s on 8,192 GPUs before the error)."""
    model = FlowCostModel(roce)
    with pytest.raises(SpecError, match="QP hops in one all-to-all"):
        model.collective_time("all_to_all", np.arange(16384)[None, :], 1e9)
