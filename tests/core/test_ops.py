"""Per-layer ops: FLOPs and collectives against hand calculations."""

from teton.spec import load_spec
from teton.workload.ops import Collective, ComputeOp, head_block, layer_block


def _spec(**job):
    base = {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048}
    base.update(job)
    return load_spec({"cluster": "meta-roce-24k", "model": "llama3-405b", "job": base})


def _flops(items, kind):
    return sum(i.flops for i in items if isinstance(i, ComputeOp) and i.kind == kind)


def test_layer_gemm_flops_are_six_n_tokens_over_tp():
    spec = _spec()
    m, t, s = spec.model, 8, 8192
    blk = layer_block(m, spec.job)
    matmul_params = m.attention_params() + m.mlp_params()
    assert abs(_flops(blk.fwd, "gemm") - 2 * matmul_params * s / t) / (2 * matmul_params * s / t) < 1e-9
    assert abs(_flops(blk.bwd, "gemm") - 4 * matmul_params * s / t) / (4 * matmul_params * s / t) < 1e-9


def test_causal_attention_flops_hand_calc():
    spec = _spec()
    blk = layer_block(spec.model, spec.job)
    s, d, t = 8192, 16384, 8
    fwd = 4 * s * (s / 2) * d / t  # QK^T and PV over s/2 keys on average
    assert _flops(blk.fwd, "attention") == fwd
    assert _flops(blk.bwd, "attention") == 2.5 * fwd


def test_context_parallel_quarters_attention_per_gpu_and_gathers_kv():
    spec = _spec(cp=16, dp=8, seq_len=131072, global_batch=128)
    blk = layer_block(spec.model, spec.job)
    s, d, t, c = 131072, 16384, 8, 16
    assert _flops(blk.fwd, "attention") == 4 * (s / c) * (s / 2) * d / t
    cp = [i for i in blk.fwd if isinstance(i, Collective) and i.axis == "cp"]
    assert len(cp) == 1 and cp[0].op == "all_gather"
    assert cp[0].bytes == 2 * s * 2 * 1024 / t  # K and V of the whole sequence, 1 KV head per TP rank


def test_sequence_parallel_collectives_per_layer():
    blk = layer_block(_spec().model, _spec().job)
    fwd = [i.op for i in blk.fwd if isinstance(i, Collective)]
    bwd = [i.op for i in blk.bwd if isinstance(i, Collective)]
    assert sorted(fwd) == ["all_gather"] * 2 + ["reduce_scatter"] * 2
    # transposes (2 AG + 2 RS) plus the re-gather of the two sharded GEMM inputs for wgrad
    assert sorted(bwd) == ["all_gather"] * 4 + ["reduce_scatter"] * 2
    nosp = _spec(sequence_parallel=False)
    ops = [i.op for i in layer_block(nosp.model, nosp.job).fwd if isinstance(i, Collective)]
    assert ops == ["all_reduce", "all_reduce"]


def test_full_recompute_replays_the_forward():
    spec, full = _spec(), _spec(recompute="full")
    g = _flops(layer_block(spec.model, spec.job).bwd, "gemm")
    gf = _flops(layer_block(full.model, full.job).bwd, "gemm")
    assert abs(gf - g * 1.5) / g < 1e-9  # backward (4N) + replayed forward (2N)


def test_head_gemm_flops():
    spec = _spec()
    blk = head_block(spec.model, spec.job)
    assert _flops(blk.fwd, "gemm") == 2 * 8192 * (128256 // 8) * 16384
