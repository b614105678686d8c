"""Time-to-train, energy, cost, run_summary, the CLI, and the glue to teton.simulate / storage
(checkpoint costs and intervals from the storage model or the documented fallback)."""

from __future__ import annotations

import json
import math

import pytest
from cli_checks import error_line
from layouts import LLAMA3_405B_16K
from rel_helpers import CKPT, STEP_S, spec_405b

from teton.errors import SpecError
from teton.reliability import goodput, run_summary
from teton.spec import load_spec
from teton.spec.reliability import parse_reliability


def _table4_step_time_s(spec) -> float:
    """Step time implied by Table 4 row 2 (400 TFLOPs/GPU at 16,384 GPUs) and 6 N per token."""
    flops = 6.0 * spec.model.total_params() * spec.job.tokens_per_step
    return flops / (16384 * 400e12)


def test_time_to_train_405b_15_6t_tokens(spec405):
    st = _table4_step_time_s(spec405)
    out = goodput(spec405, step_time_s=st, tokens=15.6e12, runs=100, seed=0).to_dict()
    steps = math.ceil(15.6e12 / spec405.job.tokens_per_step)
    assert out["steps"] == steps
    assert out["ideal_days"] == pytest.approx(steps * st / 86400)
    assert out["ideal_gpu_hours"] == pytest.approx(steps * st * 16384 / 3600)
    assert out["finished_fraction"] == 1.0
    ttt = out["time_to_train_percentiles"]
    assert ttt["p5"] <= out["time_to_train_days"] <= ttt["p95"]
    assert out["time_to_train_days"] > out["ideal_days"]
    # wall = failure-free time / ETTR (ETTR counts the useful training seconds)
    assert out["time_to_train_days"] == pytest.approx(out["ideal_days"] / out["ettr"], rel=0.01)
    # the practical interval gives up at most the tolerance (0.5 pp) against the optimum's ~90 %
    rec = out["interval_recommendation"]
    assert out["checkpoint_interval_s"] == rec["practical_interval_s"]
    assert out["ettr"] > 0.89 and rec["practical_ettr"] >= rec["optimal_ettr"] - 0.005
    assert out["gpu_hours"] == pytest.approx(ttt["mean"] * 24 * 16384)
    assert any("step time" in a for a in out["assumptions"])
    assert out["tokens_trained"]["p50"] == pytest.approx(steps * spec405.job.tokens_per_step, rel=1e-9)


def test_energy_power_swing_and_cost(spec405):
    out = goodput(spec405, step_time_s=6.0, days=10, runs=50, seed=0).to_dict()
    # busy fraction 1 (no breakdown given): every GPU from 700 W to 70 W, times PUE 1.09
    assert out["power_swing_mw"] == pytest.approx(16384 * (700 - 70) * 1.09 / 1e6)
    hosts_w = 2048 * 4600
    assert out["power_idle_mw"] > (16384 * 70 + hosts_w) * 1.09 / 1e6
    assert out["power_train_mw"] - out["power_idle_mw"] == pytest.approx(out["power_swing_mw"])
    # energy lies between all-idle and all-training over 10 days
    assert out["power_idle_mw"] * 240 < out["energy_mwh"] < out["power_train_mw"] * 240
    assert out["cost_usd"] == pytest.approx(16384 * 240 * 2.0)  # $2 / GPU-hour, fixed 10 days
    capex = spec_405b({**CKPT, "capex_per_gpu_usd": 40_000, "depreciation_years": 4, "usd_per_kwh": 0.1})
    c = goodput(capex, step_time_s=6.0, days=10, runs=50, seed=0).to_dict()
    depreciation = 16384 * 240 * 40_000 / (4 * 8766)
    assert c["cost_usd"] == pytest.approx(depreciation + c["energy_mwh"] * 1000 * 0.1)


def test_communication_bound_step_draws_less_power(spec405):
    busy = goodput(spec405, step_time_s=6.0, days=5, runs=20, seed=0).to_dict()
    comm = goodput(spec405, step_time_s=6.0, days=5, runs=20, seed=0,
                   breakdown={"compute": 3.0, "exposed_dp_comm": 3.0}).to_dict()
    assert comm["power_train_mw"] < busy["power_train_mw"]
    assert comm["energy_mwh"] < busy["energy_mwh"]


def test_optional_throughput_effects_slow_the_run(spec405):
    base = goodput(spec405, step_time_s=6.0, tokens=1e12, runs=50, seed=0).to_dict()
    slow = spec_405b({**CKPT, "diurnal_variation": 0.02, "straggler_slowdown": 0.05})
    s = goodput(slow, step_time_s=6.0, tokens=1e12, runs=50, seed=0).to_dict()
    assert s["effective_step_time_s"] == pytest.approx(6.0 / 0.99 * 1.05)
    assert s["time_to_train_days"] > base["time_to_train_days"] * 1.05
    assert s["goodput"] < s["ettr"]


def test_optimized_pg_init_shortens_recovery(spec405):
    stock = goodput(spec405, step_time_s=6.0, days=20, runs=50, seed=0).to_dict()
    fast = goodput(spec_405b({**CKPT, "pg_init": "optimized"}), step_time_s=6.0, days=20, runs=50, seed=0).to_dict()
    assert fast["pg_init_s"] < stock["pg_init_s"]
    assert fast["ettr"] > stock["ettr"]


def test_run_summary_keys_and_run_length_from_spec():
    spec = spec_405b({**CKPT, "tokens": 2e12, "runs": 50})
    out = run_summary(spec, step_time_s=6.0, tokens_per_step=spec.job.tokens_per_step)
    for key in ("goodput", "ettr", "time_to_train_days", "energy_mwh", "cost_usd"):
        assert isinstance(out[key], float) and out[key] > 0
    assert 0.85 < out["ettr"] <= 1.0
    days = run_summary(spec_405b({**CKPT, "days": 7, "runs": 20}), 6.0, 16_777_216)
    assert days["time_to_train_days"] is None and days["ettr"] > 0.85


def test_bad_run_length_is_spec_error(spec405):
    with pytest.raises(SpecError):
        goodput(spec405, step_time_s=6.0, days=5, tokens=1e12).to_dict()
    with pytest.raises(SpecError):
        goodput(spec405, step_time_s=6.0, days=float("nan")).to_dict()


def test_step_time_from_the_step_simulator_passed(spec405):
    import teton

    calls = []

    def simulate(spec):
        calls.append(spec)
        return teton.simulate(spec)

    out = goodput(spec405, tokens=1e12, runs=20, seed=0, simulate=simulate).to_dict()
    assert calls == [spec405]
    assert out["step_time_source"] == "teton.simulate"
    assert out["step_time_s"] == pytest.approx(teton.simulate(spec405).step_time_s)


def test_no_step_time_and_no_simulator_is_an_error_naming_the_parameter(spec405):
    with pytest.raises(SpecError, match=r"^step_time_s = None: give the step time"):
        goodput(spec405, tokens=1e12, runs=20, seed=0)


def test_goodput_is_a_frozen_typed_result(spec405):
    import dataclasses

    from teton.reliability import GoodputResult

    r = goodput(spec405, step_time_s=6.0, tokens=1e12, runs=20, seed=0, interval_sweep=True)
    assert isinstance(r, GoodputResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.time = None
    d = r.to_dict()
    assert (d["ettr"], d["gpus"], d["checkpoint_interval_s"], d["cost_usd"]) == (
        r.time.ettr, r.run.gpus, r.checkpoint.checkpoint_interval_s, r.energy.cost_usd)
    keys = list(d)
    assert keys[:3] == ["gpus", "hosts", "switch_equivalents"] and keys[-2:] == ["assumptions", "warnings"]
    assert d["mc_optimal_ettr"] == max(row["ettr_mean"] for row in d["interval_sweep"])
    assert "time_to_train_samples_days" not in d


def test_checkpoint_costs_from_storage_model():
    from teton.storage.checkpoint import checkpoint_summary

    spec = spec_405b({})
    expected = checkpoint_summary(spec)
    out = goodput(spec, step_time_s=6.0, days=5, runs=20, seed=0).to_dict()
    assert out["checkpoint_source"] == "storage model"
    assert out["checkpoint_restore_s"] == pytest.approx(expected["checkpoint_restore_s"])
    assert out["checkpoint_blocking_s"] == pytest.approx(expected["checkpoint_blocking_s"])


def test_cli_json_and_errors(tmp_path, cli):
    """In-process CLI (the suite's ``cli`` fixture): JSON keys, exit code 2 on bad input."""
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**LLAMA3_405B_16K, "reliability": CKPT}))
    code, stdout, stderr = cli("goodput", path, "--step-time", "6", "--days", "54", "--runs", "50", "--seed", "3",
                               "--json")
    assert code == 0, stderr
    out = json.loads(stdout)
    for key in ("unexpected_interruptions", "ettr", "time_to_train_days", "checkpoint_interval_s",
                "young_daly_interval_s", "ettr_percentiles", "interruptions_by_category", "energy_mwh",
                "interruptions_by_category_percentiles", "wall_days", "lost_gpu_hours",
                "cost_usd"):
        assert key in out
    assert out["unexpected_interruptions"] == pytest.approx(419, rel=0.15)
    code, _, stderr = cli("goodput", path, "--step-time", "6", "--set", "reliability.rates_per_hour.faulty_gpu=-1")
    assert code == 2
    assert stderr.strip().count("\n") == 0 and "faulty_gpu" in stderr
    code, _, stderr = cli("goodput", path, "--step-time", "6", "--tokens", "lots")
    assert code == 2 and "--tokens" in stderr
    code, stdout, _ = cli("goodput", path, "--step-time", "6", "--days", "5", "--runs", "20", "--interval-sweep")
    assert code == 0 and "checkpoint interval vs ETTR" in stdout and "assumptions" in stdout


def test_validation_case_rows():
    from teton.validation.cases import run_validation

    d = run_validation(["llama3-405b-54-days"])
    rows = {r["metric"]: r for r in d["rows"]}
    assert rows["unexpected_interruptions"]["kind"] == "check"
    assert rows["ettr"]["kind"] == "lower_bound" and rows["ettr"]["published"] == 0.90
    assert d["mean_abs_error"] == 0.0  # no point values in this case: checks and bounds only


def test_goodput_table_when_no_unexpected_failures(cli, example_spec):
    """rate_scale 0 (no failure loses work): MTBI and Young/Daly are undefined (null in JSON),
    and the table said so with a TypeError traceback."""
    args = ("goodput", example_spec, "--runs", "10", "--step-time", str(STEP_S), "--set", "reliability.rate_scale=0")
    code, out, err = cli(*args)
    assert code == 0, err
    assert "MTBI" in out and "no unexpected interruptions" in out
    code, out, err = cli(*args, "--json")
    d = json.loads(out)
    assert d["mtbi_h"] is None and d["young_interval_s"] is None and d["young_daly_interval_s"] is None


def test_too_long_run_cli_one_line(cli, example_spec):
    code, _, err = cli("goodput", example_spec, "--runs", "5", "--step-time", str(STEP_S), "--days", "1e9")
    line = error_line(code, err)
    assert "--days" in line


def test_days_inf_in_spec_names_the_spec_field(cli, example_spec):
    code, _, err = cli("goodput", example_spec, "--runs", "5", "--step-time", str(STEP_S),
                       "--set", "reliability.days=inf")
    assert "reliability.days" in error_line(code, err)


def test_runs_are_capped_with_a_one_line_error(cli, example_spec):
    """``--runs 10000000`` ran out of memory (a spare-host ring per run) with a traceback."""
    code, _, err = cli("goodput", example_spec, "--step-time", str(STEP_S), "--runs", "10000000")
    assert "--runs" in error_line(code, err)
    with pytest.raises(SpecError, match="reliability.runs"):
        parse_reliability({"runs": 10_000_000})


def test_goodput_without_any_storage_uses_the_documented_fallback(cli):
    """A cluster that names no storage (DGX presets): the documented fallback (14 bytes/param at
    2 TB/s, ``checkpoint_bytes_per_param`` / ``storage_bytes_s``) was unreachable; goodput and
    ``teton run`` with a run length failed, even with every checkpoint cost given."""
    data = {"cluster": "dgx-a100-superpod", "model": "gpt3-175b",
            "job": {"gpus": 1024, "tp": 8, "pp": 8, "seq_len": 2048, "global_batch": 1536}}
    spec = load_spec(data)
    d = goodput(spec, step_time_s=10.0, days=1, runs=5, seed=0).to_dict()
    expect = spec.model.total_params() * 14.0 / 2e12
    assert d["checkpoint_source"].startswith("fallback")
    assert d["checkpoint_save_s"] == pytest.approx(expect)
    assert d["checkpoint_restore_s"] == pytest.approx(expect)
    given = goodput(load_spec({**data, "reliability": dict(CKPT)}), step_time_s=10.0, days=1, runs=5, seed=0).to_dict()
    assert given["checkpoint_source"] == "reliability section"
    assert given["checkpoint_blocking_s"] == CKPT["checkpoint_blocking_s"]
    code, out, err = cli("run", "examples/gpt3-175b-a100.yaml", "--set", "reliability.days=2", "--json")
    assert code == 0, err
    assert 0 < json.loads(out)["ettr"] <= 1


def test_energy_and_cost_add_up():
    spec = spec_405b(dict(CKPT))
    d = goodput(spec, step_time_s=STEP_S, tokens=2e12, runs=20, seed=0).to_dict()
    gpu_h = d["gpu_hours"]
    assert gpu_h == pytest.approx(d["wall_days"]["mean"] * 24 * d["gpus"])
    assert d["cost_usd"] == pytest.approx(gpu_h * 2.0)  # default $2 per GPU-hour
    wall_h = d["wall_days"]["mean"] * 24
    # facility energy (MWh) = MW x h, between all-idle and all-training power for the wall time
    assert d["power_idle_mw"] * wall_h < d["energy_mwh"] < d["power_train_mw"] * wall_h
    assert d["power_swing_mw"] == pytest.approx(d["power_train_mw"] - d["power_idle_mw"])
    assert d["ideal_gpu_hours"] == pytest.approx(d["ideal_days"] * 24 * d["gpus"])


def test_storage_checkpoint_interval_is_the_one_goodput_uses(cli, example_spec):
    """``storage.checkpoint.interval_s: 600``: ``teton checkpoint`` judged 600 s sustainable while
    ``teton goodput`` (and ``teton run``'s whole-run keys) silently used Daly's 16 s."""
    over = ("--set", "storage.checkpoint.interval_s=600")
    code, out, err = cli("checkpoint", example_spec, "--json", *over)
    assert code == 0, err
    assert json.loads(out)["checkpoint_interval_s"] == 600
    code, out, err = cli("goodput", example_spec, "--json", "--runs", "5", "--step-time", str(STEP_S), *over)
    assert code == 0, err
    used = json.loads(out)["checkpoint_interval_s"]
    assert used == pytest.approx(round(600 / STEP_S) * STEP_S)
    # an explicit --interval or reliability.checkpoint_interval_s still wins
    code, out, err = cli("goodput", example_spec, "--json", "--runs", "5", "--step-time", str(STEP_S), *over,
                         "--set", "reliability.checkpoint_interval_s=60")
    assert json.loads(out)["checkpoint_interval_s"] == pytest.approx(round(60 / STEP_S) * STEP_S)


def test_daly_interval_is_held_to_what_the_storage_sustains(cli, example_spec):
    """On 60 Tectonic-like servers a checkpoint every Daly ~100 s would outrun the flash's
    sustained write rate: the best offered interval is bytes / sustained rate (whole steps), the
    interval used the longest within tolerance of it, and it says why; a given interval is taken
    as is, with a warning when the storage cannot sustain it."""
    import json

    code, out, err = cli("goodput", example_spec, "--tokens", "1T", "--set", "storage.servers=60", "--runs", "50",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["checkpoint_interval_source"] == "storage sustained write rate"
    rec = d["interval_recommendation"]
    assert rec["storage_limits_optimum"] and rec["min_interval_bound"] == "storage write rate"
    assert d["storage_min_interval_s"] <= rec["optimal_interval_s"] < d["storage_min_interval_s"] + 10
    assert d["checkpoint_interval_s"] == rec["practical_interval_s"] >= rec["optimal_interval_s"]
    assert d["checkpoint_interval_s"] > d["young_daly_interval_s"] and rec["storage_use"] <= 1
    assert d["warnings"] == []
    code, out, err = cli("goodput", example_spec, "--tokens", "1T", "--set", "storage.servers=60", "--runs", "50",
                         "--interval", "120", "--json")
    assert code == 0, err
    given = json.loads(out)
    # the 120 s given is raised to the save's drain, and the source says so
    assert given["checkpoint_interval_source"] == "given 120 s, raised to the asynchronous save's drain"
    assert given["checkpoint_interval_s"] > 120
    assert any("the shortest interval it sustains is" in w for w in given["warnings"])
