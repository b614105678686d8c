"""The 2025 model vocabulary: MoE with shared experts and dense layers, MLA, multi-token prediction,
hybrid Mamba-2 layers and sliding windows; parameter counts against the published ones, which layer
is which, HF config.json import of each family and bad input as one-line errors."""

import json

import pytest
from cli_checks import one_line_error, write_spec

from teton.spec.hf_config import model_from_hf_config
from teton.spec.layer_types import LayerType
from teton.spec.model import MODEL_PRESETS, ModelSpec

# (preset, total parameters within this share of the published count); Kimi K2's published 1.04T
# is rounded, DeepSeek-V3's 685B includes the MTP module; Nemotron 3 Nano's 30B is its name's rounding (31.6B)
NEW_PRESETS = [("deepseek-v3", 0.01), ("kimi-k2", 0.02), ("llama4-scout", 0.02), ("llama4-maverick", 0.01),
               ("nemotron-h-8b", 0.02), ("nemotron-h-56b", 0.01), ("grok-1", 0.01), ("gpt-oss-120b", 0.01),
               ("qwen3-235b-a22b", 0.01), ("nemotron-3-nano", 0.06)]


@pytest.mark.parametrize(("name", "tolerance"), NEW_PRESETS)
def test_2025_presets_match_their_published_parameter_counts(name, tolerance):
    m = ModelSpec(**MODEL_PRESETS[name])
    assert abs(m.total_params() / m.published_params - 1) < tolerance


def test_deepseek_v3_active_parameters_are_37b():
    # DeepSeek-V3 report: 37B activated per token (36.6B of the main model incl. the 0.9B head)
    m = ModelSpec(**MODEL_PRESETS["deepseek-v3"])
    main_active = m.matmul_params() - m.mtp_params(active=True)
    assert 36.0e9 < main_active < 37.5e9


def test_deepseek_v3_mla_attention_by_hand():
    h, ql, kvl, heads, nope, rope, v = 7168, 1536, 512, 128, 128, 64, 128
    q = h * ql + ql + ql * heads * (nope + rope)
    kv = h * (kvl + rope) + kvl + kvl * heads * (nope + v)
    assert ModelSpec(**MODEL_PRESETS["deepseek-v3"]).attention_params() == q + kv + heads * v * h


def test_layer_kinds_follow_dense_prefix_interleave_and_pattern():
    ds = ModelSpec(**MODEL_PRESETS["deepseek-v3"]).layer_types()
    assert [t.ffn for t in ds[:4]] == ["dense", "dense", "dense", "moe"] and len(ds) == 61
    mav = ModelSpec(**MODEL_PRESETS["llama4-maverick"]).layer_types()
    assert [t.ffn for t in mav[:4]] == ["dense", "moe", "dense", "moe"]
    nh = ModelSpec(**MODEL_PRESETS["nemotron-h-56b"])
    counts = {t.label: n for t, n in nh.layer_type_counts().items()}
    assert counts == {"mamba": 54, "dense": 54, "attention": 10}
    oss = ModelSpec(**MODEL_PRESETS["gpt-oss-120b"]).layer_types()
    assert [t.windowed for t in oss[:4]] == [True, False, True, False]


def test_as_layer_gives_a_uniform_model_of_that_kind():
    ds = ModelSpec(**MODEL_PRESETS["deepseek-v3"])
    dense = ds.as_layer(LayerType("attention", "dense"))
    assert dense.uniform and dense.experts == 1 and dense.mlp_params() == 3 * 7168 * 18432
    moe = ds.as_layer(LayerType("attention", "moe"))
    assert moe.uniform and moe.mlp_params() == 3 * 7168 * 2048
    # the whole model is the sum of its kinds
    assert ds.layers_params() == 3 * dense.layer_params() + 58 * moe.layer_params()
    mamba = ModelSpec(**MODEL_PRESETS["nemotron-h-8b"]).as_layer(LayerType("mamba", "none"))
    assert mamba.mixer == "mamba" and mamba.ffn == "none"


def _write(tmp_path, cfg: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_hf_deepseek_v3_config_imports_mla_shared_experts_and_mtp(tmp_path):
    cfg = {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168, "intermediate_size": 18432,
           "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_key_value_heads": 128,
           "vocab_size": 129280, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
           "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 128, "v_head_dim": 128, "num_nextn_predict_layers": 1, "hidden_act": "silu"}
    m = ModelSpec(**model_from_hf_config(_write(tmp_path, cfg)))
    ref = ModelSpec(**MODEL_PRESETS["deepseek-v3"])
    assert m.total_params() == ref.total_params() and m.layer_types() == ref.layer_types()


def test_hf_llama4_nested_text_config_imports_interleave_and_widths(tmp_path):
    text = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "vocab_size": 202048, "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2}
    m = ModelSpec(**model_from_hf_config(_write(tmp_path, {"model_type": "llama4", "text_config": text})))
    assert m.total_params() == ModelSpec(**MODEL_PRESETS["llama4-maverick"]).total_params()


def test_hf_nemotron_h_and_gpt_oss_configs_import(tmp_path):
    pattern = MODEL_PRESETS["nemotron-h-8b"]["layer_pattern"]
    nh = {"model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 4096, "intermediate_size": 21504,
          "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 131072, "mlp_hidden_act": "relu2",
          "hybrid_override_pattern": pattern, "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128,
          "n_groups": 8, "conv_kernel": 4}
    m = ModelSpec(**model_from_hf_config(_write(tmp_path, nh)))
    assert m.mlp == "relu2" and m.has_mamba and m.layer_types() == ModelSpec(**MODEL_PRESETS["nemotron-h-8b"]).layer_types()
    oss = {"model_type": "gpt_oss", "num_hidden_layers": 4, "hidden_size": 2880, "intermediate_size": 2880,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 201088,
           "num_local_experts": 128, "experts_per_token": 4, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 2, "swiglu_limit": 7.0,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0}}
    m = ModelSpec(**model_from_hf_config(_write(tmp_path, oss)))
    assert (m.sliding_window, m.global_attention_every, m.top_k, m.glu_clamp) == (128, 2, 4, 7.0)
    assert m.position_embedding == "yarn" == MODEL_PRESETS["gpt-oss-120b"]["position_embedding"]


def test_hf_yarn_is_yarn_outside_latent_attention(tmp_path):
    """A YaRN rope_scaling (either key) makes a model's rotary yarn; under multi-head latent
    attention (DeepSeek-V3's config) it stays rope, as its temperature scales the softmax."""
    base = {"num_hidden_layers": 2, "hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 8,
            "vocab_size": 32000}
    for scaling, kind in (({"type": "yarn", "factor": 4.0}, "yarn"), ({"rope_type": "llama3", "factor": 8.0}, "rope"),
                          (None, "rope")):
        assert ModelSpec(**model_from_hf_config(_write(tmp_path, {**base, "rope_scaling": scaling}))).position_embedding == kind
    mla = {**base, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
           "v_head_dim": 128, "rope_scaling": {"type": "yarn", "factor": 40.0}}
    assert ModelSpec(**model_from_hf_config(_write(tmp_path, mla))).position_embedding == "rope"


def test_hf_nemotron_3_nano_config_imports_as_the_preset_and_latent_moe_is_refused(tmp_path):
    """Nemotron-H MoE (Nemotron 3): the shared expert's width is that many experts' width; a latent
    MoE and hybrid MTP layers are refused, naming the key."""
    from teton.errors import SpecError

    p = MODEL_PRESETS["nemotron-3-nano"]
    cfg = {"model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 2688, "intermediate_size": 1856,
           "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072,
           "mlp_hidden_act": "relu2", "hybrid_override_pattern": p["layer_pattern"], "mamba_num_heads": 64,
           "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "n_routed_experts": 128,
           "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712}
    m = ModelSpec(**model_from_hf_config(_write(tmp_path, cfg)))
    preset = ModelSpec(**p)
    assert (m.shared_experts, m.experts, m.top_k, m.moe_ffn_hidden) == (2, 128, 6, 1856)
    assert m.total_params() == pytest.approx(preset.total_params(), rel=1e-9)
    for extra, key in (({"moe_latent_size": 1024}, "moe_latent_size"),
                       ({"num_nextn_predict_layers": 2, "mtp_hybrid_override_pattern": "*E"}, "num_nextn_predict_layers"),
                       ({"moe_shared_expert_intermediate_size": 3000}, "not a multiple")):
        with pytest.raises(SpecError, match=key):
            model_from_hf_config(_write(tmp_path, {**cfg, **extra}))


def test_hf_config_with_dense_layers_not_a_prefix_is_a_spec_error(tmp_path):
    from teton.errors import SpecError

    cfg = {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
           "vocab_size": 100, "num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [2]}
    with pytest.raises(SpecError, match="mlp_only_layers"):
        model_from_hf_config(_write(tmp_path, cfg))


def test_qk_norm_normalises_this_ranks_queries_and_keys_and_keeps_their_inputs(tmp_path):
    """Qwen3's per-head QK norms: a norm kernel over this rank's Q and K after the QKV GEMM (and its
    backward after rotary's), their inputs and rstd kept for backward; the HF import reads it from
    the model type (Qwen3) or Llama 4's use_qk_norm; MLA refuses it."""
    from teton.spec import load_spec
    from teton.workload.activations import layer_activation_bytes
    from teton.workload.elementwise import elementwise_bytes
    from teton.workload.ops import layer_block

    assert MODEL_PRESETS["qwen3-30b-a3b"]["qk_norm"] and MODEL_PRESETS["qwen3-235b-a22b"]["qk_norm"]

    def spec(qk):
        return load_spec({"cluster": "dgx-b200-superpod", "model": {"base": "qwen3-30b-a3b", "qk_norm": qk},
                          "job": {"gpus": 8, "tp": 2, "ep": 4, "seq_len": 4096, "global_batch": 8}})

    on, off = spec(True), spec(False)
    block = layer_block(on.model, on.job)
    names = [i.name for i in block.fwd]
    assert names.index("qkv") < names.index("qk_norm") < names.index("rope")
    elements = 4096 * (on.model.q_width + on.model.kv_width) / 2
    fwd, bwd = elementwise_bytes("rmsnorm", "fused", elements)
    assert [i.bytes for i in block.fwd if i.name == "qk_norm"] == [fwd]
    assert [i.bytes for i in block.bwd if i.name == "qk_norm.bwd"] == [bwd]
    assert not [i for i in layer_block(off.model, off.job).fwd if i.name == "qk_norm"]
    kept = layer_activation_bytes(on.model, on.job) - layer_activation_bytes(off.model, off.job)
    assert kept == pytest.approx(2 * elements + 4 * 4096 * (on.model.heads + on.model.n_kv_heads) / 2)
    base = {"num_hidden_layers": 4, "hidden_size": 2048, "intermediate_size": 6144, "num_attention_heads": 16,
            "vocab_size": 1000}
    assert model_from_hf_config(_write(tmp_path, {**base, "model_type": "qwen3"}))["qk_norm"]
    assert not model_from_hf_config(_write(tmp_path, {**base, "model_type": "llama"}))["qk_norm"]
    assert model_from_hf_config(_write(tmp_path, {**base, "model_type": "llama4_text", "use_qk_norm": True}))["qk_norm"]
    with pytest.raises(ValueError, match="model.qk_norm = True: is for grouped-query attention"):
        ModelSpec(**{**MODEL_PRESETS["deepseek-v3"], "qk_norm": True})


@pytest.mark.parametrize(("override", "field"), [
    ({"layer_pattern": "M-X"}, "model.layer_pattern"),
    ({"layer_pattern": "M-"}, "model.layer_pattern"),
    ({"first_dense_layers": 61}, "model.first_dense_layers"),
    ({"shared_experts": -1}, "model.shared_experts"),
    ({"qk_norm": True}, "model.qk_norm"),
])
def test_bad_model_vocabulary_is_one_line(tmp_path, cli, override, field):
    model = json.dumps({"base": "deepseek-v3", **override})
    spec = write_spec(tmp_path, f"cluster: dgx-h100-superpod\nmodel: {model}\njob: {{gpus: 256, pp: 8, seq_len: 4096}}\n")
    code, _, err = cli("run", spec)
    one_line_error(code, err, field)
