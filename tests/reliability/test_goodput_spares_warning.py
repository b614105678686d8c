"""``teton goodput`` warns, in the main output, when waiting for spare hosts drags ETTR down
(issue 13: 1,024 GPUs on all 128 hosts of dgx-h100-superpod, 30 days: ETTR 48 %, the cause only
in the assumptions footer)."""

import json

import pytest
import yaml

from teton.reliability import goodput
from teton.spec import load_spec
from teton.spec.reliability import parse_reliability

FULL = {"cluster": "dgx-h100-superpod", "model": "llama3-70b",
        "job": {"gpus": 1024, "tp": 8, "pp": 4, "seq_len": 8192, "global_batch": 1024, "zero": 1,
                "pp_schedule": "interleaved", "virtual_stages": 5},
        "reliability": {"checkpoint_save_s": 5.0, "checkpoint_blocking_s": 1.0, "checkpoint_restore_s": 10.0}}
FAST = ["--days", "30", "--runs", "200", "--step-time", "10.7"]


@pytest.fixture
def full_spec(tmp_path):
    p = tmp_path / "full.yaml"
    p.write_text(yaml.safe_dump(FULL))
    return p


def test_no_spare_hosts_is_a_warning_in_json_and_table(cli, full_spec):
    code, out, err = cli("goodput", full_spec, *FAST, "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["spare_hosts"] == 0 and d["ettr"] < 0.7
    (w,) = d["warnings"]
    assert "waiting for a spare host" in w and "0 spare hosts" in w
    assert "repair_h = 72 h" in w and "reliability.spare_hosts" in w
    code, table, err = cli("goodput", full_spec, *FAST)
    assert code == 0, err
    first = table.strip().splitlines()[0]
    assert first.startswith("warning: ETTR") and "spare host" in first  # above the table, not in the footer
    # following the advice removes the cause and the warning
    n = int(w.split("--set reliability.spare_hosts=")[1].split(";")[0])
    code, out, err = cli("goodput", full_spec, *FAST, "--set", f"reliability.spare_hosts={n}", "--json")
    assert code == 0, err
    fixed = json.loads(out)
    assert fixed["warnings"] == [] and fixed["ettr"] > 0.9


def test_no_warning_when_the_cluster_has_spares():
    spec = load_spec({**FULL, "job": {**FULL["job"], "gpus": 512, "global_batch": 512}})
    out = goodput(spec, parse_reliability(spec.reliability), step_time_s=10.7, days=30, runs=100, seed=0).to_dict()
    assert out["spare_hosts"] == 64 and out["warnings"] == []
