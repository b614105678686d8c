"""HF config.json import: Gemma's gated MLP, tied embeddings and local / global layers, and a
wrongly typed count as a one-line error naming the key."""

import json

import pytest
from cli_checks import one_line_error, write_spec

from teton.spec.hf_config import model_from_hf_config
from teton.spec.model import ModelSpec

# google/gemma-2-9b's config.json (the keys teton reads, and some it does not): 9.24B parameters
GEMMA2_9B = {"model_type": "gemma2", "hidden_act": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
             "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "num_hidden_layers": 42,
             "vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096,
             "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
SMALL = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
         "num_attention_heads": 8, "vocab_size": 1000}


def _model(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return model_from_hf_config(path)


def test_gemma2_imports_geglu_tied_embeddings_and_alternating_windows(tmp_path):
    fields = _model(tmp_path, GEMMA2_9B)
    m = ModelSpec(**fields)
    assert m.mlp == "swiglu" and m.tied_embeddings  # GeGLU: gated, three matrices; HF's Gemma default ties
    assert m.total_params() == pytest.approx(9.24e9, rel=0.005)
    assert (fields["sliding_window"], fields["global_attention_every"]) == (4096, 2)
    gemma3 = _model(tmp_path, {**GEMMA2_9B, "model_type": "gemma3_text", "sliding_window": 1024})
    assert gemma3["global_attention_every"] == 6  # every sliding_window_pattern-th layer global


def test_an_untied_gemma_and_a_llama_keep_what_their_config_says(tmp_path):
    assert not _model(tmp_path, {**GEMMA2_9B, "tie_word_embeddings": False})["tied_embeddings"]
    llama = _model(tmp_path, SMALL)
    assert llama["mlp"] == "swiglu" and not llama.get("tied_embeddings")


@pytest.mark.parametrize(("extra", "key"), [
    ({"num_experts": 4, "mlp_only_layers": 3}, "mlp_only_layers"),
    ({"num_experts": 4, "mlp_only_layers": [0, "a"]}, "mlp_only_layers"),
    ({"num_local_experts": "8"}, "num_local_experts"),
    ({"n_routed_experts": 8, "n_group": "4", "topk_group": 2}, "n_group"),
    ({"num_hidden_layers": 32.5}, "num_hidden_layers"),
    ({"layer_types": "full_attention", "sliding_window": 128}, "layer_types"),
])
def test_a_wrongly_typed_hf_field_is_a_one_line_error(tmp_path, cli, extra, key):
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, **extra}))
    spec = write_spec(tmp_path, "model: config.json\ncluster: meta-roce-24k\njob: {gpus: 8, tp: 8}\n")
    code, _, err = cli("run", str(spec))
    assert key in one_line_error(code, err, "config.json")


def test_malformed_json_is_named_as_the_file_not_a_flag(tmp_path, cli):
    (tmp_path / "config.json").write_text('{"num_hidden_layers": 2, x}')
    spec = write_spec(tmp_path, "model: config.json\ncluster: meta-roce-24k\njob: {gpus: 8}\n")
    code, _, err = cli("run", str(spec), "--json")
    line = one_line_error(code, err, "malformed JSON")
    assert "--json" not in line


def test_keys_teton_does_not_model_are_notes_not_dropped(tmp_path):
    """Gemma 2's soft-capping and the like reach every result as notes."""
    from teton import simulate

    (tmp_path / "config.json").write_text(json.dumps(GEMMA2_9B))
    spec = write_spec(tmp_path, "model: config.json\ncluster: meta-roce-24k\njob: {gpus: 8, tp: 8}\n")
    notes = [n for n in simulate(spec).notes if "is not modelled" in n]
    assert len(notes) == 2 and all(n.startswith("model config.json: ") for n in notes)
    assert any("final_logit_softcapping = 30.0" in n for n in notes)
