"""Inputs an independent black-box fuzz campaign (issue 22) found to crash, hang or be accepted:
each is now one error line with exit code 2 (or, where the input is valid, a clean exit)."""

import json

import pytest

SPEC = "cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 64, tp: 2, pp: 2, seq_len: 4096, global_batch: 64}\n"
PHILLY = [{"status": "Pass", "jobid": "a1", "submitted_time": "2017-10-03 08:10:00", "attempts": [
    {"start_time": "2017-10-03 08:10:25", "end_time": "2017-10-03 08:42:21", "detail": [{"ip": "m1", "gpus": 1e400}]}]}]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "s.yaml").write_text(SPEC)
    (tmp_path / "listkey.yaml").write_text(SPEC + "? [a, b]\n: 1\n")
    (tmp_path / "dup.json").write_text('{"cluster": "meta-roce-24k", "model": "llama3-8b", "model": "llama3-70b", '
                                      '"job": {"gpus": 8}}')
    (tmp_path / "cal.json").write_text('{"efficiency_overrides": {"mem": 0.8, "mem": 0.9}}')
    (tmp_path / "philly.json").write_text(json.dumps(PHILLY).replace("Infinity", "1e400"))
    (tmp_path / "w.yaml").write_text("base: s.yaml\ngrid: {job.tp: [1, 2]}\n")
    return tmp_path


@pytest.mark.parametrize(("args", "says"), [
    (("run", "listkey.yaml"), "a mapping key must be a plain value"),  # was TypeError: unhashable type: 'list'
    (("run", "dup.json"), "model = 'given twice'"),  # JSON let the second key win
    (("calibrate", "cal.json"), "calibration.mem = 'given twice'"),
    (("schedule", "philly.json", "--format", "philly"), "no valid jobs"),  # was TypeError: float has no len()
    (("collective", "-b", "0.1", "-e", "1M"), "--min-bytes = '0.1'"),  # was a hang: sizes from 0 never grow
    (("collective", "-e", "9" * 50), "--max-bytes"),  # a 10^50-byte message was accepted
    (("collective", "--placement-study", "--trials", "1000000"), "--trials = 1000000"),  # was a hang
    (("collective", "--trials", "3"), "applies to --placement-study only"),  # was silently ignored
    (("collective", "--placement-study", "--pinning-study"), "give one study"),
    (("collective", "--cluster", ""), "--cluster = ''"),  # an empty name fell back to the default
    (("sweep", "w.yaml", "--db", "r.duckdb", "--executor", "serial", "--top", "9" * 50), "--top"),  # duckdb INT64
    (("search", "s.yaml", "--top", "9" * 50), "--top"),
    (("plan", "s.yaml", "--tokens", "1T", "--gpus", "64", "--runs", "99999999999"), "--runs"),  # MemoryError
    (("report", "s.yaml", "--sections", "goodput", "--runs", "2147483648"), "--runs"),
])
def test_fuzz_finding_is_one_error_line(cli, files, monkeypatch, args, says):
    monkeypatch.chdir(files)
    code, _, err = cli(*args)
    assert code == 2, err
    lines = err.strip().splitlines()  # a skipped line's warning may come first
    assert "Traceback" not in err and lines[-1].startswith("error:") and says in lines[-1], err
    assert [ln for ln in lines if ln.startswith("error:")] == lines[-1:]


def test_a_whole_run_figure_without_a_value_prints_as_n_a(cli, files, monkeypatch):
    """``reliability.days`` just over a whole number left ``time_to_train_days`` None, which the run
    table formatted with ``:,.1f`` (TypeError)."""
    monkeypatch.chdir(files)
    code, out, err = cli("run", "s.yaml", "--set", "reliability.days=4.0000000001")
    assert code == 0 and "Traceback" not in err, err
