"""A pipeline's boundaries send at once: concurrent point-to-point sends share the uplinks they
cross, one direction each (meta-roce-24k: pods of 3,072 GPUs, 1:7 above them)."""

import numpy as np
import pytest

from teton.network.analytical import AnalyticalCostModel
from teton.network.flow_model import FlowCostModel

GIB = 2**30
POD = 3072


def _sends(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    return np.stack([src, dst], axis=1)


# two boundaries, each 1,536 GPUs of pod 0 sending to pod 1: together they fill pod 0's uplinks
OUT_A = _sends(np.arange(0, 1536), POD + np.arange(0, 1536))
OUT_B = _sends(np.arange(1536, POD), POD + np.arange(1536, POD))
# the same GPUs' sends the other way (pod 1 to pod 0): the uplinks' other direction
BACK = _sends(POD + np.arange(1536, POD), np.arange(1536, POD))


@pytest.mark.parametrize("model", [AnalyticalCostModel, FlowCostModel], ids=["analytical", "flow"])
def test_boundaries_leaving_one_pod_share_its_uplinks(roce, model):
    m = model(roce)
    alone = m.collective_time("send_recv", OUT_A, GIB)
    both = m.concurrent_times("send_recv", [OUT_A, OUT_B], GIB)
    assert both[0] > 1.8 * alone  # twice the sends through the same 3,072 / 7 NICs' worth
    assert both[0] == pytest.approx(both[1], rel=0.05)


def test_analytical_share_is_the_pods_uplinks_over_its_sends(roce):
    m = AnalyticalCostModel(roce)
    nic = roce.nic_bytes_s_per_gpu * m.eff.nccl_net
    alone, both = m.collective_time("send_recv", OUT_A, GIB), m.concurrent_times("send_recv", [OUT_A, OUT_B], GIB)
    latency = m.path("send_recv", OUT_A)[2]
    assert alone - latency == pytest.approx(GIB / (nic * POD / (7 * 1536)))
    assert both[0] - latency == pytest.approx(GIB / (nic * POD / (7 * POD)))


@pytest.mark.parametrize("model", [AnalyticalCostModel, FlowCostModel], ids=["analytical", "flow"])
def test_sends_the_other_way_do_not_contend(roce, model):
    m = model(roce)
    alone = [m.collective_time("send_recv", s, GIB) for s in (OUT_A, BACK)]
    assert m.concurrent_times("send_recv", [OUT_A, BACK], GIB) == pytest.approx(alone, rel=0.05)


def test_sends_inside_hosts_and_a_lone_set_keep_their_own_time(roce):
    m = AnalyticalCostModel(roce)
    nvlink = _sends(np.arange(0, 64, 2), np.arange(1, 64, 2))
    assert m.concurrent_times("send_recv", [nvlink, OUT_A], GIB) == pytest.approx(
        [m.collective_time("send_recv", nvlink, GIB), m.collective_time("send_recv", OUT_A, GIB)])
    assert m.concurrent_times("send_recv", [OUT_A], 0.0) == pytest.approx([0.0])
