"""Issue 13: a pipelined job with fewer micro-batches than stages (a spec without
``job.global_batch`` runs one per DP rank) is warned about loudly, in the table and in --json."""

import json

import pytest

import teton

NO_BATCH = {"cluster": "meta-roce-24k", "model": "llama3-405b", "job": {"gpus": 16384, "tp": 8, "pp": 16}}


def test_missing_global_batch_on_pp16_warns_with_the_bubble_and_the_fix(cli, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(NO_BATCH))
    code, out, err = cli("run", path, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["micro_batches"] == 1
    (warning,) = d["warnings"]
    bubble = d["breakdown"]["pipeline_bubble"] / d["step_time_s"]
    assert bubble > 0.5
    assert f"{bubble * 100:.0f} %" in warning and "1 micro-batch" in warning and "pp=16" in warning
    assert "job.global_batch" in warning and "not set" in warning
    code, out, err = cli("run", path)
    assert code == 0, err
    head = out.splitlines()[:6]
    assert any(line.startswith("WARNING:") and "job.global_batch" in line for line in head)  # before the tables


def test_too_few_micro_batches_warns_even_with_a_global_batch():
    spec = {**NO_BATCH, "job": {**NO_BATCH["job"], "global_batch": 128 * 4}}
    r = teton.simulate(spec)
    assert r.micro_batches == 4 and len(r.warnings) == 1
    assert "4 micro-batches" in r.warnings[0] and "not set" not in r.warnings[0]
    assert "global_batch=2048" in r.warnings[0]  # dp 128 x micro_batch 1 x pp 16


@pytest.mark.parametrize("job", [{"global_batch": 128 * 16}, {"pp": 1, "tp": 8}])
def test_enough_micro_batches_or_no_pipeline_no_warning(job):
    spec = {**NO_BATCH, "job": {**NO_BATCH["job"], **job}}
    assert teton.simulate(spec).warnings == ()


def test_example_has_no_warning(cli, example_spec):
    d = json.loads(cli("run", example_spec, "--json")[1])
    assert d["warnings"] == []
