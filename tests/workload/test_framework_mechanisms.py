"""Mechanisms the training set's misses were traced to: attention dropout traffic, the epilogue
of accumulating weight-gradient GEMMs, Megatron-LM 2022's pipeline exchange and async TP without
SP, gradient clipping, and recomputed flash attention at the forward kernel's efficiency."""

import numpy as np
import pytest

import teton
from teton.engine.compute import ComputeModel
from teton.engine.step import GRAD_CLIP_BYTES_PER_PARAM, OPTIMIZER_BYTES_PER_PARAM, blocking_p2p
from teton.spec import load_spec
from teton.validation.training import KORTHIKANTI_JOB, korthikanti_spec
from teton.workload.items import ComputeOp
from teton.workload.ops import layer_block

ROW = {"model": "175B", "heads": "96", "hidden": "12288", "layers": "96", "tp": "8", "pp": "8", "gpus": "64",
       "global_batch": "64", "micro_batch": "1", "virtual_stages": "3"}
BURST = {"base": "dgx-a100-superpod", "efficiency": {"profile": "burst"}}


def _gpt(recompute="full", sp=False, **job):
    spec = korthikanti_spec(ROW, recompute, sp)
    spec["job"].update(job)
    return spec


def _item(items, name):
    return next(i for i in items if i.name == name)


def test_attention_dropout_moves_five_bytes_per_score_each_way():
    spec = load_spec(_gpt("selective", True))
    blk = layer_block(spec.model, spec.job)
    elements = 1 * (96 // 8) * 2048 * 2048
    assert _item(blk.fwd, "attn_dropout").bytes == 5 * elements  # read P, write dropped P + 1-byte mask
    assert _item(blk.bwd, "attn_dropout.bwd").bytes == 5 * elements
    assert _item(blk.bwd, "recompute.attn_dropout").bytes == 5 * elements  # selective recomputes it
    flash = load_spec(_gpt("selective", True, flash_attention=True))
    assert not [i for i in layer_block(flash.model, flash.job).fwd if i.name == "attn_dropout"]


def test_accumulating_wgrad_gemm_pays_its_fp32_epilogue():
    spec = load_spec(_gpt())
    blk = layer_block(spec.model, spec.job)
    wgrad = _item(blk.bwd, "mlp_up.wgrad")
    assert wgrad.accumulate_bytes == 4 and _item(blk.bwd, "mlp_up.dgrad").accumulate_bytes == 0
    compute = ComputeModel.for_gpu(spec.cluster.gpu_spec, overrides={"profile": "burst"})
    bw = spec.cluster.gpu_spec.hbm_bw_bytes_s * compute.eff.mem
    fresh = ComputeOp(wgrad.name, "gemm", wgrad.flops, wgrad.bytes, wgrad.m, wgrad.n, wgrad.k, backward=True)
    assert compute.time_s(wgrad) - compute.time_s(fresh) == pytest.approx(wgrad.m * wgrad.n * 6 / bw)
    unfused = load_spec(_gpt(grad_accum_fusion=False))
    assert _item(layer_block(unfused.model, unfused.job).bwd, "mlp_up.wgrad").accumulate_bytes == 0


def test_tp_overlap_bwd_hides_the_gradient_all_reduce_without_sp():
    spec = load_spec(_gpt(tp_overlap="bwd"))
    blk = layer_block(spec.model, spec.job)
    assert {c.name: c.overlap for c in blk.bwd if getattr(c, "overlap", "")} == {
        "tp.rs_mlp_grad": "mlp_up.wgrad", "tp.rs_qkv_grad": "qkv.wgrad"}
    hidden = teton.simulate({**_gpt(tp_overlap="bwd"), "cluster": BURST}).breakdown["tp_comm"]
    exposed = teton.simulate({**_gpt(tp_overlap="none"), "cluster": BURST}).breakdown["tp_comm"]
    assert hidden < exposed * 0.8  # 2 of the 6 all-reduces per layer (forward, recompute, backward)


def test_scatter_gather_sends_one_tp_slice_and_gathers_it():
    from teton.workload.ops import pipeline_p2p_bytes, pipeline_p2p_gather_bytes

    plain, sg = load_spec(_gpt(pp_scatter_gather=False)), load_spec(_gpt())
    assert pipeline_p2p_bytes(sg.model, sg.job) == pipeline_p2p_bytes(plain.model, plain.job) / 8
    assert pipeline_p2p_gather_bytes(sg.model, sg.job) == 2 * 2048 * 12288
    with_sp = load_spec(_gpt("selective", True))
    assert pipeline_p2p_gather_bytes(with_sp.model, with_sp.job) == 0  # SP already sends a shard
    a = teton.simulate({**_gpt(pp_scatter_gather=False, pp_p2p="async"), "cluster": BURST})
    b = teton.simulate({**_gpt(pp_p2p="async"), "cluster": BURST})
    assert b.breakdown["pp_comm"] < a.breakdown["pp_comm"]  # 1/8 over the NIC beats the whole tensor


def test_blocking_p2p_adds_each_send_to_its_op():
    fwd = np.ones((3, 2))
    bwd = 2 * np.ones((3, 2))
    p2p = np.array([0.1, 0.2, 0.3])  # boundaries 0->1, 1->2 and the wrap-around 2->0
    f, b = blocking_p2p(fwd, bwd, p2p)
    assert f.tolist() == [[1.1, 1.1], [1.2, 1.2], [1.3, 1.0]]  # the last virtual stage sends nothing
    assert b.tolist() == [[2.0, 2.3], [2.1, 2.1], [2.2, 2.2]]  # nor does the first one's backward
    blocking = teton.simulate({**_gpt(), "cluster": BURST})
    overlapped = teton.simulate({**_gpt(pp_p2p="async"), "cluster": BURST})
    assert blocking.step_time_s > overlapped.step_time_s
    assert sum(blocking.breakdown.values()) == pytest.approx(blocking.step_time_s)


def test_optimizer_step_counts_gradient_clipping():
    spec = load_spec({**_gpt(), "cluster": BURST})
    r = teton.simulate(spec)
    bw = spec.cluster.gpu_spec.hbm_bw_bytes_s * ComputeModel.for_gpu(
        spec.cluster.gpu_spec, overrides={"profile": "burst"}).eff.mem
    assert GRAD_CLIP_BYTES_PER_PARAM == 12 and OPTIMIZER_BYTES_PER_PARAM == 46
    params = r.breakdown["optimizer"] * bw / OPTIMIZER_BYTES_PER_PARAM
    assert 2.5e9 < params < 3.0e9  # 175B over 64 GPUs, the fullest rank (with the embedding)


def test_recomputed_flash_attention_runs_at_the_forward_kernels_efficiency():
    spec = load_spec({"cluster": "meta-roce-24k", "model": "llama3-8b",
                      "job": {"gpus": 8, "tp": 8, "global_batch": 8, "recompute": "full"}})
    blk = layer_block(spec.model, spec.job)
    compute = ComputeModel.for_gpu(spec.cluster.gpu_spec, seq_len=spec.job.seq_len)
    assert compute.time_s(_item(blk.bwd, "recompute.attention")) == compute.time_s(_item(blk.fwd, "attention"))


def test_korthikanti_jobs_name_what_megatron_2022_did():
    """The megatron-lm-2022 stack sets what Megatron-LM of 2022 did; the job fields show it."""
    from teton.validation.training import training_runs

    job = next(r for r in training_runs() if r.name.startswith("Korthikanti")).spec.job
    assert job.software.name == "megatron-lm-2022" and KORTHIKANTI_JOB["zero"] == 0
    assert job.tp_overlap == "bwd" and job.pp_p2p == "blocking" and not job.flash_attention
    assert job.pp_scatter_gather and job.grad_accum_fusion
