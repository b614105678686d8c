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


def _bytes(items, name):
    return sum(i.bytes for i in items if isinstance(i, ComputeOp) and i.name == name)


def test_unfused_grad_accumulation_adds_ten_bytes_per_parameter_per_micro_batch():
    fused, unfused = _spec(), _spec(grad_accum_fusion=False)
    m = fused.model
    layer_params = (m.attention_params() + m.mlp_params()) / 8 + 2 * m.norm_params()
    blk_f, blk_u = layer_block(m, fused.job), layer_block(m, unfused.job)
    assert _bytes(blk_f.bwd, "grad_accumulate") == 0
    # read the bf16 gradient, read and write the fp32 buffer
    assert _bytes(blk_u.bwd, "grad_accumulate") == (2 + 4 + 4) * layer_params
    # the fused weight-gradient GEMM reads and writes the fp32 buffer (k x n = 16384 x 13312)
    k, n = 16384, 2 * 53248 // 8
    assert _bytes(blk_f.bwd, "mlp_up.wgrad") - _bytes(blk_u.bwd, "mlp_up.wgrad") == (2 * 4 - 2) * k * n
    bf16 = _spec(grad_accum_fusion=False, grad_accum_dtype="bf16")
    assert _bytes(layer_block(m, bf16.job).bwd, "grad_accumulate") == (2 + 2 + 2) * layer_params


def test_unfused_grad_accumulation_slows_the_step_by_its_hbm_time():
    from teton import simulate

    base = {"cluster": "meta-roce-24k", "model": "llama3-8b",
            "job": {"gpus": 8, "tp": 1, "seq_len": 4096, "global_batch": 64, "zero": 1}}
    fused = simulate(base)
    unfused = simulate({**base, "job": {**base["job"], "grad_accum_fusion": False}})
    spec = load_spec(base)
    gpu = spec.cluster.gpu_spec
    from teton.hardware import cluster_efficiency

    per_mb = 10 * spec.model.total_params() / (gpu.hbm_bw_bytes_s * cluster_efficiency(gpu).mem)
    extra = unfused.step_time_s - fused.step_time_s
    # 8 micro-batches each add one accumulate pass; the fused wgrad GEMMs were compute-bound
    assert abs(extra - 8 * per_mb) / (8 * per_mb) < 0.02


def test_sustained_ratio_slows_tensor_core_kernels_only():
    from teton.engine.compute import ComputeModel

    spec = _spec()
    gpu = spec.cluster.gpu_spec
    burst = ComputeModel.for_gpu(gpu)
    hot = ComputeModel.for_gpu(gpu, overrides={"sustained_ratio": 0.8})
    blk = layer_block(spec.model, spec.job)
    ops = {i.kind: i for i in blk.fwd if isinstance(i, ComputeOp)}
    for kind in ("gemm", "attention"):
        assert abs(hot.time_s(ops[kind]) / burst.time_s(ops[kind]) - 1 / 0.8) < 1e-12
    assert hot.time_s(ops["memory"]) == burst.time_s(ops["memory"])  # HBM-bound: clocks don't matter
