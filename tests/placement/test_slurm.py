"""Slurm topology.conf export (tree plugin), checked by parsing it back."""

import pytest

from teton.errors import SpecError
from teton.placement.slurm import expand_hostlist, hostlist, parse_topology_conf, slurm_topology
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec


@pytest.mark.parametrize("name", sorted(CLUSTER_PRESETS))
def test_every_switch_and_its_children(name):
    cluster = ClusterSpec(**CLUSTER_PRESETS[name])
    text = slurm_topology(cluster)
    conf = parse_topology_conf(text)
    switch_lines = [ln for ln in text.splitlines() if ln.startswith("SwitchName=")]
    assert len(switch_lines) == len(conf)  # one line per switch
    expected = sum(-(-cluster.gpus // layer.span_gpus) for layer in cluster.layers)
    assert len(conf) == expected
    leaves = {s: v for s, v in conf.items() if v["nodes"]}
    inner = {s: v for s, v in conf.items() if v["switches"]}
    assert len(leaves) + len(inner) == len(conf)  # every switch has children
    assert not any(v["nodes"] and v["switches"] for v in conf.values())
    nodes = [n for v in leaves.values() for n in v["nodes"]]
    assert len(nodes) == len(set(nodes)) == cluster.hosts  # every node under exactly one leaf
    children = [c for v in inner.values() for c in v["switches"]]
    assert set(children) <= set(conf)  # every child is a defined switch
    assert len(children) == len(set(children)) == len(conf) - 1  # a tree: one root, one parent each
    roots = set(conf) - set(children)
    assert len(roots) == 1
    # leaves hold the hosts of one lowest-layer domain each
    per_leaf = cluster.layers[0].span_gpus // cluster.gpus_per_host
    assert max(len(v["nodes"]) for v in leaves.values()) == per_leaf


def test_meta_roce_shape():
    cluster = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])
    conf = parse_topology_conf(slurm_topology(cluster, node_prefix="gt"))
    assert conf["rtsw-rack0"]["nodes"] == ["gt0000", "gt0001"]
    assert conf["ctsw-pod7"]["switches"] == [f"rtsw-rack{i}" for i in range(1344, 1536)]
    assert conf["atsw-cluster0"]["switches"] == [f"ctsw-pod{i}" for i in range(8)]


def test_hostlists_round_trip():
    assert hostlist("n", [3, 1, 2, 7, 9, 10], 3) == "n[001-003,007,009-010]"
    assert expand_hostlist("n[001-003,007],m5") == ["n001", "n002", "n003", "n007", "m5"]
    assert expand_hostlist(hostlist("node", list(range(40)), 4)) == [f"node{i:04d}" for i in range(40)]


def test_parser_rejects_bad_lines():
    with pytest.raises(SpecError, match="line = 2"):
        parse_topology_conf("SwitchName=s0 Nodes=n1\nNodes=n2\n")
    with pytest.raises(SpecError, match="twice"):
        parse_topology_conf("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n")
