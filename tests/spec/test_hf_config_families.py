"""HF config.json import by model family: HF's class defaults for the keys a config leaves out,
Qwen-MoE's shared expert, model types and layer kinds teton does not model refused (never priced
as a Llama), JSON booleans and numbers, the activation checked and the MLP the model type's, the
notes found however the config is named, and a malformed file never named as a CLI flag."""

import json

import pytest
from cli_checks import one_line_error, write_spec

from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.hf_config import SUPPORTED_TYPES, model_from_hf_config
from teton.spec.model import ModelSpec

LLAMA = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
         "num_attention_heads": 8, "vocab_size": 1000, "hidden_act": "silu"}
# google/gemma-3-12b-pt's text_config: no head_dim, no vocab_size (Gemma3TextConfig's defaults: 256, 262,208)
GEMMA3_12B = {"model_type": "gemma3_text", "hidden_size": 3840, "intermediate_size": 15360, "num_attention_heads": 16,
              "num_hidden_layers": 48, "num_key_value_heads": 8, "sliding_window": 1024}
# Qwen/Qwen1.5-MoE-A2.7B and Qwen/Qwen2-57B-A14B: one shared expert of shared_expert_intermediate_size
QWEN_MOE = {"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
            "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936, "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
            "decoder_sparse_step": 1, "tie_word_embeddings": False, "use_sliding_window": False,
            "sliding_window": 32768, "hidden_act": "silu"}
QWEN2_57B = dict(QWEN_MOE, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                 num_key_value_heads=4, moe_intermediate_size=2560, shared_expert_intermediate_size=20480,
                 num_experts=64, num_experts_per_tok=8)
SPEC = "model: config.json\ncluster: meta-roce-24k\njob: {gpus: 8, tp: 8}\n"


def _write(tmp_path, cfg, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


def _model(tmp_path, cfg) -> ModelSpec:
    return ModelSpec(**model_from_hf_config(_write(tmp_path, cfg)))


def _active(m: ModelSpec) -> int:
    return m.layers_params(active=True) + m.embedding_params() + m.head_params()


def _refusal(tmp_path, cli, cfg) -> str:
    _write(tmp_path, cfg)
    code, _, err = cli("run", str(write_spec(tmp_path, SPEC)))
    return one_line_error(code, err, "config.json")


# --- 1. HF's config-class defaults for the keys a config leaves out ------------------------------

def test_gemma3_without_head_dim_takes_hfs_256_and_its_published_size(tmp_path):
    m = _model(tmp_path, GEMMA3_12B)
    assert (m.head_dim, m.vocab, m.tied_embeddings) == (256, 262_208, True)  # not 3840 / 16 = 240
    assert m.total_params() == pytest.approx(11.77e9, rel=0.002)  # Gemma 3 12B's language model
    four_b = {**GEMMA3_12B, "hidden_size": 2560, "intermediate_size": 10240, "num_attention_heads": 8,
              "num_hidden_layers": 34, "num_key_value_heads": 4}
    wrapped = _model(tmp_path, {"model_type": "gemma3", "text_config": four_b})  # the multimodal config.json
    assert wrapped.head_dim == 256 and wrapped.total_params() == pytest.approx(3.88e9, rel=0.002)


def test_gemma_defaults_are_each_model_types_own_and_listed_in_a_note(tmp_path):
    no_heads = {k: v for k, v in GEMMA3_12B.items() if k not in ("num_attention_heads", "num_key_value_heads")}
    assert (_model(tmp_path, no_heads).heads, _model(tmp_path, no_heads).n_kv_heads) == (8, 4)  # Gemma3TextConfig's
    gemma2 = {**GEMMA3_12B, "model_type": "gemma2"}
    assert _model(tmp_path, gemma2).vocab == 256_000  # Gemma2Config's vocabulary, not Gemma 3's
    notes = load_spec(write_spec(tmp_path, SPEC)).notes
    assert any("head_dim = 256" in n and "Gemma2Config" in n for n in notes)
    assert any("attn_logit_softcapping = 50.0 is not modelled" in n for n in notes)  # Gemma 2's default too


# --- 2. Qwen-MoE's shared expert ----------------------------------------------------------------

def test_qwen2_moe_shared_expert_counts_at_its_own_width(tmp_path):
    small, big = _model(tmp_path, QWEN_MOE), _model(tmp_path, QWEN2_57B)
    assert small.shared_experts == 4 and big.shared_experts == 8  # 5,632 / 1,408 and 20,480 / 2,560
    assert small.total_params() == pytest.approx(14.3e9, rel=0.005)  # Qwen1.5-MoE-A2.7B
    assert _active(small) == pytest.approx(2.7e9, rel=0.01)
    assert big.total_params() == pytest.approx(57.4e9, rel=0.002)  # Qwen2-57B-A14B
    assert _active(big) == pytest.approx(14.2e9, rel=0.01)
    with pytest.raises(SpecError, match="shared_expert_intermediate_size 5000 is not a multiple"):
        _model(tmp_path, {**QWEN_MOE, "shared_expert_intermediate_size": 5000})
    _write(tmp_path, QWEN_MOE)
    assert any("shared_expert_gate" in n for n in load_spec(write_spec(tmp_path, SPEC)).notes)


# --- 3. model types and layer kinds teton does not model ----------------------------------------

@pytest.mark.parametrize(("extra", "key"), [
    ({"model_type": "foobar_lm"}, "model_type = 'foobar_lm'"),
    ({"model_type": "jamba", "attn_layer_period": 8, "attn_layer_offset": 4, "num_experts": 16,
      "num_experts_per_tok": 2, "expert_layer_period": 2}, "attn_layer_period = 8"),
    ({"model_type": "qwen3_next", "full_attention_interval": 4}, "full_attention_interval = 4"),
    ({"model_type": "qwen3_next", "layer_types": ["linear_attention"] * 3 + ["full_attention"]},
     "layer_types has 'linear_attention' (3 of 4 layers)"),
    ({"model_type": "mllama_text_model", "cross_attention_layers": [1, 3]}, "cross_attention_layers"),
    ({"model_type": "llama", "layer_types": ["full_attention"] * 3}, "layer_types has 3 entries"),
    ({"model_type": "mixtral", "num_local_experts": 8}, "num_experts_per_tok missing"),
])
def test_what_teton_cannot_price_is_refused_naming_the_key(tmp_path, cli, extra, key):
    assert key in _refusal(tmp_path, cli, {**LLAMA, **extra})


@pytest.mark.parametrize("kind", SUPPORTED_TYPES)
def test_every_model_type_teton_reads_imports(tmp_path, kind):
    assert _model(tmp_path, {**LLAMA, "model_type": kind}).layers == 4


def test_a_config_without_model_type_is_read_as_llama_with_a_note(tmp_path):
    _write(tmp_path, {k: v for k, v in LLAMA.items() if k != "model_type"})
    spec = load_spec(write_spec(tmp_path, SPEC))
    assert spec.model.mlp == "swiglu" and any("names no model_type" in n for n in spec.notes)


# --- 4. JSON booleans and numbers ----------------------------------------------------------------

@pytest.mark.parametrize(("key", "value"), [("tie_word_embeddings", "false"), ("attention_bias", "false"),
                                            ("use_qk_norm", "false"), ("use_sliding_window", "false"),
                                            ("mlp_bias", 1), ("swiglu_limit", "7")])
def test_a_switch_must_be_a_json_boolean_and_a_number_a_number(tmp_path, cli, key, value):
    assert f"{key} = {value!r}" in _refusal(tmp_path, cli, {**LLAMA, key: value})


def test_a_false_switch_turns_its_feature_off(tmp_path):
    m = _model(tmp_path, {**LLAMA, "tie_word_embeddings": False, "attention_bias": False, "use_qk_norm": False,
                          "sliding_window": 128, "use_sliding_window": False})
    assert not (m.tied_embeddings or m.bias or m.qk_norm) and m.sliding_window is None


# --- 5. the activation is checked; the MLP is the model type's ----------------------------------

@pytest.mark.parametrize("act", ["foo_act", ["silu"], 3])
def test_an_unknown_activation_is_refused_naming_hidden_act(tmp_path, cli, act):
    line = _refusal(tmp_path, cli, {**LLAMA, "hidden_act": act})
    assert f"hidden_act = {act!r}" in line and "gelu_pytorch_tanh" in line


def test_the_mlp_is_the_model_types_whatever_the_activation(tmp_path):
    silu = _model(tmp_path, LLAMA)
    gelu = _model(tmp_path, {**LLAMA, "hidden_act": "gelu"})  # LlamaMLP: gated whatever its activation
    assert gelu.mlp == "swiglu" and gelu.total_params() == silu.total_params()
    assert _model(tmp_path, {**LLAMA, "model_type": "nemotron", "hidden_act": "relu2"}).mlp == "relu2"  # up, down


# --- 6. the notes, however the config is named ---------------------------------------------------

@pytest.mark.parametrize("model", ["{base: gemma.json, layers: 40}", "./gemma-config"])
def test_hf_notes_reach_a_mapping_base_and_a_path_without_json(tmp_path, model):
    gemma2 = {**GEMMA3_12B, "model_type": "gemma2", "head_dim": 256, "vocab_size": 256000,
              "final_logit_softcapping": 30.0}
    _write(tmp_path, gemma2, "gemma.json")
    _write(tmp_path, gemma2, "gemma-config")
    spec = load_spec(write_spec(tmp_path, SPEC.replace("config.json", model)))
    assert any("final_logit_softcapping = 30.0 is not modelled" in n for n in spec.notes)


# --- 7. a malformed file named by --set is the file's error, not a flag's ------------------------

def test_malformed_json_named_by_set_names_the_file_not_the_json_flag(tmp_path, cli, example_spec):
    bad = tmp_path / "empty.json"
    bad.write_text("")
    code, _, err = cli("run", example_spec, "--set", f"model={bad}", "--json")
    line = one_line_error(code, err, "malformed JSON")
    assert str(bad) in line and "--json =" not in line


def test_llama4_chunked_attention_is_a_note(tmp_path):
    text = {**LLAMA, "model_type": "llama4_text", "num_local_experts": 4, "num_experts_per_tok": 1}
    _write(tmp_path, {"model_type": "llama4", "text_config": text})  # attention_chunk_size: HF's default 8192
    notes = load_spec(write_spec(tmp_path, SPEC)).notes
    assert any("attention_chunk_size = 8192 is not modelled" in n for n in notes)
