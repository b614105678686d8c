"""teton plan: GPUs, layout, storage, days, cost to train a model on N tokens."""

import json
import os
import re

import pytest
import yaml
from cli_checks import one_line_error
from plotly.offline import get_plotlyjs


def _plan(cli, spec, args, *extra):
    code, out, err = cli("plan", spec, *args, *extra, "--json")
    assert code == 0, err
    return json.loads(out)


def test_json_rows_match_search_and_goodput_run_by_hand(cli, small_spec, plan_args):
    """The chosen plan's figures are what `teton search` and `teton goodput` print for it."""
    d = _plan(cli, small_spec, plan_args)
    chosen = next(p for p in d["plans"] if p["chosen"])
    rep = chosen["reproduce"]
    sets = [a for item in rep["set"] for a in ("--set", item)]
    code, out, err = cli("goodput", small_spec, *sets, "--tokens", str(rep["tokens"]), "--runs", str(rep["runs"]),
                         "--seed", str(rep["seed"]), "--json")
    assert code == 0, err
    by_hand = json.loads(out)
    for key, value in chosen["goodput"].items():
        assert by_hand[key] == value, key
    count = next(c for c in d["counts"] if c["gpus"] == chosen["gpus"] and c["cluster"] == chosen["cluster"])
    rs = count["reproduce_search"]
    code, out, err = cli("search", small_spec, *[a for i in rs["set"] for a in ("--set", i)], *rs["options"],
                         "--top", "100000", "--json")
    assert code == 0, err
    rows = [r for r in json.loads(out)["rows"] if r["fits_in_memory"]]
    for mine, theirs in zip(count["layouts"], rows, strict=False):
        assert mine["step_time_s"] == theirs["step_time_s"] and mine["memory_per_gpu_bytes"] == theirs["memory_per_gpu_bytes"]
        assert all(mine[k] == theirs[k] for k in ("tp", "cp", "pp", "dp", "virtual_stages", "micro_batch", "zero"))
    assert chosen["step_time_s"] == rows[0]["step_time_s"]


def test_every_plan_has_the_whole_answer(cli, small_spec, plan_args):
    d = _plan(cli, small_spec, plan_args)
    assert len(d["plans"]) == 3 * 2  # 3 GPU counts x 2 storage sizes
    for p in d["plans"]:
        assert p["days_p10"] <= p["days_p50"] <= p["days_p90"]
        assert p["cost_usd"] == pytest.approx(p["gpu_cost_usd"] + p["storage_cost_usd"])
        assert p["cost_usd"] == pytest.approx(sum(p["cost_split_usd"].values()))
        assert p["gpu_hours"] > 0 and p["energy_mwh"] > 0 and p["batch_tokens"] == 512 * 8192
    front = [p for p in d["plans"] if p["on_front"]]
    for f in front:  # nothing on the front is beaten on both days and cost
        assert not any(q["days_p50"] < f["days_p50"] and q["cost_usd"] < f["cost_usd"] for q in d["plans"])
    assert sum(p["chosen"] for p in d["plans"]) == 1 and d["why"]


def test_llama3_405b_on_16k_gpus_and_why_doubling_does_not_halve_the_days(cli, example_spec):
    """The 405B run for 15.6T tokens on meta-roce-24k around 16K GPUs (Llama 3's pipeline, tp8 pp16 v8)."""
    args = ("plan", example_spec, "--tokens", "15.6T", "--gpus", "8192,16384", "--runs", "200", "--executor",
            "serial", "--tp", "8", "--cp", "1", "--pp", "16", "--virtual-stages", "8")
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    d = json.loads(out)
    by = {p["gpus"]: p for p in d["plans"]}
    assert 1.0 < by[8192]["days_p50"] / by[16384]["days_p50"] < 2.0  # doubling the GPUs does not halve the days
    assert by[16384]["bubble_fraction"] > by[8192]["bubble_fraction"]  # 16 -> 8 micro-batches at the fixed batch
    assert "Scaling:" in d["why"] and "bubble" in d["why"]
    code, text, _ = cli(*args)
    assert code == 0
    for needle in ("days p50", "GPU-hours", "MWh", "cost", "16,384", "Plan:"):
        assert needle in text, needle


def test_the_deadline_picks_the_cheapest_plan_that_meets_it(cli, small_spec, plan_args):
    d = _plan(cli, small_spec, plan_args)
    deadline = sorted(p["days_p90"] for p in d["plans"])[2] + 1e-6
    d2 = _plan(cli, small_spec, plan_args, "--deadline-days", str(deadline))
    chosen = next(p for p in d2["plans"] if p["chosen"])
    meets = [p for p in d2["plans"] if p["days_p90"] <= deadline]
    cheapest = min(meets, key=lambda p: p["cost_usd"])
    assert chosen["days_p90"] <= deadline
    if chosen is not cheapest and chosen["cost_usd"] != cheapest["cost_usd"]:  # a tie within the cost band, said so
        half = (cheapest["cost_p90_usd"] - cheapest["cost_p10_usd"]) / (2 * cheapest["cost_usd"])
        assert "a tie" in d2["why"] and chosen["cost_usd"] <= cheapest["cost_usd"] * (1 + half)
        assert chosen["gpus"] <= cheapest["gpus"]  # plan.prefer's default: fewer GPUs


def test_a_deadline_only_b200s_meet_picks_b200s(cli, tmp_path, plan_args, small_dict):
    spec = {**small_dict, "plan": {"clusters": ["dgx-h100-superpod", {"base": "dgx-h100-superpod", "gpu": "b200",
                                                                  "name": "superpod-b200"}]}}
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(spec))
    d = _plan(cli, path, plan_args)
    h100 = min(p["days_p90"] for p in d["plans"] if p["cluster"] == "dgx-h100-superpod")
    b200 = min(p["days_p90"] for p in d["plans"] if p["cluster"] == "superpod-b200")
    assert b200 < h100
    d2 = _plan(cli, path, plan_args, "--deadline-days", str((b200 + h100) / 2))
    chosen = next(p for p in d2["plans"] if p["chosen"])
    assert chosen["cluster"] == "superpod-b200" and chosen["gpu"] == "b200"


@pytest.mark.parametrize("extra,needle", [
    (("--deadline-days", "0.01"), "the fastest"),
    (("--budget-usd", "1"), "the cheapest"),
    (("--tokens", "-5"), "--tokens"),
    (("--gpus", "100:50"), "--gpus"),
    (("--gpus", "3"), "whole hosts"),
    (("--storage-servers", "x"), "--storage-servers"),
    (("--global-batch", "lots"), "plan.global_batch"),
    (("--global-batch", "16M"), "no layout passes the job rules at this count and batch at 64, 128, 256 GPUs"),
])
def test_bad_inputs_are_one_line_errors(cli, small_spec, extra, needle, plan_args):
    code, _, err = cli("plan", small_spec, *plan_args, *extra)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_token_count_is_a_one_line_error(cli, small_spec):
    code, _, err = cli("plan", small_spec, "--gpus", "128")
    assert code == 2 and "--tokens" in err


def test_per_gpu_batch_scales_and_is_printed(cli, small_spec, plan_args):
    d = _plan(cli, small_spec, plan_args, "--global-batch", "per_gpu")
    by = {p["gpus"]: p["batch_tokens"] for p in d["plans"]}
    assert by[256] == 2 * by[128] == 4 * by[64]
    code, out, _ = cli("plan", small_spec, *plan_args, "--global-batch", "per_gpu")
    assert code == 0 and "8.39M" in out and "4.19M" in out  # the batch at each size, on screen


def test_html_page(cli, small_spec, tmp_path, plan_args):
    page = tmp_path / "plan.html"
    code, _, err = cli("plan", small_spec, *plan_args, "--out", page)
    assert code == 0, err
    html = page.read_text()
    assert "Pareto front" in html and "fig-front-pareto" in html
    # offline: plotly.js inlined once, nothing fetched, no URL outside the bundle
    bundle = get_plotlyjs()
    assert html.count(bundle) == 1 and not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    rest = html.replace(bundle, "")
    assert "https://" not in rest and "http://" not in rest


def _scaling_plan(gpus: int, cluster: str = "c", storage: int = 20) -> dict:
    """A plan that scales perfectly (days ~ 1 / GPUs, nothing grows): only the head line is written."""
    return {"cluster": cluster, "storage_servers": storage, "storage_request": storage, "gpus": gpus,
            "days_p50": 1e4 / gpus,
            "bubble_fraction": 0.0, "comm_fraction": 0.0, "ettr": 0.95, "step_time_s": 1e3 / gpus}


@pytest.mark.parametrize("chosen,others,pair", [
    (128, (64, 192, 256), "128 -> 256"),  # every larger count is at most 2x: the largest
    (128, (192, 512), "128 -> 192"),  # one is more than 2x: the next one up
    (128, (256,), "128 -> 256"),
    (256, (64, 128), "128 -> 256"),  # the chosen count is the largest: the next one down
])
def test_scaling_reason_compares_the_chosen_count_with_its_neighbour(chosen, others, pair):
    from teton.plan.answer import scaling_reason

    c = _scaling_plan(chosen)
    unrelated = [_scaling_plan(2 * chosen, cluster="other"), _scaling_plan(2 * chosen, storage=200)]
    text = scaling_reason(c, [c, *map(_scaling_plan, others), *unrelated])
    assert text.startswith(f"{pair} GPUs (") and text.endswith("(scaling is near-linear)."), text
    assert scaling_reason(c, [c, *unrelated]) is None


def test_the_scaling_reason_names_spare_hosts_when_they_sink_the_ettr():
    """A job that takes every host waits for repairs: ETTR falls for want of spares, which the
    reason says (with goodput's advice), not 'failures at scale'."""
    from teton.plan.answer import scaling_reason

    small, big = _scaling_plan(128), _scaling_plan(256)
    wait = ("ETTR 4.0%: 96% of the wall time is spent waiting for a spare host. There are 0 spare hosts; "
            "add spares: reliability.spare_hosts = 39")
    small["goodput"], big["goodput"] = {"mtbi_h": 4.0, "warnings": []}, {"mtbi_h": 2.0, "warnings": [wait]}
    big |= {"ettr": 0.04, "days_p50": small["days_p50"] * 10}
    text = scaling_reason(small, [small, big])
    assert "failed hosts wait for spares: 96% of the wall time" in text and "failures at scale" not in text


def test_the_scaling_reason_writes_the_layout_as_text_not_a_dict():
    """More GPU-time per step and nothing else growing: the cause names the larger plan's layout as
    the tables write it (it printed the row's raw dict)."""
    from teton.plan.answer import scaling_reason

    a = {**_scaling_plan(128), "layout": {"tp": 8, "cp": 1, "pp": 2, "dp": 8, "ep": 1}}
    b = {**_scaling_plan(256), "step_time_s": 1.5 * 1e3 / 256, "days_p50": 1.5 * 1e4 / 256,
         "layout": {"tp": 8, "cp": 1, "pp": 2, "dp": 16, "ep": 1}}
    text = scaling_reason(a, [a, b])
    assert "50 % more GPU-time (tp8 cp1 pp2 dp16)" in text, text
    assert "{" not in text and "'tp'" not in text, text


def _die(task):
    os._exit(9)  # a worker killed mid-task (the OOM killer, kill -9)


def test_a_killed_plan_worker_is_a_one_line_error_naming_the_executor():
    """It was a BrokenProcessPool traceback; ``teton sweep`` says it in one line, and so does plan."""
    from teton.errors import SpecError
    from teton.plan import run_tasks

    with pytest.raises(SpecError, match=r"^executor = 'local': a worker died \(BrokenProcessPool: killed or "
                                        r"out of memory\?\); 0 of 2 GPU counts were evaluated"):
        run_tasks([1, 2], "local", 2, evaluate=_die)


def test_an_moe_plan_carries_expert_tp_and_the_rank_order(cli, tmp_path):
    """A plan of an MoE model chooses etp and the order with the other degrees (issue 25), shows
    them in its layout ("etp1 tp-cp-ep-dp-pp") and hands ``teton search`` the --etp it searched."""
    from teton.plan.answer import layout_text

    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
                                    "job": {"gpus": 64, "tp": 2, "pp": 2, "ep": 8, "seq_len": 4096,
                                            "global_batch": 512}}))
    d = _plan(cli, path, ("--tokens", "100B", "--gpus", "64", "--runs", "50", "--executor", "serial", "--tp", "2",
                          "--cp", "1", "--pp", "2", "--virtual-stages", "1", "--ep", "8", "--etp", "1,2"))
    chosen = next(p for p in d["plans"] if p["chosen"])
    lay = chosen["layout"]
    assert lay["etp"] in (1, 2) and lay["parallel_order"] in (["tp", "cp", "ep", "dp", "pp"], ["tp", "cp", "pp", "ep", "dp"])
    assert "-".join(lay["parallel_order"]) in layout_text(chosen) and ("etp1" in layout_text(chosen)) == (lay["etp"] == 1)
    options = d["counts"][0]["reproduce_search"]["options"]
    assert options[options.index("--etp") + 1] == "1,2"
    assert all("etp" in r and "parallel_order" in r for r in d["counts"][0]["layouts"])
    dense = {"tp": 8, "cp": 1, "pp": 2, "dp": 8, "ep": 1}
    assert layout_text({"layout": dense}) == "tp8 cp1 pp2 dp8"  # a dense layout's text is as before


def test_the_step_time_band_is_drawn_as_the_p10_p90_interval_it_is():
    """A plan scales each Monte Carlo run by a factor whose 10th and 90th percentiles are the band's
    ends (a fifth of the draws outside it, as a fifth of real runs), not uniformly inside it."""
    import numpy as np

    from teton.plan.evaluate import step_factors

    f = step_factors(25.8, 25.2, 46.7, 200_000, seed=0)
    p10, p50, p90 = np.percentile(f * 25.8, [10, 50, 90])
    assert p10 == pytest.approx(25.2, rel=0.01) and p90 == pytest.approx(46.7, rel=0.01)
    assert p50 == pytest.approx((25.2 * 46.7) ** 0.5, rel=0.01)  # the geometric middle of a skewed band
    assert 0.18 < np.mean((f * 25.8 < 25.2) | (f * 25.8 > 46.7)) < 0.22
    assert np.array_equal(step_factors(25.8, 25.2, 46.7, 10, seed=3), step_factors(25.8, 25.2, 46.7, 10, seed=3))


def test_a_batch_no_layout_divides_names_the_batch_and_a_power_of_two(cli, small_spec, plan_args):
    """1,001 sequences divide over no data-parallel degree: the error is about --global-batch (not
    --gpus, which the user may not have given) and names a batch that divides."""
    code, _, err = cli("plan", small_spec, *plan_args, "--global-batch", str(1001 * 8192))
    line = one_line_error(code, err, "--global-batch")
    assert "1,001 sequences" in line and "1,024 sequences" in line


def test_token_counts_print_as_they_are_typed():
    """``teton plan``'s counts read back in parse_count's suffixes, three significant digits; a value
    that rounds to a thousand of one unit moves up to the next (999.96K reads 1M)."""
    from teton.units import format_count, parse_count

    assert [format_count(x) for x in (1, 4096, 16_777_216, 15.6e12, 1e9, 999_960)] == \
        ["1", "4.1K", "16.8M", "15.6T", "1B", "1M"]
    assert parse_count(format_count(2.5e12), "tokens") == 2.5e12
