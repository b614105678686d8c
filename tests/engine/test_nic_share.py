"""An MoE job's DP stream and its all-to-all share the NICs where both leave the NVLink domain
(``teton.engine.nic_share``): the stream runs at what the all-to-all leaves of the link."""

import numpy as np
import pytest

import teton.engine.step as step_module
from teton.engine.nic_share import MAX_A2A_SHARE, a2a_nic_share, crosses_domains, shared_dp_streams
from teton.engine.step import simulate_step
from teton.spec import load_spec


class _Placement:
    def __init__(self, groups):
        self._groups = groups

    def groups(self, axis):
        return self._groups[axis]


def _parts(ep_s, other_s):
    fwd = {"compute": np.array([[other_s]]), "ep": np.array([[ep_s]])}
    return fwd, {k: 2 * v for k, v in fwd.items()}


def test_the_dp_stream_runs_at_what_the_all_to_all_leaves():
    fwd, bwd = _parts(ep_s=1.0, other_s=3.0)  # the all-to-all holds the NIC a quarter of the time
    assert a2a_nic_share(fwd, bwd) == pytest.approx([0.25])
    across = _Placement({"ep": np.array([[0, 8]]), "dp_cp": np.array([[0, 16]])})
    ag, rs = shared_dp_streams(np.array([[0.3]]), np.array([[0.6]]), fwd, bwd, across, 8, has_edp=False)
    assert (ag[0, 0], rs[0, 0]) == pytest.approx((0.4, 0.8))
    inside = _Placement({"ep": np.array([[0, 1]]), "dp_cp": np.array([[0, 16]])})  # EP on NVLink
    assert shared_dp_streams(np.array([[0.3]]), np.array([[0.6]]), fwd, bwd, inside, 8, False)[1][0, 0] == 0.6
    dp_inside = _Placement({"ep": np.array([[0, 8]]), "dp_cp": np.array([[0, 1]])})  # DP on NVLink
    assert shared_dp_streams(np.array([[0.3]]), np.array([[0.6]]), fwd, bwd, dp_inside, 8, False)[1][0, 0] == 0.6
    fwd, bwd = _parts(ep_s=10.0, other_s=0.1)  # an all-to-all-bound rank still leaves the stream a tenth
    assert a2a_nic_share(fwd, bwd) == pytest.approx([MAX_A2A_SHARE])
    assert crosses_domains(np.array([[0, 7], [8, 15]]), 8) is False and crosses_domains(np.array([[0, 8]]), 8)


@pytest.mark.parametrize(("tp", "crosses"), [(1, False), (2, True)])
def test_a_cross_host_all_to_all_slows_the_data_parallel_stream(monkeypatch, tp, crosses):
    """Mixtral 8x7B on 32 H100s, EP 8 in Megatron's tp-cp-ep-dp-pp order: with TP 1 each EP group
    is one host (NVLink: no sharing), with TP 2 it spans two hosts and the DP stream, which also
    leaves them, slows."""
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
                      "job": {"gpus": 32, "tp": tp, "pp": 1, "ep": 8, "seq_len": 4096, "global_batch": 64,
                              "zero": 3, "recompute": "full"}})
    shared = simulate_step(spec)
    monkeypatch.setattr(step_module, "shared_dp_streams", lambda ag, rs, *args: (ag, rs))
    alone = simulate_step(spec)
    dp = lambda r: r.breakdown["dp_comm"] + r.breakdown["dp_last_bucket"]  # noqa: E731
    if crosses:
        assert shared.step_time_s > alone.step_time_s and dp(shared) > dp(alone)
    else:
        assert shared.step_time_s == alone.step_time_s
