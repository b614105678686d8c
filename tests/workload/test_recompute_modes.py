"""torchtitan's recompute modes: per-op SAC (selective_op) and per-layer AC (selective_layer).

Bounds against none and full, the limits of the layer interval, the job rules, and a cross-check
of per-op SAC against torch.utils.checkpoint running torchtitan's policy on the reference Llama
layer (meta device): the bytes it keeps for backward and the FLOPs its backward recomputes.
"""

import gc
import json

import numpy as np
import pytest

import teton
from teton.engine.block_timer import recompute_flops
from teton.spec import load_spec
from teton.sweep import SearchSpace, candidate_jobs
from teton.workload.items import ComputeOp
from teton.workload.memory import layer_activation_bytes
from teton.workload.ops import layer_block
from teton.workload.recompute import checkpointed_layers, sac_op_projections
from teton.workload.step_work import step_work

NEW = ("selective_op", "selective_layer")
L8B = {"cluster": "meta-roce-24k", "model": "llama3-8b"}
EXACT = 1e-12


def _simulate(spec, mode: str, *extra: str):
    return teton.simulate(spec, [f"job.recompute={mode}", *extra])


def _8b(tmp_path, **job):
    path = tmp_path / "8b.json"
    path.write_text(json.dumps({**L8B, "job": {"gpus": 64, "seq_len": 8192, "global_batch": 128, **job}}))
    return path


LAYOUTS = {  # Llama 3 8B on 64 GPUs: name -> job fields
    "8b-fsdp": dict(tp=1, pp=1, zero=3),
    "8b-tp4-pp2-sp": dict(tp=4, pp=2),
    "8b-tp8-nosp": dict(tp=8, pp=1, sequence_parallel=False),
}


def _runs(spec, *extra):
    return {m: _simulate(spec, m, *extra) for m in ("none", "full", *NEW)}


def _check_between(runs):
    none, full = runs["none"], runs["full"]
    for mode in NEW:
        r = runs[mode]
        assert full.memory_breakdown["activations"] < r.memory_breakdown["activations"] < none.memory_breakdown[
            "activations"], mode
        assert full.memory_per_gpu_bytes < r.memory_per_gpu_bytes < none.memory_per_gpu_bytes, mode
        # recomputed FLOPs = HFU's FLOPs beyond none's (MFU's model FLOPs are the same in every mode)
        extra = r.hardware_flops_per_step - none.hardware_flops_per_step
        assert 0 < extra < full.hardware_flops_per_step - none.hardware_flops_per_step, mode
        assert r.model_flops_per_step == none.model_flops_per_step
        assert none.step_time_s < r.step_time_s < full.step_time_s, mode
        assert r.hfu - r.mfu > none.hfu - none.mfu, mode


@pytest.mark.parametrize("name", LAYOUTS)
def test_llama3_8b_new_modes_sit_between_none_and_full(tmp_path, name):
    _check_between(_runs(_8b(tmp_path, **LAYOUTS[name])))


def test_llama3_405b_new_modes_sit_between_none_and_full(example_spec):
    """The example's layout (TP 8, PP 16 interleaved, v = 8) without sequence parallelism: with
    it, see the next test."""
    _check_between(_runs(example_spec, "job.sequence_parallel=false"))


def test_405b_per_op_sac_under_tp8_sp_holds_more_than_none(example_spec):
    """torchtitan's policy saves w2's aten.mm output: under TP it is the row-parallel partial sum
    over all tokens (s x h per rank), before the reduce-scatter whose output is saved too. teton's
    none keeps Megatron's SP shards (s h / t), so at TP 8 per-op SAC keeps more than none does.
    The layer interval still sits between, and both recompute less than full."""
    runs = _runs(example_spec)
    none, full, op, layer = runs["none"], runs["full"], runs["selective_op"], runs["selective_layer"]
    spec = load_spec(example_spec, ["job.recompute=selective_op"])
    m, j = spec.model, spec.job
    tok, t = j.seq_len, j.tp
    w2_and_scatters = 2 * tok * m.hidden + 2 * 2 * tok * m.hidden / t
    assert layer_activation_bytes(m, j) > layer_activation_bytes(m, j.model_copy(update={"recompute": "none"}))
    assert layer_activation_bytes(m, j) - w2_and_scatters < layer_activation_bytes(
        m, j.model_copy(update={"recompute": "none"}))
    assert op.memory_breakdown["activations"] > none.memory_breakdown["activations"]
    assert full.memory_breakdown["activations"] < layer.memory_breakdown["activations"] < none.memory_breakdown[
        "activations"]
    for r in (op, layer):
        assert 0 < r.hardware_flops_per_step - none.hardware_flops_per_step < (
            full.hardware_flops_per_step - none.hardware_flops_per_step)


def test_per_op_sac_recomputes_wk_wo_w3_and_the_elementwise_ops():
    spec = load_spec({**L8B, "job": {"gpus": 8, "tp": 8, "seq_len": 8192, "global_batch": 1,
                                     "recompute": "selective_op"}})
    m, j = spec.model, spec.job
    assert [(p, s) for _, p, s in sac_op_projections(m)] == [
        ("wq", True), ("wk", False), ("wv", True), ("wo", False), ("w1", True), ("w3", False), ("w2", True)]
    rec = [i for i in layer_block(m, j).bwd if i.name.startswith("recompute.")]
    names = [i.name.removeprefix("recompute.") for i in rec]
    assert names == ["attn_norm", "tp.ag_qkv", "qkv.wk", "rope", "attn_out.wo", "attn_residual", "mlp_norm",
                     "tp.ag_mlp", "mlp_up.w3", "mlp_act", "mlp_residual"]  # the SDPA and reduce-scatters saved
    tok, h, t = j.seq_len, m.hidden, j.tp
    gemm = {i.name: i.flops for i in rec if isinstance(i, ComputeOp) and i.kind == "gemm"}
    assert gemm == {"recompute.qkv.wk": 2 * tok * h * m.kv_width / t, "recompute.attn_out.wo": 2 * tok * m.q_width * h / t,
                    "recompute.mlp_up.w3": 2 * tok * h * m.ffn_hidden / t}
    gelu = m.model_copy(update={"mlp": "gelu"})
    assert [(p, s) for _, p, s in sac_op_projections(gelu)][4:] == [("w1", True), ("w2", False)]


def test_layer_interval_counts_each_ranks_blocks_in_order():
    """torchtitan's _layer_sac_count: one counter per process over its blocks, chunk by chunk."""
    layers = np.array([[3, 3], [2, 4], [1, 0]])
    assert checkpointed_layers(layers, 2).tolist() == [[1, 2], [1, 2], [0, 0]]
    assert checkpointed_layers(layers, 1).tolist() == layers.tolist()
    assert checkpointed_layers(layers, 7).tolist() == [[0, 0], [0, 0], [0, 0]]
    assert checkpointed_layers(np.array([[32]]), 3).tolist() == [[10]]


@pytest.mark.parametrize("where", ["405b", "8b", "8b-no-flash"])
def test_layer_interval_one_is_full_and_beyond_the_layers_is_none(example_spec, tmp_path, where):
    if where == "405b":
        spec, extra = example_spec, ()
    else:
        spec = _8b(tmp_path, tp=2, pp=2)
        extra = ("job.flash_attention=false",) if where == "8b-no-flash" else ()
    for mode, interval in (("full", 1), ("none", 10_000)):
        ref = _simulate(spec, mode, *extra)
        r = _simulate(spec, "selective_layer", f"job.recompute_interval={interval}", *extra)
        assert r.memory_per_gpu_bytes == pytest.approx(ref.memory_per_gpu_bytes, rel=EXACT)
        assert r.memory_breakdown == pytest.approx(ref.memory_breakdown, rel=EXACT)
        assert r.step_time_s == pytest.approx(ref.step_time_s, rel=EXACT)
        assert r.hardware_flops_per_step == pytest.approx(ref.hardware_flops_per_step, rel=EXACT)
        assert r.breakdown == pytest.approx(ref.breakdown, rel=EXACT, abs=1e-15)


def test_layer_interval_mixes_full_and_plain_layers_per_chunk(example_spec):
    spec = load_spec(example_spec, ["job.recompute=selective_layer", "job.recompute_interval=3"])
    work = step_work(spec.model, spec.job)
    plain, ckpt = work.layer_mix()
    full = layer_block(spec.model, spec.job.model_copy(update={"recompute": "full"}))
    assert ckpt[0].bwd == full.bwd and plain[0].bwd == layer_block(
        spec.model, spec.job.model_copy(update={"recompute": "none"})).bwd
    assert (ckpt[1] == checkpointed_layers(work.split.layers, 3)).all()
    assert (plain[1] + ckpt[1] == work.split.layers).all()
    none = _simulate(example_spec, "none")
    r = teton.simulate(spec)
    extra = r.hardware_flops_per_step - none.hardware_flops_per_step
    per_layer = recompute_flops(full) - recompute_flops(plain[0])
    assert extra == pytest.approx(ckpt[1].sum() * per_layer * spec.job.micro_batches * spec.job.gpus / spec.job.pp,
                                  rel=1e-12)


def test_search_tries_the_new_modes():
    spec = load_spec({**L8B, "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 256}})
    space = SearchSpace(tp=(8,), cp=(1,), pp=(1, 2), virtual_stages=(1,), micro_batch=(1,), zero=(1,))
    modes = {(c.job.recompute, c.job.recompute_interval) for c in candidate_jobs(spec, space)}
    assert {("selective_op", 2), ("selective_layer", 2), ("none", 2), ("full", 2)} <= modes
    gpt = load_spec({"cluster": "meta-roce-24k", "model": "gpt3-175b",
                     "job": {"gpus": 64, "tp": 8, "seq_len": 2048, "global_batch": 64}})
    assert "selective_op" not in {c.job.recompute for c in candidate_jobs(gpt, space)}  # biases: refused


@pytest.mark.parametrize("overrides,field", [
    (["job.recompute=selective_op2"], "job.recompute"),
    (["job.recompute_interval=0"], "job.recompute_interval"),
    (["job.recompute=selective_layer", "job.recompute_interval=true"], "job.recompute_interval"),
    (["job.recompute=full", "job.recompute_interval=4"], "job.recompute_interval"),
    (["job.recompute_interval=3"], "job.recompute_interval"),
    (["job.recompute=selective_op", "job.precision=fp8"], "job.recompute"),
    (["model=gpt3-175b", "job.recompute=selective_op", "job.seq_len=2048", "job.virtual_stages=2"],
     "job.recompute"),
])
def test_bad_recompute_values_are_one_line_errors(cli, example_spec, overrides, field):
    code, _, err = cli("run", example_spec, *(a for o in overrides for a in ("--set", o)))
    assert code == 2 and field in err and len(err.strip().splitlines()) == 1


def test_the_interval_is_accepted_with_its_mode(cli, example_spec):
    code, _, _ = cli("run", example_spec, "--set", "job.recompute=selective_layer", "--set",
                     "job.recompute_interval=4", "--json")
    assert code == 0


# --- against torch.utils.checkpoint with torchtitan's policy, on the meta device -------------


def _torchtitan_sac_context(torch):
    """torchtitan's per-op SAC context (v0.2 ``_apply_op_sac._get_custom_policy`` with the Llama 3
    ``_op_sac_save_list``; the ops this torch build registers)."""
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default, aten._scaled_dot_product_cudnn_attention.default,
            aten.max.default}
    for name in ("_scaled_dot_product_attention_math", "_scaled_dot_product_fused_attention_overrideable"):
        if hasattr(aten, name):
            save.add(getattr(aten, name).default)
    if hasattr(torch.ops, "_c10d_functional"):
        save.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)

    def context_fn():
        meta = defaultdict(int)

        def _custom_policy(ctx, func, *args, **kwargs):
            mode = "recompute" if ctx.is_recompute else "forward"
            mm_count_key = f"{mode}_mm_count"
            if func == aten.mm.default:
                meta[mm_count_key] += 1
            # saves output of all compute ops, except every second mm
            to_save = func in save and not (func == aten.mm.default and meta[mm_count_key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(_custom_policy)

    return context_fn


def _held_and_flops(torch, layer, x, context_fn=None) -> tuple[int, dict[str, int]]:
    """(bytes held for backward after the forward, backward FLOPs by op) of ``layer(x)``, under
    torchtitan's checkpoint (non-reentrant, early_stop off) when ``context_fn`` is given.

    Held bytes: what autograd packs through ``saved_tensors_hooks`` (inside a checkpoint the
    checkpoint's own hooks replace the tensors by handles: only its input reaches these hooks),
    plus the storages the forward created that are still alive once it returns (the policy's
    MUST_SAVE cache, which no hook sees), the output excluded; parameters count in neither.
    """
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.checkpoint import checkpoint
    from torch.utils.flop_counter import FlopCounterMode

    params = {p.untyped_storage()._cdata for p in layer.parameters()}

    class Created(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.storages = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    self.storages.setdefault(st._cdata, (StorageWeakRef(st), st.nbytes()))
            return out

    def run():
        if context_fn is None:
            return layer(x)
        return checkpoint(layer, x, use_reentrant=False, context_fn=context_fn, preserve_rng_state=False,
                          early_stop=False)

    packed: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        packed[st._cdata] = st.nbytes()
        return t

    created = Created()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), created:
        out = run()
    gc.collect()
    mine = out.untyped_storage()._cdata
    alive = {k: n for k, (ref, n) in created.storages.items() if not ref.expired() and k not in params | {mine}}
    hooked = {k: n for k, n in packed.items() if k not in params and k not in alive}
    held = sum(alive.values()) + sum(hooked.values())
    del out
    with FlopCounterMode(display=False) as counter:
        out = run()
        fwd = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
        out.backward(torch.empty_like(out))
        total = {str(op): int(n) for op, n in counter.get_flop_counts()["Global"].items()}
    return held, {op: n - fwd.get(op, 0) for op, n in total.items()}


CROSS = [("llama3-8b", 1, True), ("llama3-8b", 8, True), ("llama3-8b", 1, False), ("llama3-8b-gelu", 4, True)]


@pytest.mark.parametrize("model,tp,flash", CROSS, ids=[f"{m}-tp{t}-{'flash' if f else 'math'}" for m, t, f in CROSS])
def test_per_op_sac_matches_torch_checkpoint_with_torchtitans_policy(model, tp, flash):
    """teton's selective_op bytes per layer and recompute FLOPs against the reference layer under
    torchtitan's policy. Bytes: torch keeps 24 more (the flash kernel's philox seed and offset,
    uint64 tensors teton does not count), so it must lie within [teton, teton + 64 B]. FLOPs:
    exact, since both count 2mnk per recomputed mm (and, on the math path, the full s x s bmm
    of the recomputed attention core, which teton's unfused attention also counts)."""
    torch = pytest.importorskip("torch")
    from teton.workload.torch_reference import _modules

    seq = 2048
    m = {"base": "llama3-8b", "mlp": "gelu", "name": "llama3-8b-gelu"} if model.endswith("gelu") else model
    spec = load_spec({"cluster": "meta-roce-24k", "model": m,
                      "job": {"gpus": tp, "tp": tp, "dp": 1, "seq_len": seq, "global_batch": 1,
                              "sequence_parallel": False, "flash_attention": flash, "recompute": "selective_op"}})
    _, DecoderLayer, _ = _modules()
    layer = DecoderLayer(spec.model, tp, seq, "flash" if flash else "math")
    x = torch.empty(1, seq, spec.model.hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    sac_held, sac_bwd = _held_and_flops(torch, layer, x, _torchtitan_sac_context(torch))
    plain_held, plain_bwd = _held_and_flops(torch, layer, x)

    teton_held = layer_activation_bytes(spec.model, spec.job)
    assert teton_held <= sac_held <= teton_held + 64
    assert sac_held < plain_held
    torch_recompute = sum(sac_bwd.values()) - sum(plain_bwd.values())
    rec = [i for i in layer_block(spec.model, spec.job).bwd if i.name.startswith("recompute.")]
    teton_recompute = sum(i.flops for i in rec if isinstance(i, ComputeOp))
    assert teton_recompute == pytest.approx(torch_recompute, rel=1e-12)
    assert torch_recompute > 0
