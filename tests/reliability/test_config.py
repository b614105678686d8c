"""The reliability section: one-line SpecErrors for bad rates, shares and fields."""

from __future__ import annotations

import math

import pytest
from cli_checks import one_line_error, write_spec
from layouts import LLAMA3_8B_8_GPUS_YAML

from teton.errors import SpecError
from teton.spec.reliability import parse_reliability


@pytest.mark.parametrize("raw, field", [
    ({"rates_per_hour": {"faulty_gpu": -1e-6}}, "reliability.rates_per_hour.faulty_gpu"),
    ({"rates_per_hour": {"faulty_gpu": math.nan}}, "reliability.rates_per_hour.faulty_gpu"),
    ({"rates_per_hour": {"faulty_gpu": math.inf}}, "reliability.rates_per_hour.faulty_gpu"),
    ({"rates_per_hour": {"faulty_gpus": 1e-6}}, "reliability.rates_per_hour.faulty_gpus"),
    ({"rate_scale": -2}, "reliability.rate_scale"),
    ({"rate_scale": math.nan}, "reliability.rate_scale"),
    ({"shares": {"faulty_gpu": 0.5, "nic": 0.4}, "unexpected_mtbi_h": 3}, "reliability.shares"),
    ({"shares": {"faulty_gpu": 1.2, "nic": -0.2}}, "reliability.shares.nic"),
    ({"shares": {"planned_maintenance": 1.0}}, "reliability.shares.planned_maintenance"),
    ({"unexpected_mtbi_h": 3.0}, "reliability.unexpected_mtbi_h"),
    ({"days": 10, "tokens": 1e12}, "reliability.tokens"),
    ({"days": -1}, "reliability.days"),
    ({"hang_detect_s": math.nan}, "reliability.hang_detect_s"),
    ({"pue": 0.8}, "reliability.pue"),
    ({"pg_init": "fast"}, "reliability.pg_init"),
    ({"infant_mortality": {"weibull_shape": 1.5}}, "reliability.infant_mortality.weibull_shape"),
    ({"infant_mortality": {"shape": 0.5}}, "reliability.infant_mortality.shape"),
    ({"mtbf": 3}, "reliability.mtbf"),
    ({"checkpoint_save_s": 1.0, "checkpoint_blocking_s": 2.0}, "reliability.checkpoint_blocking_s"),
    ({"preset": "llama4"}, "reliability.preset"),
])
def test_bad_input_is_one_line_spec_error(raw, field):
    with pytest.raises(SpecError) as info:
        parse_reliability(raw)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_shares_summing_to_one_are_accepted():
    cfg = parse_reliability({"shares": {"faulty_gpu": 0.6, "software_bug": 0.4}, "unexpected_mtbi_h": 2.5})
    assert cfg.shares == {"faulty_gpu": 0.6, "software_bug": 0.4}


def test_spec_section_and_overrides(tmp_path):
    from rel_helpers import spec_405b

    spec = spec_405b({"days": 54, "pg_init": "optimized"})
    cfg = parse_reliability(spec.reliability, {"runs": 10})
    assert (cfg.days, cfg.pg_init, cfg.runs) == (54, "optimized", 10)
    assert parse_reliability({"preset": "llama3-table5"}).preset == "llama3-table5"


@pytest.mark.parametrize("text, value", [(15.6e12, 15.6e12), ("15.6e12", 15.6e12), ("15.6T", 15.6e12),
                                         ("2B", 2e9), ("800M", 8e8)])
def test_token_budget_forms(text, value):
    assert parse_reliability({"tokens": text}).tokens == pytest.approx(value)


def test_no_failures_gives_valid_json_and_no_optimum():
    import json

    from rel_helpers import CKPT, spec_405b

    from teton.reliability import goodput

    spec = spec_405b({**CKPT, "rate_scale": 0, "rates_per_hour": {"planned_maintenance": 0}})
    out = goodput(spec, step_time_s=6.0, tokens=1e12, runs=5, seed=0).to_dict()
    assert out["young_daly_interval_s"] is None and out["mtbi_h"] is None
    assert out["ettr"] == pytest.approx(1.0, abs=1e-3)
    json.loads(json.dumps(out, allow_nan=False))


def test_reliability_typo_is_reported_not_ignored(tmp_path, cli):
    code, _, err = cli("run", write_spec(tmp_path, LLAMA3_8B_8_GPUS_YAML + "reliability: {token: 15.6T}\n"))
    one_line_error(code, err, "reliability.token")


@pytest.mark.parametrize("field", ["step_time_s", "tokens_per_step", "days", "checkpoint_interval_s",
                                   "storage_bytes_s", "usd_per_gpu_hour", "pue"])
def test_reliability_rejects_infinite_values(field):
    """inf was accepted for step_time_s / tokens_per_step (NaN results) and others."""
    with pytest.raises(SpecError, match=f"reliability.{field}"):
        parse_reliability({field: math.inf})
