"""``teton placement`` edge cases (issue 13): a job that fills the cluster, a capped occupancy."""

import json

import numpy as np
import pytest
import yaml

import teton
from teton.placement.compare import occupancy_capped, ranks_per_host
from teton.placement.mapping import place

needs_simulate = pytest.mark.skipif(getattr(teton, "simulate", None) is None, reason="teton.simulate not available")

# Llama 3 70B on all 1,024 GPUs of the DGX H100 SuperPOD (rail-optimised, 1:1 at every layer); the
# DP collectives after the backward (not bucketed under it), so that their exposed time is their time.
FULL = {"cluster": "dgx-h100-superpod", "model": "llama3-70b",
        "job": {"gpus": 1024, "tp": 4, "pp": 2, "seq_len": 8192, "global_batch": 512, "zero": 1,
                "pp_schedule": "interleaved", "virtual_stages": 5, "overlap_dp_comm": False}}


@pytest.fixture
def full_spec(tmp_path):
    p = tmp_path / "full.yaml"
    p.write_text(yaml.safe_dump(FULL))
    return p


def _rows(cli, *args):
    code, out, err = cli("placement", *args, "--json")
    assert code == 0, err
    return {r["policy"]: r for r in json.loads(out)}


def test_every_policy_uses_every_gpu_when_the_job_fills_the_cluster():
    spec = teton.load_spec(FULL)
    deg = {"tp": 4, "cp": 1, "pp": 2, "dp": 128}
    for policy in ("topology-aware", "linear", "random", "fragmented"):
        p = place(spec.cluster, deg, ("tp", "cp", "pp", "dp"), policy)
        assert np.array_equal(np.sort(p.gpu_of_rank), np.arange(1024))


@needs_simulate
def test_fragmented_gain_is_its_rank_order_not_a_cost_model_error(cli, full_spec):
    """On a full cluster fragmented only reorders ranks: two DP ranks share each host, so the
    gradient collective reduces over NVLink first and each NIC carries half the bytes. The same
    job placed topology-aware with dp inside pp gets exactly the same step time."""
    rows = _rows(cli, full_spec)
    ta, frag = rows["topology-aware"], rows["fragmented"]
    assert frag["ranks_per_host"]["dp"] == 2 and ta["ranks_per_host"]["dp"] == 1
    assert frag["breakdown"]["dp_comm"] == pytest.approx(ta["breakdown"]["dp_comm"] / 2, rel=0.02)
    reordered = _rows(cli, full_spec, "--set", "job.parallel_order=[tp, cp, dp, pp]", "--policy", "topology-aware")
    assert reordered["topology-aware"]["step_time_s"] == pytest.approx(frag["step_time_s"], rel=1e-4)
    # ... and the output says so, with the change of order that gets it
    (note,) = [n for n in frag["notes"] if n.startswith("fragmented is")]
    assert "2 ranks of each dp group on a host" in note and "['tp', 'cp', 'dp', 'pp']" in note
    for r in rows.values():
        assert any("takes every free GPU (1024 of 1024)" in n for n in r["notes"])
        assert r["span"]["hosts"] == 128
    assert any("non-blocking fabric" in n for n in rows["random"]["notes"])
    code, out, err = cli("placement", full_spec, "--policy", "topology-aware", "--policy", "fragmented")
    assert code == 0, err
    assert "note: fragmented is" in out and "not a cost-model error" in out


def test_occupancy_capped():
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    roce = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])
    assert occupancy_capped(roce, 0.5, 16384) and not occupancy_capped(roce, 0.3, 16384)
    spec = teton.load_spec(FULL)
    p = place(spec.cluster, {"tp": 4, "cp": 1, "pp": 2, "dp": 128}, ("tp", "cp", "pp", "dp"))
    assert ranks_per_host(spec.cluster, p) == {"tp": 4, "pp": 2, "dp": 1}


@needs_simulate
def test_capped_occupancy_is_reported(cli, example_spec):
    """llama3-405b-16k needs 16,384 of 24,576 GPUs: --occupancy 0.5 becomes 1/3, and says so."""
    rows = _rows(cli, example_spec, "--occupancy", "0.5", "--policy", "topology-aware")
    r = rows["topology-aware"]
    assert r["occupancy_requested"] == 0.5 and r["occupancy"] == pytest.approx(1 / 3)
    assert r["occupancy_capped"] is True
    assert any("occupancy capped: 0.500 requested, 0.333 used" in n for n in r["notes"])
    code, out, err = cli("placement", example_spec, "--occupancy", "0.5", "--policy", "topology-aware")
    assert code == 0, err
    assert "note: occupancy capped: 0.500 requested, 0.333 used, so that the job's 16384 GPUs stay free" in out
    uncapped = _rows(cli, example_spec, "--occupancy", "0.2", "--policy", "topology-aware")["topology-aware"]
    assert uncapped["occupancy_capped"] is False and not any("capped" in n for n in uncapped["notes"])
