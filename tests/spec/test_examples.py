"""Every bundled example spec runs, and the Megatron-style fp8 example shows what its choices buy."""

from pathlib import Path

import pytest

import teton

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".toml", ".json") and "sweep" not in p.name)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_example_runs_and_fits(path):
    r = teton.simulate(path)
    assert r.step_time_s > 0 and 0 < r.mfu < 1 and r.fits_in_memory
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-9)


def test_megatron_fp8_example_beats_the_published_layout_and_its_overlap_pays():
    meta = teton.simulate(EXAMPLES / "llama3-405b-16k.yaml")
    fp8 = EXAMPLES / "llama3-405b-megatron-fp8.yaml"
    r = teton.simulate(fp8)
    no_overlap = teton.simulate(fp8, ["job.tp_overlap=none"])
    assert r.step_time_s < meta.step_time_s
    assert r.breakdown["tp_comm"] < no_overlap.breakdown["tp_comm"]
    assert r.breakdown["cp_comm"] == 0  # the ring hides under 8K attention blocks


@pytest.mark.parametrize("name", ["llama3-405b-16k.yaml", "llama3-70b-ib-2k.toml", "gpt3-175b-a100.yaml",
                                  "custom-cluster.yaml"])
def test_bundled_examples_run(name, example_spec):
    r = teton.simulate(example_spec.parent / name)
    assert r.step_time_s > 0 and r.fits_in_memory
