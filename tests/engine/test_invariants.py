"""Invariants of the step model a user relies on: identities between the reported numbers, the
direction of every what-if (faster hardware never slows a step, more micro-batches never raise the
bubble's share, ...), hand calculations of the memory terms and corner layouts. (The same step
time from every verb that reports one: tests/cli/test_verbs_agree.py.)

Where a tempting invariant does *not* hold because of a modelled mechanism, the test is scoped to
where it must hold and the docstring says why (e.g. ZeRO-3's gathered-layer buffers, fp8 casts on
skinny GEMMs, Llama 3's N = m rounds over unequal chunks).
"""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import teton
from teton.engine.compute import ComputeModel
from teton.errors import SpecError
from teton.hardware import GPUS
from teton.hardware.hosts import PCIE_GEN6_X16_BYTES_S
from teton.spec import load_spec
from teton.spec.cluster import CLUSTER_PRESETS
from teton.workload.items import gemm_ops
from teton.workload.ops import fp8_casts
from teton.workload.pipeline import split_layers
from teton.workload.step_work import step_work

H100 = "dgx-h100-superpod"
FAST = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
# a tiny dense model whose parameters are counted by hand below
TINY = {"name": "tiny", "layers": 2, "hidden": 256, "ffn_hidden": 1024, "heads": 4, "vocab": 1000}
TINY_PARAMS = 2 * (4 * 256 * 256 + 3 * 256 * 1024 + 2 * 256) + 1000 * 256 + (1000 * 256 + 256)


def _spec(model, job, cluster=H100):
    return {"cluster": cluster, "model": model, "job": job}


@st.composite
def layouts(draw):
    """(cluster, model, job) of a small valid layout with every modelling option in play."""
    model = draw(st.sampled_from(["llama3-8b", "llama2-7b", "gpt3-175b", "mixtral-8x7b"]))
    tp, cp = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 1, 2]))
    pp, dp = draw(st.sampled_from([1, 2, 3, 4])), draw(st.sampled_from([1, 2, 4]))
    interleaved = pp > 1 and draw(st.booleans())
    m = draw(st.sampled_from([1, 2, 3, 4])) * (pp if interleaved else 1)
    job = {"gpus": tp * cp * pp * dp, "tp": tp, "cp": cp, "pp": pp, "dp": dp, "seq_len": 4096,
           "global_batch": dp * m, "pp_schedule": "interleaved" if interleaved else "1f1b",
           "virtual_stages": draw(st.sampled_from([2, 3])) if interleaved else 1,
           "zero": draw(st.sampled_from([0, 1, 2, 3])), "recompute": draw(st.sampled_from(["none", "selective", "full"])),
           "precision": draw(st.sampled_from(["bf16", "fp8"])), "tp_overlap": draw(st.sampled_from(["none", "bwd", "full"])),
           "cp_algo": draw(st.sampled_from(["all_gather", "ring", "a2a"])), "overlap_dp_comm": draw(st.booleans()),
           "grad_reduce": draw(st.sampled_from([None, "per_step", "per_microbatch"])),
           "grad_accum_fusion": draw(st.booleans()), "pp_embedding_slots": pp > 1 and draw(st.booleans()),
           "sequence_parallel": draw(st.booleans()),
           "ep": 2 if model.startswith("mixtral") and dp >= 2 and draw(st.booleans()) else 1}
    return draw(st.sampled_from([H100, "meta-roce-24k"])), model, job


def _simulate(cluster, model, job):
    try:
        return teton.simulate(_spec(model, job, cluster))
    except SpecError:
        assume(False)


# --- identities between reported numbers -----------------------------------------------------

@FAST
@given(layouts())
def test_reported_numbers_are_consistent(layout):
    cluster, model, job = layout
    r = _simulate(cluster, model, job)
    spec = load_spec(_spec(model, job, cluster))
    peak = spec.cluster.gpu_spec.peak_flops(job["precision"])
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert min(r.breakdown.values()) >= 0
    assert r.tokens_per_s * r.step_time_s == pytest.approx(r.tokens_per_step, rel=1e-12)
    assert r.tokens_per_step == job["global_batch"] * job["seq_len"]
    assert r.mfu * peak / 1e12 == pytest.approx(r.tflops_per_gpu, rel=1e-12)
    assert r.hfu / r.mfu == pytest.approx(r.hardware_flops_per_step / r.model_flops_per_step, rel=1e-12)
    assert 0 < r.mfu < 1 and 0 < r.hfu < 1


def _hand_flops(recompute):
    """Model and hardware FLOPs per token of TINY at s = 1024 (PaLM's 6N + 12 L s d; hardware: the
    same plus a full recompute's forward as its kernels run it, causal attention at s/2 keys)."""
    layers, h, f, vocab, s = 2, 256, 1024, 1000, 1024
    layer_gemm = 4 * h * h + 3 * h * f
    model = 6 * (layers * (layer_gemm + 2 * h) + vocab * h + h) + 12 * layers * s * h
    hardware = model
    if recompute == "full":
        hardware += 2 * layers * layer_gemm + 2 * layers * s * h
    return model, hardware


@pytest.mark.parametrize("tp,cp,recompute", [(1, 1, "none"), (2, 2, "none"), (2, 1, "selective"), (1, 1, "full")])
def test_mfu_and_hfu_flops_hand_calc(tp, cp, recompute):
    """hfu == mfu without recompute (one FLOP convention for both: it was below, the kernels'
    causal attention against PaLM's full matrix), hfu > mfu with full recompute (the forward runs
    twice)."""
    job = {"gpus": 4 * tp * cp, "tp": tp, "cp": cp, "dp": 4, "seq_len": 1024, "global_batch": 8,
           "recompute": recompute}
    r = teton.simulate(_spec(TINY, job))
    model, hardware = _hand_flops(recompute)
    assert r.model_flops_per_step == pytest.approx(model * 8 * 1024, rel=1e-12)
    assert r.hardware_flops_per_step == pytest.approx(hardware * 8 * 1024, rel=1e-12)
    assert (r.hfu > r.mfu) == (recompute == "full")
    assert r.hfu >= r.mfu


# --- determinism ------------------------------------------------------------------------------

def test_same_spec_same_numbers_whatever_ran_before():
    """Memoised blocks, placements and cost models never leak between specs."""
    specs = [_spec("mixtral-8x7b", {"gpus": 64, "tp": 4, "pp": 2, "ep": 2, "seq_len": 4096, "global_batch": 64}),
             _spec("llama3-8b", {"gpus": 64, "tp": 2, "cp": 2, "pp": 2, "seq_len": 4096, "global_batch": 64,
                                 "cp_algo": "ring", "placement": "random"}, "meta-roce-24k"),
             _spec("llama3-8b", {"gpus": 64, "tp": 2, "cp": 2, "pp": 2, "seq_len": 4096, "global_batch": 64},
                   {"base": "meta-roce-24k", "efficiency": {"mem": 0.9}})]
    first = [json.dumps(teton.simulate(s).to_dict(), sort_keys=True) for s in specs]
    again = [json.dumps(teton.simulate(s).to_dict(), sort_keys=True) for s in reversed(specs)]
    assert first == list(reversed(again))


def test_same_spec_and_seed_same_numbers_across_processes(example_spec):
    """String hashing is salted per process; a random placement and the result must not depend on it."""
    code = (f"import json, teton; r = teton.simulate({str(example_spec)!r}, ['job.placement=random', 'seed=7']); "
            "print(json.dumps(r.to_dict(), sort_keys=True))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1


# --- faster hardware never slows a step -------------------------------------------------------

EFFICIENCY_KEYS = ("gemm_bf16", "gemm_fp8", "attn_fwd", "attn_bwd", "mem", "nccl_nvlink", "nccl_net", "sustained_ratio")


@FAST
@given(layouts(), st.sampled_from(EFFICIENCY_KEYS))
def test_raising_an_achievable_rate_never_slows_a_step(layout, key):
    cluster, model, job = layout
    base = _simulate(cluster, model, job)
    from teton.hardware.efficiency import efficiency_for

    eff = efficiency_for(load_spec(_spec(model, job, cluster)).cluster.gpu_spec)
    now = {"gemm_bf16": eff.gemm_mamf["bf16"], "gemm_fp8": eff.gemm_mamf["fp8"], "attn_fwd": eff.attn_fwd,
           "attn_bwd": eff.attn_bwd, "mem": eff.mem, "nccl_nvlink": eff.nccl_nvlink, "nccl_net": eff.nccl_net,
           "sustained_ratio": eff.sustained_ratio}[key]
    faster = teton.simulate(_spec(model, job, {"base": cluster, "efficiency": {key: now * 1.3}}))
    assert faster.step_time_s <= base.step_time_s * (1 + 1e-12)


def _double_peak_gpu() -> dict:
    """An H100 with twice the dense tensor peak (same memory, bandwidth and SMs), inline."""
    h100 = GPUS["h100-sxm"]
    return {**h100.model_dump(), "name": "h100-2x-peak", "peak_tflops": {k: 2 * v for k, v in h100.peak_tflops.items()}}


@FAST
@given(layouts())
def test_more_hbm_bandwidth_faster_nics_or_a_higher_peak_never_slow_a_step(layout):
    cluster, model, job = layout
    base = _simulate(cluster, model, job).step_time_s
    host = CLUSTER_PRESETS[cluster].get("host", "grand-teton")
    gen6 = {"base": host, "name": f"{host}-gen6", "pcie_x16_bytes_s": PCIE_GEN6_X16_BYTES_S}  # room for 800G NICs
    for change in ({"gpu": "h200"}, {"backend_nic": "cx8-800g", "host": gen6}, {"gpu": _double_peak_gpu()}):
        faster = teton.simulate(_spec(model, job, {"base": cluster, **change})).step_time_s
        assert faster <= base * (1 + 1e-12), change


# --- pipeline ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["llama3-8b", "gpt3-175b", "mixtral-8x7b"])
@pytest.mark.parametrize("p,v,slots", [(2, 1, False), (3, 1, True), (4, 1, False), (2, 3, True), (4, 2, False),
                                       (5, 2, True)])
def test_more_micro_batches_never_raise_the_bubble_share(model, p, v, slots):
    """Holds for 1F1B and Megatron's rounds of p. Not asserted for Llama 3's rounds of N = m over
    unequal chunks: all m micro-batches then cross a chunk at the pace of its slowest stage, so a
    rank idles m times the imbalance (the bubble grows with m; see the report)."""
    shares = []
    for k in (1, 2, 4, 8):
        job = {"gpus": 16 * p, "tp": 8, "pp": p, "dp": 2, "seq_len": 2048, "global_batch": 2 * p * k,
               "pp_schedule": "interleaved" if v > 1 else "1f1b", "virtual_stages": v, "pp_embedding_slots": slots}
        r = teton.simulate(_spec(model, job))
        shares.append(r.breakdown["pipeline_bubble"] / r.step_time_s)
    assert all(b <= a * (1 + 1e-9) for a, b in zip(shares, shares[1:], strict=False)), shares


@pytest.mark.parametrize("model,p,m", [("llama3-8b", 4, 8), ("gpt3-175b", 3, 6), ("mixtral-8x7b", 2, 4)])
def test_interleaved_with_one_virtual_stage_is_1f1b(model, p, m):
    job = {"gpus": 16 * p, "tp": 8, "pp": p, "dp": 2, "seq_len": 2048, "global_batch": 2 * m, "zero": 3}
    a = teton.simulate(_spec(model, job)).to_dict()
    b = teton.simulate(_spec(model, {**job, "pp_schedule": "interleaved", "virtual_stages": 1})).to_dict()
    assert a == b


@given(st.integers(1, 130), st.integers(1, 16), st.integers(1, 8), st.booleans())
@settings(max_examples=200, deadline=None, derandomize=True)
def test_layer_split_keeps_every_layer_and_balances_slots(layers, p, v, slots):
    """Odd layer counts: every layer lands on exactly one chunk, the slots (layers, plus the
    embedding and head with ``pp_embedding_slots``) differ by at most one between chunks."""
    assume(p * v <= layers + (2 if slots else 0))
    model = load_spec(_spec({**TINY, "layers": layers}, {"gpus": 1})).model
    job = load_spec(_spec(TINY, {"gpus": 1})).job.model_copy(
        update={"pp": p, "pp_schedule": "interleaved" if v > 1 else "1f1b", "virtual_stages": v,
                "pp_embedding_slots": slots})
    split = split_layers(model, job).layers
    assert split.sum() == layers and split.min() >= 0
    slot = split.T.ravel().astype(int).copy()  # virtual stage order c*p + r
    if slots:
        slot[0] += 1
        slot[-1] += 1
    assert slot.max() - slot.min() <= 1


@pytest.mark.parametrize("layers,p", [(7, 2), (31, 4), (126, 5), (33, 8)])
def test_odd_layer_counts_run_every_layer_once(layers, p):
    """The pipeline split runs each of the model's layers once per pipeline, however unevenly the
    layers divide over the stages; full recompute re-runs each once per micro-batch."""
    from teton.engine.block_timer import recompute_flops

    model = {**TINY, "layers": layers, "hidden": 1024, "heads": 8}
    job = {"gpus": 2 * p, "pp": p, "dp": 2, "seq_len": 2048, "global_batch": 2 * p, "recompute": "full"}
    r = teton.simulate(_spec(model, job))
    spec = load_spec(_spec(model, job))
    work = step_work(spec.model, spec.job)
    pipelines, micro_batches = 2, p
    assert work.split.layers.sum() == layers
    assert r.hardware_flops_per_step - r.model_flops_per_step == pytest.approx(
        layers * recompute_flops(work.layer) * micro_batches * pipelines, rel=1e-12)
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-12)


# --- corner layouts ---------------------------------------------------------------------------

def test_one_gpu_step_is_compute_plus_optimizer():
    r = teton.simulate(_spec("llama3-8b", {"gpus": 1, "seq_len": 4096, "global_batch": 4}))
    b = r.breakdown
    assert all(b[k] == 0 for k in ("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "sm_contention",
                                   "pipeline_bubble"))
    # an eager step also pays the GPU's idle gap after each kernel (launch_overhead), a small share
    assert 0 < b["launch_overhead"] < 0.01 * b["compute"]
    assert r.step_time_s == pytest.approx(b["compute"] + b["optimizer"] + b["launch_overhead"], rel=1e-12)
    assert r.comm_times_s == {}


@pytest.mark.parametrize("job,present,absent", [
    ({"gpus": 2, "pp": 2}, {"pipeline_bubble", "pp_comm"}, {"tp_comm", "dp_comm", "cp_comm"}),
    ({"gpus": 2, "dp": 2}, {"dp_comm"}, {"tp_comm", "pp_comm", "pipeline_bubble", "cp_comm"}),
    ({"gpus": 2, "tp": 2}, {"tp_comm"}, {"dp_comm", "pp_comm", "pipeline_bubble", "cp_comm"}),
    # CP ranks hold the same weights: their gradients are all-reduced like DP's
    ({"gpus": 2, "cp": 2}, {"cp_comm", "dp_comm"}, {"pp_comm", "pipeline_bubble", "tp_comm"}),
])
def test_each_axis_alone_costs_only_its_own_category(job, present, absent):
    r = teton.simulate(_spec("llama3-8b", {"seq_len": 4096, "global_batch": 8, "zero": 0, **job}))

    def cost(k: str) -> float:  # DP's exposed time: dp_comm and the exposed last bucket
        return r.dp_exposed_s if k == "dp_comm" else r.breakdown[k]

    assert all(cost(k) > 0 for k in present) and all(cost(k) == 0 for k in absent)


def test_a_dense_job_may_name_ep_in_its_parallel_order(cli, example_spec):
    """``parallel_order`` may name ep (degree 1 for a dense model): it used to fail with
    'error: degrees = 'ep': every axis of the order needs a degree'."""
    a = teton.simulate(example_spec)
    b = teton.simulate(example_spec, ["job.parallel_order=[tp,ep,cp,pp,dp]"])
    assert b.step_time_s == a.step_time_s and b.memory_per_gpu_bytes == a.memory_per_gpu_bytes
    code, out, err = cli("run", example_spec, "--set", "job.parallel_order=[tp,cp,pp,ep,dp]", "--json")
    assert code == 0, err
    assert json.loads(out)["step_time_s"] == a.step_time_s


# --- memory -----------------------------------------------------------------------------------

@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("m", [1, 4])
def test_model_state_memory_hand_calc(zero, m):
    """bf16 weights 2 B, fp32 gradients 4 B, Adam 12 B per parameter; ZeRO-1 shards the optimizer,
    ZeRO-2 also the gradients (kept whole while micro-batches accumulate once per step), ZeRO-3
    also the weights (its gradients reduced every micro-batch)."""
    dp = 4
    r = teton.simulate(_spec(TINY, {"gpus": dp, "dp": dp, "seq_len": 1024, "global_batch": dp * m, "zero": zero}))
    mem = r.memory_breakdown
    sharded_grads = zero == 3 or (zero == 2 and m == 1)
    assert mem["weights"] == 2 * TINY_PARAMS / (dp if zero == 3 else 1)
    assert mem["gradients"] == 4 * TINY_PARAMS / (dp if sharded_grads else 1)
    assert mem["optimizer"] == 12 * TINY_PARAMS / (dp if zero else 1)


@pytest.mark.parametrize("zero", [1, 3])
def test_cp_ranks_share_the_gradient_reduction_and_the_zero_shards(zero):
    """CP splits the sequence, not the weights: the dp x cp ranks hold the same weights, so their
    gradients are reduced together and ZeRO shards over all of them (Megatron-Core's data-parallel
    group with CP, torchtitan's dp_shard_cp). With cp 2 x dp 2 the shard is a quarter, as with dp 4."""
    job = {"gpus": 4, "seq_len": 1024, "global_batch": 4, "zero": zero}
    cp2 = teton.simulate(_spec(TINY, {**job, "cp": 2, "dp": 2}))
    dp4 = teton.simulate(_spec(TINY, {**job, "dp": 4}))
    assert cp2.memory_breakdown["optimizer"] == dp4.memory_breakdown["optimizer"] == 12 * TINY_PARAMS / 4
    cp4 = teton.simulate(_spec(TINY, {**job, "cp": 4, "dp": 1}))
    assert cp4.breakdown["dp_comm"] > 0 and cp4.memory_breakdown["optimizer"] == 12 * TINY_PARAMS / 4


TINY_MOE = {**TINY, "name": "tiny-moe", "ffn_hidden": 512, "experts": 4, "top_k": 2}


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_expert_state_is_sharded_over_the_expert_data_parallel_group(ep):
    """ZeRO shards the routed experts' state over the dp / ep ranks that hold the same experts
    (Megatron-Core / DeepSpeed-MoE expert-data-parallel groups), not over all dp ranks: it used
    to divide expert optimizer state by dp, ep times too little."""
    dp = 4
    r = teton.simulate(_spec(TINY_MOE, {"gpus": dp, "dp": dp, "ep": ep, "seq_len": 1024, "global_batch": 4,
                                        "zero": 3}))
    h, f = 256, 512
    expert = 2 * (4 // ep) * 3 * h * f  # two layers' local experts
    dense = 2 * (4 * h * h + h * 4 + 2 * h) + 2 * 1000 * h + h
    shard = dense / dp + expert / (dp // ep)
    mem = r.memory_breakdown
    assert mem["optimizer"] == pytest.approx(12 * shard, rel=1e-12)
    assert mem["weights"] == pytest.approx(2 * shard, rel=1e-12)
    assert mem["gradients"] == pytest.approx(4 * shard, rel=1e-12)


def test_adam_time_does_not_shrink_with_expert_parallelism():
    """Every GPU updates (experts / ep) / (dp / ep) of the experts' state: the same for any ep."""
    opt = [teton.simulate(_spec("mixtral-8x7b", {"gpus": 64, "tp": 4, "pp": 2, "ep": ep, "seq_len": 4096,
                                                 "global_batch": 64})).breakdown["optimizer"] for ep in (1, 2, 4, 8)]
    assert opt == pytest.approx([opt[0]] * 4, rel=1e-9)


@pytest.mark.parametrize("model", ["mixtral-8x7b", "mixtral-8x22b"])
def test_mixtral_expert_parallelism(model):
    runs = [teton.simulate(_spec(model, {"gpus": 256, "tp": 4, "pp": 4, "ep": ep, "seq_len": 4096,
                                         "global_batch": 256})) for ep in (1, 2, 4, 8)]
    assert runs[0].breakdown["ep_comm"] == 0 and all(r.breakdown["ep_comm"] > 0 for r in runs[1:])
    mem = [r.memory_per_gpu_bytes for r in runs]
    assert mem == sorted(mem, reverse=True) and mem[-1] < mem[0]
    for r in runs:
        assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-12)


@FAST
@given(layouts())
def test_full_recompute_trades_time_for_activation_memory(layout):
    cluster, model, job = layout
    full = _simulate(cluster, model, {**job, "recompute": "full"})
    for other in ("none", "selective"):
        r = teton.simulate(_spec(model, {**job, "recompute": other}, cluster))
        assert full.step_time_s > r.step_time_s
        assert full.memory_breakdown["activations"] <= r.memory_breakdown["activations"]


def test_full_recompute_counts_the_recomputed_layer_once():
    """One layer per pipeline rank and one micro-batch in flight: full recompute holds that
    layer's activations, whose input is its checkpoint (it used to be counted twice, so full
    recompute showed more activation memory than none)."""
    job = {"gpus": 2, "pp": 2, "seq_len": 1024, "global_batch": 1}
    none = teton.simulate(_spec(TINY, job)).memory_breakdown["activations"]
    full = teton.simulate(_spec(TINY, {**job, "recompute": "full"})).memory_breakdown["activations"]
    assert full == pytest.approx(none, rel=1e-12)


def test_full_recompute_without_flash_attention_holds_the_recomputed_scores():
    """Recomputing a layer without flash attention materialises its s x s scores again."""
    job = {"gpus": 8, "tp": 8, "seq_len": 2048, "global_batch": 1, "recompute": "full"}
    flash = teton.simulate(_spec("gpt3-175b", job, "dgx-a100-superpod")).memory_breakdown["activations"]
    plain = teton.simulate(_spec("gpt3-175b", {**job, "flash_attention": False}, "dgx-a100-superpod"))
    s, heads, t = 2048, 96, 8
    scores = (2 + 1 * (1 + 2)) * (heads / t) * s * s  # softmax out, dropout mask, dropped-out probabilities
    assert plain.memory_breakdown["activations"] - flash == pytest.approx(scores, rel=1e-12)


@pytest.mark.parametrize("model,pp,dp", [("llama3-8b", 2, 4), ("llama2-13b", 4, 8), ("gpt3-175b", 8, 4),
                                         ("mixtral-8x7b", 2, 4)])
def test_zero3_uses_less_memory_than_zero1(model, pp, dp):
    """With dp >= 4 and several layers per rank. Not asserted at dp = 2 with a layer or two per
    rank (ZeRO-3's two prefetched layers and unsharded gradient bucket then outweigh halving the
    rank's weights and gradients: llama2-7b tp 8 pp 16 dp 2 takes 3602.4 MiB against ZeRO-1's
    3601.1), nor at dp = 1 (nothing to shard)."""
    job = {"gpus": 8 * pp * dp, "tp": 8, "pp": pp, "dp": dp, "seq_len": 2048, "global_batch": 4 * dp}
    one = teton.simulate(_spec(model, {**job, "zero": 1})).memory_per_gpu_bytes
    three = teton.simulate(_spec(model, {**job, "zero": 3})).memory_per_gpu_bytes
    assert three < one


def test_ring_context_parallelism_keeps_less_and_hides_its_forward_exchange():
    """Ring CP never keeps more than all-gather CP, and its forward K/V exchange is never more
    exposed. Its step is not always faster: in backward the ring passes K/V *and* their gradients
    (2x the bytes) under attention, where all-gather CP only reduce-scatters the gradients."""
    from teton.engine.op_table import block_totals, op_rows

    for seq, cp in ((8192, 2), (32768, 4), (4096, 2)):
        job = {"gpus": 8 * cp, "tp": 8, "cp": cp, "seq_len": seq, "global_batch": 4}
        ag, ring = (load_spec(_spec("llama3-70b", {**job, "cp_algo": a})) for a in ("all_gather", "ring"))
        assert teton.simulate(ring).memory_per_gpu_bytes < teton.simulate(ag).memory_per_gpu_bytes
        fwd = [block_totals(op_rows(s))["layer.fwd"]["cp"] for s in (ag, ring)]
        assert fwd[1] <= fwd[0]


def test_fp8_is_not_slower_than_bf16_for_large_gemms():
    """A GEMM and its two backward GEMMs with all dimensions >= 2048, fp8 casts included. Skinny
    GEMMs (a dimension of 256) can be slower in fp8: the 4-byte-per-element cast-transposes of a
    16384 x 256 input outweigh the halved GEMM time (up to 1.47x)."""
    gpu = GPUS["h100-sxm"]
    bf16, fp8 = ComputeModel.for_gpu(gpu, "bf16"), ComputeModel.for_gpu(gpu, "fp8")
    job = load_spec(_spec(TINY, {"gpus": 1, "precision": "fp8"})).job
    for m in (2048, 8192, 16384):
        for n in (2048, 8192, 53248):
            for k in (2048, 16384):
                g = gemm_ops("x", m, n, k)
                casts = [c for side in fp8_casts(job, g) for c in side]
                t8 = sum(fp8.time_s(o) for o in (*g, *casts))
                assert t8 <= sum(bf16.time_s(o) for o in g), (m, n, k)


@FAST
@given(layouts())
def test_fp8_step_is_not_slower_than_bf16(layout):
    cluster, model, job = layout
    bf16 = _simulate(cluster, model, {**job, "precision": "bf16"})
    fp8 = teton.simulate(_spec(model, {**job, "precision": "fp8"}, cluster))
    assert fp8.step_time_s <= bf16.step_time_s


def test_interleaved_with_one_virtual_stage_takes_any_microbatch_count():
    """v = 1 is plain 1F1B: no divisibility of the micro-batches by pp is needed, and the step
    equals 1F1B's."""
    job = {"gpus": 4, "pp": 4, "seq_len": 2048, "global_batch": 6}
    one = teton.simulate(_spec("llama3-8b", {**job, "pp_schedule": "1f1b"}))
    inter = teton.simulate(_spec("llama3-8b", {**job, "pp_schedule": "interleaved", "virtual_stages": 1}))
    assert inter.step_time_s == one.step_time_s and inter.micro_batches == 6
