"""``teton checkpoint``: JSON contract, table, scaling plot, --measure, one-line errors."""

from __future__ import annotations

import json
import sys

import pytest

from teton.cli import main

SPEC = {"cluster": "meta-roce-24k", "model": "llama3-405b",
        "job": {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048, "zero": 1,
                "pp_schedule": "interleaved", "virtual_stages": 8, "pp_embedding_slots": True}}
KEYS = {"checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s", "checkpoint_restore_broadcast_s",
        "bytes_per_gpu_min", "bytes_per_gpu_max", "total_bytes", "bottleneck", "delivered_bw_bytes_s"}
BOTTLENECKS = {"ssd", "server_nic", "frontend_fabric", "fuse_client", "metadata"}


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(SPEC))
    return p


def run(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["teton", "checkpoint", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_contract(monkeypatch, capsys, spec_file):
    code, out, _ = run(monkeypatch, capsys, spec_file, "--json", "--tokens-per-s", "2.6e6")
    assert code == 0
    d = json.loads(out)
    assert KEYS <= set(d)
    assert d["bottleneck"] in BOTTLENECKS
    assert 1e6 <= d["bytes_per_gpu_min"] <= d["bytes_per_gpu_max"] <= 4e9
    assert d["data_loading"]["stalls"] is False
    assert d["devx_job_start"]["clients"] == 2048


def test_table_and_options(monkeypatch, capsys, spec_file):
    code, out, _ = run(monkeypatch, capsys, spec_file, "--mode", "sync", "--writer-policy", "one_replica",
                       "--tokens-per-s", "2.6e6")
    assert code == 0
    assert "bottleneck" in out and "one_replica" in out and "sync" in out


def test_writers_what_if(monkeypatch, capsys, spec_file):
    code, out, _ = run(monkeypatch, capsys, spec_file, "--json", "--writers", "64", "--tokens-per-s", "1e6")
    d = json.loads(out)
    assert code == 0 and d["writers"] == 64
    assert d["bytes_per_gpu_max"] == pytest.approx(d["total_bytes"] / 64)


def test_scaling_plot(monkeypatch, capsys, spec_file, tmp_path):
    png = tmp_path / "scaling.png"
    code, out, _ = run(monkeypatch, capsys, spec_file, "--json", "--scaling", "--png", png, "--tokens-per-s", "1e6")
    d = json.loads(out)
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert [r["writers"] for r in d["scaling"]][0] == 8 and d["scaling"][-1]["writers"] == 16384


def test_measure_json(monkeypatch, capsys, spec_file, tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    code, out, _ = run(monkeypatch, capsys, spec_file, "--json", "--measure", d, "--scale", "1e-6",
                       "--files", "8", "--writers", "2")
    assert code == 0
    m = json.loads(out)["measure"]
    assert m["files"] == 8 and m["files_removed"] and list(d.iterdir()) == []


@pytest.mark.parametrize("args, text", [
    (["--measure", "/nonexistent-dir-xyz"], "--measure"),
    (["--mode", "lazy"], "--mode"),
    (["--set", "storage.preset=nope"], "storage.preset"),
    (["--set", "storage.checkpoint.writers=all"], "storage.checkpoint.writers"),
    (["--writers", "0"], "--writers"),
])
def test_errors_exit_2_one_line(monkeypatch, capsys, spec_file, args, text):
    code, _, err = run(monkeypatch, capsys, spec_file, *args)
    assert code == 2
    assert err.strip().startswith("error:") and text in err and err.strip().count("\n") == 0
