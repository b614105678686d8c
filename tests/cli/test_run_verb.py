"""``teton run`` as a user drives it: the JSON contract and the table, the same numbers as
``teton.simulate``, the resolved spec it echoes (and which fields came from defaults), the
whole-run keys, the Chrome trace, one-line errors."""

import json

import pytest
from cli_checks import one_line_error, write_spec
from layouts import LLAMA3_8B_8_GPUS_YAML

import teton

KEYS = {"step_time_s", "mfu", "tflops_per_gpu", "tokens_per_s", "memory_per_gpu_bytes", "fits_in_memory", "breakdown"}
MINIMAL = {"cluster": "dgx-h100-superpod", "model": "llama3-8b", "job": {"gpus": 64, "tp": 8}}


def _write(tmp_path, spec):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec))
    return path


def test_run_json_has_the_contract_keys(example_spec, cli):
    code, out, _ = cli("run", example_spec, "--json")
    assert code == 0
    d = json.loads(out)
    assert KEYS <= set(d)
    assert d["step_time_s"] > 0 and 0 < d["mfu"] < 1
    assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"], rel=1e-9)
    assert {"compute", "tp_comm", "pp_comm", "dp_comm", "pipeline_bubble", "optimizer"} <= set(d["breakdown"])


def test_run_table_prints_memory_breakdown(example_spec, cli):
    code, out, _ = cli("run", example_spec)
    assert code == 0 and "activations" in out and "pipeline_bubble" in out and "MFU" in out


def test_api_matches_cli(example_spec, cli):
    _, out, _ = cli("run", example_spec, "--json")
    r = teton.simulate(example_spec)
    assert json.loads(out)["step_time_s"] == pytest.approx(r.step_time_s, rel=1e-12)


def test_run_adds_checkpoint_and_goodput_keys_when_asked(tmp_path, example_spec, cli):
    import yaml

    data = yaml.safe_load(example_spec.read_text())
    data["storage"] = {"preset": "tectonic-llama3"}
    data["reliability"] = {"tokens": 15.6e12}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, _ = cli("run", path, "--json")
    d = json.loads(out)
    assert code == 0
    for key in ("checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s", "goodput", "ettr",
                "time_to_train_days", "energy_mwh", "cost_usd"):
        assert key in d and d[key] > 0
    assert d["checkpoint_blocking_s"] <= d["checkpoint_save_s"]
    # time to train >= the failure-free time for 15.6T tokens at this step time
    ideal_days = 15.6e12 / d["tokens_per_s"] / 86400
    assert d["time_to_train_days"] >= ideal_days * 0.999
    code, out, _ = cli("run", example_spec, "--json")
    assert "checkpoint_save_s" not in json.loads(out)


def test_run_writes_a_chrome_trace(example_spec, cli, tmp_path):
    out = tmp_path / "trace.json"
    code, stdout, _ = cli("run", example_spec, "--json", "--timeline", out)
    assert code == 0 and "timeline" not in json.loads(stdout)
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 16 * 8 * 16 * 2  # ranks x chunks x micro-batches x passes
    assert max(e["ts"] + e["dur"] for e in events) <= json.loads(stdout)["step_time_s"] * 1e6 + 1
    code, _, err = cli("run", example_spec, "--timeline", tmp_path / "missing" / "t.json")
    assert code == 2 and "--timeline" in err


def test_header_echoes_the_resolved_spec_and_its_defaults(cli, tmp_path):
    code, out, err = cli("run", _write(tmp_path, MINIMAL))
    assert code == 0, err
    head = "\n".join(out.splitlines()[:4])
    for text in ("llama3-8b", "dgx-h100-superpod", "h100-sxm", "bf16", "seq 8,192", "global batch 8",
                 "micro batch 1"):
        assert text in head, text
    defaults = next(line for line in out.splitlines() if line.startswith("defaults:"))
    for field in ("job.precision", "job.seq_len", "job.global_batch", "job.micro_batch"):
        assert field in defaults


def test_given_fields_are_not_defaults(cli, example_spec, tmp_path):
    code, out, _ = cli("run", example_spec)
    assert code == 0 and "llama3-405b" in out.splitlines()[0]
    assert not any(line.startswith("defaults:") for line in out.splitlines())
    code, out, _ = cli("run", _write(tmp_path, MINIMAL), "--set", "job.precision=fp8", "--json")
    d = json.loads(out)
    assert d["spec"]["precision"] == "fp8" and "job.precision" not in d["defaults"]
    assert {"job.seq_len", "job.global_batch", "job.micro_batch", "job.dp"} <= set(d["defaults"])
    assert d["spec"] == {"model": "llama3-8b", "cluster": "dgx-h100-superpod", "gpu": "h100-sxm", "gpus": 64,
                         "precision": "fp8", "seq_len": 8192, "global_batch": 8, "micro_batch": 1,
                         "tokens_per_step": 8 * 8192}


def test_global_batch_tokens_counts_as_given(cli, tmp_path):
    spec = {**MINIMAL, "job": {**MINIMAL["job"], "global_batch_tokens": 8192 * 16}}
    d = json.loads(cli("run", _write(tmp_path, spec), "--json")[1])
    assert "job.global_batch" not in d["defaults"] and d["spec"]["global_batch"] == 16


def test_trace_write_failure_is_one_line(tmp_path, cli):
    (tmp_path / "file").write_text("")
    spec = write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML)
    code, out, err = cli("run", spec, "--timeline", tmp_path / "file" / "trace.json")
    one_line_error(code, err, "--timeline")
    assert out == ""


def test_reliability_without_run_length_says_why_nothing_is_computed(tmp_path, cli):
    spec = write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML + "reliability: {pue: 1.2}\n")
    code, out, _ = cli("run", spec, "--json")
    assert code == 0
    d = json.loads(out)
    assert "ettr" not in d and any("no run length" in n for n in d["notes"])


def test_run_table_labels_whole_run_numbers_with_units(tmp_path, cli):
    text = LLAMA3_8B_8_GPUS_YAML + "storage: tectonic-llama3\nreliability: {tokens: 1T}\n"
    path = write_spec(tmp_path, text)
    code, out, _ = cli("run", path)
    assert code == 0
    code, js, _ = cli("run", path, "--json")
    d = json.loads(js)
    assert f"{d['ettr'] * 100:.1f} %" in out
    assert f"{d['time_to_train_days']:,.1f} days" in out
    assert f"${d['cost_usd']:,.0f}" in out
    assert "cost_usd" not in out and "ettr " not in out  # JSON keys are not table labels
