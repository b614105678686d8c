"""Defects a new user hit (issue 13): each test failed before its fix."""

import json
from pathlib import Path

import yaml

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "a100-2rank-nccl.kineto.json.gz"


def test_binary_calibration_files_are_one_line_errors(tmp_path, cli):
    path = tmp_path / "calibration.json"
    path.write_bytes(bytes(range(256)) * 4)  # not UTF-8
    for args in (("calibrate", str(path)), ("validate", "--calibration", str(path))):
        code, _, err = cli(*args)
        assert code == 2 and "not a UTF-8 JSON file" in err and len(err.strip().splitlines()) == 1, err


def test_teton_alone_prints_its_help_and_no_empty_error(cli):
    code, out, err = cli()
    assert "Usage" in out + err and "run" in out + err
    assert "error: teton:" not in err


def test_a_filter_that_drops_every_point_leaves_no_results_file(tmp_path, cli, example_spec):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"base": str(example_spec), "grid": {"job.tp": [4, 8]},
                                     "filter": ["job.tp > 100"]}))
    out = tmp_path / "results.duckdb"
    code, _, err = cli("sweep", str(sweep), "--out", str(out))
    assert code == 2 and "drops every one" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("results.duckdb*"))


def test_fit_json_is_one_document(cli, tmp_path):
    code, out, _ = cli("fit", "--trace", str(TRACE), "--json")
    assert code == 0 and json.loads(out)["gpu"] == "a100-40gb"
