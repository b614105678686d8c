"""``teton checkpoint``: JSON contract (strict JSON), the table against the JSON, scaling plot,
--measure, data loading, one-line errors."""

from __future__ import annotations

import json
import sys

import pytest
from cli_checks import error_line
from layouts import LLAMA3_405B_16K

from teton.cli import main

KEYS = {"checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s", "checkpoint_restore_broadcast_s",
        "bytes_per_gpu_min", "bytes_per_gpu_max", "total_bytes", "bottleneck", "delivered_bw_bytes_s"}
BOTTLENECKS = {"ssd", "server_nic", "frontend_fabric", "fuse_client", "metadata"}


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "spec.json"
    p.write_text(json.dumps(LLAMA3_405B_16K))
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
    # the study writes on the storage share other jobs leave the job, as the save does: at the job's
    # own 16,384 writers it takes the save's time (it had used the whole storage: 6.5 TB/s, not 4.35)
    assert d["scaling"][-1]["time_s"] == pytest.approx(d["sync_save_s"], rel=0.05)


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


def test_checkpoint_interval_inf_rejected(cli, example_spec):
    code, _, err = cli("checkpoint", example_spec, "--set", "storage.checkpoint.interval_s=inf")
    assert "storage.checkpoint.interval_s" in error_line(code, err)


def test_inf_override_is_one_line_error(cli, example_spec):
    code, _, err = cli("checkpoint", example_spec, "--json", "--set", "storage.ssd_write_gbytes_s=inf")
    assert "storage.ssd_write_gbytes_s" in error_line(code, err)


@pytest.mark.parametrize("preset", ["tectonic-llama3", "hammerspace-pnfs", "local-nvme"])
def test_json_is_strict_json(cli, example_spec, preset):
    code, out, err = cli("checkpoint", example_spec, "--json", "--set", f"storage.preset={preset}")
    assert code == 0, err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_tokens_per_s_zero_is_rejected_not_ignored(cli, example_spec):
    """``--tokens-per-s 0`` silently meant 'not given' (data loading skipped) while -5 was an
    error naming ``tokens_per_s``; both now name the option."""
    for v in ("0", "-5", "nan"):
        code, _, err = cli("checkpoint", example_spec, "--tokens-per-s", v)
        assert "--tokens-per-s" in error_line(code, err)


def test_writers_beyond_the_job_is_rejected(cli, example_spec):
    """``--writers 100000000`` on a 16,384-GPU job was silently capped to 16,384 writers."""
    code, _, err = cli("checkpoint", example_spec, "--writers", "100000000")
    line = error_line(code, err)
    assert "--writers" in line and "16384" in line
    code, out, err = cli("checkpoint", example_spec, "--writers", "16384", "--json")
    assert code == 0, err
    assert json.loads(out)["writers"] == 16384


def test_table_matches_json(cli, example_spec):
    code, out, err = cli("checkpoint", example_spec, "--json")
    assert code == 0, err
    d = json.loads(out)
    code, table, err = cli("checkpoint", example_spec)
    assert code == 0, err
    assert f"{d['sync_save_s']:.3f} s" in table
    assert f"{d['async_blocking_s']:.4f} s" in table
    assert f"{d['total_bytes'] / 1e9:,.3f} GB" in table
    assert f"{d['checkpoint_restore_all_read_s']:.3f} s ({d['restore_bottleneck']})" in table
    # the sustainable interval is total bytes over the write rate other jobs and the data loader leave
    assert d["min_checkpoint_interval_s"] == pytest.approx(d["total_bytes"] / d["storage_available_write_bytes_s"])
    assert d["storage_available_write_bytes_s"] < d["storage_sustained_write_bytes_s"]
    assert f"{d['storage_other_jobs_share']:.1%} ({d['storage_other_jobs_share_source']})" in table
    # a sync save pauses for the whole save; async for the device-to-host copy only
    assert d["async_blocking_s"] < d["sync_save_s"] and d["checkpoint_blocking_s"] == d["async_blocking_s"]


def test_spec_data_loading_tokens_per_s_is_used(cli, example_spec):
    """``storage.data_loading.tokens_per_s`` in the spec was ignored (the step model's figure won);
    a typo in ``storage.data_loading`` was silently ignored too."""
    code, out, err = cli("checkpoint", example_spec, "--json", "--set", "storage.data_loading.tokens_per_s=1e9")
    assert code == 0, err
    dl = json.loads(out)["data_loading"]
    assert dl["tokens_per_s"] == 1e9 and dl["needed_bytes_s"] == pytest.approx(1e9 * dl["bytes_per_token"])
    code, out, err = cli("checkpoint", example_spec, "--json", "--tokens-per-s", "2e6",
                         "--set", "storage.data_loading.tokens_per_s=1e9")
    assert json.loads(out)["data_loading"]["tokens_per_s"] == 2e6  # the option wins over the spec
    code, _, err = cli("checkpoint", example_spec, "--set", "storage.data_loading.tokens_per_s=0")
    assert "storage.data_loading.tokens_per_s" in error_line(code, err)
    code, _, err = cli("checkpoint", example_spec, "--set", "storage.data_loading.tokenz_per_s=1e9")
    assert "storage.data_loading.tokenz_per_s" in error_line(code, err)


def test_measure_does_not_offer_a_calibration_from_metadata_bound_files(cli, example_spec, tmp_path):
    """``--measure DIR`` at the default scale writes ~35 kB shards: the model is metadata-bound,
    yet the verb printed '--set storage.ssd_write_gbytes_s=0.1' as a drive calibration."""
    code, out, err = cli("checkpoint", example_spec, "--measure", tmp_path, "--files", "8", "--scale", "1e-5")
    assert code == 0, err
    assert "metadata-bound" in out and "ssd_write_gbytes_s" not in out
    code, out, err = cli("checkpoint", example_spec, "--measure", tmp_path, "--files", "8", "--scale", "1e-5", "--json")
    assert json.loads(out)["measure"]["calibration"]["bandwidth_bound"] is False
    assert list(tmp_path.iterdir()) == []
