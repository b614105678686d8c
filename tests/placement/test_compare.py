"""The cost of a placement for one job (Llama 3 405B on 16K GPUs of meta-roce-24k)."""

import numpy as np
import pytest

import teton
from teton.errors import SpecError
from teton.placement.compare import axis_that_pays, compare_policies, occupancy_busy

simulate = getattr(teton, "simulate", None)
needs_simulate = pytest.mark.skipif(simulate is None, reason="teton.simulate not available in this build")


@pytest.fixture(scope="module")
def spec(llama3_405b_16k):
    return teton.load_spec(llama3_405b_16k)


@needs_simulate
def test_405b_topology_aware_best_and_fragmented_pays_on_tp(spec):
    rows = {r["policy"]: r for r in compare_policies(spec, simulate=simulate)}
    ta = rows["topology-aware"]["step_time_s"]
    assert all(ta <= r["step_time_s"] + 1e-9 for r in rows.values())
    assert rows["topology-aware"]["slowdown"] == pytest.approx(1.0)
    frag = rows["fragmented"]
    assert frag["step_time_s"] > 1.05 * ta  # measurably slower
    assert frag["axis_pays"] == "tp"  # TP groups split over two hosts leave NVLink
    assert frag["delta_vs_ideal_s"]["tp_comm"] > 0.1
    # whole hosts scattered over the 1:7 pods: every pipeline boundary crosses a pod edge, and in
    # steady state all of them send at once through the same uplinks (the flow model: below)
    assert rows["random"]["slowdown"] > 1.05
    assert rows["random"]["axis_pays"] == "pp"
    for r in rows.values():
        assert set(r) >= {"policy", "step_time_s", "breakdown"}
        assert sum(r["breakdown"].values()) == pytest.approx(r["step_time_s"], rel=1e-6)


@needs_simulate
def test_on_a_half_occupied_cluster_topology_aware_wins(llama3_405b_16k):
    small = teton.load_spec(llama3_405b_16k, ["job.gpus=4096", "job.global_batch=512"])
    rows = {r["policy"]: r for r in compare_policies(small, occupancy=0.5, seed=2, simulate=simulate)}
    assert rows["topology-aware"]["occupancy"] == pytest.approx(0.5)
    ta = rows["topology-aware"]["step_time_s"]
    assert all(ta <= r["step_time_s"] for r in rows.values())
    assert rows["fragmented"]["step_time_s"] > 1.15 * ta  # the flow model: +21 %, as the analytical
    assert rows["fragmented"]["axis_pays"] == "tp"


@needs_simulate
def test_random_placement_pays_ecmp_collisions_in_the_flow_model(spec):
    """The 405B job's whole hosts scattered over the 1:7 pods: beyond the uplinks every pipeline
    boundary shares (both models), ECMP hashes the scattered flows onto colliding links, which only
    the flow model sees (+26 % against the analytical model's +12 %, in pp and dp)."""
    flow = spec.model_copy(update={"network": spec.network.model_copy(update={"fidelity": "flow"})})
    rows = {r["policy"]: r for r in compare_policies(flow, policies=("topology-aware", "random"), simulate=simulate)}
    analytical = {r["policy"]: r for r in compare_policies(spec, policies=("topology-aware", "random"), simulate=simulate)}
    assert rows["random"]["slowdown"] > analytical["random"]["slowdown"] > 1.05
    assert rows["random"]["axis_pays"] in ("pp", "dp")


def test_estimate_path_agrees_on_the_ranking(spec):
    rows = {r["policy"]: r for r in compare_policies(spec, simulate=None)}
    assert {r["priced_by"] for r in rows.values()} == {"estimate"}
    ta = rows["topology-aware"]["step_time_s"]
    assert all(ta <= r["step_time_s"] for r in rows.values())
    assert rows["fragmented"]["axis_pays"] == "tp"
    # scattered hosts: each DP ring, linked in rank order, leaves its pod at most hops, and the
    # estimate (no overlap) charges all of it; the full simulation hides most under the backward
    assert rows["random"]["axis_pays"] == "dp"


def test_occupancy_pattern(roce):
    busy = occupancy_busy(roce, 0.5, seed=1)
    assert busy.size == roce.gpus // 2
    assert np.unique(busy).size == busy.size
    hosts = np.bincount(busy // 8, minlength=roce.hosts)
    assert set(np.unique(hosts)) <= {0, 4, 8}
    assert (hosts == 4).sum() > 0.3 * roce.hosts  # scattered half-hosts, not a contiguous block
    capped = occupancy_busy(roce, 0.5, seed=1, keep_free=16384)
    assert capped.size == roce.gpus - 16384
    assert np.array_equal(busy, occupancy_busy(roce, 0.5, seed=1))
    with pytest.raises(SpecError, match="occupancy"):
        occupancy_busy(roce, 1.5)


def test_axis_that_pays():
    ideal = {"compute": 1.0, "tp_comm": 0.1, "pp_comm": 0.1}
    assert axis_that_pays({"compute": 1.0, "tp_comm": 0.1, "pp_comm": 0.5}, ideal) == "pp"
    assert axis_that_pays(dict(ideal), ideal) is None


def test_neighbours_slow_placements_whose_traffic_crosses_the_fabric(cli, tmp_path):
    import json

    spec = tmp_path / "small.yaml"
    spec.write_text("cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 128, tp: 8, global_batch: 128, zero: 2}\n")
    args = ("placement", spec, "--set", "cluster.hosts=256", "--occupancy", "0.5", "--policy", "topology-aware",
            "--policy", "random", "--json")
    code, quiet, _ = cli(*args, "--set", "network.fidelity=flow")
    code2, busy, _ = cli(*args, "--neighbours")
    assert code == 0 and code2 == 0
    q = {r["policy"]: r for r in json.loads(quiet)}
    b = {r["policy"]: r for r in json.loads(busy)}
    assert all(r["neighbours"] for r in b.values())
    # a random placement's DP ring crosses the pod's switches that the neighbours' rings load too;
    # tensor parallelism stays inside hosts either way
    assert b["random"]["breakdown"]["dp_comm"] > 1.1 * q["random"]["breakdown"]["dp_comm"]
    assert b["random"]["breakdown"]["tp_comm"] == q["random"]["breakdown"]["tp_comm"]
    code, _, err = cli("placement", spec, "--neighbours")  # nobody else on the cluster
    assert code == 2 and "--neighbours" in err and err.count("\n") == 1


def test_the_placement_table_says_leaves(cli):
    from teton.placement.compare import plural

    assert [plural(n) for n in ("leaf", "rack", "switch", "pod")] == ["leaves", "racks", "switches", "pods"]
