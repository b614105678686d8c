"""Real local checkpoint I/O (--measure): files written, read, compared, always removed."""

from __future__ import annotations

import errno
import os

import pytest

from teton.errors import SpecError
from teton.storage import measure as measure_mod
from teton.storage.measure import measure


@pytest.fixture(scope="module")
def small_spec():
    from teton.spec import load_spec

    return load_spec({"cluster": "meta-roce-24k", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 8, "pp": 2, "seq_len": 8192, "global_batch": 64, "zero": 1}})


def test_measure_writes_reads_and_removes(small_spec, tmp_path):
    out = measure(small_spec, tmp_path, scale=1e-4, writers=3, max_files=16)
    assert out["files"] == 16 and out["writers"] == 3
    # llama3-8b on 64 GPUs: 14 bytes/param spread over 64 ranks = 1.76 GB per rank, x 1e-4
    per_rank = 14 * small_spec.model.total_params() / 64 * 1e-4
    assert out["file_bytes_min"] == pytest.approx(per_rank, rel=0.05)
    assert out["file_bytes_max"] == pytest.approx(per_rank, rel=0.05)
    assert out["total_bytes"] == pytest.approx(16 * out["file_bytes_max"], rel=0.2)
    phases = {r["phase"]: r for r in out["rows"]}
    assert set(phases) == {"write", "read"}
    for r in phases.values():
        assert r["measured_bw_bytes_s"] > 0 and r["modelled_bw_bytes_s"] > 0
        assert r["measured_over_modelled"] == pytest.approx(r["measured_bw_bytes_s"] / r["modelled_bw_bytes_s"])
        assert r["measured_bw_bytes_s"] == pytest.approx(out["total_bytes"] / r["measured_s"])
    assert out["storage"] == "local-nvme"
    assert out["files_removed"] and list(tmp_path.iterdir()) == []


def test_files_really_exist_during_the_run(small_spec, tmp_path, monkeypatch):
    seen = []
    real = measure_mod._read_file

    def spy(path, block):
        seen.append((path, path.stat().st_size))
        return real(path, block)

    monkeypatch.setattr(measure_mod, "_read_file", spy)
    out = measure(small_spec, tmp_path, scale=1e-3, writers=2, max_files=4)
    assert len(seen) == 4 and sum(size for _, size in seen) == out["total_bytes"]
    assert all(p.name.endswith(".distcp") for p, _ in seen)
    assert not any(p.exists() for p, _ in seen)


def test_enospc_is_one_line_error_and_leaves_nothing(small_spec, tmp_path, monkeypatch):
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd, data):
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(measure_mod.os, "write", full_disk)
    with pytest.raises(SpecError, match=r"disk full \(ENOSPC\)") as err:
        measure(small_spec, tmp_path, scale=1e-3, writers=2, max_files=8)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_directory(small_spec, tmp_path, monkeypatch):
    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(measure_mod.tempfile, "mkdtemp", denied)
    with pytest.raises(SpecError, match="not writable"):
        measure(small_spec, tmp_path, scale=1e-3, max_files=4)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_directory(small_spec, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(SpecError, match="not writable"):
            measure(small_spec, ro, scale=1e-3, max_files=4)
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_read_only_filesystem(small_spec, tmp_path, monkeypatch):
    monkeypatch.setattr(measure_mod.os, "access", lambda *a, **k: True)

    def erofs(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(measure_mod.tempfile, "mkdtemp", erofs)
    with pytest.raises(SpecError, match="not writable"):
        measure(small_spec, tmp_path, scale=1e-3, max_files=4)


def test_interrupt_cleans_up(small_spec, tmp_path, monkeypatch):
    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(measure_mod.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        measure(small_spec, tmp_path, scale=1e-3, writers=1, max_files=4)
    assert list(tmp_path.iterdir()) == []


def test_not_enough_space_refused_before_writing(small_spec, tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(measure_mod.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10, 10, 10))
    with pytest.raises(SpecError, match="only 10 are free"):
        measure(small_spec, tmp_path, scale=1e-3, max_files=4)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kw, field", [({"scale": 0}, "scale"), ({"scale": 2}, "scale"),
                                       ({"writers": 0}, "writers"), ({"max_files": 0}, "max_files")])
def test_bad_arguments(small_spec, tmp_path, kw, field):
    """The library names its parameters (the CLI's flags are the CLI's: test_errors_name_flags)."""
    with pytest.raises(SpecError, match=rf"^{field} = "):
        measure(small_spec, tmp_path, **kw)


def test_missing_directory(small_spec, tmp_path):
    with pytest.raises(SpecError, match="not an existing directory"):
        measure(small_spec, tmp_path / "nope")


def test_model_side_uses_a_local_spec_storage(tmp_path):
    from teton.spec import load_spec

    spec = load_spec({"cluster": "meta-roce-24k", "model": "llama3-8b",
                      "job": {"gpus": 64, "tp": 8, "pp": 2, "seq_len": 8192, "global_batch": 64, "zero": 1},
                      "storage": {"preset": "local-nvme", "ssds_per_server": 1, "ssd_write_gbytes_s": 0.001,
                                  "ssd_read_gbytes_s": 0.002}})
    out = measure(spec, tmp_path, scale=1e-5, writers=2, max_files=4)
    rows = {r["phase"]: r for r in out["rows"]}
    assert rows["write"]["modelled_bw_bytes_s"] <= 1e6 * (1 + 1e-9)
    assert rows["read"]["modelled_bw_bytes_s"] <= 2e6 * (1 + 1e-9)
    assert out["calibration"]["ssd_write_gbytes_s"] == pytest.approx(rows["write"]["measured_bw_bytes_s"] / 1e9)
