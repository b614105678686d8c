"""Model fields from a Hugging Face ``config.json``."""

from __future__ import annotations

import json
import math
import reprlib
from pathlib import Path

from teton.errors import SpecError


def model_from_hf_config(path: str | Path) -> dict:
    """Model fields from a Hugging Face ``config.json`` of a model type teton reads
    (:data:`SUPPORTED_TYPES`; a config naming none is read as Llama's, with a note): Llama-style
    keys, plus the MoE, MLA, hybrid and sliding-window keys of the families teton describes
    (:func:`_moe_fields`, :func:`_mla_fields`, :func:`_hybrid_fields`, :func:`_window_fields`).
    Llama 4's and other multimodal configs nest the language model under ``text_config``. A key
    the config leaves out takes its HF config class's default (:data:`HF_DEFAULTS`: Gemma 3's
    head_dim 256, not hidden / heads). Whether the MLP is gated is the model type's (its HF
    modelling code's MLP class), never the activation's name, which must be one HF knows. A model
    type or layer kind teton does not model is refused (:func:`_check_supported`), never priced
    as a Llama. Its name is the config's own: ``_name_or_path`` where the config has one
    (``meta-llama/Meta-Llama-3-8B``), else its ``model_type`` and size in billions of parameters
    (``llama-8b``), else the file's name without its suffix: never the folder it sits in."""
    path = Path(path)
    where = str(path)
    try:
        top = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SpecError("model", where, f"not a readable HF config.json ({err})") from None
    if not isinstance(top, dict):
        raise SpecError("model", where, f"an HF config.json holds one JSON object, not a {type(top).__name__}")
    cfg = _language_config(top)
    required = ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"]
    missing = [k for k in required if k not in cfg]
    if missing:
        raise SpecError("model", where, f"HF config lacks {', '.join(missing)}")
    _check_types(top, cfg, where)
    _check_supported(top, cfg, where)
    kind = cfg.get("model_type") or ""
    fields = dict(
        name=path.stem,
        layers=cfg["num_hidden_layers"],
        hidden=cfg["hidden_size"],
        ffn_hidden=cfg["intermediate_size"],
        heads=cfg["num_attention_heads"],
        kv_heads=cfg.get("num_key_value_heads"),
        head_dim=cfg.get("head_dim"),
        vocab=cfg["vocab_size"],
        mlp=_mlp(cfg, kind),
        norm="layernorm" if kind == "nemotron" else None,  # NemotronLayerNorm1P: a LayerNorm with a bias
        tied_embeddings=cfg.get("tie_word_embeddings"),
        max_seq_len=cfg.get("max_position_embeddings", 8192),
        bias=cfg.get("attention_bias"),
        qk_norm=_qk_norm(cfg),
        glu_clamp=cfg.get("swiglu_limit"),  # GPT-OSS: the gate and linear halves clamped
        position_embedding=_position_embedding(cfg),
    )
    fields.update(_moe_fields(cfg, where))
    fields.update(_mla_fields(cfg))
    fields.update(_hybrid_fields(cfg, where))
    fields.update(_window_fields(cfg, where))
    fields = {k: v for k, v in fields.items() if v is not None}
    return {**fields, "name": _hf_name(top, fields)}


# Gemma's model types: a gated MLP whatever its GELU (GeGLU: gate, up and down projections, the
# shapes of teton's swiglu), embeddings tied unless the config says otherwise, and local / global
# attention layers (Gemma 2 alternates them; Gemma 3 every sliding_window_pattern-th is global)
GEMMA_TYPES = ("gemma", "gemma2", "gemma3", "gemma3_text")
# The model types teton reads (HF's model_type), by the MLP their HF modelling code builds: gated
# (gate, up and down projections: LlamaMLP and its copies, Gemma's GeGLU, the experts of Mixtral,
# Qwen-MoE, OLMoE, DeepSeek, GPT-OSS and Llama 4: teton's swiglu shapes) or not (up and down:
# NemotronMLP, NemotronHMLP: relu2 for ReLU squared, else priced as gelu). kimi_k2 is DeepSeek-V3's
# architecture (its config's architectures: DeepseekV3ForCausalLM).
GATED_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo2", "olmoe",
               "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "llama4", "llama4_text", *GEMMA_TYPES)
UNGATED_TYPES = ("nemotron", "nemotron_h")
SUPPORTED_TYPES = GATED_TYPES + UNGATED_TYPES
# HF transformers' config-class defaults (transformers/models/<type>/configuration_<type>.py,
# 4.50 to 5.x) of keys teton reads that published configs leave out: an absent key takes this
# value, as HF's class gives it (Gemma 3 12B's config.json names no head_dim: 256, not
# 3840 / 16 = 240), and a note lists them. A multimodal type reads its language model's.
_GEMMA = dict(head_dim=256, vocab_size=256_000, tie_word_embeddings=True, max_position_embeddings=8192)
HF_DEFAULTS: dict[str, tuple[str, dict]] = {
    "gemma": ("GemmaConfig", _GEMMA),
    "gemma2": ("Gemma2Config", dict(_GEMMA, sliding_window=4096, attn_logit_softcapping=50.0,
                                     final_logit_softcapping=30.0)),
    "gemma3_text": ("Gemma3TextConfig", dict(_GEMMA, vocab_size=262_208, max_position_embeddings=131_072,
                                             num_attention_heads=8, num_key_value_heads=4, sliding_window=4096)),
    "llama4_text": ("Llama4TextConfig", dict(intermediate_size_mlp=16384, num_local_experts=16, num_experts_per_tok=1,
                                             use_qk_norm=True, attention_chunk_size=8192)),
}
TEXT_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text"}  # a multimodal type's language model
# keys read as counts or sizes: an integer each where present (a list of integers for layer lists)
INT_KEYS = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size",
            "num_key_value_heads", "head_dim", "max_position_embeddings", "num_local_experts", "n_routed_experts",
            "num_experts", "num_experts_per_tok", "experts_per_token", "moe_intermediate_size", "n_shared_experts",
            "first_k_dense_replace", "interleave_moe_layer_step", "decoder_sparse_step", "n_group", "topk_group",
            "intermediate_size_mlp", "moe_shared_expert_intermediate_size", "shared_expert_intermediate_size",
            "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
            "num_nextn_predict_layers", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups",
            "conv_kernel", "sliding_window", "sliding_window_pattern", "attention_chunk_size")
INT_LIST_KEYS = ("mlp_only_layers",)
BOOL_KEYS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_qk_norm", "use_sliding_window")  # JSON true / false
NUMBER_KEYS = ("swiglu_limit",)  # a positive number
ACT_KEYS = ("hidden_act", "hidden_activation", "mlp_hidden_act")  # Gemma 2 / 3: hidden_activation; Nemotron-H: mlp_
# the activations HF knows (transformers/activations.py, ACT2CLS): any other name fails in HF too
ACTIVATIONS = ("gelu", "gelu_10", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh", "gelu_python_tanh",
               "gelu_accurate", "hardswish", "laplace", "leaky_relu", "linear", "mish", "quick_gelu", "relu", "relu2",
               "relu6", "sigmoid", "silu", "sqrtsoftplus", "swish", "tanh", "prelu", "xielu")
# layer_types entries teton prices: full and sliding-window attention; Llama 4's chunked
# attention as full attention (a note: attention_chunk_size)
LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")
# keys of layer kinds teton does not model: a config that sets one is refused, naming it
LAYER_KINDS_NOT_MODELLED = {
    "cross_attention_layers": "cross-attention layers to an image encoder (Mllama)",
    "full_attention_interval": "linear-attention (Gated DeltaNet) layers between the full-attention ones (Qwen3-Next)",
    "attn_layer_period": "Jamba's Mamba-1 layers (attention every attn_layer_period-th layer, Mamba-1 in the rest)",
}
MODELLED_LAYERS = ("teton models attention layers (full, sliding-window), Mamba-2 layers (Nemotron-H's "
                   "hybrid_override_pattern) and dense / MoE MLPs")


def _merged(top: dict) -> dict:
    """The language model's keys: a multimodal config's (Llama 4, Gemma 3) ``text_config`` over
    the top level's."""
    return {**top, **top["text_config"]} if isinstance(top.get("text_config"), dict) else top


def _hf_defaults(cfg: dict) -> tuple[str, dict]:
    """(HF config class, its defaults of the keys ``cfg`` leaves out): :data:`HF_DEFAULTS`."""
    kind = cfg.get("model_type")
    kind = TEXT_TYPES.get(kind, kind) if isinstance(kind, str) else None
    name, defaults = HF_DEFAULTS.get(kind, ("", {}))
    return name, {k: v for k, v in defaults.items() if k not in cfg}


def _language_config(top: dict) -> dict:
    """The language model's keys (:func:`_merged`), with the HF defaults of those it leaves out."""
    cfg = _merged(top)
    return {**_hf_defaults(cfg)[1], **cfg}


def _check_types(top: dict, cfg: dict, where: str) -> None:
    """Every count or size the import reads is an integer (:data:`INT_KEYS`), every layer list a
    list of them, every switch a JSON boolean (:data:`BOOL_KEYS`: ``"false"`` is no false), every
    number a number, ``model_type`` a string and an activation one HF knows (:data:`ACTIVATIONS`):
    anything else is a one-line error naming the key."""
    def bad(key: str, value, allowed: str) -> SpecError:
        return SpecError("model", where, f"{key} = {_short(value)} in the HF config: {allowed}")

    for key in INT_KEYS:
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise bad(key, value, "must be a non-negative integer")
    for key in INT_LIST_KEYS:
        value = cfg.get(key)
        if value is not None and (not isinstance(value, list)
                                  or any(isinstance(v, bool) or not isinstance(v, int) for v in value)):
            raise bad(key, value, "must be a list of layer numbers")
    for key in BOOL_KEYS:
        if cfg.get(key) is not None and not isinstance(cfg[key], bool):
            raise bad(key, cfg[key], "must be a JSON boolean, true or false")
    for key in NUMBER_KEYS:
        value = cfg.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            raise bad(key, value, "must be a positive number")
    for value in (top.get("model_type"), cfg.get("model_type")):
        if value is not None and not isinstance(value, str):
            raise bad("model_type", value, "must be a string (HF's model type: llama, qwen3, ...)")
    for key in ACT_KEYS:
        value = cfg.get(key)
        if value is not None and not (isinstance(value, str) and value in ACTIVATIONS):
            raise bad(key, value, f"an activation HF knows: {', '.join(ACTIVATIONS)}")
    types = cfg.get("layer_types")
    if types is not None and (not isinstance(types, list) or not all(isinstance(t, str) for t in types)):
        raise bad("layer_types", types, "must be a list of layer types")
    if types is not None and len(types) != cfg["num_hidden_layers"]:
        raise SpecError("model", where, f"layer_types has {len(types)} entries in the HF config: one per layer "
                        f"(num_hidden_layers = {cfg['num_hidden_layers']})")


def _check_supported(top: dict, cfg: dict, where: str) -> None:
    """A config teton would price wrongly is refused, naming the key: a ``layer_types`` entry
    other than :data:`LAYER_TYPES` (Qwen3-Next's linear_attention), a key of a layer kind teton
    does not model (:data:`LAYER_KINDS_NOT_MODELLED`: Mllama's cross-attention, Jamba's Mamba-1
    interleave), or a ``model_type`` outside :data:`SUPPORTED_TYPES` (its layers could be anything)."""
    types = cfg.get("layer_types") or []
    other = [t for t in types if t not in LAYER_TYPES]
    if other:
        raise SpecError("model", where, f"layer_types has {other[0]!r} ({other.count(other[0])} of {len(types)} "
                        f"layers): a layer kind teton does not model; it prices {', '.join(LAYER_TYPES)}")
    for key, what in LAYER_KINDS_NOT_MODELLED.items():
        if cfg.get(key) is not None:
            raise SpecError("model", where, f"{key} = {_short(cfg[key])} in the HF config: {what} are not "
                            f"modelled; {MODELLED_LAYERS}")
    for kind in dict.fromkeys((top.get("model_type"), cfg.get("model_type"))):
        if kind is not None and kind not in SUPPORTED_TYPES:
            raise SpecError("model", where, f"model_type = {kind!r} in the HF config: not a model type teton "
                            f"reads ({', '.join(SUPPORTED_TYPES)}); describe the model as a mapping of "
                            "model fields instead")


def _short(value) -> str:
    return reprlib.repr(value)


def _mlp(cfg: dict, kind: str) -> str:
    """teton's MLP of the model type (:data:`GATED_TYPES`: swiglu; :data:`UNGATED_TYPES`: relu2
    for ReLU squared, HF's NemotronConfig / NemotronHConfig default, else gelu's two matrices)."""
    if kind not in UNGATED_TYPES:
        return "swiglu"
    act = cfg.get("mlp_hidden_act" if kind == "nemotron_h" else "hidden_act") or "relu2"
    return "relu2" if act == "relu2" else "gelu"


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
    "attention_chunk_size": "chunked attention (Llama 4's RoPE layers, 3 of 4, attend within chunks of this many "
                            "tokens): priced as full attention on every layer",
}


# Keys that mark a Hugging Face config.json (every transformers config has model_type).
HF_CONFIG_KEYS = ("num_hidden_layers", "model_type", "architectures")


def hf_notes_of(value, base_dir: Path | None, presets, suffixes: tuple[str, ...]) -> tuple[str, ...]:
    """The notes (:func:`hf_config_notes`) of a spec's ``model`` value where it names an HF config
    as the loader reads one: a file (a name with one of ``suffixes`` or a ``/``, not one of
    ``presets``), or a mapping's ``base:``, followed through model files' own ``base:``."""
    from teton.spec.read import read_file

    while True:
        if isinstance(value, dict):
            value = value.get("base")
        if not (isinstance(value, str) and value not in presets and (value.endswith(suffixes) or "/" in value)):
            return ()
        path = Path(value) if base_dir is None else base_dir / value
        raw = read_file(path)
        if any(k in raw for k in HF_CONFIG_KEYS):
            return hf_config_notes(path)
        value, base_dir = raw, path.parent


def hf_config_notes(path: str | Path) -> tuple[str, ...]:
    """What teton leaves out of its model of an HF config, one note each: a key of
    :data:`UNMODELLED_KEYS` the config sets (a value other than null, false or 0); the HF class
    defaults it took for keys the config leaves out (:data:`HF_DEFAULTS`); a Qwen-MoE shared
    expert's sigmoid gate (not counted); a config naming no model type (read as Llama's)."""
    try:
        top = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ()
    if not isinstance(top, dict):
        return ()
    merged = _merged(top)
    cls, defaults = _hf_defaults(merged)
    cfg, name = {**defaults, **merged}, f"model {Path(path).name}"
    notes = [f"{name}: {key} = {cfg[key]!r} is not modelled: {what}"
             for key, what in UNMODELLED_KEYS.items() if cfg.get(key) not in (None, False, 0, "softmax")]
    if defaults:
        taken = ", ".join(f"{k} = {v!r}" for k, v in defaults.items())
        notes.append(f"{name}: {taken}: HF's {cls} defaults, for keys the config leaves out")
    if cfg.get("shared_expert_intermediate_size"):
        notes.append(f"{name}: the shared expert's sigmoid gate (shared_expert_gate, hidden x 1 weights per MoE "
                     "layer) is not counted")
    if top.get("model_type") is None and merged.get("model_type") is None:
        notes.append(f"{name}: the config names no model_type: read as Llama's (LlamaForCausalLM: a gated MLP, "
                     "grouped-query attention on every layer)")
    return tuple(notes)


def _qk_norm(cfg: dict) -> bool:
    """Whether the model normalises each query and key head: Llama 4's ``use_qk_norm``, else its
    model type (:data:`QK_NORM_TYPES`)."""
    if cfg.get("use_qk_norm") is not None:
        return cfg["use_qk_norm"]
    return str(cfg.get("model_type", "")) in QK_NORM_TYPES


def _first(cfg: dict, *keys: str):
    return next((cfg[k] for k in keys if cfg.get(k) is not None), None)


def _moe_fields(cfg: dict, where: str) -> dict:
    """Experts (Mixtral / Llama 4 ``num_local_experts``, DeepSeek ``n_routed_experts``, Qwen-MoE
    ``num_experts``), top-k (``num_experts_per_tok``: required), the expert width
    (``moe_intermediate_size``; Llama 4's experts are ``intermediate_size`` wide and its dense
    layers ``intermediate_size_mlp``), shared experts (:func:`_shared_experts`; Llama 4 always has
    one), the dense prefix (``first_k_dense_replace``, or Qwen-MoE's ``mlp_only_layers`` when
    they are the first ones) and the MoE interval (``interleave_moe_layer_step``,
    ``decoder_sparse_step``); DeepSeek's group-limited routing (``topk_group`` of ``n_group`` > 1
    groups) as node-limited routing, one group a node as in DeepSeek-V3's training (arXiv
    2412.19437, Sec. 2.1.2)."""
    experts = _first(cfg, "num_local_experts", "n_routed_experts", "num_experts") or 1
    if experts <= 1:
        return {}
    top_k = _first(cfg, "num_experts_per_tok", "experts_per_token")
    if top_k is None:
        raise SpecError("model", where, f"num_experts_per_tok missing in an MoE config ({experts} experts): "
                        "how many experts each token is routed to")
    out = dict(experts=experts, top_k=top_k, moe_ffn_hidden=cfg.get("moe_intermediate_size"),
               first_dense_layers=cfg.get("first_k_dense_replace") or 0,
               moe_layer_interval=_first(cfg, "interleave_moe_layer_step", "decoder_sparse_step") or 1)
    if (cfg.get("n_group") or 1) > 1 and cfg.get("topk_group"):
        out["moe_max_nodes"] = min(cfg["topk_group"], out["top_k"])
    out.update(_shared_experts(cfg, where, out["moe_ffn_hidden"]))
    if str(cfg.get("model_type", "")).startswith("llama4"):
        out.update(moe_ffn_hidden=cfg["intermediate_size"], ffn_hidden=cfg.get("intermediate_size_mlp"),
                   shared_experts=1)
    dense = sorted(cfg.get("mlp_only_layers") or [])
    if dense and dense != list(range(len(dense))):
        raise SpecError("model", where, f"mlp_only_layers {dense} are not the first layers: teton's "
                        "model.first_dense_layers takes a prefix")
    if dense:
        out["first_dense_layers"] = len(dense)
    return out


# keys of a shared expert's width: Qwen2-MoE / Qwen3-Next's, Nemotron-H's
SHARED_WIDTH_KEYS = ("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size")


def _shared_experts(cfg: dict, where: str, expert: int | None) -> dict:
    """Shared experts: DeepSeek's ``n_shared_experts`` routed experts' width; or one shared expert
    of a width of its own (:data:`SHARED_WIDTH_KEYS`: Qwen2-MoE's ``shared_expert_intermediate_size``,
    HF's ``Qwen2MoeSparseMoeBlock.shared_expert``, its output scaled by a sigmoid
    ``shared_expert_gate``; Nemotron-H's ``moe_shared_expert_intermediate_size``, which
    Megatron-Bridge's NemotronH bridge maps as is) as that many routed experts' width: the same
    weights and FLOPs, as teton counts shared experts in whole ``moe_intermediate_size`` widths (a
    width that is no multiple is refused). A latent MoE (``moe_latent_size``: tokens projected to
    a smaller width around the experts) is not modelled."""
    if cfg.get("moe_latent_size"):
        raise SpecError("model", where, f"moe_latent_size {cfg['moe_latent_size']}: a latent MoE (experts on a "
                        "projected width, Nemotron 3 Super / Ultra) is not modelled")
    key = next((k for k in SHARED_WIDTH_KEYS if cfg.get(k)), None)
    if key is None:
        return {"shared_experts": cfg.get("n_shared_experts") or 0}
    width = cfg[key]
    if not expert:
        raise SpecError("model", where, f"{key} {width} without moe_intermediate_size: "
                        "teton counts shared experts in routed experts' widths")
    if width % expert:
        raise SpecError("model", where, f"{key} {width} is not a multiple of moe_intermediate_size ({expert}): "
                        "teton counts shared experts whole")
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
    ``sliding_window_pattern``-th (6) global, any other model windows every layer. No window
    where ``use_sliding_window`` is false (Qwen's configs)."""
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
