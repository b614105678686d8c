"""Glue: ``network.fidelity: flow`` in the step simulator (skipped only if teton.simulate is missing)."""

from pathlib import Path

import pytest

teton = pytest.importorskip("teton")
if not hasattr(teton, "simulate"):
    pytest.skip("teton.simulate not available yet", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama3-405b-16k.yaml"


def test_llama3_405b_flow_fidelity_agrees_with_analytical_when_well_placed():
    ana = teton.simulate(EXAMPLE, overrides=["network.fidelity=analytical"])
    flow = teton.simulate(EXAMPLE, overrides=["network.fidelity=flow"])
    assert flow.fidelity == "flow"
    assert flow.step_time_s == pytest.approx(ana.step_time_s, rel=0.05)


def test_bad_placement_is_much_slower_and_the_breakdown_says_tp():
    good = teton.simulate(EXAMPLE, overrides=["network.fidelity=flow"])
    bad = teton.simulate(EXAMPLE, overrides=["network.fidelity=flow", "job.parallel_order=[dp,pp,cp,tp]"])
    assert bad.step_time_s > 3 * good.step_time_s
    worst = max(bad.breakdown, key=bad.breakdown.get)
    assert worst == "tp_comm"
