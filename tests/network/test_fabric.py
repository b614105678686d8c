import numpy as np
import pytest
import rustworkx as rx

from teton.network.routing import Router, flow_key
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.topology.graph import FABRIC, GPU_NODE, NIC_LINK, NIC_NODE, SWITCH, build_fabric


@pytest.mark.parametrize("name", sorted(CLUSTER_PRESETS))
def test_every_preset_builds_a_consistent_graph(name):
    c = ClusterSpec(**CLUSTER_PRESETS[name])
    f = build_fabric(c)
    assert f.n_gpus == c.gpus
    assert (f.node_kind[f.gpu_node] == GPU_NODE).all()
    assert ((f.node_kind == NIC_NODE).sum()) == c.gpus
    assert f.link_src.max() < f.n_nodes and f.link_dst.max() < f.n_nodes
    assert (f.link_capacity_bytes_s > 0).all()
    # every fabric link joins tier i and tier i+1 switches
    for i in range(f.tiers - 1):
        sel = f.link_layer == FABRIC + i
        kinds = {tuple(x) for x in np.stack([f.node_kind[f.link_src[sel]], f.node_kind[f.link_dst[sel]]], 1)}
        assert kinds == {(SWITCH + i, SWITCH + i + 1), (SWITCH + i + 1, SWITCH + i)}
        # the uplinks of a tier carry the tier's down capacity divided by its oversubscription
        up = f.link_capacity_bytes_s[f.up_base[i]:f.down_base[i]].sum()
        down = (c.gpus * c.nic_bytes_s_per_gpu if i == 0 else
                f.link_capacity_bytes_s[f.up_base[i - 1]:f.down_base[i - 1]].sum())
        assert up == pytest.approx(down / c.layers[i].oversubscription, rel=1e-9)


def test_meta_roce_shape(roce):
    f = build_fabric(roce)
    assert f.switches[0] == 24576 // 16  # one RTSW per rack of 16 GPUs
    assert f.planes[0] == 16  # 1:1 RTSW: 16 uplinks, one per CTSW of the pod
    nic = f.link_capacity_bytes_s[f.link_layer == NIC_LINK]
    assert np.allclose(nic, 400e9 / 8)
    pod_up = f.link_capacity_bytes_s[f.up_base[1]:f.down_base[1]].sum() / 8
    assert pod_up == pytest.approx(3072 * 50e9 / 7)  # 1:7 above each 3,072-GPU pod
    doubled = build_fabric(roce, leaf_uplink_ratio=2.0)  # SIGCOMM'24 phase 2: 2x RTSW uplinks
    assert doubled.planes[0] == 32
    assert doubled.link_capacity_bytes_s[doubled.up_base[0]:doubled.down_base[0]].sum() == pytest.approx(
        2 * 24576 * 50e9)


def test_ib_fat_tree_is_full_bisection_with_64_port_switches(ib):
    f = build_fabric(ib)
    assert f.planes == (32, 32)  # 32 down / 32 up on every 64-port leaf and spine
    for i in range(f.tiers - 1):
        caps = f.link_capacity_bytes_s[f.up_base[i]:f.down_base[i]]
        assert caps.sum() == pytest.approx(24576 * 50e9)


@pytest.mark.parametrize("name", ["meta-roce-24k", "dgx-h100-superpod", "meta-rsc-16k"])
@pytest.mark.parametrize("routing", ["ecmp", "pinned", "e-ecmp"])
def test_routed_paths_are_contiguous_and_shortest(name, routing):
    c = ClusterSpec(**CLUSTER_PRESETS[name])
    f = build_fabric(c)
    r = Router(f, routing, seed=3, failed_links=5)
    rng = np.random.default_rng(0)
    a = rng.integers(0, c.gpus, 400)
    b = rng.integers(0, c.gpus, 400)
    b = np.where(a == b, (b + 1) % c.gpus, b)
    ptr, links, tier = r.route(a, b, flow_key(a, b, np.zeros_like(a)))
    dead = set()
    for i, alive in enumerate(r.alive):
        idx = np.flatnonzero(~alive.ravel())
        dead |= set((f.up_base[i] + idx).tolist()) | set((f.down_base[i] + idx).tolist())
    for k in range(a.size):
        p = links[ptr[k]:ptr[k + 1]]
        assert f.link_src[p[0]] == a[k] and f.link_dst[p[-1]] == b[k]
        assert (f.link_dst[p[:-1]] == f.link_src[p[1:]]).all()
        assert not dead & set(p.tolist())
    if name == "dgx-h100-superpod":  # shortest in hop count: compare with a BFS on the graph
        g = rx.PyDiGraph()
        g.add_nodes_from(range(f.n_nodes))
        g.add_edges_from_no_data(list(zip(f.link_src.tolist(), f.link_dst.tolist(), strict=True)))
        for k in range(20):
            d = rx.dijkstra_shortest_path_lengths(g, int(a[k]), lambda _: 1.0, goal=int(b[k]))
            assert ptr[k + 1] - ptr[k] == int(d[int(b[k])])


def test_rail_optimized_same_rail_stays_on_its_leaf():
    c = ClusterSpec(**CLUSTER_PRESETS["dgx-h100-superpod"])
    f = build_fabric(c)
    # GPU 3 of host 0 and GPU 3 of host 5 share rail leaf 3 of scalable unit 0
    assert f.turn_tier(np.array([3]), np.array([5 * 8 + 3]))[0] == 0
    assert f.turn_tier(np.array([3]), np.array([5 * 8 + 4]))[0] == 1
