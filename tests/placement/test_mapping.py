"""Rank mapping against a hand-built reference, and the placement policies on a busy cluster."""

import itertools

import numpy as np
import pytest

from teton.errors import SpecError
from teton.placement import POLICIES, place
from teton.placement.mapping import Placement

DEG = {"tp": 2, "cp": 3, "pp": 2, "dp": 4}


def reference_groups(degrees, order, gpu_of_rank, axis):
    """Brute force: decompose every rank into coordinates (innermost first), group ranks that
    agree on every coordinate but ``axis``; inside a group sort by the axis coordinate."""
    coords = []
    for r in range(len(gpu_of_rank)):
        c, rest = {}, r
        for a in order:
            c[a] = rest % degrees[a]
            rest //= degrees[a]
        coords.append(c)
    groups = {}
    for r, c in enumerate(coords):
        key = tuple(c[a] for a in order if a != axis)
        groups.setdefault(key, []).append((c[axis], gpu_of_rank[r]))
    return sorted(tuple(g for _, g in sorted(v)) for v in groups.values())


@pytest.mark.parametrize("order", list(itertools.permutations(("tp", "cp", "pp", "dp"))))
def test_every_order_matches_reference(small_cluster, order):
    p = place(small_cluster, DEG, order, "linear", busy=np.array([3, 17, 40]))  # a non-trivial rank -> GPU map
    for axis in DEG:
        got = sorted(tuple(row) for row in p.groups(axis).tolist())
        assert got == reference_groups(DEG, order, p.gpu_of_rank.tolist(), axis)
        assert p.groups(axis).shape == (48 // DEG[axis], DEG[axis])


def test_llama3_default_order_on_empty_cluster_is_contiguous(roce):
    p = place(roce, {"tp": 8, "cp": 1, "pp": 16, "dp": 128})
    assert np.array_equal(p.gpu_of_rank, np.arange(16384))
    assert p.groups("tp")[0].tolist() == list(range(8))
    assert p.groups("pp")[0].tolist() == list(range(0, 128, 8))
    assert p.groups("dp")[1].tolist() == list(range(1, 16384, 128))
    pairs = p.pp_neighbours()
    assert pairs.shape == (128 * 8 * 15, 2)
    assert pairs[0].tolist() == [0, 8]


def _coords(rank, axes, degrees):
    c = {}
    for a in axes:
        c[a], rank = rank % degrees[a], rank // degrees[a]
    return c


def stage_expert_groups(degrees, order, gpu_of_rank, axis):
    """Brute force of teton's expert decomposition: each rank's dense coordinates (the order
    without ep); its index among the tp, cp, dp ranks of its pipeline stage (the order without
    pp); that index over etp, ep, edp where the order puts tp, ep and dp; group the ranks that
    share pp and every expert coordinate but ``axis``. An order without ep has it just inside dp."""
    dense = [a for a in order if a != "ep"]
    if "ep" not in order:
        order = (*order[:order.index("dp")], "ep", *order[order.index("dp"):])
    exp = {"etp": degrees["etp"], "ep": degrees["ep"],
           "edp": degrees["tp"] * degrees["cp"] * degrees["dp"] // (degrees["etp"] * degrees["ep"])}
    names = {"tp": "etp", "ep": "ep", "dp": "edp"}
    eorder = [names[a] for a in order if a in names]
    groups = {}
    for r, gpu in enumerate(gpu_of_rank):
        c = _coords(r, dense, degrees)
        w, stride = 0, 1
        for a in dense:
            if a != "pp":
                w, stride = w + c[a] * stride, stride * degrees[a]
        e = _coords(w, eorder, exp)
        key = (c["pp"], *(e[a] for a in eorder if a != axis))
        groups.setdefault(key, []).append((e[axis], gpu))
    return sorted(tuple(g for _, g in sorted(v)) for v in groups.values())


# (tp, cp, pp, dp, ep, etp): Megatron-Bridge's Qwen3-30B-A3B H100 recipe (EP 32 over TP 2 x DP 16,
# expert-TP 1), EP folded over TP x CP, and experts sharded with the dense TP
MEGATRON_LAYOUTS = [(2, 1, 1, 16, 32, 1), (2, 2, 2, 4, 4, 1), (2, 1, 2, 8, 4, 2), (4, 1, 2, 4, 8, 2)]


@pytest.mark.parametrize("tp,cp,pp,dp,ep,etp", MEGATRON_LAYOUTS)
def test_expert_groups_are_megatron_cores_rank_generators(small_cluster, tp, cp, pp, dp, ep, etp):
    """Megatron-Core's order tp-cp-ep-dp-pp: the dense groups are its RankGenerator over tp, cp, dp,
    pp (ep 1), the expert groups its expert RankGenerator over tp = etp, ep, dp = edp, pp (cp 1)."""
    order = ("tp", "cp", "ep", "dp", "pp")
    deg = {"tp": tp, "cp": cp, "pp": pp, "dp": dp, "ep": ep, "etp": etp}
    p = place(small_cluster, deg, order, "linear", busy=np.array([5, 70]))
    g = p.gpu_of_rank.tolist()
    dense = {"tp": tp, "cp": cp, "ep": 1, "dp": dp, "pp": pp}
    expert = {"tp": etp, "cp": 1, "ep": ep, "dp": tp * cp * dp // (etp * ep), "pp": pp}
    for axis in ("tp", "cp", "dp", "pp"):
        assert sorted(map(tuple, p.groups(axis).tolist())) == reference_groups(dense, order, g, axis)
    for axis, megatron in (("etp", "tp"), ("ep", "ep"), ("edp", "dp")):
        assert sorted(map(tuple, p.groups(axis).tolist())) == reference_groups(expert, order, g, megatron)
    assert sorted(map(tuple, p.groups("edp_cp").tolist())) == sorted(map(tuple, p.groups("edp").tolist()))


def test_ep_spans_tp_ranks_in_megatron_bridges_layout(small_cluster):
    """EP 32 over TP 2 x DP 16 with etp 1: one all-to-all group of all 32 ranks, holding both TP
    ranks of every TP group; every expert is whole on its rank (no expert TP, no expert DP)."""
    p = place(small_cluster, {"tp": 2, "cp": 1, "pp": 1, "dp": 16, "ep": 32, "etp": 1}, ("tp", "cp", "ep", "dp", "pp"))
    assert p.groups("ep").shape == (1, 32) and sorted(p.groups("ep")[0]) == sorted(p.gpu_of_rank)
    assert p.groups("etp").shape == p.groups("edp").shape == (32, 1)
    assert p.groups("tp").shape == (16, 2) and p.groups("dp").shape == (2, 16)


@pytest.mark.parametrize("order", [("tp", "ep", "cp", "pp", "dp"), ("ep", "tp", "pp", "dp", "cp"),
                                   ("tp", "cp", "pp", "dp", "ep"), ("tp", "cp", "pp", "dp")])
@pytest.mark.parametrize("etp", [1, 2])
def test_expert_groups_of_any_order_stay_in_a_pipeline_stage(small_cluster, order, etp):
    deg = {"tp": 2, "cp": 2, "pp": 2, "dp": 4, "ep": 4 if "ep" in order else 1, "etp": etp}
    p = place(small_cluster, deg, order, "linear", busy=np.array([1, 40]))
    g = p.gpu_of_rank.tolist()
    for axis in ("etp", "ep", "edp"):
        assert sorted(map(tuple, p.groups(axis).tolist())) == stage_expert_groups(deg, order, g, axis)
    dense = tuple(a for a in order if a != "ep")
    for axis in ("tp", "cp", "pp", "dp"):  # the dense groups do not see ep
        assert sorted(map(tuple, p.groups(axis).tolist())) == reference_groups(deg, dense, g, axis)
    stage = {gpu: i for i, row in enumerate(p.groups("pp").T.tolist()) for gpu in row}
    for axis in ("etp", "ep", "edp"):  # Megatron-Core asserts both decompositions' pp groups agree
        assert all(len({stage[gpu] for gpu in row}) == 1 for row in p.groups(axis).tolist())


def test_bad_orders_are_one_line_errors(small_cluster):
    with pytest.raises(SpecError, match="parallel_order"):
        place(small_cluster, DEG, ("tp", "pp", "dp"))
    with pytest.raises(SpecError, match="ep"):
        place(small_cluster, {**DEG, "ep": 5}, ("tp", "ep", "cp", "pp", "dp"))
    with pytest.raises(SpecError, match=r"etp\*ep = 1\*16 must divide tp\*cp\*dp = 24"):
        place(small_cluster, {**DEG, "ep": 16, "etp": 1}, ("tp", "cp", "ep", "dp", "pp"))
    with pytest.raises(SpecError, match="placement"):
        place(small_cluster, DEG, policy="best")
    with pytest.raises(SpecError, match="free GPUs"):
        place(small_cluster, DEG, busy=np.arange(100))


@pytest.mark.parametrize("policy", POLICIES)
def test_policies_use_only_free_gpus(small_cluster, policy):
    rng = np.random.default_rng(3)
    busy = rng.choice(128, 50, replace=False)
    p = place(small_cluster, {"tp": 2, "cp": 1, "pp": 2, "dp": 16}, policy=policy, busy=busy, seed=1)
    assert p.ranks == 64
    assert np.unique(p.gpu_of_rank).size == 64
    assert not np.isin(p.gpu_of_rank, busy).any()
    assert isinstance(p, Placement) and p.policy == policy


def test_topology_aware_keeps_model_parallel_blocks_inside_a_pod(roce):
    # pods 0 and 1 each have a few busy hosts: a block of tp*pp = 128 GPUs (16 hosts) must never
    # straddle a pod boundary, and the job goes to the pods with the most free hosts first
    busy = np.concatenate([np.arange(0, 8 * 20), np.arange(3072, 3072 + 8 * 5)])
    p = place(roce, {"tp": 8, "cp": 1, "pp": 16, "dp": 40}, policy="topology-aware", busy=busy)
    blocks = p.gpu_of_rank.reshape(40, 128)
    assert all(np.unique(b // 3072).size == 1 for b in blocks)
    assert not np.isin(p.gpu_of_rank, busy).any()
    assert (p.gpu_of_rank // 3072 == 2).sum() == 3072  # an untouched pod is used whole first
    lin = place(roce, {"tp": 8, "cp": 1, "pp": 16, "dp": 40}, policy="linear", busy=busy)
    assert any(np.unique(b // 3072).size > 1 for b in lin.gpu_of_rank.reshape(40, 128))


def test_fragmented_takes_half_hosts(roce):
    p = place(roce, {"tp": 8, "cp": 1, "pp": 1, "dp": 4}, policy="fragmented")
    assert p.groups("tp")[0].tolist() == [0, 1, 2, 3, 8, 9, 10, 11]  # a TP group over two hosts


def test_random_is_seeded(roce):
    a = place(roce, {"tp": 8, "cp": 1, "pp": 2, "dp": 8}, policy="random", seed=5)
    b = place(roce, {"tp": 8, "cp": 1, "pp": 2, "dp": 8}, policy="random", seed=5)
    c = place(roce, {"tp": 8, "cp": 1, "pp": 2, "dp": 8}, policy="random", seed=6)
    assert np.array_equal(a.gpu_of_rank, b.gpu_of_rank)
    assert not np.array_equal(a.gpu_of_rank, c.gpu_of_rank)


def test_gb200_replicas_never_cross_a_zone():
    """A 112-GPU GB200 replica (TP 8 x PP 14) fits whole in a 4,608-GPU zone of the frontier
    study's campus, whose pods (the largest domain below the cluster) are buildings: the
    topology-aware placement keeps every replica inside one zone (41 per zone, 16 GPUs left idle)
    instead of running some DP rings' model-parallel traffic across the building's spine
    (``fabric_aligned``; 12 of 585 replicas crossed a zone before)."""
    from teton.spec import load_spec
    from teton.studies.frontier_specs import SYSTEMS, frontier_spec_fields, job_gpus

    system = SYSTEMS["gb200"]
    spec = load_spec(frontier_spec_fields(system, job_gpus(system, 65536)))
    lay = spec.job.layout
    p = place(spec.cluster, lay.degrees, lay.order)
    replicas = p.gpu_of_rank.reshape(lay.dp, -1)  # dp is the outermost axis
    zone = next(layer.span_gpus for layer in spec.cluster.layers if layer.name == "zone")
    assert all(np.unique(r // zone).size == 1 for r in replicas)


def test_ep_groups_stay_inside_an_nvlink_domain():
    """Megatron's tp-cp-ep-dp-pp order makes an EP group ``etp x ep`` consecutive ranks. DeepSeek-V3's
    GB300 recipe (TP 1, PP 2, EP 32, DP 128 on 256 GPUs) has no TP x CP x DP block that fits a
    72-GPU domain, so before only TP's unit (1) was aligned and the EP group of ranks 64-95
    straddled two racks: its all-to-all ran on the scale-out network and the predicted step was
    2.2x the published one (22.5 s against 10.3). Now two EP groups sit in each rack's 72 GPUs (8 idle)."""
    from teton.spec import load_spec

    spec = load_spec({"cluster": "gb300-nvl72-superpod", "model": "deepseek-v3",
                      "job": {"gpus": 256, "tp": 1, "pp": 2, "ep": 32, "etp": 1, "seq_len": 4096,
                              "global_batch": 4096, "pp_schedule": "interleaved", "virtual_stages": 8}})
    lay = spec.job.layout
    p = place(spec.cluster, {**lay.degrees, "etp": 1}, lay.order)
    domain = spec.cluster.domain_gpus
    assert all(np.unique(g // domain).size == 1 for g in p.groups("ep"))
    assert all(np.unique(g // domain).size == 1 for g in p.groups("tp"))
