"""teton compare: two variants side by side, B against A."""

import json

import pytest
from cli_checks import one_line_error

import teton


def test_compare_overrides_against_the_same_spec(cli, example_spec):
    code, out, _ = cli("compare", example_spec, "--b", "job.precision=fp8", "--json")
    assert code == 0
    d = json.loads(out)
    a, b = teton.simulate(example_spec), teton.simulate(example_spec, ["job.precision=fp8"])
    assert d["a"]["step_time_s"] == pytest.approx(a.step_time_s) and d["b"]["step_time_s"] == pytest.approx(b.step_time_s)
    assert d["change"]["step_time_s"] == pytest.approx(b.step_time_s / a.step_time_s - 1)
    assert d["breakdown_delta_s"]["compute"] == pytest.approx(b.breakdown["compute"] - a.breakdown["compute"])
    assert d["breakdown_delta_s"]["tp_comm"] == pytest.approx(0.0)  # fp8 leaves TP communication alone
    # a share (MFU) changes by percentage points, printed so: not the relative change beside it
    assert d["change_points"]["mfu_bf16"] == pytest.approx(100 * (b.mfu_bf16 - a.mfu_bf16))
    code, table, _ = cli("compare", example_spec, "--b", "job.precision=fp8")
    assert f"{d['change_points']['mfu_bf16']:+.1f} pts" in table


def test_compare_two_files_table_and_errors(cli, example_spec):
    fp8 = example_spec.parent / "llama3-405b-megatron-fp8.yaml"
    code, out, _ = cli("compare", example_spec, fp8)
    assert code == 0 and "B against A" in out and "tp_comm" in out and "step time" in out
    code, _, err = cli("compare", example_spec)
    assert code == 2 and err.startswith("error: SPEC_B") and err.count("\n") == 1
    code, _, err = cli("compare", example_spec, "--b", "job.tp=0")
    assert code == 2 and "job.tp" in err and err.count("\n") == 1


def test_compare_error_names_the_variant(cli, example_spec):
    code, _, err = cli("compare", example_spec, "--b", "job.tp=abc")
    one_line_error(code, err, "variant B (--b job.tp=abc)")


def test_compare_validates_both_variants_before_simulating(cli, example_spec, monkeypatch):
    import teton.engine.step

    def never(*args, **kwargs):
        raise AssertionError("simulated variant A before checking variant B")

    monkeypatch.setattr(teton.engine.step, "simulate_step", never)
    code, _, err = cli("compare", example_spec, "--b", "job.precision=fp4")
    one_line_error(code, err, "variant B (--b job.precision=fp4)")


def test_compare_set_applies_to_both_variants_then_each_side(cli, example_spec):
    """--set overrides both variants (two spec files, or one with --a / --b), before --a / --b."""
    both = ["job.gpus=8192", "job.dp=64"]
    code, out, err = cli("compare", example_spec, "--set", both[0], "--set", both[1], "--b", "job.precision=fp8",
                         "--json")
    assert code == 0, err
    d = json.loads(out)
    a, b = teton.simulate(example_spec, both), teton.simulate(example_spec, [*both, "job.precision=fp8"])
    assert d["a"]["step_time_s"] == a.step_time_s and d["b"]["step_time_s"] == b.step_time_s
    fp8 = example_spec.parent / "llama3-405b-megatron-fp8.yaml"
    code, out, err = cli("compare", example_spec, fp8, "--set", "job.global_batch=4096", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["a"]["tokens_per_step"] == d["b"]["tokens_per_step"] == 4096 * 8192


def test_compare_errors_name_the_flag_and_only_the_culprit(cli, example_spec):
    # tp 3 breaks tp*cp*pp*dp = gpus, which is reported on job.dp: the --b that set tp is blamed, not --set dp
    code, _, err = cli("compare", example_spec, "--set", "job.gpus=8192", "--set", "job.dp=64", "--b", "job.tp=3")
    assert code == 2 and err.count("\n") == 1, err
    assert "variant B (--b job.tp=3)" in err and "job.dp=64" not in err.split(":")[1], err
    code, _, err = cli("compare", example_spec, "--set", "job.gpus=8192", "--b", "job.precision=fp8")
    assert code == 2 and "variant A (--set job.gpus=8192)" in err, err
