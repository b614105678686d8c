"""``teton report --frontier``: the table and verdict in the terminal, one JSON document with
--json, the page written, and one-line errors for bad --gpus / --systems and options that do not
go with it."""

import json

import pytest

SMALL = ("--gpus", "16384,32768", "--systems", "gb200", "--runs", "2")  # about a second


def test_frontier_json_has_rows_verdicts_and_writes_the_page(cli, tmp_path):
    out = tmp_path / "frontier.html"
    code, stdout, err = cli("report", "--frontier", *SMALL, "--out", out, "--json")
    assert code == 0, err
    d = json.loads(stdout)
    assert [r["gpus"] for r in d["rows"]] == [16128, 33264] and d["systems"] == ["gb200"]
    assert {x["key"] for x in d["limits"]} == {"ettr", "dp_exposed", "checkpoint", "startup"}
    assert d["verdicts"][0]["system"] == "gb200" and d["html"] == str(out) and out.stat().st_size > 1e6
    assert "<script" in out.read_text()[:5_000_000]


def test_frontier_table_prints_the_verdict_and_thresholds(cli, tmp_path):
    code, stdout, err = cli("report", "--frontier", *SMALL, "--out", tmp_path / "f.html")
    assert code == 0, err
    assert "what breaks first" in stdout and "gb200" in stdout and "16,128" in stdout
    assert "gb200: " in stdout and "first crossed:" in stdout and "ETTR < 90 %" in stdout
    assert "note: gb200: 16,384 GPUs run as 16,128" in stdout


@pytest.mark.parametrize("args, message", [
    (("--frontier", "--gpus", "16384,abc"), "error: --gpus = '16384,abc': expected positive integers"),
    (("--frontier", "--gpus", "512"), "error: --gpus = 512: each scale at least 1,008 GPUs"),
    (("--frontier", "--systems", "h100,b300"), "error: --systems = 'b300': unknown; did you mean"),
    (("--frontier", "--systems", ""), "error: --systems = '': one or more of h100, gb200"),
    (("--gpus", "16384"), "error: --gpus = '16384': only with --frontier"),
    (("--frontier", "--sections", "step"), "error: --sections = 'step': not with --frontier"),
    (("--frontier", "--set", "job.tp=4"), "error: --set = ['job.tp=4']: not with --frontier"),
    ((), "error: SPEC = None: give a spec file, or --frontier"),
])
def test_bad_frontier_options_are_one_line_errors(cli, tmp_path, args, message):
    code, stdout, err = cli("report", *args, "--out", tmp_path / "f.html")
    assert code == 2 and stdout == ""
    assert err.startswith(message) and err.count("\n") == 1, err


def test_a_spec_with_frontier_is_refused(cli, tmp_path, example_spec):
    code, _, err = cli("report", example_spec, "--frontier", "--out", tmp_path / "f.html")
    assert code == 2 and "builds its own specs" in err and err.count("\n") == 1
