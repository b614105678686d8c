import numpy as np
import pytest

from teton.network.routing import Router, flow_key, splitmix64
from teton.topology.graph import build_fabric


@pytest.fixture(scope="module")
def fabric(roce):
    return build_fabric(roce)


def _uplink(fabric, router, a, b, key):
    ptr, links, _ = router.route(a, b, key)
    return links[ptr[:-1] + 2] - fabric.up_base[0]  # the RTSW uplink each flow takes


def test_ecmp_is_reproducible_per_seed_and_changes_with_it(fabric):
    a = np.zeros(64, dtype=np.int64) + 16  # rack 1
    b = np.arange(64) * 16 + 3000
    key = flow_key(a, b, np.zeros_like(a))
    one = _uplink(fabric, Router(fabric, "ecmp", seed=1), a, b, key)
    assert (one == _uplink(fabric, Router(fabric, "ecmp", seed=1), a, b, key)).all()
    assert (one != _uplink(fabric, Router(fabric, "ecmp", seed=2), a, b, key)).any()
    assert len(np.unique(one)) > 8  # hashing spreads 64 flows over the 16 uplinks


def test_qps_share_a_path_with_plain_ecmp_but_not_with_e_ecmp(fabric, roce):
    from teton.network.flow_model import FlowCostModel

    a, b = np.full(16, 16), np.full(16, 5000)
    keys = flow_key(a, b, np.arange(16))  # 16 QPs of one connection, QP number hashed (E-ECMP)
    assert len(np.unique(_uplink(fabric, Router(fabric, "e-ecmp"), a, b, keys))) >= 6
    # the cost model splits connections into separately hashed QPs only for e-ecmp
    assert FlowCostModel(roce, routing="e-ecmp", qps=16).split == 16
    assert FlowCostModel(roce, routing="ecmp", qps=16).split == 1


def test_pinning_depends_on_the_destination_only(fabric):
    r = Router(fabric, "pinned")
    a = np.arange(16, 32)  # every GPU of rack 1
    b = np.full(16, 5000 + 7)  # one destination
    up = _uplink(fabric, r, a, b, flow_key(a, b, np.arange(16)))
    assert len(np.unique(up % 16)) == 1 and up[0] % 16 == (5007 % 16)
    b2 = 4992 + np.arange(16)  # the 16 slices of one rack: one uplink each
    up2 = _uplink(fabric, r, a, b2, flow_key(a, b2, np.zeros(16, dtype=np.int64)))
    assert sorted(up2 % 16) == list(range(16))


def test_adaptive_bundles_lose_the_capacity_of_failed_links(fabric):
    full = Router(fabric, "adaptive")
    hurt = Router(fabric, "adaptive", failed_links=1000, seed=4)
    lost = full.capacity_bytes_s.sum() - hurt.capacity_bytes_s.sum()
    per = fabric.link_capacity_bytes_s[fabric.up_base[0]]
    assert lost > 0 and lost <= 2 * 1000 * max(per, fabric.link_capacity_bytes_s[fabric.up_base[1]]) * (1 + 1e-9)


def test_splitmix_is_a_bijection_on_a_sample():
    x = np.arange(100_000, dtype=np.uint64)
    assert np.unique(splitmix64(x)).size == x.size


def test_failed_links_never_speed_up_an_ecmp_all_reduce():
    """Resilient hashing: a flow keeps its next hop while that is alive, and only a failed hop's flows
    move. Rehashing every flow of the switch over its survivors had made a 512-GPU ECMP all-reduce
    29 % faster with 32 cables cut than with none."""
    from teton.network.flow_model import FlowCostModel
    from teton.placement.mapping import place
    from teton.spec.cluster import ClusterSpec

    c = ClusterSpec(name="t", host="grand-teton", hosts=64, topology="clos",
                    layers=[dict(name="rack", span_gpus=64, oversubscription=1.0, hop_latency_us=1.0),
                            dict(name="cluster", span_gpus=512, oversubscription=1.0, hop_latency_us=4.0)])
    g = place(c, {"tp": 1, "cp": 1, "pp": 1, "dp": 512}, policy="topology-aware", seed=0).groups("dp")
    times = [FlowCostModel(c, routing="ecmp", qps=1, failed_links=n, seed=0).collective_time("all_reduce", g, 2**28)
             for n in (0, 8, 32, 128, 256)]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(times, times[1:], strict=False)), times


def test_each_fabric_routes_its_own_way_unless_the_spec_says_otherwise():
    """InfiniBand presets route adaptively (no 5-tuple hashing), Meta's RoCE fabric by E-ECMP; a
    spec's network.routing overrides the fabric's, and the flow model, the nccl-tests sweep and the
    report all take the same."""
    from teton.spec import load_spec
    from teton.studies.nccl_tests import collective_sweep

    ib = load_spec({"cluster": "meta-ib-24k", "model": "llama3-8b", "job": {"gpus": 64},
                    "network": {"fidelity": "flow"}})
    roce = load_spec({"cluster": "meta-roce-24k", "model": "llama3-8b", "job": {"gpus": 64},
                      "network": {"fidelity": "flow"}})
    assert (ib.routing, roce.routing) == ("adaptive", "e-ecmp")
    pinned = load_spec({"cluster": "meta-ib-24k", "model": "llama3-8b", "job": {"gpus": 64},
                        "network": {"fidelity": "flow", "routing": "ecmp"}})
    assert pinned.routing == "ecmp"
    # a random 1,024-GPU all-reduce on the IB fat tree: adaptive spreads it, hashing collides
    adaptive = collective_sweep(ib.cluster, "all_reduce", 1024, "random", 1 << 28, 1 << 28, fidelity="flow")
    hashed = collective_sweep(ib.cluster, "all_reduce", 1024, "random", 1 << 28, 1 << 28, routing="ecmp",
                              fidelity="flow")
    assert adaptive[0]["busbw_gbytes_s"] > 1.2 * hashed[0]["busbw_gbytes_s"]
