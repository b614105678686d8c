import json

import pytest
from cli_checks import one_line_error

from teton.network.analytical import bus_factor


def test_json_rows_follow_nccl_tests_definitions(cli):
    code, out, err = cli("collective", "--cluster", "meta-roce-24k", "--op", "all_reduce", "--gpus", "16",
                         "--min-bytes", "1M", "--max-bytes", "8M", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["size_bytes"] for r in rows] == [2**20, 2**21, 2**22, 2**23]  # step factor 2 (-f 2)
    for r in rows:
        assert set(r) == {"size_bytes", "time_s", "algbw_gbytes_s", "busbw_gbytes_s"}
        assert r["algbw_gbytes_s"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gbytes_s"] == pytest.approx(r["algbw_gbytes_s"] * bus_factor("all_reduce", 16))


def test_table_and_analytical_fidelity(cli):
    code, out, _ = cli("collective", "--op", "all_gather", "--gpus", "64", "--fidelity", "analytical",
                       "-b", "1K", "-e", "4K", "-f", "4")
    assert code == 0
    assert "busbw" in out and "4,096" in out


def test_routing_and_failures_options(cli):
    code, out, err = cli("collective", "--op", "all_reduce", "--gpus", "128", "--routing", "ecmp", "--qps", "1",
                         "--fail-links", "50", "--policy", "random", "--seed", "3", "-b", "1G", "-e", "1G", "--json",
                         "--fidelity", "flow")
    assert code == 0, err
    assert json.loads(out)[0]["busbw_gbytes_s"] > 0


@pytest.mark.parametrize("args,needle", [
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "30000"], "--gpus"),
    (["--op", "all_gatherx"], "--op"),
    (["--routing", "ospf", "--fidelity", "flow"], "--routing"),
    (["--algo", "bruck"], "--algo"),
    (["--min-bytes", "1Q"], "--min-bytes"),
    (["--max-bytes", "-5"], "--max-bytes"),
    (["--min-bytes", "1G", "--max-bytes", "1M"], "--min-bytes"),
    (["--cluster", "meta-roce-48k"], "--cluster"),
    (["--policy", "best"], "--policy"),
    (["--fidelity", "packet"], "--fidelity"),
    (["--fail-links", "-1", "--fidelity", "flow"], "--fail-links"),
    (["--routing", "ecmp"], "--fidelity flow"),  # routing means nothing to the analytical model
    (["--qps", "0", "--fidelity", "flow"], "--qps"),
    (["--gpus", "abc"], "--gpus"),
    (["--step-factor", "1"], "--step-factor"),
    (["--leaf-uplink-ratio", "100", "--fidelity", "flow"], "--leaf-uplink-ratio"),
    (["--seed", "-1"], "--seed"),  # accepted before
])
def test_bad_arguments_give_one_line_errors_and_exit_2(cli, args, needle):
    code, out, err = cli("collective", *args)
    assert code == 2
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
    if " " not in needle:  # the option at fault, as a flag (its parameter's name before issue 22)
        assert lines[0].startswith(f"error: {needle} = "), lines[0]


def test_fidelity_defaults_to_analytical_as_in_every_verb(cli):
    """--fidelity means one thing with one default everywhere (analytical, as a spec's network.fidelity)."""
    _, default, _ = cli("collective", "--gpus", "128", "-b", "1G", "-e", "1G", "--json")
    _, analytical, _ = cli("collective", "--gpus", "128", "-b", "1G", "-e", "1G", "--json", "--fidelity", "analytical")
    assert json.loads(default) == json.loads(analytical)
    code, _, err = cli("collective", "--gpus", "128", "--fail-links", "3")
    assert code == 2 and "--fidelity flow only" in err


@pytest.mark.parametrize("out_path,needle", [("NODIR/x.png", "existing directory"), ("x.txt", "image path")])
def test_placement_study_checks_out_before_running(tmp_path, cli, out_path, needle):
    # was: a traceback from matplotlib after the whole study had run
    code, _, err = cli("collective", "--placement-study", "--trials", "1", "--png", tmp_path / out_path)
    one_line_error(code, err, needle)


def test_pinning_study_fits_a_small_cluster(cli):
    # was: "groups = 'GPU ids 0..10239': must lie in 0..1119": 64 racks asked of a 7-rack cluster
    code, out, err = cli("collective", "--cluster", "dgx-a100-superpod", "--pinning-study", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["racks"] == 7 and len(d["normalized_busbw"]) == 6


@pytest.mark.parametrize("args", [("--png", "plot.png"), ("--neighbours",)])
def test_study_only_options_are_not_silently_ignored(cli, args):
    code, _, err = cli("collective", "--gpus", "8", *args)
    one_line_error(code, err, "--placement-study only")


def test_an_error_names_flags_not_parameters(cli):
    """``--min-bytes 1G --max-bytes 1M`` said ``must not exceed max_bytes``: a name no user types."""
    code, _, err = cli("collective", "--min-bytes", "1G", "--max-bytes", "1M")
    line = one_line_error(code, err, "--min-bytes = ")
    assert "max_bytes" not in line and "min_bytes" not in line
