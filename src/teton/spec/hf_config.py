"""Model fields from a Hugging Face ``config.json``."""

from __future__ import annotations

import json
from pathlib import Path

from teton.errors import SpecError


def model_from_hf_config(path: str | Path) -> dict:
    """Model fields from a Hugging Face ``config.json``: Llama-style keys, plus the MoE, MLA, hybrid
    and sliding-window keys of the families teton describes (:func:`_moe_fields`,
    :func:`_mla_fields`, :func:`_hybrid_fields`, :func:`_window_fields`). Llama 4's and other
    multimodal configs nest the language model under ``text_config``. Its name is the config's own:
    ``_name_or_path`` where the config has one (``meta-llama/Meta-Llama-3-8B``), else its
    ``model_type`` and size in billions of parameters (``llama-8b``), else the file's name without
    its suffix: never the folder it sits in."""
    path = Path(path)
    try:
        top = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise SpecError("model", str(path), f"not a readable HF config.json ({err})") from None
    if not isinstance(top, dict):
        raise SpecError("model", str(path), f"an HF config.json holds one JSON object, not a {type(top).__name__}")
    cfg = _language_config(top)
    kind = str(cfg.get("model_type", ""))
    if kind in GEMMA_TYPES and "vocab_size" not in cfg:
        cfg = {**cfg, "vocab_size": GEMMA3_VOCAB}  # Gemma3TextConfig's default, which its configs leave out
    required = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"]
    missing = [k for k in required if k not in cfg]
    if missing:
        raise SpecError("model", str(path), f"HF config lacks {', '.join(missing)}")
    _check_types(cfg, str(path))
    act = str(cfg.get("hidden_act", cfg.get("hidden_activation", cfg.get("mlp_hidden_act", "silu")))).lower()
    fields = dict(
        name=path.stem,
        layers=cfg["num_hidden_layers"],
        hidden=cfg["hidden_size"],
        ffn_hidden=cfg["intermediate_size"],
        heads=cfg["num_attention_heads"],
        kv_heads=cfg.get("num_key_value_heads"),
        head_dim=cfg.get("head_dim"),
        vocab=cfg["vocab_size"],
        mlp=("swiglu" if act in ("silu", "swish", "swiglu") or kind in GEMMA_TYPES
             else "relu2" if act in ("relu2", "squared_relu") else "gelu"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", kind in GEMMA_TYPES)),
        max_seq_len=cfg.get("max_position_embeddings", 8192),
        bias=bool(cfg.get("attention_bias", False)),
        qk_norm=_qk_norm(cfg),
        glu_clamp=cfg.get("swiglu_limit"),  # GPT-OSS: the gate and linear halves clamped
        position_embedding=_position_embedding(cfg),
    )
    fields.update(_moe_fields(cfg, str(path)))
    fields.update(_mla_fields(cfg))
    fields.update(_hybrid_fields(cfg, str(path)))
    fields.update(_window_fields(cfg, str(path)))
    fields = {k: v for k, v in fields.items() if v is not None}
    return {**fields, "name": _hf_name(top, fields)}


# Gemma's model types: a gated MLP whatever its GELU (GeGLU: gate, up and down projections, the
# shapes of teton's swiglu), embeddings tied unless the config says otherwise (HF's GemmaConfig,
# Gemma2Config and Gemma3TextConfig default tie_word_embeddings to True), and local / global
# attention layers (Gemma 2 alternates them; Gemma 3 every sliding_window_pattern-th is global)
GEMMA_TYPES = ("gemma", "gemma2", "gemma3", "gemma3_text")
GEMMA3_VOCAB = 262_208  # Gemma3TextConfig's vocab_size default (transformers 4.50)
# keys read as counts or sizes: an integer each where present (a list of integers for layer lists)
INT_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size",
            "num_key_value_heads", "head_dim", "max_position_embeddings", "num_local_experts", "n_routed_experts",
            "num_experts", "num_experts_per_tok", "experts_per_token", "moe_intermediate_size", "n_shared_experts",
            "first_k_dense_replace", "interleave_moe_layer_step", "decoder_sparse_step", "n_group", "topk_group",
            "intermediate_size_mlp", "moe_shared_expert_intermediate_size", "kv_lora_rank", "q_lora_rank",
            "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "num_nextn_predict_layers", "mamba_num_heads",
            "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "sliding_window", "sliding_window_pattern")
INT_LIST_KEYS = ("mlp_only_layers",)


def _language_config(top: dict) -> dict:
    """The language model's keys: a multimodal config's (Llama 4, Gemma 3) ``text_config`` over
    the top level's."""
    return {**top, **top["text_config"]} if isinstance(top.get("text_config"), dict) else top


def _check_types(cfg: dict, where: str) -> None:
    """Every count or size the import reads is an integer (:data:`INT_KEYS`), every layer list a
    list of them: a string or float there is a one-line error naming the key."""
    for key in INT_KEYS:
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise SpecError("model", where, f"{key} = {value!r} in the HF config: must be a non-negative integer")
    for key in INT_LIST_KEYS:
        value = cfg.get(key)
        if value is not None and (not isinstance(value, list)
                                  or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
            raise SpecError("model", where, f"{key} = {value!r} in the HF config: must be a list of layer numbers")
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise SpecError("model", where, f"layer_types = {types!r} in the HF config: must be a list of layer types")


# model types whose attention normalises each query and key head (Qwen3 and Qwen3-MoE, OLMo-2 and
# OLMoE, Gemma 3: their HF modelling code's q_norm / k_norm); Llama 4 says so in use_qk_norm
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "olmo2", "olmoe", "gemma3", "gemma3_text")


# keys of families teton reads whose cost it does not price or whose meaning it does not take:
# each one a config sets is a note on every result, never silently dropped
UNMODELLED_KEYS = {
    "attn_logit_softcapping": "attention-score soft-capping (a tanh on every score: not priced)",
    "final_logit_softcapping": "output-logit soft-capping (a tanh over the logits: not priced)",
    "mlp_bias": "biases in the dense MLP (not counted)",
    "quantization_config": "the checkpoint's quantisation (teton trains in job.precision)",
    "scoring_func": "the router's scoring function (priced as a softmax top-k)",
    "topk_method": "the router's top-k method (priced as a plain top-k)",
}


def hf_config_notes(path: str | Path) -> tuple[str, ...]:
    """One note per key of :data:`UNMODELLED_KEYS` an HF config sets (a value other than null,
    false or 0): what teton leaves out of its model of that config."""
    try:
        top = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ()
    if not isinstance(top, dict):
        return ()
    cfg = _language_config(top)
    return tuple(f"model {Path(path).name}: {key} = {cfg[key]!r} is not modelled: {what}"
                 for key, what in UNMODELLED_KEYS.items() if cfg.get(key) not in (None, False, 0, "softmax"))


def _qk_norm(cfg: dict) -> bool:
    """Whether the model normalises each query and key head: Llama 4's ``use_qk_norm``, else its
    model type (:data:`QK_NORM_TYPES`)."""
    if cfg.get("use_qk_norm") is not None:
        return bool(cfg["use_qk_norm"])
    return str(cfg.get("model_type", "")) in QK_NORM_TYPES


def _first(cfg: dict, *keys: str):
    return next((cfg[k] for k in keys if cfg.get(k) is not None), None)


def _moe_fields(cfg: dict, where: str) -> dict:
    """Experts (Mixtral / Llama 4 ``num_local_experts``, DeepSeek ``n_routed_experts``, Qwen3-MoE
    ``num_experts``), top-k, the expert width (``moe_intermediate_size``; Llama 4's experts are
    ``intermediate_size`` wide and its dense layers ``intermediate_size_mlp``), shared experts
    (DeepSeek ``n_shared_experts``; Llama 4 always has one), the dense prefix
    (``first_k_dense_replace``, or Qwen3-MoE's ``mlp_only_layers`` when they are the first ones)
    and the MoE interval (``interleave_moe_layer_step``, ``decoder_sparse_step``); DeepSeek's group-limited
    routing (``topk_group`` of ``n_group`` > 1 groups) as node-limited routing, one group a node as in
    DeepSeek-V3's training (arXiv 2412.19437, Sec. 2.1.2)."""
    experts = _first(cfg, "num_local_experts", "n_routed_experts", "num_experts") or 1
    if experts <= 1:
        return {}
    out = dict(experts=experts, top_k=_first(cfg, "num_experts_per_tok", "experts_per_token") or 1,
               moe_ffn_hidden=cfg.get("moe_intermediate_size"), shared_experts=cfg.get("n_shared_experts") or 0,
               first_dense_layers=cfg.get("first_k_dense_replace") or 0,
               moe_layer_interval=_first(cfg, "interleave_moe_layer_step", "decoder_sparse_step") or 1)
    if (cfg.get("n_group") or 1) > 1 and cfg.get("topk_group"):
        out["moe_max_nodes"] = min(cfg["topk_group"], out["top_k"])
    if str(cfg.get("model_type", "")).startswith("llama4"):
        out.update(moe_ffn_hidden=cfg["intermediate_size"], ffn_hidden=cfg.get("intermediate_size_mlp"),
                   shared_experts=1)
    dense = sorted(cfg.get("mlp_only_layers") or [])
    if dense and dense != list(range(len(dense))):
        raise SpecError("model", where, f"mlp_only_layers {dense} are not the first layers: teton's "
                        "model.first_dense_layers takes a prefix")
    if dense:
        out["first_dense_layers"] = len(dense)
    out.update(_nemotron_h_moe(cfg, where, out["moe_ffn_hidden"]))
    return out


def _nemotron_h_moe(cfg: dict, where: str, expert: int | None) -> dict:
    """Nemotron-H MoE (Nemotron 3): its shared expert is ``moe_shared_expert_intermediate_size``
    wide, that many routed experts' width (Megatron-Bridge's NemotronH bridge maps the key as is);
    a latent MoE (``moe_latent_size``: tokens projected to a smaller width around the experts) is
    not modelled."""
    if cfg.get("moe_latent_size"):
        raise SpecError("model", where, f"moe_latent_size {cfg['moe_latent_size']}: a latent MoE (experts on a "
                        "projected width, Nemotron 3 Super / Ultra) is not modelled")
    width = cfg.get("moe_shared_expert_intermediate_size")
    if not width:
        return {}
    if not expert:
        raise SpecError("model", where, f"moe_shared_expert_intermediate_size {width} without moe_intermediate_size: "
                        "teton counts shared experts in routed experts' widths")
    if width % expert:
        raise SpecError("model", where, f"moe_shared_expert_intermediate_size {width} is not a multiple of "
                        f"moe_intermediate_size ({expert}): teton counts shared experts whole")
    return {"shared_experts": width // expert}


def _position_embedding(cfg: dict) -> str | None:
    """``yarn`` for a YaRN-scaled rotary (``rope_scaling``'s ``rope_type`` or ``type``: GPT-OSS)
    outside multi-head latent attention (whose YaRN temperature scales the softmax, not the
    rotary: teton's ``rope``); None (the default, rope) otherwise."""
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
    return "yarn" if kind == "yarn" and cfg.get("kv_lora_rank") is None else None


def _mla_fields(cfg: dict) -> dict:
    """DeepSeek's multi-head latent attention: the low-rank dims, the RoPE and value head dims;
    ``qk_nope_head_dim`` is teton's head_dim; ``num_nextn_predict_layers`` the MTP depth."""
    if cfg.get("kv_lora_rank") is None:
        return {}
    return dict(kv_lora_rank=cfg["kv_lora_rank"], q_lora_rank=cfg.get("q_lora_rank"),
                qk_rope_head_dim=cfg.get("qk_rope_head_dim", 64), v_head_dim=cfg.get("v_head_dim"),
                head_dim=cfg.get("qk_nope_head_dim", cfg.get("head_dim")),
                mtp_depth=cfg.get("num_nextn_predict_layers") or 0)


def _hybrid_fields(cfg: dict, where: str) -> dict:
    """Nemotron-H's ``hybrid_override_pattern`` and Mamba-2 sizes; multi-token prediction layers of
    their own hybrid pattern (``num_nextn_predict_layers`` with ``mtp_hybrid_override_pattern``,
    Nemotron 3.5) are not modelled."""
    if not cfg.get("hybrid_override_pattern"):
        return {}
    if cfg.get("num_nextn_predict_layers"):
        raise SpecError("model", where, f"num_nextn_predict_layers {cfg['num_nextn_predict_layers']} with "
                        f"mtp_hybrid_override_pattern {cfg.get('mtp_hybrid_override_pattern')!r}: hybrid "
                        "multi-token prediction layers are not modelled")
    return dict(layer_pattern=cfg["hybrid_override_pattern"], mamba_heads=cfg.get("mamba_num_heads"),
                mamba_head_dim=cfg.get("mamba_head_dim", 64), mamba_state_dim=cfg.get("ssm_state_size", 128),
                mamba_groups=cfg.get("n_groups", 8), mamba_conv_kernel=cfg.get("conv_kernel", 4))


def _window_fields(cfg: dict, where: str) -> dict:
    """A sliding window on some layers: GPT-OSS's ``layer_types`` (``sliding_attention`` /
    ``full_attention``) must repeat with a full layer every N-th; without ``layer_types`` Gemma 2
    alternates (its ``Gemma2DecoderLayer``: every other layer global) and Gemma 3 makes every
    ``sliding_window_pattern``-th (6) global, any other model windows every layer."""
    window = cfg.get("sliding_window")
    if not window or cfg.get("use_sliding_window") is False:
        return {}
    types = cfg.get("layer_types") or []
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    kind = str(cfg.get("model_type", ""))
    if not types and kind in GEMMA_TYPES[1:]:  # HF's Gemma 2 / 3 modelling code when the config lists no types
        return dict(sliding_window=window, global_attention_every=2 if kind == "gemma2"
                    else cfg.get("sliding_window_pattern") or 6)
    if not full:
        return dict(sliding_window=window)
    every = full[0] + 1
    if full != list(range(every - 1, len(types), every)):
        raise SpecError("model", where, "layer_types does not repeat with a full-attention layer every N-th: "
                        "teton's model.global_attention_every takes a period")
    return dict(sliding_window=window, global_attention_every=every)


def _hf_name(cfg: dict, fields: dict) -> str:
    """``_name_or_path``, else ``<model_type>-<size>b``, else the file's stem (fields' name)."""
    given = cfg.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        return given.strip()
    kind = cfg.get("model_type")
    if not isinstance(kind, str) or not kind.strip():
        return fields["name"]
    try:
        from teton.spec.model import ModelSpec

        params = ModelSpec(**fields).total_params()
    except (ValueError, SpecError):  # the fields' own error is raised when the model is built
        return kind.strip()
    return f"{kind.strip()}-{round(params / 1e9, 1):g}b"
