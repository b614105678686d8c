"""teton plan prices the storage a run uses (issue 24 item 1): a share of a shared system, or a
system sized to the run; the cost split; ties within the band; sentences that never round two
values to one figure."""

import json
import math

import pytest

from teton.plan.answer import distinct, recommend
from teton.spec.storage import storage_system
from teton.storage.usage import storage_use

TB = 1e12


def _plan(cli, spec, args, *extra):
    code, out, err = cli("plan", spec, *args, *extra, "--json")
    assert code == 0, err
    return json.loads(out)


def _args(plan_args, drop=("--storage-servers",)):
    """The fixture's plan options without ``drop`` (and its value)."""
    out, skip = [], False
    for a in plan_args:
        if skip:
            skip = False
        elif a in drop:
            skip = True
        else:
            out.append(a)
    return out


def test_storage_use_is_the_largest_of_capacity_endurance_and_bandwidth_and_scales_with_servers():
    system = storage_system("tectonic-llama3")
    use = storage_use(system, 128, checkpoint_bytes=1 * TB, checkpoints_kept=2, interval_s=1000.0,
                      dataset_bytes=8 * TB, read_bytes_s=1e9)
    assert use.capacity_bytes == 10 * TB and use.write_bytes_s == 1e9
    assert use.capacity_share == pytest.approx(10 * TB / system.usable_capacity_bytes())
    assert use.endurance_share == pytest.approx(1e9 / system.endurance_write_bytes_s())
    assert use.bandwidth_share == pytest.approx(1e9 / system.peak_write_bytes_s() + 1e9 / system.peak_read_bytes_s())
    assert use.share == max(use.capacity_share, use.endurance_share, use.bandwidth_share)
    assert use.servers_used == pytest.approx(use.share * 7500)
    # every term is linear in the servers: the same run uses the same servers' worth of a smaller system
    small = storage_use(storage_system({"preset": "tectonic-llama3", "servers": 50}), 128, 1 * TB, 2, 1000.0,
                        8 * TB, 1e9)
    assert small.servers_used == pytest.approx(use.servers_used) and small.binding == use.binding
    assert use.dedicated_servers == math.ceil(use.servers_used)
    # a run that fills more than the system: a share over 1 (the plan drops it)
    assert storage_use(storage_system({"preset": "tectonic-llama3", "servers": 1}), 128, 1 * TB, 2, 1000.0,
                       100 * TB, 1e9).capacity_share > 1
    # the local tier is the hosts' own drives: no storage servers, a share of the run's hosts' drives
    local = storage_use(storage_system("local-nvme"), 16, 1 * TB, 2, 1000.0, 1 * TB, 1e9)
    assert local.servers_used == 0 and local.servers == 16
    assert local.capacity_share == pytest.approx(3 * TB / storage_system("local-nvme").usable_capacity_bytes(16))


def test_a_shared_system_charges_the_servers_the_run_uses_not_the_whole_preset(cli, small_spec, plan_args):
    d = _plan(cli, small_spec, _args(plan_args))
    assert d["storage_pricing"] == "share"
    for p in d["plans"]:
        use = p["storage_use"]
        assert p["storage_servers"] == 200  # the spec's system, shared
        assert p["storage_servers_charged"] == pytest.approx(use["servers_used"])
        assert 0 < p["storage_servers_charged"] < 1
        assert use["capacity_bytes"] == pytest.approx(2 * use["checkpoint_bytes"] + 1e12 * 4)  # 1T tokens x 4 B
        tb_month = p["storage_usable_tb"] / 200 * 20.0
        months = p["storage_cost_usd"] / (p["storage_servers_charged"] * tb_month)
        assert p["days_p10"] / 30.44 <= months <= p["days_p90"] / 30.44  # for the run's (mean) length
        split = p["cost_split_usd"]
        assert set(split) == {"gpus", "storage", "energy", "network"}
        assert p["cost_usd"] == pytest.approx(sum(split.values())) and split["storage"] == p["storage_cost_usd"]
        assert split["storage"] < 1e-3 * split["gpus"]  # a sliver of the system, not all of it
    code, text, _ = cli("plan", small_spec, *_args(plan_args))
    assert code == 0 and "storage $" in text and "shared storage servers" in text
    assert "energy and network in the GPU-hour price" in text  # a rental price: no energy / network columns
    code, text, _ = cli("plan", small_spec, *_args(plan_args), "--set", "reliability.network_usd_per_gpu_hour=0.3")
    assert code == 0 and "network $" in text and "energy in the GPU-hour price" in text


def test_a_dedicated_system_is_the_fewest_servers_that_hold_and_sustain_the_run(cli, small_spec, plan_args):
    d = _plan(cli, small_spec, _args(plan_args), "--storage-pricing", "dedicated")
    for p in d["plans"]:
        n, use = p["storage_servers"], p["storage_use"]
        assert p["storage_servers_charged"] == n and use["share"] <= 1.0
        if n > 1:  # one server fewer would not hold or sustain it
            fewer = storage_system({"preset": "tectonic-llama3", "servers": n - 1})
            less = storage_use(fewer, 1, use["checkpoint_bytes"], use["checkpoints_kept"],
                               use["checkpoint_bytes"] / use["write_bytes_s"], use["dataset_bytes"],
                               use["read_bytes_s"])
            assert less.share > 1.0
        sets = p["reproduce"]["set"]
        assert f"storage.servers={n}" in sets and "storage.other_jobs_share=0.0" in sets
        months = p["storage_cost_usd"] / (p["storage_usable_tb"] * 20.0)  # every server, for the run
        assert p["days_p10"] / 30.44 <= months <= p["days_p90"] / 30.44


def test_dedicated_systems_too_small_for_the_data_are_dropped(cli, small_spec, plan_args):
    args = [*_args(plan_args, ("--storage-servers", "--tokens")), "--tokens", "10T"]  # 40 TB of tokens
    d = _plan(cli, small_spec, args, "--storage-pricing", "dedicated", "--storage-servers", "1,20")
    assert {p["storage_servers"] for p in d["plans"]} == {20}  # one server holds 18 TB
    code, _, err = cli("plan", small_spec, *args, "--storage-pricing", "dedicated", "--storage-servers", "1")
    assert code == 2 and "storage: 1 servers cannot hold" in err and len(err.strip().splitlines()) == 1


def _p(gpus, cost, band=0.1, days=10.0):
    return {"gpus": gpus, "cluster": "c", "layout": {"tp": 1, "cp": 1, "pp": 1, "dp": gpus, "ep": 1},
            "storage_servers": 10, "storage_servers_charged": 1.0, "storage_pricing": "share",
            "cost_usd": cost, "cost_p10_usd": cost * (1 - band), "cost_p90_usd": cost * (1 + band),
            "days_p10": days * (1 - band), "days_p50": days, "days_p90": days * (1 + band)}


def test_plans_within_the_band_are_a_tie_broken_by_fewer_gpus():
    big, small = _p(256, 100.0, days=5.0), _p(64, 104.0, days=20.0)
    chosen, rule = recommend([big, small], deadline_days=30, budget_usd=None)
    assert chosen is small and "a tie, broken by the preference for fewer GPUs" in rule and "64 GPUs" in rule
    chosen, rule = recommend([big, small], deadline_days=30, budget_usd=None, prefer="cheaper")
    assert chosen is big and "a tie" in rule
    narrow = [_p(256, 100.0, band=0.01, days=5.0), _p(64, 104.0, band=0.01, days=20.0)]
    chosen, rule = recommend(narrow, deadline_days=30, budget_usd=None)
    assert chosen["gpus"] == 256 and "tie" not in rule
    # under a budget the rule ranks by days: a tie there too
    chosen, rule = recommend([_p(256, 100.0, days=10.0), _p(64, 90.0, days=10.5)], deadline_days=None,
                             budget_usd=200)
    assert chosen["gpus"] == 64 and "days (p50) band" in rule


def test_sentences_never_round_two_values_to_one_figure():
    assert distinct(0.992, 0.989) == ("99.2 %", "98.9 %")
    assert distinct(0.9901, 0.9904) == ("99.01 %", "99.04 %")
    assert distinct(0.5, 0.25) == ("50 %", "25 %")
    assert distinct(0.9, 0.9) == ("90 %", "90 %")


def test_the_cost_split_prices_the_network_where_the_spec_does_and_sums_to_the_cost():
    from teton.reliability.energy import cost_split_usd
    from teton.spec.reliability import ReliabilitySpec

    rental = ReliabilitySpec(usd_per_gpu_hour=2.0, network_usd_per_gpu_hour=0.25)
    assert cost_split_usd(rental, 1000.0, 5.0) == {"gpus": 2000.0, "energy": 0.0, "network": 250.0}
    capex = ReliabilitySpec(capex_per_gpu_usd=35064.0, depreciation_years=4.0, usd_per_kwh=0.1,
                            network_capex_per_gpu_usd=7012.8)
    split = cost_split_usd(capex, 1000.0, 5.0)
    assert split["gpus"] == pytest.approx(1000.0) and split["network"] == pytest.approx(200.0)
    assert split["energy"] == pytest.approx(500.0)  # 5 MWh x $0.1/kWh
