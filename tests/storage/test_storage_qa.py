"""QA pass on ``teton checkpoint``: defects a demanding user hit, and what the table and JSON promise."""

from __future__ import annotations

import json
import math

import pytest

from teton.errors import SpecError
from teton.storage import storage_system


def _one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("field", ["ssd_write_gbytes_s", "server_nic_gbps", "metadata_ops_s_per_node",
                                   "op_latency_us"])
def test_storage_rejects_infinite_values(field):
    """``--set storage.ssd_write_gbytes_s=inf`` was accepted and --json printed ``Infinity``
    (not JSON)."""
    with pytest.raises(SpecError, match=f"storage.{field}"):
        storage_system({"preset": "tectonic-llama3", field: math.inf})


def test_checkpoint_interval_inf_rejected(cli, example_spec):
    code, _, err = cli("checkpoint", example_spec, "--set", "storage.checkpoint.interval_s=inf")
    assert "storage.checkpoint.interval_s" in _one_line_error(code, err)


def test_inf_override_is_one_line_error(cli, example_spec):
    code, _, err = cli("checkpoint", example_spec, "--json", "--set", "storage.ssd_write_gbytes_s=inf")
    assert "storage.ssd_write_gbytes_s" in _one_line_error(code, err)


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
        assert "--tokens-per-s" in _one_line_error(code, err)


def test_writers_beyond_the_job_is_rejected(cli, example_spec):
    """``--writers 100000000`` on a 16,384-GPU job was silently capped to 16,384 writers."""
    code, _, err = cli("checkpoint", example_spec, "--writers", "100000000")
    line = _one_line_error(code, err)
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
    # the sustainable interval is total bytes over the sustained write rate
    assert d["min_checkpoint_interval_s"] == pytest.approx(d["total_bytes"] / d["storage_sustained_write_bytes_s"])
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
    assert "storage.data_loading.tokens_per_s" in _one_line_error(code, err)
    code, _, err = cli("checkpoint", example_spec, "--set", "storage.data_loading.tokenz_per_s=1e9")
    assert "storage.data_loading.tokenz_per_s" in _one_line_error(code, err)


def test_measure_does_not_offer_a_calibration_from_metadata_bound_files(cli, example_spec, tmp_path):
    """``--measure DIR`` at the default scale writes ~35 kB shards: the model is metadata-bound,
    yet the verb printed '--set storage.ssd_write_gbytes_s=0.1' as a drive calibration."""
    code, out, err = cli("checkpoint", example_spec, "--measure", tmp_path, "--files", "8", "--scale", "1e-5")
    assert code == 0, err
    assert "metadata-bound" in out and "ssd_write_gbytes_s" not in out
    code, out, err = cli("checkpoint", example_spec, "--measure", tmp_path, "--files", "8", "--scale", "1e-5", "--json")
    assert json.loads(out)["measure"]["calibration"]["bandwidth_bound"] is False
    assert list(tmp_path.iterdir()) == []
