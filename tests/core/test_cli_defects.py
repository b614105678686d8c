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
    code, _, err = cli("sweep", str(sweep), "--db", str(out))
    assert code == 2 and "drops every one" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("results.duckdb*"))


def test_fit_json_is_one_document(cli, tmp_path):
    code, out, _ = cli("fit", "--trace", str(TRACE), "--json")
    assert code == 0 and json.loads(out)["gpu"] == "a100-40gb"


def test_set_errors_blame_the_set_not_the_file(cli, example_spec):
    """A cross-field rule broken by an override names the --set that broke it, not a file line."""
    for item in ("job.tp=3", "job.micro_batch=4096"):
        code, _, err = cli("run", str(example_spec), "--set", item)
        assert code == 2 and err.startswith(f"error: --set {item}:") and ".yaml:" not in err, err
    # two overrides, one of which breaks the spec on its own: only that one is named
    code, _, err = cli("run", str(example_spec), "--set", "job.seq_len=8192", "--set", "model.layers=7")
    assert code == 2 and err.startswith("error: --set model.layers=7:") and "seq_len" not in err, err


def test_a_file_error_is_still_blamed_on_the_file(tmp_path, cli, example_spec):
    bad = tmp_path / "bad.yaml"
    bad.write_text(example_spec.read_text().replace("dp: 128", "dp: 64"))
    code, _, err = cli("run", str(bad), "--set", "job.seq_len=8192")
    assert code == 2 and "bad.yaml:" in err and "--set" not in err, err


def test_set_without_a_value_keeps_the_verb_prefix(cli, example_spec):
    code, _, err = cli("run", str(example_spec), "--set")
    assert code == 2 and err.strip() == "error: teton run: Option '--set' requires an argument."


def test_the_placement_table_says_leaves(cli):
    from teton.placement.compare import plural

    assert [plural(n) for n in ("leaf", "rack", "switch", "pod")] == ["leaves", "racks", "switches", "pods"]
