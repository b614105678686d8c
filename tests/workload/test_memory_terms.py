"""Memory terms a Megatron-Core / Transformer Engine job holds that a lighter count misses: the
fp8 weight copies TE caches through a step, the SwiGLU product the down projection keeps, the
interleaved schedule's peak after its warm-up, and a CPU offload count no chunk can honour."""

import numpy as np
import pytest

from teton.errors import SpecError
from teton.hardware.kernels import FP8_RECIPES
from teton.spec import load_spec
from teton.workload.activations import layer_activation_bytes
from teton.workload.items import ACT_BYTES
from teton.workload.memory import memory_per_gpu
from teton.workload.moe import moe_rows, moe_saved_bytes
from teton.workload.pipeline import chunk_orders, in_flight_microbatches


def _spec(software, model="llama3-70b", cluster="dgx-h100-superpod", **job):
    base = {"gpus": 64, "tp": 8, "pp": 2, "global_batch": 64, "seq_len": 8192, "precision": "fp8"}
    return load_spec({"cluster": cluster, "model": model, "software": software, "job": {**base, **job}})


def test_a_te_fp8_job_keeps_cached_fp8_weights_beside_its_bf16_weights():
    """Megatron-Core passes is_first_microbatch, so TE caches each weight's fp8 rowwise and
    transposed copies for the step (2 B per layer parameter per-tensor) beside the bf16 weights;
    held in fp8 only (fp8_param_gather) there is no bf16 copy; bf16 jobs and torchao-style stacks
    hold bf16 alone; ZeRO-3 gathers per use and keeps no cache."""
    mx, b200 = {"base": "megatron-lm-2025", "fp8_recipe": "mxfp8"}, "dgx-b200-superpod"
    te = _spec(mx, cluster=b200)
    quantised = _spec({**mx, "fp8_param_gather": True}, cluster=b200)
    bf16 = _spec(mx, cluster=b200, precision="bf16")
    w = {k: memory_per_gpu(s.model, s.job)[0].weights for k, s in (("te", te), ("q", quantised), ("bf16", bf16))}
    # the rank's layer parameters L gain the recipe's copies, wb B each (q - bf16 = L (wb - 2));
    # the rest (embedding, head) stays bf16
    wb = FP8_RECIPES[te.job.software.fp8_recipe].weight_bytes
    assert w["te"] - w["bf16"] == pytest.approx(wb / (wb - 2) * (w["q"] - w["bf16"]), rel=1e-6)
    assert w["te"] > 1.9 * w["bf16"] and w["q"] < 1.05 * w["bf16"]
    zero3 = _spec({"base": "megatron-lm-2025"}, zero=3, pp=1)
    zero3_bf16 = _spec({"base": "megatron-lm-2025"}, zero=3, pp=1, precision="bf16")
    assert memory_per_gpu(zero3.model, zero3.job)[0].weights == memory_per_gpu(zero3_bf16.model, zero3_bf16.job)[0].weights


def test_the_down_projection_keeps_the_swiglu_product_on_megatron_stacks():
    """Megatron-Core's fused SwiGLU returns the product and TE's row-parallel Linear saves it for
    the weight gradient: 3 FFN-wide tensors, where a compiled MLP recomputes it (2). moe_act
    recompute drops the routed experts' product, which is what it exists for."""
    mc = _spec({"base": "megatron-lm-2025"}, precision="bf16")
    plain = _spec({"base": "megatron-lm-2025", "glu_product_saved": False}, precision="bf16")
    lay = mc.job.layout
    extra = layer_activation_bytes(mc.model, mc.job) - layer_activation_bytes(plain.model, plain.job)
    assert extra == pytest.approx(ACT_BYTES * lay.tokens * mc.model.ffn_hidden / lay.tp)
    moe = dict(model="mixtral-8x7b", tp=1, ep=8, pp=1, global_batch=64, seq_len=4096, precision="bf16")
    kept = _spec({"base": "megatron-bridge-26.04"}, **moe)
    act = _spec({"base": "megatron-bridge-26.04"}, recompute="selective", recompute_modules=["moe_act"], **moe)
    dropped = moe_saved_bytes(kept.model, kept.job) - moe_saved_bytes(act.model, act.job, act.job.recomputed_modules)
    rows, elay = moe_rows(kept.model, kept.job), kept.job.layout
    assert dropped == pytest.approx(ACT_BYTES * rows.expert * kept.model.expert_ffn / elay.etp)  # the routed product
    assert moe_saved_bytes(kept.model, kept.job, frozenset({"moe"})) == 0.0


def test_the_interleaved_peak_follows_the_schedule_past_its_warm_up():
    """Chunks of unequal sizes (Llama 3 405B's 126 layers and the embedding / loss slots over 8 x 3
    chunks held 2 GiB more than counted): a steady-state forward of a larger chunk than the backward
    before it frees lifts the held bytes above the warm-up's. The peak is the running total's maximum, checked against a brute-force walk
    of Megatron's order (warm-up forwards, then forward / backward pairs)."""
    from teton.workload.memory import _interleaved_peak

    rng = np.random.default_rng(0)
    p, v, m = 4, 3, 8
    per_chunk = rng.integers(4, 7, size=(p, v)).astype(float)
    fwd, bwd = chunk_orders(v, m, p)
    peaks = _interleaved_peak(per_chunk, p, v, m, p, 0)
    warm_up = np.zeros(p)
    for r in range(p):
        held = in_flight_microbatches(p, v, m, r, p, 0)
        total, best, b = 0.0, 0.0, 0
        for i, (c, _) in enumerate(fwd):
            total += per_chunk[r][c]
            best = max(best, total)
            if i + 1 >= held:  # steady state: each forward is followed by a backward
                total -= per_chunk[r][bwd[b][0]]
                b += 1
        assert peaks[r] == pytest.approx(best)
        warm_up[r] = per_chunk[r][fwd[:held, 0]].sum()
    assert (peaks >= warm_up).all() and (peaks > warm_up).any()  # the warm-up's count missed a climb


def test_an_offload_count_no_pipeline_chunk_can_honour_is_refused():
    """A chunk keeps its last layer on the GPU: offloading as many layers as the smallest chunk has
    was silently clamped (1 layer per chunk of 1: nothing offloaded, no word)."""
    base = {"cluster": "meta-roce-24k", "model": "llama3-405b", "software": {"base": "meta-llama3-2024",
                                                                            "cpu_offload_layers": 1},
            "job": {"gpus": 16384, "tp": 8, "pp": 16, "virtual_stages": 8, "seq_len": 8192, "global_batch": 2048,
                    "pp_schedule": "interleaved", "pp_embedding_slots": True}}
    with pytest.raises(SpecError) as err:
        load_spec(base)
    assert err.value.field == "software.cpu_offload_layers" and "no layer can be offloaded" in str(err.value)
