"""Per-layer ops: FLOPs and collectives against hand calculations."""

import pytest
from layouts import LAYOUT_405B_16K, LLAMA3_405B_16K

from teton.spec import load_spec
from teton.workload.items import Collective, ComputeOp
from teton.workload.ops import head_block, layer_block


def _spec(**job):
    """Llama 3 405B at Table 4's 16K-GPU degrees, 1F1B (no interleaving) unless ``job`` says otherwise."""
    return load_spec({**LLAMA3_405B_16K, "job": {**LAYOUT_405B_16K, **job}})


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

    base = {"cluster": {"base": "meta-roce-24k", "efficiency": {"profile": "burst"}}, "model": "llama3-8b",
            "job": {"gpus": 8, "tp": 1, "seq_len": 4096, "global_batch": 64, "zero": 1}}
    fused = simulate(base)
    unfused = simulate({**base, "job": {**base["job"], "grad_accum_fusion": False}})
    spec = load_spec(base)
    gpu, model = spec.cluster.gpu_spec, spec.model
    from teton.hardware import cluster_efficiency

    bw = gpu.hbm_bw_bytes_s * cluster_efficiency(gpu, {"profile": "burst"}).mem
    # unfused: one accumulate pass over every parameter (bf16 read, fp32 read + write: 10 B);
    # fused: the weight-gradient GEMMs' epilogue reads and writes the fp32 C (6 B beyond the bf16
    # output the GEMM sweep measured) over the matmul weights (no embedding lookup among them)
    gemm_params = model.matmul_params() - model.norm_params() - model.layers * 2 * model.norm_params()
    per_mb = (10 * model.total_params() - 6 * gemm_params) / bw
    # HBM time only: the accumulate kernels' own launch gaps (launch_overhead) are not bytes
    extra = ((unfused.step_time_s - unfused.breakdown["launch_overhead"])
             - (fused.step_time_s - fused.breakdown["launch_overhead"]))
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


def test_overlapped_collective_exposure_hand_calc():
    from teton.engine.overlap import overlapped_exposed_s

    assert overlapped_exposed_s(1.0, 3.0, 1) == 0.0  # hidden under a longer GEMM
    assert overlapped_exposed_s(3.0, 1.0, 1) == 2.0  # the part the GEMM cannot cover
    # pipelined in 8 chunks, the local one first: a GEMM chunk (3/8) outlasts a shard (1/7): hidden
    assert overlapped_exposed_s(1.0, 3.0, 8) == 0.0
    # shards of 3/7 under chunks of 1/8: the local chunk, then 7 shard waits: 1/8 + 3 - 1 exposed 2.125
    assert abs(overlapped_exposed_s(3.0, 1.0, 8) - (1.0 / 8 + 3.0 - 1.0)) < 1e-15
    # two chunks (TP 2): the remote half arrives during the local half's GEMM, 0.5 s each
    assert overlapped_exposed_s(0.5, 1.0, 2) == 0.0
    assert abs(overlapped_exposed_s(0.8, 1.0, 2) - 0.3) < 1e-15
    # the SM share still slows the chunks when they hide the transfers: 0.25 of 1 s
    assert abs(overlapped_exposed_s(1.0, 3.0, 8, 0.25) - 0.25) < 1e-15
    # the collective holds a quarter of the SMs for its 1 s: the 3 s GEMM ends 0.25 s later
    assert abs(overlapped_exposed_s(1.0, 3.0, 1, 0.25) - 0.25) < 1e-15
    # a GEMM short enough to finish on the remaining SMs stays hidden: max(2, 1 + 0.25 * 2) = 2
    assert abs(overlapped_exposed_s(2.0, 1.0, 1, 0.25) - 1.0) < 1e-15


def test_nccl_channels_per_rank():
    import numpy as np

    from teton.collectives.algorithms import nccl_channels

    one_host = np.arange(8)[None, :]
    assert nccl_channels(one_host, 8, 8) == 16  # NVLink: NCCL's NVLS default
    one_per_host = (np.arange(16) * 8)[None, :]
    assert nccl_channels(one_per_host, 8, 8) == 2  # one rail NIC, two channels on it
    four_per_host = np.concatenate([np.arange(4) + 8 * h for h in range(4)])[None, :]
    assert nccl_channels(four_per_host, 8, 8) == 8
    assert nccl_channels(four_per_host, 8, 2) == 4  # capped by the host's NICs


def test_overlapped_dp_collectives_cost_the_sms_they_hold():
    from teton import simulate

    # DP 8 inside one host (16 NVLink channels): the gradient reduce-scatter runs under the
    # backward of the other chunks and takes 16 of the 132 SMs while it does
    base = {"cluster": "meta-roce-24k", "model": "llama3-8b",
            "job": {"gpus": 16, "tp": 1, "pp": 2, "dp": 8, "seq_len": 4096, "global_batch": 64, "zero": 2,
                    "parallel_order": ["dp", "tp", "cp", "pp"]}}
    r = simulate(base)
    alone = simulate({**base, "job": {**base["job"], "overlap_dp_comm": False}})
    assert r.breakdown["sm_contention"] > 0 and alone.breakdown["sm_contention"] == 0
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-12)
    # hand calc: 1F1B, one chunk per rank; the rank with the most parameters (the head's) reduces
    # and gathers once per step; what is not exposed ran under compute at 16/132 of the SMs
    rs, ag = r.comm_times_s["dp.reduce_per_chunk_max"], r.comm_times_s["dp.all_gather_per_chunk_max"]
    assert r.breakdown["sm_contention"] == pytest.approx(16 / 132 * (rs + ag - r.dp_exposed_s), rel=1e-9)


def test_tp_overlap_pairs_each_collective_with_an_independentgemm():
    bwd_mode = layer_block(_spec().model, _spec(tp_overlap="bwd").job)
    full = layer_block(_spec().model, _spec(tp_overlap="full").job)
    paired = {i.name: i.overlap for i in bwd_mode.bwd if isinstance(i, Collective) and i.overlap}
    # the re-gathered input feeds the weight gradient, not the data gradient it overlaps; the
    # input-gradient reduce-scatter overlaps the weight gradient, which does not need it
    assert paired == {"tp.ag_mlp_input": "mlp_up.dgrad", "tp.rs_mlp_grad": "mlp_up.wgrad",
                      "tp.ag_qkv_input": "qkv.dgrad", "tp.rs_qkv_grad": "qkv.wgrad"}
    assert not any(isinstance(i, Collective) and i.overlap for i in bwd_mode.fwd)
    fwd_full = [i for i in full.fwd if isinstance(i, Collective)]
    assert all(i.overlap and i.chunks == 8 for i in fwd_full) and len(fwd_full) == 4
    # full keeps the weight-gradient side concurrent (the userbuffers' bulk overlaps) and pipelines
    # the output-gradient gathers with their data-gradient GEMMs
    chunks = {i.name: i.chunks for i in full.bwd if isinstance(i, Collective) and i.overlap}
    assert chunks == {**dict.fromkeys(paired, 1), "tp.ag_mlp_grad": 8, "tp.ag_attn_grad": 8}
    # each pipelined reduce-scatter ends by summing the 8 partials: the output read, 1/8 written
    sums = {i.name: i.bytes for i in full.fwd if isinstance(i, ComputeOp) and i.name.endswith(".reduce")}
    scatters = {i.name: i.bytes for i in fwd_full if i.op == "reduce_scatter"}
    assert sums == {f"{n}.reduce": b * (1 + 1 / 8) for n, b in scatters.items()} and len(sums) == 2
    assert not any(i.name.endswith(".reduce") for i in bwd_mode.fwd)
    for blk in (bwd_mode, full):  # every paired GEMM exists in the same pass
        for items in (blk.fwd, blk.bwd):
            names = {i.name for i in items if isinstance(i, ComputeOp)}
            assert all(i.overlap in names for i in items if isinstance(i, Collective) and i.overlap)


def test_tp_overlap_hides_the_backward_collectives_under_longer_gemms():
    from teton import simulate

    base = {"cluster": "meta-roce-24k", "model": "gpt3-175b",
            "job": {"gpus": 8, "tp": 8, "seq_len": 2048, "micro_batch": 4, "global_batch": 8}}
    none = simulate(base)
    bwd = simulate({**base, "job": {**base["job"], "tp_overlap": "bwd"}})
    full = simulate({**base, "job": {**base["job"], "tp_overlap": "full"}})
    # GPT-3 at TP 8: every paired GEMM outlasts its collective even on the SMs NCCL leaves it, so
    # "bwd" hides 4 of each layer's 10 hidden-state collectives but for the SM share their 16
    # NVLink channels hold (16 of 132); the embedding's and head's 3 stay exposed (the head's two
    # small cross-entropy all-reduces are ~1e-4 of the rest)
    layers = load_spec(base).model.layers
    f = 16 / 132
    expected = (6 * layers + 4 * layers * f + 3) / (10 * layers + 3)
    assert abs(bwd.breakdown["tp_comm"] / none.breakdown["tp_comm"] - expected) < 0.002
    assert full.breakdown["tp_comm"] < bwd.breakdown["tp_comm"] < none.breakdown["tp_comm"]
    assert bwd.breakdown["compute"] == none.breakdown["compute"]


def test_fp8_casts_move_four_bytes_per_operand_element_and_the_head_stays_bf16():
    bf16, fp8 = _spec(), _spec(precision="fp8")
    m = bf16.model
    assert not [i for i in layer_block(m, bf16.job).fwd if i.name.endswith("fp8_cast")]
    blk = layer_block(m, fp8.job)
    tok, h, f, t = 8192, 16384, 53248, 8
    # forward: each GEMM's input (m x k) cast to fp8 plus its fp8 transpose
    assert _bytes(blk.fwd, "mlp_up.fp8_cast") == 4 * tok * h
    assert _bytes(blk.fwd, "mlp_down.fp8_cast") == 4 * tok * f / t
    # backward: each GEMM's output gradient (m x n)
    assert _bytes(blk.bwd, "mlp_up.grad_fp8_cast") == 4 * tok * 2 * f / t
    assert _bytes(blk.bwd, "attn_out.grad_fp8_cast") == 4 * tok * h
    casts = [i for i in (*blk.fwd, *blk.bwd) if isinstance(i, ComputeOp) and "fp8_cast" in i.name]
    assert len(casts) == 8 and all(i.kind == "memory" for i in casts)
    head = head_block(m, fp8.job)
    assert not any(isinstance(i, ComputeOp) and i.fp8 for i in (*head.fwd, *head.bwd))


def test_ring_attention_exposure_hand_calc():
    from teton.engine.overlap import ring_exposed_s

    # 3 steps, 4 compute blocks of 1 s: steps of 0.5 s hide, steps of 2 s expose 1 s each
    assert ring_exposed_s(1.5, 4.0, 3) == 0.0
    assert ring_exposed_s(6.0, 4.0, 3) == 3.0


def test_ring_context_parallelism_moves_the_allgather_bytes_under_attention_and_saves_memory():
    from teton.workload.memory import layer_activation_bytes

    gather = _spec(cp=16, dp=8, seq_len=131072, global_batch=128)
    ring = _spec(cp=16, dp=8, seq_len=131072, global_batch=128, cp_algo="ring")
    g_blk, r_blk = layer_block(gather.model, gather.job), layer_block(ring.model, ring.job)
    kv = 2 * 131072 * 2 * 1024 / 8  # bf16 K and V of the whole sequence, one KV head per TP rank
    (fwd,) = [i for i in r_blk.fwd if isinstance(i, Collective) and i.axis == "cp"]
    (bwd,) = [i for i in r_blk.bwd if isinstance(i, Collective) and i.axis == "cp"]
    assert (fwd.bytes, fwd.overlap, fwd.ring_steps) == (kv, "attention", 15)
    assert (bwd.bytes, bwd.overlap) == (2 * kv, "attention.bwd")  # K/V and their gradients
    assert [i.op for i in g_blk.fwd if isinstance(i, Collective) and i.axis == "cp"] == ["all_gather"]
    # the all-gather keeps the gathered K and V for backward; a ring keeps only its own block
    saved = layer_activation_bytes(gather.model, gather.job) - layer_activation_bytes(ring.model, ring.job)
    assert saved == kv


def test_hardware_flops_are_the_model_flops_plus_the_recomputed():
    from teton import simulate

    spec = _spec()
    m, s, tokens = spec.model, 8192, 2048 * 8192
    r = simulate(spec)
    # no recompute: the model count (PaLM's convention for both, so hfu is never below mfu)
    assert r.hardware_flops_per_step == r.model_flops_per_step and r.hfu == r.mfu
    # full recompute replays each layer's forward as its kernels run it: its GEMMs 2 x weights,
    # causal attention 4 (s/2) q per token; the head is not replayed
    full = simulate(_spec(recompute="full"))
    layers = 2 * m.layers * (m.attention_params() + m.mlp_params())
    assert full.hardware_flops_per_step == pytest.approx(
        full.model_flops_per_step + tokens * (layers + 2 * m.layers * s * m.q_width), rel=1e-9)
    assert full.hfu > full.mfu


def test_cp_regather_kv_trades_memory_for_one_more_gather():
    from teton.workload.memory import layer_activation_bytes

    kept = _spec(cp=16, dp=8, seq_len=131072, global_batch=128)
    again = _spec(cp=16, dp=8, seq_len=131072, global_batch=128, cp_regather_kv=True)
    bwd = [i.name for i in layer_block(again.model, again.job).bwd if isinstance(i, (Collective, ComputeOp))]
    assert bwd.index("cp.kv_regather") < bwd.index("attention.bwd") < bwd.index("cp.kv_grad_scatter")
    kv = 2 * 131072 * 2 * 1024 / 8
    assert layer_activation_bytes(kept.model, kept.job) - layer_activation_bytes(again.model, again.job) == kv
