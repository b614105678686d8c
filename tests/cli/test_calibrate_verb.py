"""teton calibrate: a microbenchmark JSON becomes a cluster spec every verb accepts; ``teton validate
--calibration`` reads the same JSON."""

import json

import pytest
import yaml
from cli_checks import one_line_error

import teton


def _calibration(tmp_path, overrides, name="calibration.json", **extra):
    path = tmp_path / name
    path.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "efficiency_overrides": overrides, **extra}))
    return path


def test_calibrated_cluster_spec_carries_the_measurements_into_a_run(tmp_path, cli, example_spec):
    cal = _calibration(tmp_path, {"gemm_bf16": 0.7, "sustained_ratio": 0.9, "mem": 0.85})
    out = tmp_path / "cluster.yaml"
    code, stdout, _ = cli("calibrate", str(cal), "--cluster-out", str(out), "--json")
    assert code == 0
    d = json.loads(stdout)
    rows = {r["key"]: r for r in d["rows"]}
    assert rows["gemm_bf16"]["catalog"] == 794.5 / 989.4 and rows["gemm_bf16"]["measured"] == 0.7
    assert rows["sustained_ratio"]["catalog"] == 1.0
    spec = yaml.safe_load(out.read_text())
    assert spec == {"base": "meta-roce-24k", "efficiency": {"gemm_bf16": 0.7, "sustained_ratio": 0.9, "mem": 0.85}}
    burst = teton.simulate(example_spec)
    calibrated = teton.simulate(example_spec, [f"cluster={out}"])
    assert calibrated.breakdown["compute"] > burst.breakdown["compute"] * 1.2  # slower kernels
    assert calibrated.breakdown["tp_comm"] == burst.breakdown["tp_comm"]  # NCCL not re-measured


def test_plain_mapping_and_table_output(tmp_path, cli):
    path = tmp_path / "plain.json"
    path.write_text(json.dumps({"attn_fwd": 0.4}))
    code, stdout, _ = cli("calibrate", str(path), "--cluster", "meta-ib-24k")
    assert code == 0 and "attn_fwd" in stdout and "+14.3%" in stdout  # 0.40 vs the catalog's 0.35


def test_bad_calibrations_are_one_line_errors(tmp_path, cli):
    cases = [
        (_calibration(tmp_path, {"gemm_bf61": 0.7}, "a.json"), "cluster.efficiency.gemm_bf61"),
        (_calibration(tmp_path, {"mem": 3.0}, "b.json"), "cluster.efficiency.mem"),
        (_calibration(tmp_path, {}, "c.json"), "calibration.efficiency_overrides"),
    ]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    cases.append((broken, "is not JSON"))
    for path, needle in cases:
        code, _, err = cli("calibrate", str(path))
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    code, _, err = cli("calibrate", str(cases[0][0]), "--cluster", "meta-roce-42k")
    assert code == 2 and "meta-roce-24k" in err


def test_validate_with_measured_efficiencies(tmp_path, cli):
    """Measured microbenchmarks replace the catalog's burst figures for the Hopper rows, and the
    in-situ fit is redone on top of them: burst predictions drop, the fit absorbs the rest."""
    # 0.9: the Llama 3 stack's fitted tensor-core value (0.84) over it stays inside the bound (1.0)
    cal = _calibration(tmp_path, {"sustained_ratio": 0.9})
    _, base, _ = cli("validate", "--case", "llama3-405b-table4", "--json")
    code, measured, _ = cli("validate", "--case", "llama3-405b-table4", "--json", "--calibration", str(cal))
    assert code == 0
    before = {(r["case"], r["metric"]): r for r in json.loads(base)["rows"]}
    after = json.loads(measured)
    for r in after["rows"]:
        if r["metric"].startswith("ratio"):
            continue
        old = before[(r["case"], r["metric"])]
        assert r["burst"] < old["burst"]  # slower kernels, fewer TFLOPs in the burst profile
        assert r["in_sample"] == pytest.approx(old["in_sample"], rel=0.03)  # the refit absorbs most of it
        assert "sustained_ratio=0.9" in r["note"]
        # measured efficiencies don't widen the bands: rows 1-2 keep +-5 %
        assert r["tolerance"] == old["tolerance"]
    # Meta's Hopper tensor-core factor is relative to the measured (slower) burst figure
    name = "tensor_core_in_situ[meta-llama3-2024/hopper]"
    value = lambda d: next(p["value"] for p in d["fit"] if p["name"] == name)  # noqa: E731
    assert value(after) > value(json.loads(base))


def test_device_calibration_script_runs_and_teton_accepts_its_output(tmp_path, cli):
    """The device script (run on a borrowed GPU, where minutes are scarce) works end to end: its
    smoke mode runs the same code on tiny shapes (on the CPU here) and writes the JSON that
    ``teton calibrate`` / ``teton validate --calibration`` read."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("torch")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "device" / "calibrate_hopper.py"
    out = tmp_path / "calibration.json"
    done = subprocess.run([sys.executable, str(script), "--smoke", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert {"gemm_bf16", "sustained_ratio", "attn_fwd", "attn_bwd", "mem"} <= set(data["efficiency_overrides"])
    assert len(data["gemm"]) == 13 and len(data["attention"]) == 2
    assert data["layer"]["burst_s"] > 0 and data["layer"]["sustained_s"] > 0
    # the MoE expert GEMMs three ways (one GEMM, per expert on streams, in series) and head dim 64 vs 128
    assert set(data["expert_gemms"]) == {"qwen3_30b_ep8", "deepseek_v3_ep8", "gpt_oss_120b_ep8"}
    assert all(e["one_gemm_tflops"] > 0 and e["per_expert_streams_tflops"] > 0 and e["per_expert_series_tflops"] > 0
               for e in data["expert_gemms"].values())
    assert [(a["backend"], a["head_dim"]) for a in data["attention_head_dim"]] == [
        ("FLASH_ATTENTION", 64), ("FLASH_ATTENTION", 128), ("CUDNN_ATTENTION", 64), ("CUDNN_ATTENTION", 128)]
    assert all(a["fwd_tflops"] > 0 for a in data["attention_head_dim"] if a["backend"] == "FLASH_ATTENTION")
    code, stdout, _ = cli("calibrate", str(out), "--cluster-out", str(tmp_path / "cluster.yaml"), "--json")
    assert code == 0 and json.loads(stdout)["cluster"]["base"] == "meta-roce-24k"
    layer = json.loads(stdout)["layer"]
    assert layer["predicted_catalog_s"] > 0 and layer["predicted_calibrated_s"] > 0


def test_binary_calibration_files_are_one_line_errors(tmp_path, cli):
    path = tmp_path / "calibration.json"
    path.write_bytes(bytes(range(256)) * 4)  # not UTF-8
    for args in (("calibrate", str(path)), ("validate", "--calibration", str(path))):
        code, _, err = cli(*args)
        assert code == 2 and "not a UTF-8 JSON file" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("content, needle", [
    # a string where a number goes: ValueError from float() before the file had a schema
    ({"efficiency_overrides": {"gemm_bf16": "x"}}, "calibration.efficiency_overrides.gemm_bf16 = 'x'"),
    ({"gemm_bf16": True}, "calibration.efficiency_overrides.gemm_bf16 = True"),
    ('{"gemm_bf16": 1e400}', "calibration.efficiency_overrides.gemm_bf16 = inf"),
    ({"efficiency_overrides": []}, "calibration.efficiency_overrides"),
    ({"efficiency_overrides": {"gemm_bf16": 0.7}, "layer": {"tokens": "a"}}, "calibration.layer.tokens"),
    ({"efficiency_overrides": {"gemm_bf16": 0.7}, "layer": {"tokens": 8192, "hidden": 1e30, "ffn": 1, "heads": 1,
                                                             "kv_heads": 1, "tp": 1}}, "calibration.layer.hidden"),
    ({"efficiency_overrides": {"gemm_bf16": 0.7}, "device": 5}, "calibration.device = 5"),
    ([1], "must be a JSON object"),
    ('{"a": ' + "9" * 5000 + "}", "too large"),
])
def test_a_bad_calibration_file_is_one_line(tmp_path, cli, content, needle):
    path = tmp_path / "c.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, _, err = cli("calibrate", str(path))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_profile_override_is_no_measured_row(tmp_path, cli):
    """``profile: burst`` is a name: float('burst') was a traceback."""
    code, out, err = cli("calibrate", str(_calibration(tmp_path, {"profile": "burst", "gemm_bf16": 0.7})), "--json")
    assert code == 0, err
    assert [r["key"] for r in json.loads(out)["rows"]] == ["gemm_bf16"]


def test_a_calibration_of_another_gpu_family_is_refused(cli, tmp_path):
    """Fractions of an A100's peaks do not calibrate an H100 cluster (the default one)."""
    path = tmp_path / "a100.json"
    path.write_text(json.dumps({"device": "NVIDIA A100-SXM4-80GB", "efficiency_overrides": {"gemm_bf16": 0.7}}))
    code, _, err = cli("calibrate", str(path))
    assert "A100" in one_line_error(code, err, "--cluster")
    code, out, _ = cli("calibrate", str(path), "--cluster", "dgx-a100-superpod", "--json")
    assert code == 0 and json.loads(out)["cluster"]["efficiency"]["gemm_bf16"] == 0.7
