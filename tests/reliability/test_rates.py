"""Failure model: the Table 5 derivation, category shares, and scaling with job size."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from teton.reliability import failure_model, goodput, interruption_table, job_components
from teton.reliability.rates import (
    CAUSE_BY_KEY,
    CAUSES,
    TABLE5_WINDOW_H,
    default_rates_per_hour,
    table5_components,
)
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.spec.reliability import ReliabilitySpec

ROCE = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])


def table5_counts() -> dict[str, int]:
    text = resources.files("teton.data").joinpath("llama3-405b-interruptions-table5.csv").read_text()
    return {row["component"]: int(row["interruptions"]) for row in csv.DictReader(text.splitlines())}


def test_causes_are_table5_rows():
    counts = table5_counts()
    unexpected = [c for c in CAUSES if not c.planned]
    assert {c.component: c.count_54d for c in unexpected} == counts
    assert sum(counts.values()) == 419
    assert CAUSE_BY_KEY["planned_maintenance"].count_54d == 47


def test_switch_equivalents_as_documented():
    comps = table5_components()
    assert (comps.gpus, comps.hosts, comps.nics) == (16384, 2048, 16384)
    tiers = dict(comps.switches_by_tier)
    assert tiers["rtsw"] == 1024  # one Minipack2 per 16-GPU rack
    assert tiers["ctsw"] == pytest.approx((16384 + 16384 / 7) / 64)
    assert tiers["atsw"] == pytest.approx(16384 / 7 / 64)
    assert comps.switches == pytest.approx(1353.14, abs=0.01)


def test_default_rates_reproduce_table5_counts():
    """rate x components x 1,296 h gives back every Table 5 count (the derivation in rates.py)."""
    rates = default_rates_per_hour()
    comps = table5_components()
    for c in CAUSES:
        assert rates[c.key] * comps.of(c.scope) * TABLE5_WINDOW_H == pytest.approx(c.count_54d, rel=1e-12)
    assert rates["faulty_gpu"] == pytest.approx(148 / (16384 * 1296))
    assert rates["faulty_gpu"] == pytest.approx(6.97e-6, rel=1e-3)


def test_405b_54_days_expected_419_and_table5_shares(spec405):
    out = goodput(spec405, step_time_s=6.0, days=54, runs=400, seed=1).to_dict()
    assert out["unexpected_interruptions"] == pytest.approx(419, rel=0.15)
    assert out["planned_interruptions"] == pytest.approx(47, rel=0.15)
    # the Monte Carlo draws interruptions over up-time only (> 90 % of the window)
    assert out["unexpected_interruptions_mc"]["mean"] == pytest.approx(419, rel=0.15)
    counts = table5_counts()
    by_cause = out["interruptions_by_cause"]
    total = sum(v for k, v in by_cause.items() if k != "planned_maintenance")
    for c in CAUSES:
        if c.planned:
            continue
        share = by_cause[c.key] / total
        # multinomial sampling error of the mean over 400 runs of ~400 events
        assert share == pytest.approx(counts[c.component] / 419, abs=0.01), c.key
    cats = out["interruptions_by_category"]
    gpu_share = cats["GPU"] / total
    assert gpu_share == pytest.approx(268 / 419, abs=0.01)  # by counts (the printed 58.7 % sums percents)


def test_interruption_rate_scales_with_job_size():
    big = ClusterSpec(**{**CLUSTER_PRESETS["meta-roce-24k"], "name": "roce-132k", "hosts": 16384,
                         "layers": [dict(name="rack", switch="rtsw", span_gpus=16),
                                    dict(name="pod", switch="ctsw", span_gpus=3072, oversubscription=7.0),
                                    dict(name="cluster", switch="atsw", span_gpus=3072 * 43)]})
    rows = {r["gpus"]: r for r in interruption_table(ROCE, [8, 1024, 16384])}
    rows[131072] = interruption_table(big, [131072])[0]
    per_day = [rows[g]["unexpected_per_day"] for g in (8, 1024, 16384, 131072)]
    assert per_day == sorted(per_day) and len(set(per_day)) == 4
    assert rows[16384]["unexpected_per_day"] == pytest.approx(419 / 54, rel=1e-6)
    assert rows[8]["switches"] == 0  # one host: NVLink only
    assert rows[1024]["switches"] == pytest.approx(64 + 1024 / 64)  # inside one pod: no pod uplinks
    # GPU, host and NIC terms scale exactly with size; switch shares nearly so
    assert rows[131072]["unexpected_per_day"] / rows[16384]["unexpected_per_day"] == pytest.approx(8, rel=0.02)
    assert rows[131072]["mtbi_h"] < 0.5
    assert rows[8]["mtbi_h"] > 1000
    # start-up cost grows with size: linearly (stock) vs logarithmically (optimized)
    assert rows[131072]["pg_init_stock_s"] > rows[16384]["pg_init_stock_s"] > rows[1024]["pg_init_stock_s"]
    assert rows[131072]["pg_init_optimized_s"] < rows[131072]["pg_init_stock_s"] / 5


def test_overrides_and_shares():
    base = failure_model(ROCE, 16384, ReliabilitySpec())
    doubled = failure_model(ROCE, 16384, ReliabilitySpec(rate_scale=2.0))
    assert doubled.unexpected_per_h == pytest.approx(2 * base.unexpected_per_h)
    assert doubled.planned_per_h == pytest.approx(base.planned_per_h)
    one = failure_model(ROCE, 16384, ReliabilitySpec(rates_per_hour={"faulty_gpu": 0.0}))
    assert one.unexpected_per_h == pytest.approx(base.unexpected_per_h * (1 - 148 / 419))
    shared = failure_model(ROCE, 16384, ReliabilitySpec(unexpected_mtbi_h=2.0,
                                                          shares={"faulty_gpu": 0.75, "software_bug": 0.25}))
    assert shared.mtbi_h == pytest.approx(2.0)
    assert shared.job_rates_h["faulty_gpu"] == pytest.approx(0.375)
    # per-component rates then scale to another size
    half = failure_model(ROCE, 8192, ReliabilitySpec(unexpected_mtbi_h=2.0,
                                                       shares={"faulty_gpu": 0.75, "software_bug": 0.25}))
    assert half.mtbi_h == pytest.approx(2.0)  # shares are applied to the job in hand


def test_job_components_small_jobs():
    c = job_components(ROCE, 16)
    assert (c.hosts, c.nics, c.switches) == (2, 16, 1.0)
    c = job_components(ROCE, 4)
    assert (c.hosts, c.nics, c.switches) == (1, 4, 0.0)


def test_pg_init_growth_laws():
    from teton.reliability.recovery import pg_init_s

    stock = ReliabilitySpec(pg_init="stock")
    opt = ReliabilitySpec(pg_init="optimized")
    assert pg_init_s(stock, 20000) - pg_init_s(stock, 10000) == pytest.approx(10000 * stock.pg_init_per_rank_s)
    assert pg_init_s(opt, 2**17) - pg_init_s(opt, 2**16) == pytest.approx(opt.pg_init_per_level_s)
    assert pg_init_s(opt, 8) <= pg_init_s(stock, 8)  # never slower than stock
