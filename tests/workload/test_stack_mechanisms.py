"""The software stack's mechanisms (``job.software``): cross-entropy kernels, fp8 recipes and the
GEMMs / layers / attention they cover, norm + fp8-cast fusion, kernel launches vs CUDA graphs, and
CPU activation offload. Each test checks what a user relies on the stack field to change."""

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import teton
from teton.engine.block_timer import BlockTimer
from teton.engine.compute import ComputeModel
from teton.engine.prepare import default_placement, make_cost_model
from teton.errors import SpecError
from teton.hardware.gpus import GPUS
from teton.hardware.kernels import CROSS_ENTROPY, EAGER_KERNEL_GAP_S, EAGER_LAUNCH_S, FP8_RECIPES
from teton.spec import load_spec
from teton.workload.head import head_block
from teton.workload.items import Collective, ComputeOp, HostCopy
from teton.workload.memory import layer_activation_bytes, memory_per_gpu
from teton.workload.ops import layer_block
from teton.workload.step_work import step_work

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
TINY = {"name": "tiny", "layers": 4, "hidden": 512, "ffn_hidden": 2048, "heads": 8, "vocab": 32000}


def _spec(job=None, software=None, model="llama3-8b", sets=()):
    job = {"gpus": 8, "tp": 8, "seq_len": 8192, "global_batch": 1, **(job or {})}
    return load_spec({"cluster": "meta-roce-24k", "model": model, "job": job,
                      "software": {"base": "unknown", **(software or {})}}, list(sets))


def _bytes(items, pred):
    return sum(i.bytes for i in items if isinstance(i, ComputeOp) and pred(i.name))


def _named(items, name):
    return next(i for i in items if i.name == name)


# --- cross-entropy ------------------------------------------------------------------------------

def test_cross_entropy_variants_move_their_bytes_per_logit():
    logits = {}
    heads = {}
    for variant in CROSS_ENTROPY:
        spec = _spec(software={"cross_entropy": variant})
        heads[variant] = head_block(spec.model, spec.job)
        logits[variant] = 8192 * spec.model.vocab / 8
    per = {v: (_named(h.fwd, "cross_entropy").bytes / logits[v], _named(h.bwd, "cross_entropy.bwd").bytes / logits[v])
           for v, h in heads.items()}
    assert per == {"eager": (18, 26), "vocab_parallel": (38, 14), "fused": (6, 4)}
    # Megatron's vocab-parallel kernel moves 32 + 10 bytes per logit more than TE's fused one
    vp, fused = heads["vocab_parallel"], heads["fused"]
    extra = _bytes((*vp.fwd, *vp.bwd), lambda n: True) - _bytes((*fused.fwd, *fused.bwd), lambda n: True)
    assert extra == pytest.approx((38 - 6 + 14 - 4) * logits["fused"])


def test_cross_entropy_tp_collectives_follow_the_variant():
    def tp_collectives(variant, tp=8):
        spec = _spec({"gpus": tp, "tp": tp}, {"cross_entropy": variant})
        return [(c.name, c.op) for c in head_block(spec.model, spec.job).fwd
                if isinstance(c, Collective) and c.name.startswith("tp.ce")]

    assert [op for _, op in tp_collectives("vocab_parallel")] == ["all_reduce"] * 3  # max, predicted logit, sum-exp
    assert [op for _, op in tp_collectives("eager")] == ["all_reduce"] * 2
    assert [op for _, op in tp_collectives("fused")] == ["all_gather"]  # each rank's (max, sum-exp, logit)
    assert tp_collectives("vocab_parallel", tp=1) == []


def test_kernel_fusion_no_longer_picks_the_cross_entropy():
    eager_job = _spec({"kernel_fusion": "eager"}, {"cross_entropy": "fused"})
    fused_job = _spec({"kernel_fusion": "fused"}, {"cross_entropy": "fused"})
    a, b = (_named(head_block(s.model, s.job).fwd, "cross_entropy").bytes for s in (eager_job, fused_job))
    assert a == b


def test_the_loss_holds_its_kernels_peak_bytes_per_logit():
    """One rank, so the fullest GPU holds the head: eager keeps 10 B per logit (bf16 logits, fp32
    copy, fp32 log-softmax), vocab_parallel 6 (the fp32 softmax in place of the copy), fused 2."""
    working = {v: memory_per_gpu(s.model, s.job)[0].working
               for v in CROSS_ENTROPY for s in [_spec(software={"cross_entropy": v})]}
    logits = 8192 * 128256 / 8
    assert working["eager"] - working["fused"] == pytest.approx(8 * logits)
    assert working["vocab_parallel"] - working["fused"] == pytest.approx(4 * logits)


# --- fp8 recipes --------------------------------------------------------------------------------

def _casts(spec):
    blk = layer_block(spec.model, spec.job)
    return blk, _bytes((*blk.fwd, *blk.bwd), lambda n: "fp8_cast" in n)


def test_current_scaling_costs_more_than_delayed_and_reduces_amax_over_tp_only_under_sp():
    fp8 = {"precision": "fp8"}
    _, delayed = _casts(_spec(fp8, {"fp8_recipe": "delayed"}))
    blk, current = _casts(_spec(fp8, {"fp8_recipe": "current"}))
    assert current == pytest.approx(6 / 4 * delayed)  # an amax pass (2 B) before each cast-transpose (4 B)
    amax = [c for c in (*blk.fwd, *blk.bwd) if isinstance(c, Collective) and "amax" in c.name]
    # the SP-sharded QKV / MLP-up inputs forward, attention-out / MLP-down output gradients backward
    assert sorted(c.name for c in amax) == ["tp.attn_out.grad_fp8_cast_amax", "tp.mlp_down.grad_fp8_cast_amax",
                                            "tp.mlp_up.fp8_cast_amax", "tp.qkv.fp8_cast_amax"]
    assert all(c.op == "all_reduce" and c.axis == "tp" and c.bytes == 4 for c in amax)
    no_sp, _ = _casts(_spec({**fp8, "sequence_parallel": False}, {"fp8_recipe": "current"}))
    assert not [c for c in no_sp.fwd + no_sp.bwd if isinstance(c, Collective) and "amax" in c.name]
    dl, _ = _casts(_spec(fp8, {"fp8_recipe": "delayed"}))
    assert not [c for c in dl.fwd + dl.bwd if isinstance(c, Collective) and "amax" in c.name]
    slow, fast = (teton.simulate(_spec(fp8, {"fp8_recipe": r})).step_time_s for r in ("current", "delayed"))
    assert slow > fast


def test_block_scaled_recipes_add_their_scales_to_the_cast():
    b200 = ("cluster=dgx-b200-superpod",)  # MXFP8 needs Blackwell's block-scaled tensor cores
    _, delayed = _casts(_spec({"precision": "fp8"}, {"fp8_recipe": "delayed"}, sets=b200))
    for recipe in ("blockwise", "mxfp8"):
        _, cast = _casts(_spec({"precision": "fp8"}, {"fp8_recipe": recipe}, sets=b200))
        assert cast == pytest.approx(delayed * FP8_RECIPES[recipe].cast_bytes / 4)
    with pytest.raises(SpecError, match="software.fp8_recipe"):
        _spec({"precision": "fp8"}, {"fp8_recipe": "mxfp8"})
    assert FP8_RECIPES["blockwise"].cast_bytes == 4 + 8 / 128 and FP8_RECIPES["mxfp8"].cast_bytes == 4 + 2 / 32


def test_blackwell_fp8_gemms_take_any_layout_so_per_tensor_casts_write_no_transpose():
    b200 = ("cluster=dgx-b200-superpod",)
    gpus = {"h100": GPUS["h100-sxm"], "b200": GPUS["b200"]}
    assert gpus["b200"].fp8_any_layout and not gpus["h100"].fp8_any_layout

    def cast_bytes_moved(recipe, gpu, sets=()):
        spec = _spec({"precision": "fp8"}, {"fp8_recipe": recipe}, sets=sets)
        compute = ComputeModel.for_gpu(gpus[gpu], "fp8")
        blk = layer_block(spec.model, spec.job)
        casts = [i for i in (*blk.fwd, *blk.bwd) if isinstance(i, ComputeOp) and i.name.endswith("fp8_cast")]
        return sum(i.bytes for i in casts), sum(compute.moved_bytes(i) for i in casts)

    for recipe, per_element in (("delayed", 4), ("current", 4)):  # the quantise kernel, amax pass apart
        listed, hopper = cast_bytes_moved(recipe, "h100")
        assert hopper == listed
        listed, blackwell = cast_bytes_moved(recipe, "b200", b200)
        assert blackwell == pytest.approx(listed * (per_element - 1) / per_element)  # no transposed fp8 copy
    listed, blackwell = cast_bytes_moved("mxfp8", "b200", b200)  # block scales run along one axis
    assert blackwell == listed
    # and the step: the same delayed-scaling job on a B200 whose fp8 GEMMs were TN-only is slower
    def step(gpu):
        return teton.simulate(load_spec({"cluster": {"base": "dgx-b200-superpod", "gpu": gpu}, "model": "llama3-8b",
                                         "job": {"gpus": 8, "seq_len": 8192, "global_batch": 8, "precision": "fp8"},
                                         "software": {"base": "unknown", "fp8_recipe": "delayed"}})).step_time_s

    assert step("b200") < step({"base": "b200", "name": "b200-tn", "fp8_any_layout": False})


def test_fused_norm_linear_removes_the_two_input_casts_under_delayed_but_not_under_current():
    def fwd_casts(recipe, fused, precision="fp8"):
        spec = _spec({"precision": precision}, {"fp8_recipe": recipe, "fused_norm_linear": fused})
        blk = layer_block(spec.model, spec.job)
        return {i.name for i in blk.fwd if "fp8_cast" in i.name}, _named(blk.fwd, "attn_norm").bytes

    (plain, norm), (fused, fused_norm) = fwd_casts("delayed", False), fwd_casts("delayed", True)
    assert plain - fused == {"qkv.fp8_cast", "mlp_up.fp8_cast"} and fused == {"attn_out.fp8_cast", "mlp_down.fp8_cast"}
    assert fused_norm == norm  # writes fp8 + fp8 transposed (2 B) instead of bf16 (2 B)
    blockwise, blockwise_norm = fwd_casts("blockwise", True)
    assert blockwise == fused and blockwise_norm == pytest.approx(norm + 8 / 128 * 8192 / 8 * 4096)  # + scales
    assert fwd_casts("current", True)[0] == fwd_casts("current", False)[0]  # the amax pass needs the bf16 output
    bf16 = _spec({}, {"fused_norm_linear": True})
    assert layer_block(bf16.model, bf16.job) == layer_block(_spec().model, _spec().job)


def test_bf16_layers_sit_on_the_first_and_last_chunks_and_slow_the_step():
    job = {"gpus": 64, "tp": 8, "pp": 4, "dp": 2, "global_batch": 16, "precision": "fp8",
           "pp_schedule": "interleaved", "virtual_stages": 2}
    spec = _spec(job, {"fp8_bf16_layers": 3})
    work = step_work(spec.model, spec.job)
    kinds = {k.label: (block, n) for k, block, n in work.kinds}
    bf16_block, bf16 = kinds["bf16_layer"]
    assert work.split.layers[0, 0] == 4 and bf16[0, 0] == 3 and bf16[-1, -1] == 3 and bf16.sum() == 6
    assert (kinds["layer"][1] + bf16 == work.split.layers).all()
    assert not any(isinstance(i, ComputeOp) and (i.fp8 or "fp8_cast" in i.name) for i in bf16_block.fwd + bf16_block.bwd)
    # more bf16 layers than the first chunk holds spill onto the next virtual stage (rank 1, chunk 0)
    spill = step_work(*(lambda s: (s.model, s.job))(_spec(job, {"fp8_bf16_layers": 6})))
    n = {k.label: c for k, _, c in spill.kinds}["bf16_layer"]
    assert n[0, 0] == 4 and n[1, 0] == 2 and n[-1, -1] == 4 and n[-2, -1] == 2
    steps = [teton.simulate(_spec(job, {"fp8_bf16_layers": k})).step_time_s for k in (0, 3)]
    assert steps[1] > steps[0]
    assert teton.simulate(_spec({**job, "precision": "bf16"}, {"fp8_bf16_layers": 3})).step_time_s == \
        teton.simulate(_spec({**job, "precision": "bf16"})).step_time_s


def test_bf16_layers_combine_with_selective_layer_checkpointing():
    job = {"gpus": 16, "tp": 8, "pp": 2, "dp": 1, "global_batch": 4, "precision": "fp8",
           "recompute": "selective_layer", "recompute_interval": 2}
    spec = _spec(job, {"fp8_bf16_layers": 1})
    work = step_work(spec.model, spec.job)
    n = {k.label: c for k, _, c in work.kinds}
    assert set(n) == {"layer", "checkpointed_layer", "bf16_layer", "bf16_checkpointed_layer"}
    assert sum(n.values()).tolist() == work.split.layers.tolist()
    # layer 0 is rank 0's first (not checkpointed); the model's last is rank 1's 16th (checkpointed)
    assert n["bf16_layer"].tolist() == [[1], [0]] and n["bf16_checkpointed_layer"].tolist() == [[0], [1]]
    assert (n["checkpointed_layer"] + n["bf16_checkpointed_layer"]).tolist() == [[8], [8]]


def test_fp8_attention_runs_the_kernels_at_the_fp8_peak_after_casting_qkv_and_do():
    plain, fp8_attn = _spec({"precision": "fp8"}), _spec({"precision": "fp8"}, {"fp8_attention": True})
    blk = layer_block(fp8_attn.model, fp8_attn.job)
    assert _named(blk.fwd, "attention").fp8 and _named(blk.bwd, "attention.bwd").fp8
    q, kv = 4096 // 8, 1024 // 8
    assert _named(blk.fwd, "attention.fp8_cast").bytes == 4 * 8192 * (q + 2 * kv)
    assert _named(blk.bwd, "attention.grad_fp8_cast").bytes == 4 * 8192 * q
    gpu = GPUS["h100-sxm"]
    fp8, bf16 = ComputeModel.for_gpu(gpu, "fp8"), ComputeModel.for_gpu(gpu, "bf16")
    op = _named(blk.fwd, "attention")
    ratio = gpu.peak_flops("fp8") / gpu.peak_flops("bf16")  # 1978.9 vs 989.4 TFLOPS dense
    assert fp8.attention_s(op) == pytest.approx(bf16.attention_s(op) / ratio)
    assert teton.simulate(fp8_attn).step_time_s < teton.simulate(plain).step_time_s


def test_nvfp4_and_mxfp8_on_hopper_are_refused_naming_the_recipe():
    """When the spec loads: NVFP4 needs fp4 tensor cores (Hopper lists none), MXFP8 Blackwell's;
    both load on a B200; a bf16 job ignores the recipe."""
    b200 = ("cluster=dgx-b200-superpod",)
    for recipe, needle in (("nvfp4", "fp4 tensor cores"), ("mxfp8", "Blackwell")):
        with pytest.raises(SpecError, match="software.fp8_recipe") as err:
            _spec({"precision": "fp8"}, {"fp8_recipe": recipe})
        assert needle in str(err.value) and "\n" not in str(err.value)
        assert "or mxfp8" not in str(err.value)  # Hopper is offered only the recipes it can run
    for recipe in ("mxfp8", "nvfp4"):
        assert _spec({"precision": "fp8"}, {"fp8_recipe": recipe}, sets=b200).job.software.fp8_recipe == recipe
    assert _spec({}, {"fp8_recipe": "nvfp4"}).job.precision == "bf16"  # bf16 ignores the recipe


def test_nvfp4_casts_read_the_tensor_three_times_and_reduce_their_amax_over_tp():
    """TE 2.9's NVFP4 quantizer: the RHT amax pass (read 2), the rowwise quantise and the RHT-cast
    fusion (read 2 each, write 1/2 + 1/16 each): 7.125 B per element against MXFP8's 4.0625, and
    the amax of a sequence-sharded tensor all-reduced over TP as under current scaling; no norm
    writes the operand (the norm runs in bf16 first)."""
    b200 = ("cluster=dgx-b200-superpod",)
    nv = FP8_RECIPES["nvfp4"]
    assert nv.amax_bytes + nv.cast_bytes == pytest.approx(2 + 4 + 2 * (0.5 + 1 / 16))
    assert nv.gemm_precision == "fp4" and not nv.norm_fusable and nv.amax_all_reduce
    _, mx = _casts(_spec({"precision": "fp8"}, {"fp8_recipe": "mxfp8", "fused_norm_linear": False}, sets=b200))
    blk, fp4 = _casts(_spec({"precision": "fp8"}, {"fp8_recipe": "nvfp4", "fused_norm_linear": False}, sets=b200))
    assert fp4 == pytest.approx(mx * (2 + nv.cast_bytes) / FP8_RECIPES["mxfp8"].cast_bytes)
    amax = sorted(c.name for c in (*blk.fwd, *blk.bwd) if isinstance(c, Collective) and "amax" in c.name)
    assert amax == ["tp.attn_out.grad_fp8_cast_amax", "tp.mlp_down.grad_fp8_cast_amax",
                    "tp.mlp_up.fp8_cast_amax", "tp.qkv.fp8_cast_amax"]
    fused = layer_block(*(lambda s: (s.model, s.job))(_spec({"precision": "fp8"},
                                                            {"fp8_recipe": "nvfp4", "fused_norm_linear": True}, sets=b200)))
    assert {i.name for i in fused.fwd if i.name in ("qkv.fp8_cast", "mlp_up.fp8_cast")} == {"qkv.fp8_cast", "mlp_up.fp8_cast"}


@pytest.mark.parametrize("recipe", ["current", "mxfp8", "nvfp4"])
def test_a_te_stack_gathers_the_quantised_shard_and_casts_only_its_own(recipe):
    """TE quantises a sequence-parallel GEMM operand on its own rank and all-gathers the quantised
    tensor: the QKV / MLP-up inputs (rowwise forward, columnwise for the weight gradient) and the
    attention-out / MLP-down output gradients (a block-scaled recipe gathers both copies); the
    reduce-scatters stay bf16. Without the stack field the gather is bf16 and the cast runs on
    the gathered tensor."""
    b200 = ("cluster=dgx-b200-superpod",)
    job = {"precision": "fp8", "gpus": 8, "tp": 4, "global_batch": 2}
    sw = {"fp8_recipe": recipe, "fused_norm_linear": False}
    quant = _spec(job, {**sw, "fp8_gather_quantized": True}, sets=b200)
    plain = _spec(job, sw, sets=b200)
    blocks = {k: layer_block(s.model, s.job) for k, s in (("quant", quant), ("plain", plain))}

    def moved(block, name):
        return _named((*block.fwd, *block.bwd), name).bytes

    act = 8192 * quant.model.hidden * 2  # one bf16 hidden-state tensor of the micro-batch
    r = FP8_RECIPES[recipe]
    grad_copies = 1 if r.transpose_bytes else 2
    for name, copies in (("tp.ag_qkv", 1), ("tp.ag_mlp", 1), ("tp.ag_qkv_input", 1), ("tp.ag_mlp_input", 1),
                         ("tp.ag_attn_grad", grad_copies), ("tp.ag_mlp_grad", grad_copies)):
        assert moved(blocks["plain"], name) == pytest.approx(act)
        assert moved(blocks["quant"], name) == pytest.approx(act / 2 * r.saved_bytes * copies)
    for name in ("tp.rs_attn", "tp.rs_mlp", "tp.rs_qkv_grad", "tp.rs_mlp_grad"):
        assert moved(blocks["quant"], name) == moved(blocks["plain"], name) == pytest.approx(act)
    # each rank casts its quarter of the sharded tensors (a per-tensor recipe rowwise only); QKV's
    # output gradient is not sharded
    for name in ("qkv.fp8_cast", "mlp_up.fp8_cast", "attn_out.grad_fp8_cast", "mlp_down.grad_fp8_cast"):
        assert moved(blocks["quant"], name) == pytest.approx(
            moved(blocks["plain"], name) / 4 * (r.cast_bytes - r.transpose_bytes) / r.cast_bytes)
    assert moved(blocks["quant"], "qkv.grad_fp8_cast") == moved(blocks["plain"], "qkv.grad_fp8_cast")
    fast, slow = (teton.simulate(s).breakdown["tp_comm"] for s in (quant, plain))
    assert fast < slow
    bf16 = _spec({**job, "precision": "bf16"}, {**sw, "fp8_gather_quantized": True}, sets=b200)
    assert moved(layer_block(bf16.model, bf16.job), "tp.ag_qkv") == pytest.approx(act)


def test_a_gathered_per_tensor_operand_is_transposed_whole_on_a_tn_only_gpu():
    """Per-tensor fp8 is gathered rowwise only; before the weight gradient TE transposes the whole
    gathered tensor (read 1, write 1 per element), work a TN-only GPU (Hopper) does and Blackwell
    skips; block-scaled recipes gather the columnwise copy instead."""
    job = {"precision": "fp8", "gpus": 8, "tp": 4, "global_batch": 2}
    spec = _spec(job, {"fp8_recipe": "current", "fp8_gather_quantized": True})
    block = layer_block(spec.model, spec.job)
    full = 8192 * spec.model.hidden
    for name in ("qkv.input.fp8_transpose", "mlp_up.input.fp8_transpose", "attn_out.grad.fp8_transpose",
                 "mlp_down.grad.fp8_transpose"):
        op = _named(block.bwd, name)
        assert op.bytes == op.tn_only_bytes == pytest.approx(2 * full)
    h100, b200 = (ComputeModel.for_gpu(GPUS[g], "fp8") for g in ("h100-sxm", "b200"))
    op = _named(block.bwd, "qkv.input.fp8_transpose")
    assert h100.moved_bytes(op) == op.bytes and b200.moved_bytes(op) == 0
    mx = _spec(job, {"fp8_recipe": "mxfp8", "fp8_gather_quantized": True}, sets=("cluster=dgx-b200-superpod",))
    assert not [i for i in layer_block(mx.model, mx.job).bwd if i.name.endswith("fp8_transpose")]


@pytest.mark.parametrize("recipe", ["current", "mxfp8", "nvfp4"])
def test_fp8_param_gather_holds_the_layers_weights_quantised_and_gathers_them_so(recipe):
    """software.fp8_param_gather (Megatron's --fp8-param-gather; NeMo 2.0's and Megatron-Bridge's
    recipes): the transformer layers' weights are held as the recipe's rowwise and columnwise
    copies, the embedding and output layer in bf16, and the ZeRO parameter all-gather moves the
    rowwise copy (MXFP8's in bf16, through the gradient buffer); a bf16 job is unchanged."""
    from teton.workload.memory import memory_per_gpu
    from teton.workload.ops import layer_params_per_gpu
    from teton.workload.step_work import per_layer_type, step_params

    b200 = ("cluster=dgx-b200-superpod",)
    job = {"precision": "fp8", "gpus": 16, "tp": 2, "pp": 2, "global_batch": 16}
    sw = {"fp8_recipe": recipe}
    held, plain = (_spec(job, {**sw, "fp8_param_gather": on}, sets=b200) for on in (True, False))
    split, params, _ = step_params(held.model, held.job)
    layers = per_layer_type(held.model, held.job, split, lambda m: layer_params_per_gpu(m, held.job))
    r = FP8_RECIPES[recipe]
    rank = int(memory_per_gpu(held.model, held.job)[1])
    expect = layers[rank].sum() * r.weight_bytes + (params[rank].sum() - layers[rank].sum()) * 2
    assert memory_per_gpu(held.model, held.job)[0].weights == pytest.approx(expect)
    assert memory_per_gpu(plain.model, plain.job)[0].weights == pytest.approx(params[rank].sum() * 2)
    # independent of the split: the quantised layers dominate, the bf16 embedding and head pull towards 2 B
    ratio = memory_per_gpu(held.model, held.job)[0].weights / memory_per_gpu(plain.model, plain.job)[0].weights
    lo, hi = sorted((r.weight_bytes / 2, 1.0))
    assert lo <= ratio <= hi and (ratio < 0.6 if recipe == "nvfp4" else True)
    gathered = step_work(held.model, held.job).param_gather_bytes_per_param
    assert gathered == pytest.approx((layers.sum() * r.param_gather_bytes + (params.sum() - layers.sum()) * 2)
                                     / params.sum())
    assert step_work(plain.model, plain.job).param_gather_bytes_per_param == 2
    bf16 = _spec({**job, "precision": "bf16"}, {**sw, "fp8_param_gather": True}, sets=b200)
    assert step_work(bf16.model, bf16.job).param_gather_bytes_per_param == 2
    assert {k: FP8_RECIPES[k].weight_bytes for k in ("current", "mxfp8", "nvfp4")} == pytest.approx(
        {"current": 2.0, "mxfp8": 2 + 2 / 32, "nvfp4": 1 + 2 / 256})


def test_nvfp4_jobs_of_a_userbuffers_stack_overlap_only_the_backward_tp_collectives():
    """TE 2.9's userbuffers take fp8 and MXFP8 quantisers, not NVFP4: a stack with the userbuffers
    overlap (``tp_comm_overlap: full``) runs an NVFP4 job's TP collectives with TE's async backward
    overlap alone; its bf16 and MXFP8 jobs keep the full overlap, and a job's own field wins."""
    b200 = ("cluster=dgx-b200-superpod",)
    stack = {"base": "megatron-bridge-26.04"}

    def overlap(job, recipe):
        spec = load_spec({"cluster": "dgx-b200-superpod", "model": "llama3-70b", "software": {**stack, "fp8_recipe": recipe},
                          "job": {"gpus": 64, "tp": 2, "pp": 4, "seq_len": 8192, "global_batch": 256, **job}}, list(b200))
        return spec.job.tp_overlap

    assert overlap({"precision": "fp8"}, "nvfp4") == "bwd"
    assert overlap({"precision": "fp8"}, "mxfp8") == "full"
    assert overlap({"precision": "bf16"}, "nvfp4") == "full"
    assert overlap({"precision": "fp8", "tp_overlap": "full"}, "nvfp4") == "full"


def test_nvfp4_gemms_run_at_the_fp4_peak_and_take_their_own_in_situ_factor():
    """A GB200 job's linear layers under NVFP4 run on the fp4 tensor cores (twice fp8's dense
    peak): faster than MXFP8, by less than 2x (attention and casts stay), with MFU against the
    fp4 peak; ``nvfp4_gemm_in_situ`` slows NVFP4 GEMMs alone and ``mxfp8_gemm_in_situ`` does not
    touch them."""
    def run(recipe, *sets):
        return teton.simulate({"cluster": "dgx-b200-superpod", "model": "llama3-8b",
                               "job": {"gpus": 8, "global_batch": 8, "precision": "fp8",
                                       "software": {"fp8_recipe": recipe}}},
                              ["cluster.efficiency.profile=burst", *sets])

    mx, nv = run("mxfp8"), run("nvfp4")
    assert mx.breakdown["compute"] / 2 < nv.breakdown["compute"] < mx.breakdown["compute"]
    assert nv.precision == "fp4" and mx.precision == "fp8"
    assert nv.mfu == pytest.approx(nv.mfu_bf16 * 2250 / 9000)  # B200 dense bf16 / fp4 TFLOP/s
    slow = run("nvfp4", "cluster.efficiency.nvfp4_gemm_in_situ=0.5")
    assert slow.breakdown["compute"] > 1.2 * nv.breakdown["compute"]
    same = run("nvfp4", "cluster.efficiency.mxfp8_gemm_in_situ=0.5")
    assert same.step_time_s == pytest.approx(nv.step_time_s, rel=1e-12)
    assert run("mxfp8", "cluster.efficiency.nvfp4_gemm_in_situ=0.5").step_time_s == pytest.approx(mx.step_time_s, rel=1e-12)


# --- kernel launches ----------------------------------------------------------------------------

def _launch_quartile_us(trace: Path) -> float:
    """25th percentile of the intervals between consecutive kernel launches on the thread that
    launches the most (cudaLaunchKernel and cudaLaunchKernelExC, Kineto's cuda_runtime events)."""
    with gzip.open(trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    by_thread = defaultdict(list)
    for e in events:
        if e.get("cat") == "cuda_runtime" and e.get("name") in ("cudaLaunchKernel", "cudaLaunchKernelExC"):
            by_thread[(e["pid"], e["tid"])].append(float(e["ts"]))
    starts = np.sort(max(by_thread.values(), key=len))
    return float(np.percentile(np.diff(starts), 25))


def test_launch_time_lies_between_the_two_traces_measurements():
    measured = sorted(_launch_quartile_us(p) for p in sorted(TRACES.glob("*.kineto.json.gz")))
    assert len(measured) == 2
    assert measured[0] == pytest.approx(11.0, abs=0.5) and measured[1] == pytest.approx(14.7, abs=0.5)
    assert measured[0] <= EAGER_LAUNCH_S * 1e6 <= measured[1]


def test_the_eager_kernel_gap_lies_between_the_two_traces_measurements():
    """The GPU's idle gap after a kernel when the CPU is ahead: the lower quartile of the idle gaps
    under 1 ms on each trace's GEMM stream (teton.validation.trace's gap reader)."""
    from teton.validation.kineto import read_kineto

    measured = []
    for path in sorted(TRACES.glob("*.kineto.json.gz")):
        trace = read_kineto(path)
        stream = next(k.stream for k in trace.kernels if k.cls == "gemm")
        gaps, end = [], None
        for k in (k for k in trace.kernels if k.stream == stream):
            if end is not None and 0.0 <= k.ts_us - end < 1000.0:
                gaps.append(k.ts_us - end)
            end = k.end_us if end is None else max(end, k.end_us)
        measured.append(float(np.percentile(gaps, 25)))
    measured.sort()
    assert measured[0] == pytest.approx(2.0, abs=0.1) and measured[1] == pytest.approx(3.0, abs=0.1)
    assert measured[0] <= EAGER_KERNEL_GAP_S * 1e6 <= measured[1]


def test_a_gpu_bound_eager_pass_pays_the_gap_after_each_kernel_and_a_graphed_one_none():
    spec = _spec({"seq_len": 8192})
    c = spec.cluster
    timer = BlockTimer(ComputeModel.for_gpu(c.gpu_spec, "bf16", 8192, c.efficiency), make_cost_model(spec),
                       default_placement(spec), c)
    blk = layer_block(spec.model, spec.job)
    fwd = timer.items_s(blk.fwd, graphed=False)
    assert fwd["compute"] > BlockTimer.launches(blk.fwd) * EAGER_LAUNCH_S  # the GPU is the slower
    assert fwd["launch"] == pytest.approx(BlockTimer.launches(blk.fwd) * EAGER_KERNEL_GAP_S)
    assert timer.items_s(blk.fwd, graphed=True)["launch"] == 0


def test_a_tiny_eager_model_is_launch_bound_and_cuda_graphs_remove_it():
    tiny = {"gpus": 1, "tp": 1, "seq_len": 128, "global_batch": 1}
    runs = {g: teton.simulate(_spec(tiny, {"cuda_graphs": g}, TINY)) for g in ("none", "layers", "full")}
    eager = runs["none"].breakdown["launch_overhead"]
    assert eager > 0.2 * runs["none"].breakdown["compute"]
    assert 0 < runs["layers"].breakdown["launch_overhead"] < eager  # the embedding and head stay eager
    assert runs["full"].breakdown["launch_overhead"] == 0
    assert runs["full"].step_time_s == pytest.approx(runs["none"].step_time_s - eager)
    big = teton.simulate(_spec({"global_batch": 4}))
    # GPU-bound: only the GPU's idle gap after each kernel (2.5 us), not the CPU's launch time;
    # 2.3 % of compute here (Llama 3 8B at TP 8: many short kernels), against over 20 % above
    assert 0 < big.breakdown["launch_overhead"] < 0.05 * big.breakdown["compute"]


def test_an_eager_pass_takes_its_launches_when_they_outlast_the_gpu():
    spec = _spec({"gpus": 1, "tp": 1, "seq_len": 512}, model=TINY)
    c = spec.cluster
    timer = BlockTimer(ComputeModel.for_gpu(c.gpu_spec, "bf16", 512, c.efficiency), make_cost_model(spec),
                       default_placement(spec), c)
    blk = layer_block(spec.model, spec.job)
    fwd = timer.items_s(blk.fwd, graphed=False)
    assert fwd["launch"] == pytest.approx(len(blk.fwd) * EAGER_LAUNCH_S - fwd["compute"])
    assert timer.items_s(blk.fwd, graphed=True)["launch"] == 0


# --- CPU activation offload ---------------------------------------------------------------------

def _offload(job, layers):
    return _spec({"gpus": 1, "tp": 1, "seq_len": 8192, "global_batch": 2, **job}, {"cpu_offload_layers": layers})


def test_cpu_offload_takes_the_offloaded_layers_activations_out_of_hbm():
    base, off = _offload({}, 0), _offload({}, 8)
    per_layer = layer_activation_bytes(base.model, base.job)
    a0, a8 = (memory_per_gpu(s.model, s.job)[0].activations for s in (base, off))
    # 8 of 32 layers leave, one layer's worth stays (the double buffer)
    assert a0 - a8 == pytest.approx(7 * per_layer)
    blk = {k.label: b for k, b, _ in step_work(off.model, off.job).kinds}["offloaded_layer"]
    d2h, h2d = _named(blk.fwd, "offload.d2h"), _named(blk.bwd, "offload.h2d")
    assert isinstance(d2h, HostCopy) and d2h.bytes == h2d.bytes == per_layer


def test_cpu_offload_is_exposed_only_when_the_copy_outlasts_the_layer():
    # llama3-8b at 8K tokens: ~1.6 GB of activations per layer over a shared PCIe Gen5 link
    # (~28 GB/s) outlasts the layer's ~5 ms forward; a fully checkpointed layer's 64 MB does not
    slow, plain = (teton.simulate(s) for s in (_offload({}, 8), _offload({}, 0)))
    assert slow.breakdown["cpu_offload"] > 0
    # the copies are launched too: each adds the GPU's eager gap (launch_overhead)
    copies = slow.breakdown["launch_overhead"] - plain.breakdown["launch_overhead"]
    assert 0 <= copies < 1e-3
    assert slow.step_time_s == pytest.approx(plain.step_time_s + slow.breakdown["cpu_offload"] + copies)
    spec = _offload({"recompute": "full"}, 8)
    hidden = teton.simulate(spec)
    assert hidden.breakdown["cpu_offload"] == 0
    assert hidden.step_time_s == pytest.approx(teton.simulate(_offload({"recompute": "full"}, 0)).step_time_s,
                                               abs=1e-3)
    assert hidden.memory_breakdown["activations"] < teton.simulate(
        _offload({"recompute": "full"}, 0)).memory_breakdown["activations"]
    # the exposed time is max(0, copy - compute) per offloaded layer and pass
    c = spec.cluster
    timer = BlockTimer(ComputeModel.for_gpu(c.gpu_spec, "bf16", 8192, c.efficiency), make_cost_model(spec),
                       default_placement(spec), c)
    blk = {k.label: b for k, b, _ in step_work(*(lambda s: (s.model, s.job))(_offload({}, 8))).kinds}["offloaded_layer"]
    copy, compute = timer.host_copy_s(blk.fwd), timer.compute_s(blk.fwd)
    assert timer.items_s(blk.fwd)["offload"] == pytest.approx(copy - compute) and copy > compute


def test_op_rows_carry_the_launch_and_offload_time_the_step_charges():
    from teton.engine.op_table import block_totals, op_rows

    for spec, cat, key in ((_spec({"gpus": 1, "tp": 1, "seq_len": 512}, model=TINY), "launch", "launch_overhead"),
                           (_offload({}, 8), "offload", "cpu_offload")):
        totals = block_totals(op_rows(spec))
        r = teton.simulate(spec)
        counts = {k.label: int(n.sum()) for k, _, n in step_work(spec.model, spec.job).kinds}
        per_mb = sum(counts.get(b.split(".")[0], 1) * cats.get(cat, 0.0) for b, cats in totals.items())
        assert r.breakdown[key] > 0
        assert r.breakdown[key] == pytest.approx(r.micro_batches * per_mb, rel=1e-9)


# --- an MoE layer's launches and host sync ------------------------------------------------------

def _qwen3_moe(recipe, seq_len=4096):
    return _spec({"gpus": 8, "tp": 1, "ep": 8, "seq_len": seq_len,
                  "global_batch": 64, "precision": "fp8"}, {"fp8_recipe": recipe}, "qwen3-30b-a3b")


@pytest.mark.parametrize("recipe, cast_launches", [("current", 16), ("delayed", 1)])
def test_grouped_expert_gemms_and_their_casts_launch_per_local_expert(recipe, cast_launches):
    """Transformer Engine's GroupedLinear runs one cuBLAS GEMM per local expert and quantises its
    input split by split, except under delayed scaling (one fused multi-cast-transpose)."""
    spec = _qwen3_moe(recipe)
    blk = layer_block(spec.model, spec.job)
    local = spec.model.experts // 8
    up = _named(blk.fwd, "expert_up")
    assert local == 16 and up.groups == local and up.kernels == local
    assert _named(blk.bwd, "expert_up.wgrad").kernels == local
    assert _named(blk.fwd, "expert_up.fp8_cast").kernels == cast_launches
    attention_out = _named(blk.fwd, "attn_out")
    assert attention_out.kernels == 1 and _named(blk.fwd, "attn_out.fp8_cast").kernels == 1


def test_the_dispatchers_host_sync_times_an_eager_forward_segment_by_segment():
    """Megatron-Core's all-to-all dispatcher waits on the host for the token counts before the
    all-to-all: the CPU-bound excess after the sync is not hidden under the GPU work before it."""
    spec = _qwen3_moe("current", seq_len=2048)
    c = spec.cluster
    timer = BlockTimer(ComputeModel.for_gpu(c.gpu_spec, "fp8", 2048, c.efficiency), make_cost_model(spec),
                       default_placement(spec), c)
    blk = layer_block(spec.model, spec.job)
    syncs = [i for i, it in enumerate(blk.fwd) if isinstance(it, ComputeOp) and it.host_sync]
    assert [blk.fwd[i].name for i in syncs] == ["moe.permute"]
    assert not any(isinstance(it, ComputeOp) and it.host_sync for it in blk.bwd)
    fwd = timer.items_s(blk.fwd, graphed=False)
    gpu = sum(v for k, v in fwd.items() if k != "launch")
    unsynced = max(0.0, timer.launches(blk.fwd) * EAGER_LAUNCH_S - gpu)
    head, tail = blk.fwd[:syncs[0] + 1], blk.fwd[syncs[0] + 1:]

    def excess(part):
        busy = sum(timer.compute.time_s(x) if isinstance(x, ComputeOp) else timer.item_s(x, blk.fwd)[1] for x in part)
        return max(timer.launches(part) * EAGER_KERNEL_GAP_S, timer.launches(part) * EAGER_LAUNCH_S - busy)

    assert fwd["launch"] == pytest.approx(excess(head) + excess(tail))
    assert fwd["launch"] > unsynced  # the experts' per-expert launches outlast their GPU time
    assert timer.items_s(blk.fwd, graphed=True)["launch"] == 0


def test_a_recomputed_grouped_gemm_keeps_its_experts_and_launches():
    """Full recompute re-runs an MoE layer's forward in backward: the grouped GEMMs keep their
    per-expert shape and launches, the dispatcher its host sync."""
    from teton.workload.items import as_recompute

    spec = _qwen3_moe("current")
    blk = layer_block(spec.model, spec.job)
    for name in ("expert_up", "moe.permute"):
        op = _named(blk.fwd, name)
        again = as_recompute(op)
        assert again.name == f"recompute.{name}"
        assert (again.groups, again.kernels, again.host_sync) == (op.groups, op.kernels, op.host_sync)
    assert as_recompute(_named(blk.fwd, "expert_up")).groups == 16
