"""Transformer model descriptions, exact parameter counts, presets and HF config import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from teton.errors import SpecError
from teton.spec.fields import MAX_LAYERS, MAX_SEQ_LEN, MAX_VOCAB, MAX_WIDTH, Section


class ModelSpec(Section):
    """A decoder-only transformer. Sizes are counts (layers, heads) or widths (hidden, ffn)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    layers: int = Field(gt=0, le=MAX_LAYERS)
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    ffn_hidden: int = Field(gt=0, le=MAX_WIDTH)
    heads: int = Field(gt=0, le=MAX_WIDTH)
    kv_heads: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    head_dim: int | None = Field(default=None, gt=0, le=MAX_WIDTH)
    vocab: int = Field(gt=0, le=MAX_VOCAB)
    # swiglu (gated: gate, up, down), gelu or relu2 (squared ReLU, Nemotron's: up and down only)
    mlp: Literal["swiglu", "gelu", "relu2"] = "swiglu"
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    bias: bool = False  # biases on the linear layers (GPT-2/3 style)
    # rope (rotary, applied to Q and K), learned (an absolute position table), alibi (a bias the
    # attention kernel adds: no parameters, no separate kernel)
    position_embedding: Literal["rope", "learned", "alibi"] = "rope"
    max_seq_len: int = Field(default=8192, gt=0, le=MAX_SEQ_LEN)
    dropout: bool = False  # dropout layers present (their masks are saved for backward)
    tied_embeddings: bool = False
    experts: int = Field(default=1, gt=0, le=MAX_LAYERS)
    top_k: int = Field(default=1, gt=0, le=MAX_LAYERS)
    published_params: float | None = None  # as the model card prints it, for checks

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise SpecError("model.kv_heads", self.kv_heads, f"must divide model.heads ({self.heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise SpecError("model.heads", self.heads, f"must divide model.hidden ({self.hidden}) or set head_dim")
        if self.top_k > self.experts:
            raise SpecError("model.top_k", self.top_k, f"must be <= model.experts ({self.experts})")
        return self

    # --- derived sizes -------------------------------------------------------------------
    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def d_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_width(self) -> int:
        return self.heads * self.d_head

    @property
    def kv_width(self) -> int:
        return self.n_kv_heads * self.d_head

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of size hidden x ffn per expert: gate, up, down (SwiGLU) or up, down."""
        return 3 if self.mlp == "swiglu" else 2

    def attention_params(self) -> int:
        h, q, kv = self.hidden, self.q_width, self.kv_width
        weights = h * q + 2 * h * kv + q * h
        biases = (q + 2 * kv + h) if self.bias else 0
        return weights + biases

    def mlp_params(self) -> int:
        """Parameters of one expert's MLP."""
        h, f = self.hidden, self.ffn_hidden
        biases = (f * (self.mlp_matrices - 1) + h) if self.bias else 0
        return self.mlp_matrices * h * f + biases

    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    def layer_params(self) -> int:
        """One transformer block: attention + MLP (all experts) + router + two norms."""
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.attention_params() + self.experts * self.mlp_params() + router + 2 * self.norm_params()

    def layer_active_params(self) -> int:
        """Parameters a token touches in one block (top_k experts)."""
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.attention_params() + self.top_k * self.mlp_params() + router + 2 * self.norm_params()

    def embedding_params(self) -> int:
        pos = self.max_seq_len * self.hidden if self.position_embedding == "learned" else 0
        return self.vocab * self.hidden + pos

    def head_params(self) -> int:
        """Output projection (0 when tied to the input embedding) plus the final norm."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.norm_params()

    def total_params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params() + self.head_params()

    def matmul_params(self) -> int:
        """Active parameters that take part in a matmul per token (PaLM's N for 6N: excludes the
        input embedding lookup, includes the output projection, tied or not)."""
        return self.layers * self.layer_active_params() + self.vocab * self.hidden + self.norm_params()


# Published architectures (model cards / papers). published_params: the headline count.
MODEL_PRESETS: dict[str, dict] = {
    # Llama 2 paper (Touvron et al. 2023, Table 1) and HF config.json files.
    "llama2-7b": dict(layers=32, hidden=4096, ffn_hidden=11008, heads=32, vocab=32000, max_seq_len=4096,
                      published_params=6.74e9),
    "llama2-13b": dict(layers=40, hidden=5120, ffn_hidden=13824, heads=40, vocab=32000, max_seq_len=4096,
                       published_params=13.0e9),
    "llama2-70b": dict(layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000,
                       max_seq_len=4096, published_params=69.0e9),
    # Llama 3 herd paper (arXiv 2407.21783, Table 3) and Meta-Llama-3 HF config.json files.
    "llama3-8b": dict(layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256,
                      published_params=8.03e9),
    "llama3-70b": dict(layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256,
                       published_params=70.6e9),
    "llama3-405b": dict(layers=126, hidden=16384, ffn_hidden=53248, heads=128, kv_heads=8, vocab=128256,
                        published_params=405e9),
    # GPT-3 paper (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, 96 heads, context 2048,
    # 4x FFN, GELU, LayerNorm, biases, learned positions, tied embeddings, BPE vocab 50257.
    "gpt3-175b": dict(layers=96, hidden=12288, ffn_hidden=49152, heads=96, vocab=50257, mlp="gelu",
                      norm="layernorm", bias=True, position_embedding="learned", max_seq_len=2048,
                      dropout=True, tied_embeddings=True, published_params=175e9),
}
# NeMo's GPT-3 family (NVIDIA/NeMo nemo/collections/llm/gpt/model/gpt.py, GPTConfig5B / 20B; the
# layout of Brown et al. 2020, Table 2.1): GELU, LayerNorm, biases, learned positions, tied embeddings.
for _size, (_layers, _hidden, _heads) in {"5b": (24, 4096, 32), "20b": (44, 6144, 48)}.items():
    MODEL_PRESETS[f"gpt3-{_size}"] = dict(MODEL_PRESETS["gpt3-175b"], layers=_layers, hidden=_hidden,
                                           ffn_hidden=4 * _hidden, heads=_heads, published_params=None)
# Nemotron (NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py: Nemotron3Config8B / 22B,
# Nemotron4Config15B / 340B; Nemotron-4 15B and 340B technical reports, arXiv 2402.16819 and
# 2406.11704): squared-ReLU MLP (not gated), LayerNorm, RoPE, no biases, untied embeddings, a
# 256,000-token vocabulary.
_NEMOTRON = dict(mlp="relu2", norm="layernorm", vocab=256000, max_seq_len=4096)
MODEL_PRESETS["nemotron3-8b"] = dict(_NEMOTRON, layers=32, hidden=4096, ffn_hidden=16384, heads=32)
MODEL_PRESETS["nemotron3-22b"] = dict(_NEMOTRON, layers=40, hidden=6144, ffn_hidden=24576, heads=48)
MODEL_PRESETS["nemotron4-15b"] = dict(_NEMOTRON, layers=32, hidden=6144, ffn_hidden=24576, heads=48, kv_heads=8,
                                      published_params=15.6e9)
MODEL_PRESETS["nemotron4-340b"] = dict(_NEMOTRON, layers=96, hidden=18432, ffn_hidden=73728, heads=96, kv_heads=8,
                                       published_params=340e9)
# BLOOM (BigScience, arXiv 2211.05100, Table 3; bigscience tr11-176B-ml): 70 layers, hidden 14,336,
# 112 heads, 4h GELU MLP, LayerNorm (and one on the embedding), biases, ALiBi positions, tied
# embeddings, a 250,680-token vocabulary, no dropout.
MODEL_PRESETS["bloom-176b"] = dict(layers=70, hidden=14336, ffn_hidden=57344, heads=112, vocab=250680, mlp="gelu",
                                   norm="layernorm", bias=True, position_embedding="alibi", max_seq_len=2048,
                                   tied_embeddings=True, published_params=176e9)
# Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990, Sec. 2): 105 layers, hidden 20,480,
# 128 heads, sequence 2,048, GPT-2 BPE vocabulary (50,272 padded), GPT-3-style blocks.
MODEL_PRESETS["mt-nlg-530b"] = dict(MODEL_PRESETS["gpt3-175b"], layers=105, hidden=20480, ffn_hidden=81920,
                                    heads=128, vocab=50272, published_params=530e9)
# Qwen3 MoE (Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B config.json): every layer routed (128 experts,
# top 8, no shared expert), expert width moe_intermediate_size, head_dim 128, GQA; vocab 151,936.
MODEL_PRESETS["qwen3-30b-a3b"] = dict(layers=48, hidden=2048, ffn_hidden=768, heads=32, kv_heads=4, head_dim=128,
                                      vocab=151936, experts=128, top_k=8, max_seq_len=40960, published_params=30.5e9)
MODEL_PRESETS["qwen3-235b-a22b"] = dict(layers=94, hidden=4096, ffn_hidden=1536, heads=64, kv_heads=4, head_dim=128,
                                        vocab=151936, experts=128, top_k=8, max_seq_len=40960, published_params=235e9)
# Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088, Table 1) and HF config.json files:
# 8 experts, 2 active per token; 46.7B total / 12.9B active (8x7B), 141B / 39B (8x22B).
MODEL_PRESETS["mixtral-8x7b"] = dict(layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=32000,
                                     experts=8, top_k=2, max_seq_len=32768, published_params=46.7e9)
MODEL_PRESETS["mixtral-8x22b"] = dict(layers=56, hidden=6144, ffn_hidden=16384, heads=48, kv_heads=8, vocab=32768,
                                      experts=8, top_k=2, max_seq_len=65536, published_params=141e9)
# Llama 3.1 keeps the Llama 3 shapes (longer RoPE context).
for _size in ("8b", "70b", "405b"):
    MODEL_PRESETS[f"llama3.1-{_size}"] = dict(MODEL_PRESETS[f"llama3-{_size}"], max_seq_len=131072)
for _name, _fields in MODEL_PRESETS.items():
    _fields.setdefault("name", _name)


def model_from_hf_config(path: str | Path) -> dict:
    """Model fields from a Hugging Face ``config.json`` with Llama-style keys. Its name is the
    config's own: ``_name_or_path`` where the config has one (``meta-llama/Meta-Llama-3-8B``), else
    its ``model_type`` and size in billions of parameters (``llama-8b``), else the file's name
    without its suffix: never the folder it sits in."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SpecError("model", str(path), f"not a readable HF config.json ({err})") from None
    required = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"]
    missing = [k for k in required if k not in cfg]
    if missing:
        raise SpecError("model", str(path), f"HF config lacks {', '.join(missing)}")
    act = str(cfg.get("hidden_act", "silu")).lower()
    fields = dict(
        name=path.stem,
        layers=cfg["num_hidden_layers"],
        hidden=cfg["hidden_size"],
        ffn_hidden=cfg["intermediate_size"],
        heads=cfg["num_attention_heads"],
        kv_heads=cfg.get("num_key_value_heads"),
        head_dim=cfg.get("head_dim"),
        vocab=cfg["vocab_size"],
        mlp="swiglu" if act in ("silu", "swish", "swiglu") else "relu2" if act in ("relu2", "squared_relu") else "gelu",
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        max_seq_len=cfg.get("max_position_embeddings", 8192),
        experts=cfg.get("num_local_experts", 1) or 1,
        top_k=cfg.get("num_experts_per_tok", 1) or 1,
        bias=bool(cfg.get("attention_bias", False)),
    )
    fields = {k: v for k, v in fields.items() if v is not None}
    return {**fields, "name": _hf_name(cfg, fields)}


def _hf_name(cfg: dict, fields: dict) -> str:
    """``_name_or_path``, else ``<model_type>-<size>b``, else the file's stem (fields' name)."""
    given = cfg.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip()
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or not kind.strip():
        return fields["name"]
    try:
        params = ModelSpec(**fields).total_params()
    except (ValueError, SpecError):  # the fields' own error is raised when the model is built
        return kind.strip()
    return f"{kind.strip()}-{round(params / 1e9, 1):g}b"
