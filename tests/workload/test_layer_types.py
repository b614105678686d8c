"""Models whose layers differ (DeepSeek-V3's dense prefix, Llama 4's interleave, Nemotron-H's hybrid
pattern, GPT-OSS's windows): one layer kind per type, each with its own block, parameters and
activations; a uniform model's step work is what it was before layer types."""

import math

import numpy as np
import pytest

from teton.engine.step import simulate_step
from teton.spec import load_spec
from teton.spec.layer_types import LayerType
from teton.spec.model_flops import model_flops_per_token
from teton.workload.activations import layer_saved_bytes
from teton.workload.items import ComputeOp
from teton.workload.layer_kinds import LayerKind, layer_kind_counts
from teton.workload.memory import _chunk_layer_bytes, memory_per_gpu
from teton.workload.mtp import mtp_params_per_gpu
from teton.workload.ops import layer_block, layer_params_per_gpu
from teton.workload.step_work import step_work

DEEPSEEK = {"gpus": 256, "tp": 1, "pp": 8, "ep": 32, "seq_len": 4096, "global_batch": 512,
            "moe_router_balance": "forced"}


def _spec(model, job, cluster="dgx-h100-superpod"):
    return load_spec({"cluster": cluster, "model": model, "job": job})


def _flops(items, recompute=False):
    return sum(i.flops for i in items if isinstance(i, ComputeOp) and i.name.startswith("recompute.") == recompute)


def test_deepseek_v3_kinds_are_its_dense_prefix_and_moe_layers():
    spec = _spec("deepseek-v3", DEEPSEEK)
    work = step_work(spec.model, spec.job)
    assert [(k.label, int(n.sum())) for k, _, n in work.kinds] == [("dense_layer", 3), ("moe_layer", 58)]
    assert work.layer == work.kinds[0][1]


def test_deepseek_v3_step_flops_per_token_match_six_n_plus_attention():
    """Every op of the step, per token, against 6 x active matmul parameters + causal attention (the
    model count's attention term halved: the kernels skip the masked half; flash attention's
    backward is 2.5x its forward, not 2x), MTP included."""
    spec = _spec("deepseek-v3", DEEPSEEK)
    m, lay = spec.model, spec.job.layout
    work = step_work(m, spec.job)
    per_mb = sum(float(n.sum()) * (_flops(b.fwd) + _flops(b.bwd)) for b, n in work.layer_mix())
    per_mb += sum(_flops(b.fwd) + _flops(b.bwd) for b in (work.embedding, work.head))
    per_token = per_mb * lay.tp / lay.tokens
    six_n = 6.0 * m.matmul_params()
    expected = six_n + (model_flops_per_token(m, lay.seq_len) - six_n) / 2 * 3.5 / 3
    assert per_token == pytest.approx(expected, rel=0.01)
    assert per_token == pytest.approx(model_flops_per_token(m, lay.seq_len), rel=0.1)


def test_uniform_dense_model_keeps_its_step_work():
    spec = _spec("llama3-70b", {"gpus": 64, "tp": 8, "pp": 2, "seq_len": 8192, "global_batch": 64})
    m, job = spec.model, spec.job
    work = step_work(m, job)
    assert [k for k, _, _ in work.kinds] == [LayerKind()] and work.kinds[0][0].label == "layer"
    assert work.layer == layer_block(m, job) and work.kinds[0][2] is not None
    expected = (work.split.layers * layer_params_per_gpu(m, job)).astype(float)
    vocab = job.layout.local_vocab(m.vocab) * m.hidden
    expected[0, 0] += vocab
    expected[-1, -1] += vocab + m.norm_params()
    assert np.array_equal(work.chunk_params, expected)
    assert model_flops_per_token(m, 8192) == 6.0 * m.matmul_params() + 12.0 * m.layers * 8192 * m.q_width


def test_uniform_fp8_kinds_keep_their_labels():
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": "llama3-70b", "software": {"fp8_bf16_layers": 1},
                      "job": {"gpus": 64, "tp": 8, "pp": 2, "seq_len": 8192, "global_batch": 64, "precision": "fp8"}})
    labels = [k.label for k in layer_kind_counts(spec.model, spec.job, step_work(spec.model, spec.job).split)]
    assert labels == ["layer", "bf16_layer"]


def test_deepseek_v3_memory_counts_dense_and_moe_layers_apart():
    spec = _spec("deepseek-v3", DEEPSEEK)
    m, job = spec.model, spec.job
    work = step_work(m, job)
    dense, moe = m.as_layer(LayerType("attention", "dense")), m.as_layer(LayerType("attention", "moe"))
    first = int(work.split.layers[0, 0])  # rank 0: the 3 dense layers, then MoE ones
    vocab = job.layout.local_vocab(m.vocab) * m.hidden
    assert work.chunk_params[0, 0] == pytest.approx(
        3 * layer_params_per_gpu(dense, job) + (first - 3) * layer_params_per_gpu(moe, job) + vocab)
    saved, _, _ = _chunk_layer_bytes(m, job, work.split)
    assert saved[0, 0] == pytest.approx(3 * layer_saved_bytes(dense, job) + (first - 3) * layer_saved_bytes(moe, job))
    assert saved[1, 0] == pytest.approx(int(work.split.layers[1, 0]) * layer_saved_bytes(moe, job))
    assert layer_saved_bytes(dense, job) != layer_saved_bytes(moe, job)
    assert memory_per_gpu(m, job)[0].total > 0


def test_deepseek_v3_mtp_module_on_the_last_stage():
    spec = _spec("deepseek-v3", DEEPSEEK)
    m, job = spec.model, spec.job
    work = step_work(m, job)
    names = {i.name for i in work.head.fwd}
    assert {"lm_head", "mtp.proj", "mtp.lm_head", "mtp.embedding.lookup", "mtp.attention"} <= names
    params, experts = mtp_params_per_gpu(m, job, work.split.p)
    assert params > 0 and experts > 0
    others = (work.chunk_params[-1, -1] - params - job.layout.local_vocab(m.vocab) * m.hidden - m.norm_params())
    assert others == pytest.approx(int(work.split.layers[-1, -1]) * layer_params_per_gpu(
        m.as_layer(LayerType("attention", "moe")), job))


def test_nemotron_h_8b_runs_on_8_gpus():
    spec = _spec("nemotron-h-8b", {"gpus": 8, "tp": 2, "seq_len": 8192, "global_batch": 64})
    work = step_work(spec.model, spec.job)
    assert [(k.label, int(n.sum())) for k, _, n in work.kinds] == [
        ("mamba_layer", 24), ("mlp_layer", 24), ("attention_layer", 4)]
    r = simulate_step(spec)
    assert math.isfinite(r.step_time_s) and r.step_time_s > 0 and 0 < r.mfu < 1


def test_hybrid_model_flops_sum_their_layer_types():
    m = _spec("nemotron-h-8b", {"gpus": 8, "tp": 2, "seq_len": 8192, "global_batch": 64}).model
    s = 8192
    scan = 3 * 7 * m.mamba_inner * m.mamba_state_dim
    assert model_flops_per_token(m, s) == pytest.approx(6 * m.matmul_params() + 24 * scan + 4 * 12 * s * m.q_width)


def test_windowed_layers_are_a_kind_of_their_own():
    spec = _spec("gpt-oss-120b", {"gpus": 64, "tp": 2, "ep": 8, "seq_len": 8192, "global_batch": 64})
    work = step_work(spec.model, spec.job)
    kinds = {k.label: b for k, b, _ in work.kinds}
    assert set(kinds) == {"windowed_moe_layer", "moe_layer"}
    core = {label: next(i for i in b.fwd if i.name == "attention") for label, b in kinds.items()}
    assert core["windowed_moe_layer"].n == 128 and core["moe_layer"].n == 0
    assert core["windowed_moe_layer"].flops < core["moe_layer"].flops / 30
