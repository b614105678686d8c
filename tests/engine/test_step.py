"""The step model on the bundled example (Llama 3 405B on 16,384 GPUs): the same spec gives the same
numbers, MFU is model FLOPs over the peak by hand, and what fp8, full recompute, FA3 and slow GPUs
change."""

import pytest

import teton


def test_same_spec_same_numbers(example_spec):
    a, b = teton.simulate(example_spec), teton.simulate(example_spec)
    assert a.to_dict() == b.to_dict()


def test_fp8_speeds_up_gemm_bound_steps(example_spec):
    bf16 = teton.simulate(example_spec)
    fp8 = teton.simulate(example_spec, ["job.precision=fp8"])
    assert fp8.breakdown["compute"] < bf16.breakdown["compute"]
    assert fp8.mfu < bf16.mfu  # MFU is measured against the (2x) fp8 peak


def test_full_recompute_costs_time_and_saves_memory(example_spec):
    none = teton.simulate(example_spec)
    full = teton.simulate(example_spec, ["job.recompute=full"])
    assert full.step_time_s > none.step_time_s
    assert full.memory_breakdown["activations"] < none.memory_breakdown["activations"] / 5


def test_mfu_is_model_flops_over_peak_hand_calc(example_spec):
    r = teton.simulate(example_spec)
    n_matmul = 126 * (2 * 16384 * 16384 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384) + 128256 * 16384 + 16384
    per_token = 6 * n_matmul + 12 * 126 * 8192 * 16384  # PaLM: 6N + 12 L s d (full attention matrix)
    flops = per_token * 2048 * 8192
    assert r.model_flops_per_step == pytest.approx(flops, rel=1e-12)
    assert r.mfu == pytest.approx(flops / (r.step_time_s * 16384 * 989.4e12), rel=1e-12)
    assert r.tflops_per_gpu == pytest.approx(flops / (r.step_time_s * 16384) / 1e12, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(2048 * 8192 / r.step_time_s, rel=1e-12)


def test_fa3_speeds_up_attention_bound_long_context(example_spec):
    longctx = ["job.cp=16", "job.dp=8", "job.seq_len=131072", "job.global_batch=128"]
    fa2 = teton.simulate(example_spec, longctx)
    fa3 = teton.simulate(example_spec, [*longctx, "job.attention_kernel=fa3"])
    assert fa3.breakdown["compute"] < 0.8 * fa2.breakdown["compute"]
    assert fa3.breakdown["tp_comm"] == pytest.approx(fa2.breakdown["tp_comm"])


def test_gpu_speed_variation_paces_large_jobs_more(example_spec):
    from teton.engine.step import slowest_gpu_factor

    assert slowest_gpu_factor(16384, 0.0) == 1.0
    assert slowest_gpu_factor(8, 0.02) < slowest_gpu_factor(16384, 0.02)
    # E[max of 2 standard normals] = 1/sqrt(pi), integrated numerically
    z2 = (1 - 1 / slowest_gpu_factor(2, 0.1)) / 0.1
    assert z2 == pytest.approx(1 / 3.14159265 ** 0.5, rel=1e-6)
    base = teton.simulate(example_spec)
    slow = teton.simulate(example_spec, ["cluster.gpu_speed_cv=0.02"])
    f = slowest_gpu_factor(16384, 0.02)
    assert slow.breakdown["compute"] == pytest.approx(base.breakdown["compute"] * f, rel=1e-9)
    assert slow.breakdown["tp_comm"] == pytest.approx(base.breakdown["tp_comm"])
