"""QA pass on ``teton goodput``: defects a demanding user hit, and the invariants they rely on.

Monte Carlo runs are kept small (tens of runs); the step time is given so no step is simulated.
"""

from __future__ import annotations

import json
import math
import time

import pytest
from rel_helpers import CKPT, spec_405b

from teton.errors import SpecError
from teton.reliability import goodput, parse_reliability
from teton.spec import load_spec

STEP_S = 5.413


def _one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ---- defects ------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("kw", [{"days": 1e9}, {"tokens": 1e40}])
def test_run_too_long_for_the_monte_carlo_is_a_spec_error(kw):
    """A run with more interruptions than the Monte Carlo follows returned ETTR = inf, 0 wall days
    and $0 after ~30 s; now a one-line error, at once."""
    spec = spec_405b(dict(CKPT))
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="interruptions"):
        goodput(spec, step_time_s=STEP_S, runs=5, seed=0, **kw)
    assert time.perf_counter() - t0 < 5.0


def test_run_that_cannot_finish_is_a_spec_error():
    """A token budget under a failure rate far above the restart time never finishes."""
    spec = spec_405b({**CKPT, "rate_scale": 1e6})
    with pytest.raises(SpecError, match="interruptions"):
        goodput(spec, step_time_s=STEP_S, tokens=15.6e12, runs=5, seed=0)


def test_too_long_run_cli_one_line(cli, example_spec):
    code, _, err = cli("goodput", example_spec, "--runs", "5", "--step-time", str(STEP_S), "--days", "1e9")
    line = _one_line_error(code, err)
    assert "--days" in line


@pytest.mark.parametrize("field", ["step_time_s", "tokens_per_step", "days", "checkpoint_interval_s",
                                   "storage_bytes_s", "usd_per_gpu_hour", "pue"])
def test_reliability_rejects_infinite_values(field):
    """inf was accepted for step_time_s / tokens_per_step (NaN results) and others."""
    with pytest.raises(SpecError, match=f"reliability.{field}"):
        parse_reliability({field: math.inf})


def test_days_inf_in_spec_names_the_spec_field(cli, example_spec):
    code, _, err = cli("goodput", example_spec, "--runs", "5", "--step-time", str(STEP_S),
                       "--set", "reliability.days=inf")
    assert "reliability.days" in _one_line_error(code, err)


def test_lost_gpu_hours_by_kind_add_up_and_stay_non_negative():
    """With no spare hosts, a repair wait cut by the end of a fixed-length run left the recovery
    share of lost GPU-hours negative (-0.49M GPU-hours)."""
    spec = spec_405b({**CKPT, "spare_hosts": 0})
    d = goodput(spec, step_time_s=STEP_S, days=54, runs=20, seed=0)
    kinds = d["lost_gpu_hours_by_kind"]
    assert all(v >= 0 for v in kinds.values()), kinds
    assert sum(kinds.values()) == pytest.approx(d["lost_gpu_hours"]["mean"], rel=1e-9)
    assert kinds["spare_wait"] > 0


def test_goodput_without_any_storage_uses_the_documented_fallback(cli):
    """A cluster that names no storage (DGX presets): the documented fallback (14 bytes/param at
    2 TB/s, ``checkpoint_bytes_per_param`` / ``storage_bytes_s``) was unreachable; goodput and
    ``teton run`` with a run length failed, even with every checkpoint cost given."""
    data = {"cluster": "dgx-a100-superpod", "model": "gpt3-175b",
            "job": {"gpus": 1024, "tp": 8, "pp": 8, "seq_len": 2048, "global_batch": 1536}}
    spec = load_spec(data)
    d = goodput(spec, step_time_s=10.0, days=1, runs=5, seed=0)
    expect = spec.model.total_params() * 14.0 / 2e12
    assert d["checkpoint_source"].startswith("fallback")
    assert d["checkpoint_save_s"] == pytest.approx(expect)
    assert d["checkpoint_restore_s"] == pytest.approx(expect)
    given = goodput(load_spec({**data, "reliability": dict(CKPT)}), step_time_s=10.0, days=1, runs=5, seed=0)
    assert given["checkpoint_source"] == "reliability section"
    assert given["checkpoint_blocking_s"] == CKPT["checkpoint_blocking_s"]
    code, out, err = cli("run", "examples/gpt3-175b-a100.yaml", "--set", "reliability.days=2", "--json")
    assert code == 0, err
    assert 0 < json.loads(out)["ettr"] <= 1


# ---- invariants users rely on -------------------------------------------------------------------

def test_young_and_daly_match_the_hand_calculation():
    spec = spec_405b(dict(CKPT))
    d = goodput(spec, step_time_s=STEP_S, days=54, runs=5, seed=0)
    c, m = CKPT["checkpoint_blocking_s"], d["mtbi_h"] * 3600.0
    assert d["young_interval_s"] == pytest.approx(math.sqrt(2 * c * m), rel=1e-12)
    x = c / (2 * m)
    assert d["young_daly_interval_s"] == pytest.approx(math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c)
    # the interval used is Daly's rounded to whole steps
    assert d["checkpoint_interval_s"] == pytest.approx(round(d["young_daly_interval_s"] / STEP_S) * STEP_S)


def test_seeded_monte_carlo_is_deterministic_and_near_the_first_order_answer():
    spec = spec_405b(dict(CKPT))
    a = goodput(spec, step_time_s=STEP_S, days=54, runs=40, seed=7)
    b = goodput(spec, step_time_s=STEP_S, days=54, runs=40, seed=7)
    assert a["ettr"] == b["ettr"] and a["energy_mwh"] == b["energy_mwh"]
    # first order: each unexpected interruption loses half a cycle + the save lag + its downtime
    m = a["mtbi_h"] * 3600.0
    tau, blk, save = a["checkpoint_interval_s"], a["checkpoint_blocking_s"], a["checkpoint_save_s"]
    by = a["interruptions_by_cause"]
    unexp = {k: v for k, v in by.items() if k != "planned_maintenance"}
    down = a["downtime_s_by_cause"]
    d_mean = sum(down[k] * v for k, v in unexp.items()) / sum(unexp.values())
    planned = by["planned_maintenance"] / sum(unexp.values()) * (down["planned_maintenance"] + save)
    first_order = (m - (tau + blk) / 2 - (save - blk)) / (m + d_mean + planned) * tau / (tau + blk)
    assert a["ettr"] == pytest.approx(first_order, abs=0.005)


def test_ettr_bounded_and_monotone_in_failure_rate_and_checkpoint_cost():
    spec_kw = dict(step_time_s=STEP_S, days=20, runs=30, seed=1, interval_s=600.0)
    by_rate = [goodput(spec_405b({**CKPT, "rate_scale": r}), **spec_kw)["ettr"] for r in (0.25, 1, 4, 16)]
    assert all(0 <= e <= 1 for e in by_rate)
    assert by_rate == sorted(by_rate, reverse=True) and by_rate[0] - by_rate[-1] > 0.1
    by_cost = [goodput(spec_405b({"checkpoint_save_s": c, "checkpoint_blocking_s": c,
                                  "checkpoint_restore_s": 60.0}), **spec_kw)["ettr"] for c in (1, 10, 60, 300)]
    assert all(0 <= e <= 1 for e in by_cost)
    assert by_cost == sorted(by_cost, reverse=True)


def test_energy_and_cost_add_up():
    spec = spec_405b(dict(CKPT))
    d = goodput(spec, step_time_s=STEP_S, tokens=2e12, runs=20, seed=0)
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


def test_runs_are_capped_with_a_one_line_error(cli, example_spec):
    """``--runs 10000000`` ran out of memory (a spare-host ring per run) with a traceback."""
    code, _, err = cli("goodput", example_spec, "--step-time", str(STEP_S), "--runs", "10000000")
    assert "--runs" in _one_line_error(code, err)
    with pytest.raises(SpecError, match="reliability.runs"):
        parse_reliability({"runs": 10_000_000})


def test_daly_interval_is_held_to_what_the_storage_sustains(cli, example_spec):
    """On 60 Tectonic-like servers a checkpoint every Daly ~100 s would outrun the flash's
    sustained write rate: the interval is raised to bytes / sustained rate (whole steps), and
    says why; a given interval is taken as is."""
    import json

    code, out, err = cli("goodput", example_spec, "--tokens", "1T", "--set", "storage.servers=60", "--runs", "50",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["checkpoint_interval_source"] == "storage sustained write rate"
    assert d["storage_min_interval_s"] <= d["checkpoint_interval_s"] < d["storage_min_interval_s"] + 10
    assert d["checkpoint_interval_s"] > d["young_daly_interval_s"]
    code, out, err = cli("goodput", example_spec, "--tokens", "1T", "--set", "storage.servers=60", "--runs", "50",
                         "--interval", "120", "--json")
    assert code == 0, err
    assert json.loads(out)["checkpoint_interval_source"] == "given"
