import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teton.network.maxmin import complete, maxmin_rates, maxmin_reference


@st.composite
def networks(draw):
    n_links = draw(st.integers(1, 8))
    cap = draw(st.lists(st.floats(0.5, 100.0), min_size=n_links, max_size=n_links))
    n_flows = draw(st.integers(1, 12))
    paths = [draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=5)) for _ in range(n_flows)]
    # crossing weights: 1, or a QP stripe share 1/N
    weights = [[draw(st.sampled_from([1.0, 1.0, 0.5, 0.25, 1 / 3, 1 / 16])) for _ in p] for p in paths]
    return paths, cap, weights


def _csr(paths):
    ptr = np.zeros(len(paths) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in paths], out=ptr[1:])
    return ptr, np.concatenate([np.asarray(p, dtype=np.int64) for p in paths])


@settings(max_examples=150, deadline=None)
@given(networks())
def test_maxmin_is_feasible_and_every_flow_has_a_bottleneck(net):
    paths, cap, weights = net
    ptr, links = _csr(paths)
    w = np.concatenate([np.asarray(x) for x in weights])
    rate = maxmin_rates(ptr, links, np.asarray(cap), weight=w)
    load = np.zeros(len(cap))
    np.add.at(load, links, np.repeat(rate, np.diff(ptr)) * w)  # a link crossed twice carries it twice
    assert (load <= np.asarray(cap) * (1 + 1e-9)).all()
    for f, p in enumerate(paths):
        # a saturated link on the flow's path where no other flow gets more
        ok = False
        for lk in set(p):
            users = [g for g, q in enumerate(paths) if lk in q]
            if load[lk] >= cap[lk] * (1 - 1e-9) and rate[f] >= max(rate[users]) * (1 - 1e-9):
                ok = True
        assert ok, (f, rate, load, cap)


@settings(max_examples=150, deadline=None)
@given(networks())
def test_maxmin_matches_the_pure_python_reference(net):
    paths, cap, weights = net
    ptr, links = _csr(paths)
    assert np.allclose(maxmin_rates(ptr, links, np.asarray(cap)), maxmin_reference(paths, cap), rtol=1e-9)
    w = np.concatenate([np.asarray(x) for x in weights])
    assert np.allclose(maxmin_rates(ptr, links, np.asarray(cap), weight=w), maxmin_reference(paths, cap, weights),
                       rtol=1e-9)


def test_completion_re_solves_when_a_flow_finishes():
    # two flows share link 0 (cap 10); flow 1 also crosses link 1 (cap 4). Max-min: 4 and 6.
    ptr, links = _csr([[0], [0, 1]])
    cap = np.array([10.0, 4.0])
    assert np.allclose(maxmin_rates(ptr, links, cap), [6.0, 4.0])
    # flow 0 has 12 bytes: done at t=2; flow 1 has 20: 8 sent by t=2, then still 4/s -> t=5
    finish, events = complete(ptr, links, cap, np.array([12.0, 20.0]), rtol=0.0)
    assert np.allclose(finish, [2.0, 5.0]) and events == 2
    # a flow alone on a link speeds up when its competitor leaves
    ptr, links = _csr([[0], [0]])
    finish, _ = complete(ptr, links, np.array([10.0]), np.array([10.0, 30.0]), rtol=0.0)
    assert np.allclose(finish, [2.0, 4.0])  # 5 each until t=2, then 10/s for the last 20


def test_100k_flows_on_the_24k_fabric_solve(roce):
    from teton.network.routing import Router, flow_key
    from teton.topology.graph import build_fabric

    f = build_fabric(roce)
    rng = np.random.default_rng(1)
    a = rng.integers(0, f.n_gpus, 100_000)
    b = (a + rng.integers(1, f.n_gpus, a.size)) % f.n_gpus
    ptr, links, _ = Router(f, "ecmp").route(a, b, flow_key(a, b, np.zeros_like(a)))
    cap = Router(f, "ecmp").capacity_bytes_s
    rate = maxmin_rates(ptr, links, cap)
    load = np.bincount(links, weights=np.repeat(rate, np.diff(ptr)), minlength=cap.size)
    assert (load <= cap * (1 + 1e-9)).all() and (rate > 0).all()
    off_host = a // 8 != b // 8
    assert rate[off_host].max() <= 50e9 * (1 + 1e-12)  # never above a NIC; NVLink pairs up to 450 GB/s
    assert rate[~off_host].max() <= 450e9 * (1 + 1e-12)


@pytest.mark.parametrize("n", [1, 5])
def test_reference_handles_trivial_cases(n):
    assert maxmin_reference([[0]] * n, [10.0]) == pytest.approx([10.0 / n] * n)
