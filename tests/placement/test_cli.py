"""``teton schedule`` and ``teton placement`` end to end (in-process): JSON and table, --cluster as a
spec file, jobs larger than the cluster, one-line errors."""

import json
from pathlib import Path

import pytest
import yaml
from cli_checks import error_line

import teton
import teton.placement.traces as tr

DATA = Path(tr.__file__).resolve().parents[1] / "data" / "traces"
TRACE_HEADER = "job_id,arrival_s,gpus,duration_s\n"


def test_schedule_json_side_by_side(cli):
    code, out, err = cli("schedule", "synthetic:300", "--cluster", "meta-roce-24k", "--json", "--seed", "4")
    assert code == 0, err
    d = json.loads(out)
    assert [r["policy"] for r in d["results"]] == ["fifo", "backfill", "topology-aware"]
    for r in d["results"]:
        assert r["jobs_finished"] == 300
        assert {"utilisation_mean", "queue_delay_s", "slowdown", "fragmentation_mean"} <= set(r)


def test_schedule_table_and_public_format(cli):
    code, out, err = cli("schedule", DATA / "philly-format-synthetic-sample.json", "--cluster",
                         "dgx-h100-superpod", "--policy", "topology-aware")
    assert code == 0, err
    assert "topology-aware" in out and "40 / 40" in out


def test_schedule_malformed_lines(cli, tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,arrival_s,gpus,duration_s\na,0,8,100\nb,1,eight,100\nc,2,8,100\n")
    code, out, err = cli("schedule", p, "--policy", "fifo", "--json")
    assert code == 0
    assert "t.csv:3: gpus = 'eight': not a number; skipped" in err
    assert json.loads(out)["jobs"] == 2
    code, out, err = cli("schedule", p, "--policy", "fifo", "--strict")
    assert code == 2
    assert "trace line = 3" in err and "Traceback" not in err
    code, _, err = cli("schedule", p, "--policy", "sjf")
    assert code == 2 and "--policy" in err


@pytest.mark.skipif(getattr(teton, "simulate", None) is None, reason="teton.simulate not available")
def test_placement_json_rows(cli, tmp_path, llama3_405b_16k):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(llama3_405b_16k))
    code, out, err = cli("placement", spec, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["policy"] for r in rows] == ["topology-aware", "linear", "random", "fragmented"]
    for r in rows:
        assert isinstance(r["step_time_s"], float) and isinstance(r["breakdown"], dict)
    best = min(r["step_time_s"] for r in rows)
    assert rows[0]["step_time_s"] == best
    code, out, err = cli("placement", spec, "--set", "job.gpus=4096", "--set", "job.global_batch=512",
                         "--occupancy", "0.5", "--policy", "topology-aware", "--policy", "fragmented")
    assert code == 0, err
    assert "fragmented" in out and "tp" in out
    code, _, err = cli("placement", spec, "--occupancy", "2")
    assert code == 2 and "occupancy" in err


def test_placement_slurm_export(cli, tmp_path):
    out_file = tmp_path / "topology.conf"
    code, _, err = cli("placement", "--slurm-topology", out_file, "--cluster", "meta-ib-24k")
    assert code == 0, err
    from teton.placement.slurm import parse_topology_conf

    conf = parse_topology_conf(out_file.read_text())
    assert len(conf) == 768 + 24 + 1
    code, _, err = cli("placement")
    assert code == 2


def test_schedule_negative_seed_is_one_line_error(cli):
    code, _, err = cli("schedule", "synthetic:10", "--seed", "-1")
    assert "--seed" in error_line(code, err)


@pytest.mark.parametrize("extra", [["--policy", "random"], ["--occupancy", "0.2"]])
def test_placement_negative_seed_is_one_line_error(cli, example_spec, extra):
    code, _, err = cli("placement", example_spec, "--seed", "-1", *extra)
    assert "--seed" in error_line(code, err)


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
    assert "hosts" in error_line(code, err)
    code, _, err = cli("placement", "--slurm-topology", tmp_path / "t.conf", "--cluster", bad)
    assert "hosts" in error_line(code, err)


def test_slurm_topology_unwritable_path_is_one_line_error(cli, tmp_path):
    code, _, err = cli("placement", "--slurm-topology", tmp_path / "no" / "dir" / "t.conf", "--cluster", "meta-roce-24k")
    assert "--slurm-topology" in error_line(code, err)


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


def test_slurm_topology_with_json_prints_one_json_document(cli, tmp_path):
    """--json printed nothing when only the topology file was written (the fuzz found it)."""
    out = tmp_path / "topology.conf"
    code, stdout, err = cli("placement", "--slurm-topology", str(out), "--cluster", "meta-rsc-16k", "--json")
    assert code == 0, err
    d = json.loads(stdout)
    assert d["slurm_topology"] == str(out) and d["switches"] == out.read_text().count("SwitchName=")
