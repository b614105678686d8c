"""QA pass on ``teton placement`` and ``teton schedule``: defects a demanding user hit."""

from __future__ import annotations

import json

import pytest

TRACE_HEADER = "job_id,arrival_s,gpus,duration_s\n"


def _one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_schedule_negative_seed_is_one_line_error(cli):
    code, _, err = cli("schedule", "synthetic:10", "--seed", "-1")
    assert "--seed" in _one_line_error(code, err)


@pytest.mark.parametrize("extra", [["--policy", "random"], ["--occupancy", "0.2"]])
def test_placement_negative_seed_is_one_line_error(cli, example_spec, extra):
    code, _, err = cli("placement", example_spec, "--seed", "-1", *extra)
    assert "--seed" in _one_line_error(code, err)


def test_cluster_option_accepts_a_spec_file(cli, tmp_path):
    """``--cluster examples/custom-cluster.yaml`` (a spec whose cluster: section is the cluster)
    printed a 5-error pydantic traceback; the spec's cluster is what a user means."""
    code, out, err = cli("schedule", "synthetic:20", "--cluster", "examples/custom-cluster.yaml",
                         "--policy", "fifo", "--json")
    assert code == 0, err
    assert json.loads(out)["jobs_finished"] == 20
    conf = tmp_path / "topology.conf"
    code, _, err = cli("placement", "--slurm-topology", conf, "--cluster", "examples/custom-cluster.yaml")
    assert code == 0, err
    assert conf.read_text().startswith("SwitchName=") or "SwitchName=" in conf.read_text()


def test_bad_cluster_file_is_one_line_error(cli, tmp_path):
    bad = tmp_path / "cl.yaml"
    bad.write_text("base: meta-roce-24k\nhosts: -3\n")
    code, _, err = cli("schedule", "synthetic:10", "--cluster", bad)
    assert "hosts" in _one_line_error(code, err)
    code, _, err = cli("placement", "--slurm-topology", tmp_path / "t.conf", "--cluster", bad)
    assert "hosts" in _one_line_error(code, err)


def test_slurm_topology_unwritable_path_is_one_line_error(cli, tmp_path):
    code, _, err = cli("placement", "--slurm-topology", tmp_path / "no" / "dir" / "t.conf", "--cluster", "meta-roce-24k")
    assert "--slurm-topology" in _one_line_error(code, err)


def test_schedule_trace_where_no_job_fits_is_an_error(cli, tmp_path):
    """Every job larger than the cluster: a table of zeros (0 / 0 jobs, slowdown 0.000) came out."""
    p = tmp_path / "t.csv"
    p.write_text(TRACE_HEADER + "big,0,30000,3600\n")
    code, _, err = cli("schedule", p, "--cluster", "meta-roce-24k")
    line = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(line) == 1 and "24576" in line[0], err


def test_schedule_oversized_job_warned_once(cli, tmp_path):
    """The warning for a job larger than the cluster was printed once per policy (3 times)."""
    p = tmp_path / "t.csv"
    p.write_text(TRACE_HEADER + "a,0,8,3600\nbig,10,30000,3600\nb,20,16,600\n")
    code, out, err = cli("schedule", p, "--cluster", "meta-roce-24k", "--json")
    assert code == 0, err
    assert err.count("job big: gpus = 30000 exceeds") == 1, err
    d = json.loads(out)
    assert [r["jobs_finished"] for r in d["results"]] == [2, 2, 2]


def test_placement_json_matches_table_and_occupancy_is_reported(cli, example_spec):
    code, out, err = cli("placement", example_spec, "--occupancy", "0.2", "--policy", "topology-aware",
                         "--policy", "fragmented", "--json")
    assert code == 0, err
    rows = json.loads(out)
    code, table, err = cli("placement", example_spec, "--occupancy", "0.2", "--policy", "topology-aware",
                           "--policy", "fragmented")
    assert code == 0, err
    for r in rows:
        assert f"{r['step_time_s']:.3f} s" in table and f"{r['slowdown']:.3f}" in table
        assert r["occupancy"] == pytest.approx(0.2, abs=1 / 24576 * 4)
    assert f"other jobs hold {rows[0]['occupancy'] * 100:.0f} %" in table
