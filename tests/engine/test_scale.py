"""What grows with the GPU count (teton.engine.scale): stragglers,
per-bucket DP collectives and their exposed last bucket."""
import numpy as np
import pytest

import teton
from teton.engine.scale import (
    BucketedCost,
    expected_max_std_normal,
    grad_bucket_params,
    straggler_s,
)
from teton.spec.software import SoftwareSpec


def _llama8b(gpus: int, tp: int = 1, cluster: str = "dgx-h100-superpod-8k", **job) -> dict:
    dp = gpus // tp
    return {"cluster": cluster, "model": "llama3-8b",
            "job": {"gpus": gpus, "tp": tp, "dp": dp, "seq_len": 8192, "global_batch": 4 * dp, "zero": 1, **job}}


def test_expected_max_of_normals_matches_the_tables():
    # E[max of n standard normals]: 1/sqrt(pi) for 2; order-statistics tables for 10, 100, 1000
    assert expected_max_std_normal(1) == 0.0
    assert expected_max_std_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-6)
    for n, z in ((10, 1.53875), (100, 2.50759), (1000, 3.24144)):
        assert expected_max_std_normal(n) == pytest.approx(z, abs=1e-4)
    zs = [expected_max_std_normal(n) for n in (2, 8, 64, 512, 2048, 16384, 131072)]
    assert all(a < b for a, b in zip(zs, zs[1:], strict=False))
    assert zs[-1] < np.sqrt(2 * np.log(131072))  # grows like, and stays below, sqrt(2 ln n)


def test_straggler_term_grows_with_ranks_and_is_zero_when_disabled():
    assert straggler_s(10.0, 1, 0.01) == 0.0 and straggler_s(10.0, 4096, 0.0) == 0.0
    assert straggler_s(10.0, 1000, 0.01) == pytest.approx(0.01 * 10.0 * expected_max_std_normal(1000))
    runs = [teton.simulate(_llama8b(g)) for g in (8, 64, 512)]
    share = [r.breakdown["stragglers"] / r.step_time_s for r in runs]
    assert 0 < share[0] < share[1] < share[2]
    off = teton.simulate(_llama8b(512), ["cluster.step_jitter_cv=0"])
    assert off.breakdown["stragglers"] == 0.0
    assert sum(off.breakdown.values()) == pytest.approx(off.step_time_s, rel=1e-12)
    assert runs[2].step_time_s - off.step_time_s == pytest.approx(runs[2].breakdown["stragglers"], rel=1e-12)


def test_step_jitter_is_bounded():
    with pytest.raises(Exception, match="step_jitter_cv"):
        teton.simulate(_llama8b(8), ["cluster.step_jitter_cv=0.7"])


def test_weak_scaling_step_grows_monotonically():
    """Llama 3 8B, the same work per GPU (4 sequences of 8K per DP rank) on 8 ... 2,048 H100s: the
    step grows with every step up in GPU count, by a few percent in all (issue #25's published
    series: 1-6 %)."""
    for tp in (1, 2):
        steps = [teton.simulate(_llama8b(g, tp)).step_time_s for g in (8, 64, 512, 2048)]
        assert all(a < b for a, b in zip(steps, steps[1:], strict=False)), steps
        assert 1.01 < steps[-1] / steps[0] < 1.06


def test_dp_collectives_run_in_buckets_that_each_pay_latency():
    class Flat:  # a collective of S bytes: 1 us + S ns
        fidelity = "analytical"

        def collective_time(self, op, groups, size_bytes):
            return 1e-6 + size_bytes * 1e-9

    one = BucketedCost(Flat(), None).collective_time("reduce_scatter", np.zeros((1, 2)), 1e6)
    four = BucketedCost(Flat(), 2.5e5).collective_time("reduce_scatter", np.zeros((1, 2)), 1e6)
    assert four - one == pytest.approx(3e-6)  # three more latencies, the same bytes
    # Megatron-Core's default bucket: max(40M, 1M x DP); one bucket without overlap; PyTorch DDP 25 MiB
    mcore = SoftwareSpec(framework="megatron-lm")
    assert grad_bucket_params(mcore, 8, True, 4) == 40e6
    assert grad_bucket_params(mcore, 512, True, 4) == 512e6
    assert grad_bucket_params(mcore, 512, False, 4) is None
    assert grad_bucket_params(SoftwareSpec(framework="pytorch"), 8, True, 4) == 25 * 2**20 / 4
    assert grad_bucket_params(SoftwareSpec(grad_bucket_params=1e7), 8, True, 4) == 1e7


def test_last_bucket_is_exposed_and_grows_with_dp():
    small, large = (teton.simulate(_llama8b(g)) for g in (64, 2048))
    assert 0 < small.breakdown["dp_last_bucket"] < large.breakdown["dp_last_bucket"]
    assert large.dp_exposed_s == pytest.approx(large.breakdown["dp_comm"] + large.breakdown["dp_last_bucket"])
    alone = teton.simulate(_llama8b(2048, overlap_dp_comm=False))
    assert alone.breakdown["dp_last_bucket"] == 0.0 and alone.breakdown["dp_comm"] > large.dp_exposed_s



def test_h800_is_an_h100_with_less_nvlink():
    h100 = teton.simulate(_llama8b(64, 8, "dgx-h100-superpod"))
    h800 = teton.simulate(_llama8b(64, 8, "deepseek-h800-2k"))
    assert h800.breakdown["compute"] == pytest.approx(h100.breakdown["compute"], rel=1e-9)
    assert h800.breakdown["tp_comm"] > 1.8 * h100.breakdown["tp_comm"]  # 200 vs 450 GB/s per direction
