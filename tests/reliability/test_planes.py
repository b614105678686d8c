"""A fabric plane down: the job slows until the repair instead of stopping (teton.reliability.planes)."""

from __future__ import annotations

import math

import pytest
from rel_helpers import CKPT, STEP_S, spec_405b

from teton.engine.step import simulate_step
from teton.reliability import goodput, job_components
from teton.reliability.planes import degraded_plane_spec, tier0_failures_per_h
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec


def _spec(planes: int, **reliability):
    s = spec_405b({**CKPT, **reliability})
    return s.model_copy(update={"cluster": s.cluster.model_copy(update={"fabric_planes": planes})})


@pytest.fixture(scope="module")
def by_planes():
    return {p: goodput(_spec(p), step_time_s=STEP_S, days=54, runs=64, seed=0, simulate=simulate_step)
            for p in (1, 2, 4)}


def test_one_plane_charges_no_degradation(by_planes):
    one = by_planes[1].to_dict()
    assert one["plane_failures_per_day"] == 0.0 and one["plane_step_stretch"] == 1.0
    assert one["plane_degraded_step_ratio"] is None


def test_a_plane_down_stretches_the_run_by_its_share_of_time(by_planes):
    two = by_planes[2]
    pl = two.planes
    counts = job_components(_spec(2).cluster, 16384)
    # share = 1 - exp(-lambda_0 x repair) with lambda_0 the leaf tier's switch / cable failures
    rates = {"network_switch_cable": 35 / (1353.2 * 1296)}
    lam = tier0_failures_per_h(counts, rates)
    assert pl.failures_per_day == pytest.approx(lam * 24, rel=1e-3)
    assert pl.degraded_share == pytest.approx(-math.expm1(-lam * 8.0), rel=1e-3)
    assert 1.0 < pl.degraded_step_ratio < 2.0  # the NICs at half rate slow the step, compute does not
    assert pl.stretch == pytest.approx(1 + pl.degraded_share * (pl.degraded_step_ratio - 1))
    d = two.to_dict()
    # slow steps are still useful training: ETTR keeps them, goodput pays them
    assert d["goodput"] == pytest.approx(d["ettr"] / pl.stretch, rel=1e-9)
    assert d["effective_step_time_s"] == pytest.approx(STEP_S * pl.stretch)


def test_more_planes_lose_less_per_failure(by_planes):
    assert by_planes[4].planes.degraded_step_ratio < by_planes[2].planes.degraded_step_ratio


def test_repair_time_sets_the_degraded_share():
    fast = goodput(_spec(2, plane_repair_h=0.0), step_time_s=STEP_S, days=54, runs=16, seed=0, simulate=simulate_step)
    slow = goodput(_spec(2, plane_repair_h=48.0), step_time_s=STEP_S, days=54, runs=16, seed=0, simulate=simulate_step)
    assert fast.planes.stretch == 1.0
    assert slow.planes.degraded_share > 0.5 and slow.planes.stretch > 1.0


def test_without_a_step_simulator_nothing_is_charged_and_the_assumptions_say_so():
    g = goodput(_spec(2), step_time_s=STEP_S, days=54, runs=16, seed=0)
    assert g.planes.degraded_step_ratio is None and g.planes.stretch == 1.0
    assert any("not simulated" in a for a in g.assumptions)


def test_the_degraded_spec_runs_every_nic_at_its_remaining_planes_share():
    s = degraded_plane_spec(_spec(4))
    assert s.cluster.nic.gbps == pytest.approx(400 * 3 / 4)
    assert "3 of 4 planes" in s.cluster.nic.name


def test_leaf_switch_equivalents_count_ports_when_a_leaf_domain_is_larger_than_a_switch():
    pod = ClusterSpec(**CLUSTER_PRESETS["dgx-h100-superpod"])  # 256-GPU leaf groups at 1:1
    leaf = job_components(pod, 2048).switches_by_tier[0][1]
    assert leaf == (2048 + 2048) / 64  # 64 leaves of 32 down and 32 up ports, not one per 256-GPU group
