"""Model specs: parameter counts (presets vs published, the formula vs a hand count) and models
imported from a Hugging Face config.json."""

import json

import pytest
from cli_checks import one_line_error, write_spec

import teton
from teton.spec import load_spec
from teton.spec.hf_config import model_from_hf_config
from teton.spec.model import MODEL_PRESETS, ModelSpec


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b", "llama2-7b", "llama2-70b"])
def test_params_within_one_percent_of_published(name):
    m = ModelSpec(**MODEL_PRESETS[name])
    assert abs(m.total_params() / m.published_params - 1) < 0.01


def test_llama3_8b_hand_count():
    # 32 layers x (q 4096^2 + k,v 2*4096*1024 + o 4096^2 + mlp 3*4096*14336 + 2 norms 4096)
    layer = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    total = 32 * layer + 2 * 128256 * 4096 + 4096  # untied embedding + output, final norm
    assert ModelSpec(**MODEL_PRESETS["llama3-8b"]).total_params() == total == 8_030_261_248


def test_gpt3_tied_gelu_biases_learned_positions():
    h, f, L, V = 12288, 49152, 96, 50257
    layer = (4 * h * h + 4 * h) + (2 * h * f + f + h) + 2 * 2 * h
    total = L * layer + V * h + 2048 * h + 2 * h  # tied: no separate output matrix
    assert ModelSpec(**MODEL_PRESETS["gpt3-175b"]).total_params() == total


def test_hf_config_import(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,'
                   ' "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,'
                   ' "hidden_act": "silu", "tie_word_embeddings": false, "max_position_embeddings": 8192}')
    m = ModelSpec(**model_from_hf_config(cfg))
    assert m.total_params() == ModelSpec(**MODEL_PRESETS["llama3-8b"]).total_params()


def test_hf_config_missing_keys_is_a_spec_error(tmp_path):
    from teton.errors import SpecError

    cfg = tmp_path / "config.json"
    cfg.write_text('{"hidden_size": 4096}')
    with pytest.raises(SpecError, match="num_hidden_layers"):
        model_from_hf_config(cfg)


def test_hf_config_as_model(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,'
                   ' "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}')
    r = teton.simulate({"cluster": "dgx-h100-superpod", "model": str(cfg),
                        "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 64}})
    assert r.fits_in_memory


def test_hf_config_without_kv_heads_or_with_rope_scaling_imports(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
         "num_hidden_layers": 32, "vocab_size": 128256, "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
         "tie_word_embeddings": True}))
    spec = load_spec(write_spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n"))
    assert spec.model.n_kv_heads == 32  # HF's default: num_key_value_heads = num_attention_heads
    assert spec.model.tied_embeddings


def test_malformed_hf_config_is_one_line(tmp_path, cli):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2,\n')
    spec = write_spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n")
    code, _, err = cli("run", spec)
    one_line_error(code, err, "malformed JSON")


def test_non_llama_hf_config_names_the_missing_keys(tmp_path, cli):
    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_layer": 12,
         "n_head": 12, "vocab_size": 50257}))
    spec = write_spec(tmp_path, "cluster: meta-roce-24k\nmodel: config.json\njob: {gpus: 8}\n")
    code, _, err = cli("run", spec)
    one_line_error(code, err, "HF config lacks num_hidden_layers")
