"""Megatron-Core's whole-module recompute (``recompute_modules``: mlp, moe, shared_experts;
Megatron-Core 0.16 ``TransformerLayer`` / ``MoELayer`` / ``SharedExpertMLP`` checkpoint the module):
the module keeps only its input, and its forward runs again ahead of its backward, its TP
collectives and all-to-alls included."""

import pytest

from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.layer_types import LayerType
from teton.workload.activations import layer_activation_bytes
from teton.workload.items import ACT_BYTES
from teton.workload.memory import memory_per_gpu
from teton.workload.ops import layer_block

DEEPSEEK = {"gpus": 64, "tp": 1, "pp": 1, "ep": 64, "seq_len": 4096, "global_batch": 64, "precision": "fp8"}
LLAMA = {"gpus": 8, "tp": 2, "global_batch": 16}


def _spec(model="deepseek-v3", **job):
    base = DEEPSEEK if model == "deepseek-v3" else LLAMA
    return load_spec({"cluster": "dgx-h100-superpod", "model": model, "job": {**base, **job}})


def _selective(model="deepseek-v3", *modules, **job):
    return _spec(model, recompute="selective", recompute_modules=list(modules), **job)


def _recomputed(model, job) -> set[str]:
    return {i.name.removeprefix("recompute.") for i in layer_block(model, job).bwd if i.name.startswith("recompute.")}


def _kind(spec, ffn):
    return spec.model.as_layer(LayerType("attention", ffn))


def test_mlp_keeps_only_the_mlp_input_and_replays_the_mlp_with_its_tp_collectives():
    plain, mlp = _selective("llama3-8b", "core_attn"), _selective("llama3-8b", "mlp")
    lay, m = plain.job.layout, plain.model
    dropped = layer_activation_bytes(m, plain.job) - layer_activation_bytes(m, mlp.job)
    assert dropped == pytest.approx(2 * ACT_BYTES * lay.tokens * m.ffn_hidden / lay.tp)  # gate and up
    assert _recomputed(m, mlp.job) == {"tp.ag_mlp", "mlp_up", "mlp_act", "mlp_down", "tp.rs_mlp"}
    assert "mlp_norm" not in _recomputed(m, mlp.job)  # the norm and the residual add are the layer's
    assert simulate_step(mlp).step_time_s > simulate_step(plain).step_time_s
    assert memory_per_gpu(mlp.model, mlp.job)[0].activations < memory_per_gpu(plain.model, plain.job)[0].activations


def test_moe_replays_the_router_all_to_alls_experts_and_shared_experts():
    plain, moe = _selective("deepseek-v3", "core_attn"), _selective("deepseek-v3", "moe")
    m = _kind(plain, "moe")
    again = _recomputed(m, moe.job)
    assert {"router", "ep.dispatch", "expert_up", "expert_down", "ep.combine", "shared_expert_up"} <= again
    assert not again & {"mlp_norm", "mlp_residual", "attention", "q_up"}
    assert layer_activation_bytes(m, moe.job) < layer_activation_bytes(m, plain.job)
    # a dense layer (DeepSeek-V3's first three) is not an MoE layer: nothing to recompute there
    assert _recomputed(_kind(plain, "dense"), moe.job) == set()
    step_plain, step_moe = simulate_step(plain), simulate_step(moe)
    assert step_moe.breakdown["ep_comm"] > step_plain.breakdown["ep_comm"]  # the all-to-alls run again
    assert step_moe.step_time_s > step_plain.step_time_s


def test_shared_experts_drops_their_two_ffn_wide_tensors_only():
    plain, shared = _selective("deepseek-v3", "core_attn"), _selective("deepseek-v3", "shared_experts")
    m, lay = _kind(plain, "moe"), plain.job.layout
    dropped = layer_activation_bytes(m, plain.job) - layer_activation_bytes(m, shared.job)
    assert dropped == pytest.approx(2 * ACT_BYTES * lay.tokens * m.shared_experts * m.expert_ffn / lay.tp)
    assert _recomputed(m, shared.job) == {"shared_expert_up.fp8_cast", "shared_expert_up", "shared_expert_act",
                                          "shared_expert_down.fp8_cast", "shared_expert_down"}


def test_a_module_the_model_lacks_is_a_one_line_error():
    for model, module, needle in (("llama3-8b", "moe", "has none"), ("llama3-8b", "shared_experts", "has none"),
                                  ("mixtral-8x7b", "mlp", "every feed-forward layer")):
        with pytest.raises(SpecError, match=needle) as err:
            _selective(model, module)
        assert "job.recompute_modules" in str(err.value) and "\n" not in str(err.value)


def test_megatron_core_before_0_13_keeps_the_expert_outputs_for_the_unpermute():
    """Megatron-Core 0.10-0.12 weighted the expert outputs by their routing probabilities in the
    combine's unpermute, which keeps its input for the probabilities' gradient; from 0.13 the
    experts' activation applies them and the unpermute keeps nothing (the NeMo 25.04 preset:
    moe_probs_in_experts off)."""
    def mixtral(stack):
        return load_spec({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b", "software": {"base": stack},
                          "job": {"gpus": 64, "tp": 1, "ep": 8, "global_batch": 256, "micro_batch": 2,
                                  "seq_len": 4096}})
    old, new = mixtral("nemo-25.04"), mixtral("nemo-25.07")
    assert old.job.software.moe_probs_in_experts is False and new.job.software.moe_probs_in_experts is True
    m, lay = _kind(old, "moe"), old.job.layout
    kept = layer_activation_bytes(m, old.job) - layer_activation_bytes(m, new.job)
    assert kept == pytest.approx(ACT_BYTES * lay.tokens * m.top_k * m.hidden)
