"""Memory model: Korthikanti et al. 2022 formulas, flash attention, pipelines, fitting."""

import pytest

import teton
from teton.spec import load_spec
from teton.workload.memory import layer_activation_bytes
from teton.workload.pipeline import in_flight_microbatches


def _gpt3(**job):
    base = {"gpus": 1024, "tp": 8, "pp": 8, "seq_len": 2048, "global_batch": 1024, "flash_attention": False}
    base.update(job)
    return load_spec({"cluster": "dgx-h100-superpod", "model": "gpt3-175b", "job": base})


def _stats(spec):
    s, t, a = spec.job.seq_len, spec.job.tp, spec.model.heads
    tok_e = s / t if spec.job.sequence_parallel else s
    return 4 * tok_e * 2 + 4 * s * a / t  # norm rstd + log-sum-exp (not in the paper's count)


def test_korthikanti_sequence_parallel_formula():
    spec = _gpt3()
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    expected = s * b * h * (34 + 5 * a * s / h) / t  # Korthikanti et al. 2022, eq. (5)/Table 2
    assert layer_activation_bytes(spec.model, spec.job) - _stats(spec) == pytest.approx(expected, rel=1e-12)


def test_korthikanti_without_sequence_parallel():
    spec = _gpt3(sequence_parallel=False)
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    expected = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))  # eq. (4): TP only
    assert layer_activation_bytes(spec.model, spec.job) - _stats(spec) == pytest.approx(expected, rel=1e-12)


def test_sequence_parallel_shards_the_elementwise_activations():
    """SP keeps 1/tp of the norm and GEMM inputs (4 bf16 hidden-state tensors) and of the norm
    statistics (2 fp32 per token); a CP rank's tokens must divide by tp under SP (4096 over 8;
    tests/spec/test_layout.py has the rule)."""
    def saved(sp):
        s = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                       "job": {"gpus": 16, "tp": 8, "cp": 2, "seq_len": 8192, "global_batch": 1,
                               "sequence_parallel": sp, "kernel_fusion": "fused"}})
        return layer_activation_bytes(s.model, s.job)

    h, tok, t = 4096, 8192 // 2, 8
    assert saved(False) - saved(True) == pytest.approx((4 * 2 * h + 2 * 4) * tok * (1 - 1 / t), rel=1e-12)


def test_flash_attention_keeps_no_scores():
    with_flash = _gpt3(flash_attention=True)
    s, b, h, t = 2048, 1, 12288, 8
    assert layer_activation_bytes(with_flash.model, with_flash.job) - _stats(with_flash) == pytest.approx(34 * s * b * h / t)


def test_interleaved_in_flight_matches_korthikanti():
    # rank 0 holds L (1 + (p-1)/(p v)) layers' worth: p*v + p - 1 chunk micro-batches of L/(p v) layers
    p, v, m = 16, 4, 64
    assert in_flight_microbatches(p, v, m, 0) == (p - 1) * 2 + (v - 1) * p + 1
    assert in_flight_microbatches(p, 1, m, 0) == p
    assert in_flight_microbatches(p, 1, m, p - 1) == 1
    # all-to-all overlap: one warm-up forward more on every rank, the last stage too
    assert [in_flight_microbatches(p, 1, m, r, None, 1) for r in (0, p - 1)] == [min(p + 1, m), 2]


def test_llama3_table4_rows_fit_in_80gb(example_spec):
    row2 = teton.simulate(example_spec)
    row1 = teton.simulate(example_spec, ["job.gpus=8192", "job.dp=64"])
    for r in (row1, row2):
        assert r.fits_in_memory and r.memory_per_gpu_bytes < r.hbm_bytes == 81559 * 2**20
        assert r.memory_breakdown["activations"] > r.memory_breakdown["weights"]


def test_tp1_does_not_fit_and_names_the_largest_term(example_spec):
    r = teton.simulate(example_spec, ["job.tp=1", "job.dp=1024", "job.global_batch=16384"])
    assert not r.fits_in_memory
    assert r.largest_memory_term == "activations"
    assert r.memory_per_gpu_bytes > r.hbm_bytes


def test_zero_stages_shrink_state(example_spec):
    mem = [teton.simulate(example_spec, [f"job.zero={z}", "job.grad_reduce=per_microbatch"]).memory_breakdown
           for z in (0, 1, 2, 3)]
    assert mem[0]["optimizer"] > mem[1]["optimizer"] == mem[2]["optimizer"]
    assert mem[1]["gradients"] > mem[2]["gradients"]
    assert mem[2]["weights"] > mem[3]["weights"]


def _clear_memory_memos():
    from teton.workload import memory, step_work

    memory.memory_per_gpu.cache_clear()
    for memo in (step_work._PARAMS, memory._ACTIVATIONS, memory._WORKING):
        memo.clear()


@pytest.mark.parametrize("example, sets", [
    ("llama3-405b-16k.yaml", ["job.precision=fp8", "software.fp8_bf16_layers=2"]),
    ("deepseek-v3-h800-2k.yaml", ["software.cpu_offload_layers=1"]),
])
def test_memory_memos_key_on_every_field_they_read(example, sets):
    """The memory model's parts are memoised by the job fields they read (a layout search varies
    recompute, ZeRO and the micro-batch at fixed degrees): a verdict taken after every other
    variant equals the one taken cold, so no field the memo keys leave out changes a part."""
    from pathlib import Path

    from teton.workload.memory import memory_per_gpu

    base = load_spec(Path(__file__).resolve().parents[2] / "examples" / example, sets)
    variants = [base.job.model_copy(update={"recompute": rc, "recompute_interval": iv, "zero": z,
                                            "grad_reduce": gr, "micro_batch": mb, "adam_moments": moments,
                                            "grad_accum_dtype": acc})
                for rc, iv in (("none", 2), ("full", 2), ("selective_layer", 3), ("selective", 2))
                for z, gr in ((1, None), (2, "per_microbatch"), (3, None)) for mb in (1, 2)
                for moments, acc in (("fp32", "fp32"), ("bf16", "bf16"))]
    _clear_memory_memos()
    warm = [memory_per_gpu(base.model, j) for j in variants]
    for j, w in zip(variants, warm, strict=True):
        _clear_memory_memos()
        assert memory_per_gpu(base.model, j) == w
    assert len({w[0].total for w in warm}) > len(variants) // 2  # the variants do differ
