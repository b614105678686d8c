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


@pytest.mark.parametrize("order", [("tp", "ep", "cp", "pp", "dp"), ("ep", "tp", "pp", "dp", "cp"),
                                   ("tp", "cp", "pp", "dp", "ep")])
def test_expert_parallel_groups(small_cluster, order):
    deg = {"tp": 2, "cp": 1, "pp": 2, "dp": 8, "ep": 4}
    p = place(small_cluster, deg, order, "linear")
    grid_deg = {"tp": 2, "cp": 1, "pp": 2, "edp": 2, "ep": 4}
    grid_order = tuple("edp" if a == "dp" else a for a in order)
    g = p.gpu_of_rank.tolist()
    assert sorted(map(tuple, p.groups("ep").tolist())) == reference_groups(grid_deg, grid_order, g, "ep")
    assert sorted(map(tuple, p.groups("edp").tolist())) == reference_groups(grid_deg, grid_order, g, "edp")
    # the dense DP group is the union of the ep and edp coordinates (same tp, cp, pp)
    dp = p.groups("dp")
    assert dp.shape == (4, 8)
    ep_sets = {frozenset(r) for r in p.groups("ep").tolist()}
    for row in dp.tolist():
        assert sum(1 for s in ep_sets if s <= set(row)) == 2
    tp = {frozenset(r) for r in p.groups("tp").tolist()}
    for row in dp.tolist():  # no two members of a DP group share a TP group
        assert all(len(set(row) & t) <= 1 for t in tp)


def test_bad_orders_are_one_line_errors(small_cluster):
    with pytest.raises(SpecError, match="parallel_order"):
        place(small_cluster, DEG, ("tp", "pp", "dp"))
    with pytest.raises(SpecError, match="ep"):
        place(small_cluster, {**DEG, "ep": 3}, ("tp", "ep", "cp", "pp", "dp"))
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
