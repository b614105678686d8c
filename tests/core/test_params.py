"""Parameter counts: presets vs published, and the formula vs a hand count."""

import pytest

from teton.workload.model import MODEL_PRESETS, ModelSpec, model_from_hf_config


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
