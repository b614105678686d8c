"""DeepSeek-V3's memory savings (arXiv 2412.19437, Sec. 3.2.3 and 3.3.2) as job and software fields:
Megatron-Core's ``recompute_modules`` (layernorm, mla_up_proj), the fp8 activation cache and Adam's
moments in bf16."""

import pytest

from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.layer_types import LayerType
from teton.workload.activations import layer_activation_bytes
from teton.workload.items import ACT_BYTES, FP8_1X128_BYTES
from teton.workload.memory import memory_per_gpu
from teton.workload.mixers import attention_widths
from teton.workload.ops import layer_block

DEEPSEEK = {"gpus": 64, "tp": 1, "pp": 1, "ep": 64, "seq_len": 4096, "global_batch": 64, "precision": "fp8"}


def _spec(model="deepseek-v3", software=None, cluster="dgx-h100-superpod", **job):
    data = {"cluster": cluster, "model": model,
            "job": {**(DEEPSEEK if model == "deepseek-v3" else {"gpus": 8, "tp": 2, "global_batch": 16}), **job}}
    if software:
        data["software"] = software
    return load_spec(data)


def _moe_layer(spec):
    return spec.model.as_layer(LayerType("attention", "moe"))


def test_layernorm_recompute_drops_the_two_norm_outputs_of_a_dense_layer():
    base = _spec("llama3-8b", recompute="selective")
    more = _spec("llama3-8b", recompute="selective", recompute_modules=["core_attn", "layernorm"])
    lay = base.job.layout
    dropped = layer_activation_bytes(base.model, base.job) - layer_activation_bytes(more.model, more.job)
    assert dropped == pytest.approx(2 * ACT_BYTES * lay.elementwise_tokens * base.model.hidden)
    bwd = [i.name for i in layer_block(more.model, more.job).bwd]
    assert "recompute.attn_norm" in bwd and "recompute.mlp_norm" in bwd
    assert not any(n.startswith("recompute.") for n in (i.name for i in layer_block(base.model, base.job).bwd))


def test_mla_up_proj_recompute_drops_q_k_v_and_the_normed_latents_and_reruns_the_up_projections():
    plain = _spec(recompute="none")
    up = _spec(recompute="selective", recompute_modules=["mla_up_proj"])
    m = _moe_layer(plain)
    lay = plain.job.layout
    qw, kw, vw, _ = attention_widths(m)
    normed = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim
    dropped = layer_activation_bytes(m, plain.job) - layer_activation_bytes(m, up.job)
    assert dropped == pytest.approx(ACT_BYTES * (lay.elementwise_tokens * normed + lay.tokens * (qw + kw + vw)))
    recomputed = {i.name for i in layer_block(m, up.job).bwd if i.name.startswith("recompute.")}
    assert {"recompute.q_up", "recompute.kv_up", "recompute.q_norm", "recompute.kv_norm", "recompute.rope"} <= recomputed
    assert "recompute.attention" not in recomputed  # flash attention: the core is not replayed
    # the up-projections' GEMMs run again: a slower step, less memory
    assert simulate_step(up).step_time_s > simulate_step(plain).step_time_s
    assert memory_per_gpu(up.model, up.job)[0].activations < memory_per_gpu(plain.model, plain.job)[0].activations


def test_the_recompute_brings_one_layers_tensors_back_at_its_backward():
    # Llama 3 8B on one pipeline rank, one micro-batch: 32 layers alike
    base = _spec("llama3-8b", recompute="selective", global_batch=4)
    norms = _spec("llama3-8b", recompute="selective", recompute_modules=["core_attn", "layernorm"], global_batch=4)
    assert base.job.layout.micro_batches == 1 and base.job.layout.pp == 1
    drop = layer_activation_bytes(base.model, base.job) - layer_activation_bytes(norms.model, norms.job)
    held_base = memory_per_gpu(base.model, base.job)[0].activations
    held_norms = memory_per_gpu(norms.model, norms.job)[0].activations
    assert held_base - held_norms == pytest.approx((base.model.layers - 1) * drop)


def test_fp8_activation_cache_keeps_the_experts_gemm_inputs_in_fp8():
    plain = _spec()
    cached = _spec(software={"fp8_activation_cache": True})
    m = _moe_layer(plain)
    saved_plain, saved_fp8 = layer_activation_bytes(m, plain.job), layer_activation_bytes(m, cached.job)
    assert saved_fp8 < saved_plain
    # the routed rows' up-projection input (hidden wide) and SwiGLU inputs (2 x expert_ffn) at
    # 1.03 bytes instead of 2, and the MLA projections' inputs: at least the routed part
    rows = 4096 * m.top_k
    assert saved_plain - saved_fp8 > (ACT_BYTES - FP8_1X128_BYTES) * rows * (m.hidden + 2 * m.expert_ffn)
    with pytest.raises(SpecError, match="fp8_activation_cache"):
        _spec(software={"fp8_activation_cache": True}, precision="bf16")


def test_bf16_adam_moments_hold_eight_bytes_of_state_per_parameter_and_step_faster():
    fp32, bf16 = _spec(), _spec(adam_moments="bf16")
    assert memory_per_gpu(bf16.model, bf16.job)[0].optimizer == pytest.approx(
        memory_per_gpu(fp32.model, fp32.job)[0].optimizer * 8 / 12)
    assert simulate_step(bf16).breakdown["optimizer"] < simulate_step(fp32).breakdown["optimizer"]


@pytest.mark.parametrize("job, match", [
    ({"recompute": "full", "recompute_modules": ["layernorm"]}, "only applies to job.recompute = selective"),
    ({"recompute": "selective", "recompute_modules": ["layernorm", "layernorm"]}, "lists a module twice"),
    ({"recompute": "selective", "recompute_modules": ["attention"]}, "recompute_modules"),
])
def test_recompute_modules_errors_name_the_field(job, match):
    with pytest.raises(SpecError, match=match):
        _spec(**job)


def test_mla_up_proj_needs_an_mla_model():
    with pytest.raises(SpecError, match="no MLA"):
        _spec("llama3-8b", recompute="selective", recompute_modules=["mla_up_proj"])


def test_a_transformer_engine_fp8_job_keeps_its_gemm_inputs_quantised():
    """TE's Linear / LayerNormLinear / GroupedLinear keep the quantised columnwise copy of an fp8
    GEMM's input for the weight gradient, not the bf16 input (``software.fp8_saves_quantized``,
    Megatron-Core presets); the attention output is kept twice (bf16 for the attention kernel, the
    quantised copy for the output projection). bf16 jobs are not affected."""
    from teton.workload.fp8 import quantized_copy_bytes, saved_input_bytes

    te = {"base": "megatron-bridge-26.04", "fp8_recipe": "mxfp8"}
    plain = {**te, "fp8_saves_quantized": False}
    blackwell = "dgx-b200-superpod"
    s_te = _spec("llama3-8b", software=te, cluster=blackwell, precision="fp8")
    s_plain = _spec("llama3-8b", software=plain, cluster=blackwell, precision="fp8")
    assert saved_input_bytes(s_te.job) == pytest.approx(1 + 1 / 32) and saved_input_bytes(s_plain.job) == ACT_BYTES
    m, lay = s_te.model, s_te.job.layout
    saved = ACT_BYTES - (1 + 1 / 32)
    # the QKV and MLP-up inputs shrink, the attention output gains the output projection's copy, and
    # the SwiGLU product the down projection keeps is its quantised copy too
    expect = (saved * 2 * lay.elementwise_tokens * m.hidden
              - quantized_copy_bytes(s_te.job) * lay.tokens * m.q_width / lay.tp
              + saved * lay.tokens * m.ffn_hidden / lay.tp)
    got = layer_activation_bytes(s_plain.model, s_plain.job) - layer_activation_bytes(s_te.model, s_te.job)
    assert got == pytest.approx(expect)
    bf16_te, bf16_plain = _spec("llama3-8b", software=te, cluster=blackwell), _spec("llama3-8b", software=plain,
                                                                                   cluster=blackwell)
    assert layer_activation_bytes(bf16_te.model, bf16_te.job) == layer_activation_bytes(bf16_plain.model, bf16_plain.job)
    nvfp4 = _spec("llama3-8b", software={**te, "fp8_recipe": "nvfp4"}, cluster=blackwell, precision="fp8")
    assert saved_input_bytes(nvfp4.job) == pytest.approx(0.5 + 1 / 16)
