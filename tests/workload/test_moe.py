"""Mixture-of-experts layers: parameter counts, routed FLOPs, expert-parallel all-to-all, memory."""

import pytest

import teton
from teton.spec import load_spec
from teton.spec.model import MODEL_PRESETS, ModelSpec
from teton.workload.items import Collective, ComputeOp
from teton.workload.ops import layer_block


def _spec(ep=8, **job):
    base = {"gpus": 256, "tp": 2, "ep": ep, "seq_len": 4096, "global_batch": 512}
    base.update(job)
    return load_spec({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b", "job": base})


@pytest.mark.parametrize("name", ["mixtral-8x7b", "mixtral-8x22b"])
def test_mixtral_params_within_one_percent(name):
    m = ModelSpec(**MODEL_PRESETS[name])
    assert abs(m.total_params() / m.published_params - 1) < 0.01


def test_routed_expert_flops_are_top_k_times_dense():
    spec = _spec(moe_router_balance="forced")
    blk = layer_block(spec.model, spec.job)
    expert = sum(i.flops for i in blk.fwd if isinstance(i, ComputeOp) and i.name.startswith("expert_"))
    tok, h, f, t = 4096, 4096, 14336, 2
    assert expert == pytest.approx(2 * 3 * h * f * tok * 2 / t)  # SwiGLU, top-2, TP-sharded


def test_expert_parallel_all_to_all_in_both_passes():
    blk = layer_block(_spec().model, _spec(moe_router_balance="forced").job)
    fwd = [i for i in blk.fwd if isinstance(i, Collective) and i.axis == "ep"]
    bwd = [i for i in blk.bwd if isinstance(i, Collective) and i.axis == "ep"]
    assert [c.op for c in fwd] == ["all_to_all", "all_to_all"] and len(bwd) == 2
    assert fwd[0].bytes == 2 * 4096 * 2 * 4096 / 2  # bf16 x tokens x top_k x hidden / tp
    assert not [i for i in layer_block(_spec(ep=1).model, _spec(ep=1).job).fwd if isinstance(i, Collective)
                and i.axis == "ep"]


def test_expert_parallelism_makes_the_model_fit_and_shows_ep_comm():
    one = teton.simulate(_spec(ep=1))
    eight = teton.simulate(_spec(ep=8))
    assert not one.fits_in_memory and eight.fits_in_memory
    assert eight.breakdown["ep_comm"] > 0 == one.breakdown["ep_comm"]
    assert eight.memory_breakdown["weights"] < one.memory_breakdown["weights"] / 3


def test_mfu_counts_active_params_only():
    r = teton.simulate(_spec())
    m = ModelSpec(**MODEL_PRESETS["mixtral-8x7b"])
    per_token = 6 * m.matmul_params() + 12 * 32 * 4096 * 4096
    assert r.model_flops_per_step == pytest.approx(per_token * 512 * 4096)
    assert m.matmul_params() < m.total_params() / 3


def test_ep_must_divide_dp(cli, tmp_path):
    import yaml

    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
                                    "job": {"gpus": 24, "tp": 2, "ep": 8, "seq_len": 4096, "global_batch": 48}}))
    code, _, err = cli("run", path)
    assert code == 2 and "job.ep" in err


@pytest.mark.parametrize("overlap", ["bwd", "full"])
def test_tp_overlap_pairs_the_shared_expert_gemms_of_moe_layers(overlap):
    """An MoE layer's TP collectives around its MLP are its shared experts' (Megatron-Core's
    SharedExpertMLP); the routed experts' expert-TP collectives run alone."""
    model = {"base": "mixtral-8x7b", "shared_experts": 1}
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": model,
                      "job": {"gpus": 256, "tp": 2, "ep": 8, "seq_len": 4096, "global_batch": 512,
                              "tp_overlap": overlap, "precision": "fp8"}})
    blk = layer_block(spec.model, spec.job)
    for items in (blk.fwd, blk.bwd):
        names = {i.name for i in items if isinstance(i, ComputeOp)}
        paired = [i for i in items if isinstance(i, Collective) and i.overlap]
        assert all(i.overlap in names for i in paired)
        assert paired or (overlap == "bwd" and items is blk.fwd)  # "bwd" pairs only backward collectives
        assert not [i for i in paired if i.name.startswith(("etp.", "ep."))]
    assert any(i.overlap == "shared_expert_up.dgrad" for i in blk.bwd if isinstance(i, Collective))
    r = teton.simulate({"cluster": "dgx-h100-superpod", "model": model, "job": dict(spec.job)})
    assert r.step_time_s > 0


# --- the MoE layer's mechanisms (teton.workload.moe) ------------------------------------------

def _moe(model="deepseek-v3", **job):
    """(uniform MoE-layer model, job) of ``model`` on 256 H100s."""
    base = {"gpus": 256, "tp": 1, "ep": 8, "seq_len": 4096, "global_batch": 512}
    base.update(job)
    spec = load_spec({"cluster": "dgx-h100-superpod", "model": model, "job": base})
    kind = next(k for k in spec.model.layer_type_counts() if k.ffn == "moe")
    return spec.model.as_layer(kind), spec.job


def _gemm_flops(items, *names):
    return sum(i.flops for i in items if isinstance(i, ComputeOp) and i.kind == "gemm"
               and (not names or i.name.split(".")[0] in names))


def test_deepseek_v3_moe_layer_flops_are_6n_of_its_active_params():
    """Forward + backward GEMMs of one DeepSeek-V3 MoE layer: 6 x tokens x the parameters a token
    touches (MLA, router, 8 routed + 1 shared experts of width 2,048), per GPU at tp 1."""
    model, job = _moe(moe_router_balance="forced")
    blk = layer_block(model, job)
    tok = job.layout.tokens
    ffn = _gemm_flops((*blk.fwd, *blk.bwd), "router", "expert_up", "expert_down", "shared_expert_up",
                      "shared_expert_down")
    assert ffn == pytest.approx(6 * tok * (model.router_params() + 9 * model.mlp_params()), rel=1e-6)
    active = model.layer_active_params() - 2 * model.norm_params()
    assert _gemm_flops((*blk.fwd, *blk.bwd)) == pytest.approx(6 * tok * active, rel=0.03)
    up = next(i for i in blk.fwd if i.name == "expert_up")
    assert (up.n, up.k) == (2 * 2048, 7168) and up.m == tok * 8 * 8 // 256  # one expert's rows


def test_shared_experts_add_a_tp_sharded_dense_mlp():
    plain, job = _moe("mixtral-8x7b", tp=2, moe_router_balance="forced")
    shared = plain.model_copy(update={"shared_experts": 2})
    blk, base = layer_block(shared, job), layer_block(plain, job)
    names = {i.name for i in blk.fwd}
    assert {"shared_expert_up", "shared_expert_down", "shared_experts.add"} <= names
    tok, h, f = job.layout.tokens, 4096, 2 * 14336
    assert _gemm_flops(blk.fwd, "shared_expert_up", "shared_expert_down") == pytest.approx(2 * tok * 3 * h * f / 2)
    assert _gemm_flops(blk.fwd, "expert_up", "expert_down") == _gemm_flops(base.fwd, "expert_up", "expert_down")
    assert [i.name for i in blk.fwd if isinstance(i, Collective) and i.axis == "tp"][-2:] == ["tp.ag_mlp", "tp.rs_mlp"]
    from teton.workload.ops import layer_params_per_gpu
    assert layer_params_per_gpu(shared, job) - layer_params_per_gpu(plain, job) == pytest.approx(
        2 * plain.mlp_params() / 2)


@pytest.mark.parametrize("etp", [1, 2, 4])
def test_expert_tp_shards_the_expert_gemms_and_gathers_over_its_group(etp):
    """Megatron-Core's expert TP: each rank routes its SP shard (tokens / tp), the EP all-to-all
    moves its top_k copies, the etp group all-gathers them; the expert GEMMs are expert_ffn / etp
    wide over etp x the rows, so their FLOPs per GPU do not change."""
    model, job = _moe("mixtral-8x7b", tp=2, etp=etp, moe_router_balance="forced")
    blk = layer_block(model, job)
    up = next(i for i in blk.fwd if i.name == "expert_up")
    tok_r, h = job.layout.tokens // 2, 4096
    assert up.n == 2 * 14336 // etp and up.flops == pytest.approx(2 * tok_r * 2 * 2 * 14336 * h)
    a2a = next(i for i in blk.fwd if i.name == "ep.dispatch")
    assert a2a.bytes == 2 * tok_r * 2 * h
    gather = [i for i in blk.fwd if i.name.startswith("etp.")]
    if etp == 1:
        assert not gather
    else:
        assert [(i.op, i.axis) for i in gather] == [("all_gather", "tp" if etp == 2 else "etp"),
                                                    ("reduce_scatter", "tp" if etp == 2 else "etp")]
        assert gather[0].bytes == 2 * etp * tok_r * 2 * h
    assert teton.simulate(_spec(etp=etp)).step_time_s > 0


def test_expert_tp_shards_expert_weights_and_their_checkpoint():
    from teton.storage.checkpoint import rank_state
    from teton.workload.step_work import step_work

    full, one = _spec(), _spec(etp=1)
    e_full = step_work(full.model, full.job).expert_params.sum()
    e_one = step_work(one.model, one.job).expert_params.sum()
    assert e_one == pytest.approx(2 * e_full)  # etp 1 keeps whole experts on each of the 2 TP ranks
    for spec in (full, one):  # one copy of the state either way
        assert rank_state(spec).unique_bytes == pytest.approx(14 * spec.model.total_params(), rel=1e-3)


def test_capacity_factor_caps_the_routed_rows():
    model, job = _moe("mixtral-8x7b", tp=2, moe_router_balance="forced")
    dropless = layer_block(model, job)
    half = layer_block(model.model_copy(update={"capacity_factor": 0.5}), job)
    experts = ("expert_up", "expert_down")
    assert _gemm_flops(half.fwd, *experts) == pytest.approx(0.5 * _gemm_flops(dropless.fwd, *experts))
    a2a = [next(i for i in b.fwd if i.name == "ep.dispatch").bytes for b in (half, dropless)]
    assert a2a[0] == pytest.approx(0.5 * a2a[1])
    # with an aux-loss router the capacity caps the imbalance: no expert computes beyond it
    capped = layer_block(model.model_copy(update={"capacity_factor": 1.0}), job.model_copy(
        update={"moe_router_balance": "aux_loss"}))
    assert _gemm_flops(capped.fwd, *experts) == pytest.approx(_gemm_flops(dropless.fwd, *experts))


def test_padded_to_capacity_every_expert_computes_its_capacity_and_the_host_never_waits():
    """Megatron-Core's drop-and-pad (moe_pad_expert_input_to_capacity): each expert's buffer is its
    capacity whatever the routing, so the rows are capacity_factor x the balanced share, and the
    counts are known on the host: the dispatcher takes no host sync (dropless and unpadded do)."""
    from teton.workload.items import ComputeOp

    model, job = _moe("mixtral-8x7b", tp=2, moe_router_balance="forced")
    experts = ("expert_up", "expert_down")
    dropless = layer_block(model, job)
    unpadded, padded = (layer_block(model.model_copy(update={"capacity_factor": 1.5, "pad_to_capacity": pad}), job)
                        for pad in (False, True))
    assert _gemm_flops(unpadded.fwd, *experts) == pytest.approx(_gemm_flops(dropless.fwd, *experts))
    assert _gemm_flops(padded.fwd, *experts) == pytest.approx(1.5 * _gemm_flops(dropless.fwd, *experts))
    a2a = [next(i for i in b.fwd if i.name == "ep.dispatch").bytes for b in (padded, dropless)]
    assert a2a[0] == pytest.approx(1.5 * a2a[1])
    syncs = [[it.name for it in b.fwd if isinstance(it, ComputeOp) and it.host_sync] for b in (dropless, unpadded, padded)]
    assert syncs == [["moe.permute"], ["moe.permute"], []]
    for bad in ({"pad_to_capacity": True}, {"pad_to_capacity": True, "experts": 1, "top_k": 1, "capacity_factor": 1.0}):
        with pytest.raises(ValueError, match="model.pad_to_capacity = True: needs an MoE model with model.capacity_factor"):
            type(model).model_validate({**model.model_dump(), **bad})


def test_router_imbalance_grows_with_ep_and_forced_balance_removes_it():
    from teton.workload.moe import moe_rows, router_imbalance

    assert router_imbalance(1, 4096, 8) == 1.0
    factors = [router_imbalance(ep, 4096, 8) for ep in (2, 8, 64, 256)]
    assert factors == sorted(factors) and factors[0] > 1.0
    assert router_imbalance(64, 512, 8) > router_imbalance(64, 4096, 8)  # fewer tokens, more imbalance
    model, job = _moe(ep=64)
    assert moe_rows(model, job).load == pytest.approx(router_imbalance(64, 4096, 8))
    assert moe_rows(model, job.model_copy(update={"moe_router_balance": "forced"})).load == 1.0
    slow, even = (_gemm_flops(layer_block(model, j).fwd, "expert_up") for j in
                  (job, job.model_copy(update={"moe_router_balance": "forced"})))
    assert slow == pytest.approx(even * router_imbalance(64, 4096, 8))


def test_router_imbalance_matches_the_balls_into_bins_maximum():
    """Monte Carlo of the stated model: tokens x top_k copies per rank thrown uniformly on ep ranks;
    the mean largest load over the mean load."""
    import numpy as np

    from teton.workload.moe import router_imbalance

    rng = np.random.default_rng(0)
    for ep, tokens, top_k in ((8, 1024, 2), (64, 512, 8)):
        loads = rng.multinomial(ep * tokens * top_k, [1 / ep] * ep, size=400)
        assert router_imbalance(ep, tokens, top_k) == pytest.approx(loads.max(axis=1).mean() / (tokens * top_k),
                                                                   rel=0.004)


def test_moe_router_balance_is_checked():
    from teton.errors import SpecError

    with pytest.raises(SpecError, match="job.moe_router_balance"):
        _spec(moe_router_balance="even")


def test_moe_memory_counts_expert_width_shared_experts_and_etp():
    from teton.workload.activations import layer_activation_bytes

    model, job = _moe("mixtral-8x7b", tp=2, moe_router_balance="forced")
    narrow = model.model_copy(update={"moe_ffn_hidden": 14336 // 2})
    assert layer_activation_bytes(narrow, job) < layer_activation_bytes(model, job)
    shared = model.model_copy(update={"shared_experts": 1})
    assert layer_activation_bytes(shared, job) - layer_activation_bytes(model, job) == pytest.approx(
        2 * 2 * job.layout.tokens * 14336 / 2)
    # etp 1: each rank's grouped GEMM runs its own copies only (not its TP group's)
    _, job1 = _moe("mixtral-8x7b", tp=2, etp=1, moe_router_balance="forced")
    assert layer_activation_bytes(model, job1) < layer_activation_bytes(model, job)


def test_moe_saved_bytes_keep_no_unpermute_copies():
    """Megatron-Core 0.15 weights each routed copy by its probability in the experts' activation and
    unpermutes without probs: the block keeps the router's fp32 probabilities, the grouped GEMM's
    input and the SwiGLU's gate and up, not the top-k copies before the unpermute."""
    from teton.workload.items import FP32
    from teton.workload.moe import moe_rows, moe_saved_bytes

    model, job = _moe("mixtral-8x7b", tp=2, etp=1, moe_router_balance="forced")
    rows, h, f = moe_rows(model, job), model.hidden, model.expert_ffn
    expect = FP32 * rows.tokens * model.experts + 2 * rows.expert * h + 2 * 2 * rows.expert * f / job.layout.etp
    assert moe_saved_bytes(model, job) == pytest.approx(expect)


def test_expert_down_bias_is_added_expert_by_expert_outside_the_gemm():
    """Megatron-Core's TEGroupedMLP returns the down projection's bias unapplied and adds it expert
    by expert, scaled by the routing probability (``_apply_bias``): memory-bound passes over the
    routed rows, kernels per local expert; a model without biases has none."""
    from teton.workload.moe import EXPERT_BIAS_BYTES, moe_rows

    spec = load_spec({"cluster": "dgx-b200-superpod", "model": "gpt-oss-120b",
                      "job": {"gpus": 64, "ep": 8, "seq_len": 4096, "micro_batch": 4, "global_batch": 1280}})
    m = spec.model.as_layer(spec.model.layer_types()[0])
    blk = layer_block(m, spec.job)
    fwd = {i.name: i for i in blk.fwd}
    bwd = {i.name: i for i in blk.bwd}
    rows = moe_rows(m, spec.job)
    assert rows.local_experts == 16
    assert fwd["expert_down.bias"].bytes == EXPERT_BIAS_BYTES[0] * rows.expert * m.hidden
    assert (fwd["expert_down.bias"].kernels, bwd["expert_down.bias.bwd"].kernels) == (33, 64)
    names = [i.name for i in blk.fwd]
    assert names.index("expert_down") < names.index("expert_down.bias") < names.index("moe.unsort_chunks")
    assert not any("bias" in i.name for i in layer_block(_spec().model, _spec().job).fwd)
