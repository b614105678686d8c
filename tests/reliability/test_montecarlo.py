"""Monte Carlo of a whole run: analytic limits, determinism, intervals (Young / Daly by hand), spares,
infant mortality, ETTR's bounds, and runs too long to follow."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from rel_helpers import CKPT, STEP_S, spec_405b

from teton.errors import SpecError
from teton.reliability import MCInputs, daly_interval_s, goodput, simulate_runs, young_interval_s


def _inp(rate_per_h=0.0, **kw):
    base = dict(rates_per_s=np.array([rate_per_h / 3600.0]), downtime_s=np.array([600.0]),
                hardware=np.array([True]), planned=np.array([False]), replaces_host=np.array([True]),
                interval_s=1000.0, blocking_s=10.0, save_s=10.0, horizon_s=10 * 86400.0)
    base.update(kw)
    return MCInputs(**base)


def test_no_failures_ettr_is_interval_share():
    res = simulate_runs(_inp(0.0), runs=5, seed=0)
    assert np.allclose(res.ettr, 1000 / 1010, rtol=1e-4)
    assert res.counts.sum() == 0
    res = simulate_runs(_inp(0.0, horizon_s=None, work_s=10_000.0), runs=3, seed=0)
    # 10 intervals of training, 9 intermediate checkpoints and a final save
    assert np.allclose(res.wall_s, 10_000 + 9 * 10 + 10)
    assert res.finished.all()


def test_interruption_count_is_poisson_over_uptime():
    res = simulate_runs(_inp(1.0, downtime_s=np.array([0.0]), blocking_s=0.0, save_s=0.0, interval_s=60.0),
                        runs=2000, seed=3)
    n = res.counts[:, 0]
    assert n.mean() == pytest.approx(240, rel=0.01)  # 1/h over 240 h
    assert n.var() == pytest.approx(240, rel=0.1)  # Poisson
    # lost work per failure ~ U(0, interval): half an interval on average
    assert res.lost_work_s.sum() / n.sum() == pytest.approx(30.0, rel=0.03)


def test_renewal_theory_ettr():
    """With exponential failures, E[useful per cycle] / E[cycle] has a closed form (Daly 2006)."""
    lam, tau, dt = 0.5 / 3600, 1800.0, 900.0
    res = simulate_runs(_inp(0.5, downtime_s=np.array([dt]), blocking_s=0.0, save_s=0.0, interval_s=tau,
                             horizon_s=400 * 86400.0), runs=300, seed=5)
    # expected wall per interval of committed work: (e^{lam tau} - 1)(1/lam + dt) (no checkpoint cost)
    expected = tau / ((math.exp(lam * tau) - 1.0) * (1.0 / lam + dt))
    assert res.ettr.mean() == pytest.approx(expected, rel=0.01)


def test_same_seed_same_numbers(spec405):
    a = goodput(spec405, step_time_s=6.0, days=20, runs=200, seed=11).to_dict()
    b = goodput(spec405, step_time_s=6.0, days=20, runs=200, seed=11).to_dict()
    c = goodput(spec405, step_time_s=6.0, days=20, runs=200, seed=12).to_dict()
    assert a == b
    assert a["ettr"] != c["ettr"]


def test_progress_counts_runs_up_to_the_total(spec405):
    """``progress(done, total)`` as every progress callback of teton: runs finished, the interval
    sweep's included, never going back, ending at the total."""
    seen = []
    out = goodput(spec405, step_time_s=6.0, days=5, runs=20, seed=0, interval_sweep=True,
                  progress=lambda done, total: seen.append((done, total))).to_dict()
    total = seen[-1][1]  # the most the sweep may simulate (its refinement stops early): a bound
    assert {t for _, t in seen} == {total} and total >= 20 * len(out["interval_sweep"])
    done = [d for d, _ in seen]
    assert all(isinstance(d, int) for d in done) and done == sorted(done)
    assert 20 in done and seen[-1] == (total, total)  # the sweep's first interval ends, and all ends at the total
    ticks = []
    simulate_runs(_inp(1.0), runs=7, seed=0, progress=lambda d, n: ticks.append((d, n)))
    assert ticks[-1] == (7, 7) and all(n == 7 for _, n in ticks)


def test_young_daly_formulas():
    assert young_interval_s(10.0, 3600.0) == pytest.approx(math.sqrt(2 * 10 * 3600))
    d, m = 10.0, 3600.0
    x = d / (2 * m)
    assert daly_interval_s(d, m) == pytest.approx(math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d)
    assert daly_interval_s(1e-3, 3600.0) == pytest.approx(young_interval_s(1e-3, 3600.0), rel=1e-3)
    assert daly_interval_s(8000.0, 3600.0) == 3600.0  # delta >= 2M


def test_ettr_above_90_with_sensible_interval_and_lower_with_bad_one(spec405):
    good = goodput(spec405, step_time_s=6.0, days=54, runs=200, seed=0).to_dict()
    rec = good["interval_recommendation"]
    assert rec["optimal_interval_s"] == pytest.approx(good["young_daly_interval_s"], abs=12.0)
    assert good["checkpoint_interval_s"] == rec["practical_interval_s"] > rec["optimal_interval_s"]
    assert good["ettr"] > 0.89
    rare = goodput(spec405, step_time_s=6.0, days=54, runs=200, seed=0, interval_s=4 * 3600.0).to_dict()
    often = goodput(spec405, step_time_s=6.0, days=54, runs=200, seed=0, interval_s=12.0).to_dict()
    assert rare["ettr"] < good["ettr"] - 0.15
    assert often["ettr"] < good["ettr"] - 0.15


def test_monte_carlo_optimum_near_daly(spec405):
    out = goodput(spec405, step_time_s=6.0, days=30, runs=100, seed=0, interval_sweep=True).to_dict()
    rows = out["interval_sweep"]
    assert len(rows) >= 13
    ettrs = [r["ettr_mean"] for r in rows]
    best = int(np.argmax(ettrs))
    assert 0 < best < len(rows) - 1  # an interior optimum
    assert out["mc_optimal_interval_s"] / out["young_daly_interval_s"] == pytest.approx(1.0, abs=0.6)
    # the optimum is flat: Daly's interval is within 0.5 % ETTR of the Monte Carlo best
    assert out["ettr"] > out["mc_optimal_ettr"] - 0.005


def test_spare_pool_is_first_in_first_out():
    """The ring buffer gives the same waits as an explicit pool where the earliest-free spare is taken."""
    inp = _inp(2.0, downtime_s=np.array([60.0]), spares=3, repair_s=5 * 3600.0, horizon_s=3 * 86400.0)
    res = simulate_runs(inp, runs=1, seed=7)
    assert res.spare_wait_s[0] > 0  # 2/h against 3 spares repaired in 5 h: the pool runs dry
    # replay the same run with an explicit pool
    rng = np.random.default_rng(7)
    pool = [0.0, 0.0, 0.0]
    t_seg, cur, total_wait = 0.0, 0.0, 0.0
    lam = 2.0 / 3600
    while True:
        e = rng.standard_exponential(1)[0]
        rng.random(1)
        rng.random(1)
        cand = cur + e / lam
        if t_seg + cand >= inp.horizon_s:
            break
        t_fail = t_seg + cand
        i = int(np.argmin(pool))
        wait = max(pool[i] - t_fail, 0.0)
        pool[i] = t_fail + inp.repair_s
        total_wait += wait
        t_seg, cur = t_fail + 60.0 + wait, 0.0
        if t_seg >= inp.horizon_s:
            break
    assert res.spare_wait_s[0] == pytest.approx(total_wait)


def test_no_spares_means_waiting_for_repair():
    full = spec_405b(dict(CKPT), gpus=24576, global_batch=3072)
    some = goodput(full, step_time_s=6.0, days=20, runs=50, seed=0).to_dict()
    assert some["spare_hosts"] == 0
    assert some["lost_gpu_hours_by_kind"]["spare_wait"] > 0
    spared = spec_405b({**CKPT, "spare_hosts": 64}, gpus=24576, global_batch=3072)
    better = goodput(spared, step_time_s=6.0, days=20, runs=50, seed=0).to_dict()
    assert better["ettr"] > some["ettr"] + 0.2


def test_infant_mortality_raises_early_rates():
    young = spec_405b({**CKPT, "infant_mortality": {"weibull_shape": 0.6, "cluster_age_days": 10,
                                                     "reference_age_days": 180}})
    flat = spec_405b({**CKPT, "infant_mortality": {"weibull_shape": 1.0}})
    base = spec_405b(dict(CKPT))
    a = goodput(young, step_time_s=6.0, days=20, runs=100, seed=0).to_dict()
    b = goodput(flat, step_time_s=6.0, days=20, runs=100, seed=0).to_dict()
    c = goodput(base, step_time_s=6.0, days=20, runs=100, seed=0).to_dict()
    assert b["unexpected_interruptions"] == pytest.approx(c["unexpected_interruptions"], rel=0.01)
    assert b["unexpected_interruptions_mc"]["mean"] == pytest.approx(c["unexpected_interruptions_mc"]["mean"],
                                                                     rel=0.03)
    assert a["unexpected_interruptions"] > 1.5 * c["unexpected_interruptions"]
    assert a["unexpected_interruptions_mc"]["mean"] > 1.4 * c["unexpected_interruptions_mc"]["mean"]
    assert a["ettr"] < c["ettr"]


def test_thinning_matches_integrated_hazard():
    """Time-varying hazard by thinning: mean count = integral of lambda(t) dt (no downtime)."""
    from teton.spec.reliability import InfantMortality

    im = InfantMortality(weibull_shape=0.5, cluster_age_days=1.0, reference_age_days=30.0)
    inp = _inp(0.5, downtime_s=np.array([0.0]), blocking_s=0.0, save_s=0.0, interval_s=60.0,
               horizon_s=30 * 86400.0, infant=im.multiplier)
    res = simulate_runs(inp, runs=1000, seed=2)
    t = np.linspace(0.0, 30 * 86400.0, 200_001)
    expected = 0.5 / 3600 * np.trapezoid(im.multiplier(t), t)
    assert res.counts.mean() == pytest.approx(expected, rel=0.02)
    assert expected > 1.5 * 0.5 * 24 * 30  # early life: well above the reference rate


@pytest.mark.parametrize("kw", [{"days": 1e9}, {"tokens": 1e40}])
def test_run_too_long_for_the_monte_carlo_is_a_spec_error(kw):
    """A run with more interruptions than the Monte Carlo follows returned ETTR = inf, 0 wall days
    and $0 after ~30 s; now a one-line error, at once."""
    spec = spec_405b(dict(CKPT))
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match="interruptions"):
        goodput(spec, step_time_s=STEP_S, runs=5, seed=0, **kw).to_dict()
    assert time.perf_counter() - t0 < 5.0


def test_run_that_cannot_finish_is_a_spec_error():
    """A token budget under a failure rate far above the restart time never finishes."""
    spec = spec_405b({**CKPT, "rate_scale": 1e6})
    with pytest.raises(SpecError, match="interruptions"):
        goodput(spec, step_time_s=STEP_S, tokens=15.6e12, runs=5, seed=0).to_dict()


def test_lost_gpu_hours_by_kind_add_up_and_stay_non_negative():
    """With no spare hosts, a repair wait cut by the end of a fixed-length run left the recovery
    share of lost GPU-hours negative (-0.49M GPU-hours)."""
    spec = spec_405b({**CKPT, "spare_hosts": 0})
    d = goodput(spec, step_time_s=STEP_S, days=54, runs=20, seed=0).to_dict()
    kinds = d["lost_gpu_hours_by_kind"]
    assert all(v >= 0 for v in kinds.values()), kinds
    assert sum(kinds.values()) == pytest.approx(d["lost_gpu_hours"]["mean"], rel=1e-9)
    assert kinds["spare_wait"] > 0


def test_gpu_hours_beyond_the_failure_free_ones_are_all_accounted_for():
    """With stragglers slowing every step 5 %, the run's GPU-hours beyond the failure-free ones
    were 3.4M and the lost kinds 1.95M: the steps' stretch is a kind of its own (slow_steps)."""
    spec = spec_405b({**CKPT, "straggler_slowdown": 0.05})
    d = goodput(spec, step_time_s=STEP_S, tokens=2e12, runs=20, seed=0).to_dict()
    kinds = d["lost_gpu_hours_by_kind"]
    assert kinds["slow_steps"] > 0
    assert sum(kinds.values()) == pytest.approx(d["gpu_hours"] - d["ideal_gpu_hours"], rel=1e-6)


def test_young_and_daly_match_the_hand_calculation():
    spec = spec_405b(dict(CKPT))
    d = goodput(spec, step_time_s=STEP_S, days=54, runs=5, seed=0).to_dict()
    c, m = CKPT["checkpoint_blocking_s"], d["mtbi_h"] * 3600.0
    assert d["young_interval_s"] == pytest.approx(math.sqrt(2 * c * m), rel=1e-12)
    x = c / (2 * m)
    assert d["young_daly_interval_s"] == pytest.approx(math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c)
    # the renewal model's optimum is Daly's to within a step; the interval used is the practical one
    rec = d["interval_recommendation"]
    assert rec["optimal_interval_s"] == pytest.approx(d["young_daly_interval_s"], abs=STEP_S)
    assert d["checkpoint_interval_s"] == rec["practical_interval_s"]
    assert d["checkpoint_interval_source"] == "practical interval (renewal model)"


def test_seeded_monte_carlo_is_deterministic_and_near_the_first_order_answer():
    spec = spec_405b(dict(CKPT))
    a = goodput(spec, step_time_s=STEP_S, days=54, runs=40, seed=7).to_dict()
    b = goodput(spec, step_time_s=STEP_S, days=54, runs=40, seed=7).to_dict()
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
    by_rate = [goodput(spec_405b({**CKPT, "rate_scale": r}), **spec_kw).to_dict()["ettr"] for r in (0.25, 1, 4, 16)]
    assert all(0 <= e <= 1 for e in by_rate)
    assert by_rate == sorted(by_rate, reverse=True) and by_rate[0] - by_rate[-1] > 0.1
    by_cost = [goodput(spec_405b({"checkpoint_save_s": c, "checkpoint_blocking_s": c,
                                  "checkpoint_restore_s": 60.0}), **spec_kw).to_dict()["ettr"] for c in (1, 10, 60, 300)]
    assert all(0 <= e <= 1 for e in by_cost)
    assert by_cost == sorted(by_cost, reverse=True)
