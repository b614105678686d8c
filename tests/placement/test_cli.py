"""``teton schedule`` and ``teton placement`` end to end (in-process)."""

import json
from pathlib import Path

import pytest
import yaml

import teton
import teton.placement.traces as tr

DATA = Path(tr.__file__).resolve().parents[1] / "data" / "traces"


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
