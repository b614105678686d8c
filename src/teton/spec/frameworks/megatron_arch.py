"""Megatron-Core's architecture settings past the dense GPT core (``teton.spec.frameworks.megatron``
reads that), as Megatron-LM's flags and NeMo 2.0's ``model.config`` keys name them alike: a
``key_of`` spells a TransformerConfig name as the framework does (``--qk-layernorm``,
``model.config.qk_layernorm``; :func:`flag` is Megatron-LM's). MoE routing, dispatch and expert
GEMMs; multi-latent attention, QK norms and sliding windows; multi-token prediction; and, for
Megatron-LM's flags only, MoE layer placement and capacity. Each setting is mapped to the teton
field that models it, or refused in one line where teton models no such thing. Names and
defaults: Megatron-Core 0.19 ``megatron/training/arguments.py`` and ``TransformerConfig``.
"""

from __future__ import annotations

import re

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, as_float, as_int, choice
from teton.spec.frameworks.mcore import KeyOf, flag, given_value, is_on, model_value, put_model

# TransformerConfig name -> teton model field, for MLA's dimensions
MLA_DIMS = (("kv_lora_rank", "kv_lora_rank"), ("q_lora_rank", "q_lora_rank"), ("qk_head_dim", "head_dim"),
            ("qk_pos_emb_head_dim", "qk_rope_head_dim"), ("v_head_dim", "v_head_dim"))
# whose defaults -> each dimension's default when absent under MLA (None: Q projected directly):
# Megatron-LM's argparse, and Megatron-Core's MLATransformerConfig (NeMo 2.0, Megatron-Bridge)
MLA_DEFAULTS = {
    "Megatron-LM": dict(kv_lora_rank=32, q_lora_rank=None, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128),
    "MLATransformerConfig": dict(kv_lora_rank=512, q_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64,
                                 v_head_dim=128),
}
# the router's load balancing types: the balancing losses and the balancing algorithms spread the
# tokens evenly in expectation, which is what teton's aux_loss prices (a multinomial spread)
BALANCED = {"aux_loss": "", "seq_aux_loss": "per-sequence loss (DeepSeek-V2/V3)", "global_aux_loss": "global-batch loss",
            "sinkhorn": "Sinkhorn assignment (S-BASE)", "quantile_balancing": "per-expert bias (QB)"}
_DENSE_PREFIX = re.compile(r"^\(?\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\)?$")


def _preset(m: Mapper) -> str | None:
    model = m.spec.get("model")
    return model if isinstance(model, str) else model.get("base") if isinstance(model, dict) else None


def attention(m: Mapper, key_of: KeyOf = flag, defaults: str = "Megatron-LM",
              gqa_key: str | None = "--group-query-attention") -> None:
    """Multi-latent attention (MLA's dimensions read only with ``multi_latent_attention``, absent
    ones at ``defaults``' values, or a preset's), QK norms and sliding-window attention."""
    mla_key, qk_key = key_of("multi_latent_attention"), key_of("qk_layernorm")
    mla = is_on(m, mla_key) or (given_value(m, mla_key) is None and model_value(m, "kv_lora_rank") is not None)
    if mla:
        _mla(m, key_of, defaults, gqa_key)
    else:
        for name, _ in MLA_DIMS:
            if m.has(key_of(name)):
                m.ignore(key_of(name), m.get(key_of(name)), f"read by Megatron-Core only with {mla_key}")
    if given_value(m, qk_key) is not None:
        on = is_on(m, qk_key)
        if mla:  # Megatron-Core's MLA spec: q_layernorm / kv_layernorm on the latents under qk_layernorm
            m.ignore(qk_key, m.config[qk_key], f"with {mla_key} it norms MLA's Q and KV latents, which teton's MLA "
                     "always has (model.q_lora_rank, kv_lora_rank)")
        else:
            put_model(m, "qk_norm", on, qk_key, m.config[qk_key], "each query and key head normalised" if on else "")
    _window(m, key_of)


def _mla(m: Mapper, key_of: KeyOf, defaults: str, gqa_key: str | None) -> None:
    """MLA's dimensions (Megatron-Core's MLATransformerConfig): ``qk_head_dim`` is the no-RoPE part
    of a query / key head (teton's head_dim, over ``kv_channels``, which MLA does not read),
    ``qk_pos_emb_head_dim`` the RoPE part."""
    mla_key, kv_key = key_of("multi_latent_attention"), key_of("kv_channels")
    if gqa_key is not None and m.get(gqa_key):
        raise SpecError(mla_key, True, f"Megatron-LM refuses it with {gqa_key} (MLA has no KV heads to group)")
    if m.has(kv_key):
        m.mapped[:] = [r for r in m.mapped if r.key != kv_key]
        if m.sources.get("model.head_dim") == kv_key:
            del m.sources["model.head_dim"]
            if isinstance(m.spec.get("model"), dict):
                m.spec["model"].pop("head_dim", None)
        m.ignore(kv_key, m.get(kv_key), f"not read under {mla_key}: {key_of('qk_head_dim')} is the head width")
    preset = _preset(m)
    for name, field in MLA_DIMS:
        key, raw, default = key_of(name), given_value(m, key_of(name)), MLA_DEFAULTS[defaults][name]
        if raw is not None:
            put_model(m, field, as_int(key, raw), key, raw, "MLA" + (": the no-RoPE part of a query / key head"
                                                                     if field == "head_dim" else ""))
        elif preset is not None:
            m.default(f"model.{field}", model_value(m, field), f"no {key}: preset {preset}'s", write=False)
        elif default is None:
            m.default(f"model.{field}", None, f"no {key}: {defaults} projects Q directly", write=False)
        else:
            m.default(f"model.{field}", default, f"no {key}: {defaults}'s default {default}")
    if m.has(mla_key):
        put_model(m, "kv_lora_rank", model_value(m, "kv_lora_rank"), mla_key, m.config[mla_key],
                  "MLA: teton's attention is latent when kv_lora_rank is set")


def _window(m: Mapper, key_of: KeyOf) -> None:
    """``window_size (L, R)``: Megatron's (left, right) window as flash attention reads it (query i
    sees keys i - L .. i + R; ``L,R`` on Megatron-LM's command line, a list of two in NeMo), so a
    causal window (R = 0) of L + 1 keys is teton's ``sliding_window``; L = -1 is an unbounded
    window (full attention). ``window_attn_skip_freq N`` makes every N-th layer full (Megatron's
    layer_number % N == 0, 1-based: teton's ``global_attention_every``, (i + 1) % N == 0); a list
    pattern is refused."""
    size_key, skip_key = key_of("window_size"), key_of("window_attn_skip_freq")
    raw, skip = given_value(m, size_key), given_value(m, skip_key)
    if raw is None:
        if skip is not None:
            m.ignore(skip_key, skip, f"read by Megatron-Core only with {size_key}")
        return
    parts = (list(raw) if isinstance(raw, list | tuple) else
             str(raw).strip().strip("()[]").split(",") if isinstance(raw, str) else [])
    try:
        left, right = (int(p) for p in parts)
    except (TypeError, ValueError):
        raise SpecError(size_key, raw, "two integers LEFT,RIGHT (Megatron's window, e.g. 4096,0)") from None
    if right != 0:
        raise SpecError(size_key, raw, "a causal window LEFT,0: teton's windowed layers see only earlier "
                        "keys (a right window is not modelled)")
    if left == -1:
        m.ignore(size_key, raw, "an unbounded window: every layer attends to the whole sequence")
        return
    if left < 0:
        raise SpecError(size_key, raw, "LEFT must be -1 (unbounded) or >= 0")
    put_model(m, "sliding_window", left + 1, size_key, raw, f"query i sees keys i-{left}..i: {left + 1} keys")
    if skip is not None:
        if isinstance(skip, bool) or not str(skip).strip().isdigit():
            raise SpecError(skip_key, skip, "an integer N (every N-th layer full); other patterns are not modelled")
        put_model(m, "global_attention_every", as_int(skip_key, skip), skip_key, skip,
                  "every N-th layer attends to the whole sequence")


def mtp(m: Mapper, key_of: KeyOf = flag) -> None:
    """``mtp_num_layers N``: N multi-token prediction modules (``model.mtp_depth``)."""
    key = key_of("mtp_num_layers")
    raw = given_value(m, key)
    if raw is not None:
        put_model(m, "mtp_depth", as_int(key, raw, minimum=0), key, raw, "multi-token prediction modules on the "
                  "last stage")


def moe_routing(m: Mapper, key_of: KeyOf = flag) -> None:
    """How the router balances the experts (``job.moe_router_balance``), how tokens reach them and
    how the experts' GEMMs run: teton prices the EP dispatch as an all-to-all (Megatron-Core's
    ``alltoall``, or ``flex``: DeepEP / HybridEP, hierarchical under ``model.moe_max_nodes``;
    the ``allgather`` dispatcher over an EP group is not modelled), and the routed experts as one
    grouped GEMM (:func:`_grouped_gemm`)."""
    names = ("moe_router_force_load_balancing", "moe_router_load_balancing_type", "moe_token_dispatcher_type",
             "moe_grouped_gemm")
    if model_value(m, "experts", 1) <= 1:
        for key in map(key_of, names):
            if m.has(key):
                m.ignore(key, m.get(key), "read by Megatron-Core only for an MoE model (model.experts > 1)")
        return
    _balance(m, key_of)
    _grouped_gemm(m, key_of("moe_grouped_gemm"))
    ep, key = m.spec["job"].get("ep", 1), key_of("moe_token_dispatcher_type")
    raw = given_value(m, key)
    if raw is None:
        if ep > 1:
            whose = f"the {_preset(m)} config class's, or " if _preset(m) and not key.startswith("--") else ""
            m.default("model.experts (token dispatcher)", "alltoall", f"no {key}: {whose}Megatron-Core's default "
                      "allgather, which teton does not model; priced as the alltoall dispatcher", write=False)
        return
    kind = choice(key, raw, {"alltoall": "alltoall", "flex": "flex", "allgather": "allgather"})
    if kind == "allgather" and ep > 1:
        raise SpecError(key, raw, f"alltoall or flex with expert parallelism {ep}: teton prices the EP dispatch as "
                        "an all-to-all; the allgather dispatcher (every EP rank gathers every token) is not modelled")
    m.ignore(key, raw, {
        "alltoall": "no field of its own: teton prices the EP dispatch as this all-to-all",
        "flex": "no field of its own: DeepEP / HybridEP, priced as teton's all-to-all (hierarchical with "
                "model.moe_max_nodes)",
        "allgather": "no EP all-to-all with expert parallelism 1: nothing to price"}[kind])


def _grouped_gemm(m: Mapper, key: str) -> None:
    """``moe_grouped_gemm``: the local experts' GEMMs as one grouped GEMM (TEGroupedMLP), as teton
    prices them (docs/moe.md, "How the expert GEMMs run"); without it Megatron-Core's SequentialMLP
    runs the experts one after another, one GEMM each, which teton does not model."""
    raw = given_value(m, key)
    if raw is not None and is_on(m, key):
        m.ignore(key, raw, "no field of its own: teton prices the routed experts as this grouped GEMM "
                 "(Megatron-Core's TEGroupedMLP)")
        return
    per_expert = ("Megatron-Core's SequentialMLP, one GEMM per local expert in turn, which teton does not model; "
                  "priced as the grouped GEMM")
    if raw is not None:
        m.ignore(key, raw, f"off: {per_expert}")
    elif _preset(m) and not key.startswith("--"):
        m.default("model.experts (expert GEMMs)", "grouped", f"no {key}: the {_preset(m)} config class's (off: "
                  f"{per_expert})", write=False)
    else:
        m.default("model.experts (expert GEMMs)", "grouped", f"no {key}: {per_expert}", write=False)


def _balance(m: Mapper, key_of: KeyOf) -> None:
    force_key, key = key_of("moe_router_force_load_balancing"), key_of("moe_router_load_balancing_type")
    raw = given_value(m, key)
    if is_on(m, force_key):
        m.put("job.moe_router_balance", "forced", force_key, m.config[force_key], "every expert its equal share")
        if raw is not None:
            m.ignore(key, raw, f"superseded by {force_key} (the routing is forced even; the balancing loss has "
                     "no cost teton prices)")
        return
    if given_value(m, force_key) is not None:
        m.ignore(force_key, m.config[force_key], f"off: the router balances as {key} says")
    if raw is None:
        m.default("job.moe_router_balance", "aux_loss", f"no {key}: Megatron-Core's default aux_loss")
        return
    names = raw if isinstance(raw, list) else [raw]
    kinds = [choice(key, n, {**dict.fromkeys(BALANCED, n), "none": "none"}) for n in names]
    if all(k == "none" for k in kinds):
        raise SpecError(key, raw, f"one of {', '.join(BALANCED)}, or {force_key}: a router without load balancing "
                        "is not modelled")
    notes = [BALANCED[k] for k in kinds if k != "none" and BALANCED[k]]
    m.put("job.moe_router_balance", "aux_loss", key, raw,
          "balanced in expectation" + (f": {', '.join(notes)}" if notes else ""))


def qkv_bias(m: Mapper, key: str, no_bias: str) -> None:
    """``add_qkv_bias``: biases on the QKV projection (Megatron-Core builds it with
    ``add_bias_linear or add_qkv_bias``). With every linear layer's biases (``model.bias``) it adds
    nothing; alone (Qwen2's QKV-only biases) it is not modelled: teton's biases are all or none."""
    raw = given_value(m, key)
    if raw is None:
        return
    if not is_on(m, key):
        m.ignore(key, raw, "off: the QKV projection has biases only with the other linear layers' (model.bias)")
        return
    if not model_value(m, "bias", False):
        raise SpecError(key, raw, f"not with {no_bias}: teton's model.bias is every linear layer's biases or none "
                        "(biases on the QKV projection alone are not modelled)")
    put_model(m, "bias", True, key, raw, "the QKV biases, among every linear layer's")


def moe_layers(m: Mapper) -> None:
    """Megatron-Core's shared experts and MoE layer placement:

    * ``--moe-shared-expert-intermediate-size S``: one ``SharedExpertMLP`` of width S, i.e.
      ``model.shared_experts = S / moe_ffn_hidden`` (Megatron sizes it as that many experts' width);
    * ``--moe-layer-freq N``: one MoE layer in N (``model.moe_layer_interval``; Megatron puts it at
      ``i % N == 0``, teton at ``(i + 1) % N == 0``: the same count when N divides the layers), or
      the pattern ``([0]*K+[1]*M)``: K dense layers first (``model.first_dense_layers``, DeepSeek's
      ``first_k_dense_replace``). Other patterns are refused.
    """
    model = m.spec["model"]
    if m.has("--moe-shared-expert-intermediate-size") and m.get("--moe-shared-expert-intermediate-size") is not None:
        raw = m.get("--moe-shared-expert-intermediate-size")
        width = as_int("--moe-shared-expert-intermediate-size", raw)
        expert = model.get("moe_ffn_hidden") or model.get("ffn_hidden")
        if not expert or width % expert:
            raise SpecError("--moe-shared-expert-intermediate-size", raw,
                            f"a multiple of the experts' width ({expert or 'unknown: give --moe-ffn-hidden-size'}), "
                            "as teton counts shared experts whole")
        m.put("model.shared_experts", width // expert, "--moe-shared-expert-intermediate-size", raw,
              f"{width} / {expert}: shared experts of the routed experts' width")
    if not m.has("--moe-layer-freq") or str(m.get("--moe-layer-freq")) in ("1", "None"):
        return
    raw = str(m.get("--moe-layer-freq")).replace(" ", "")
    if raw.isdigit():
        m.put("model.moe_layer_interval", int(raw), "--moe-layer-freq", raw,
              "one MoE layer in N (Megatron's at i % N == 0, teton's at (i + 1) % N == 0)")
        return
    hit = _DENSE_PREFIX.match(raw)
    layers = model.get("layers")
    if hit is None or (layers is not None and int(hit[1]) + int(hit[2]) != layers):
        raise SpecError("--moe-layer-freq", raw, "an integer N or ([0]*K+[1]*M) with K + M = --num-layers "
                        "(K dense layers first); other patterns are not modelled")
    m.put("model.first_dense_layers", int(hit[1]), "--moe-layer-freq", raw, "the first K layers dense")


def moe_capacity(m: Mapper) -> None:
    """``--moe-expert-capacity-factor F``: token dropping at F times an expert's balanced share
    (``model.capacity_factor``; unset: dropless); ``--moe-pad-expert-input-to-capacity``: every
    expert's input padded to that capacity (``model.pad_to_capacity``: fixed shapes, no host sync
    in the dispatcher)."""
    raw = m.get("--moe-expert-capacity-factor")
    factor = None if raw is None else as_float("--moe-expert-capacity-factor", raw)
    if factor:
        m.put("model.capacity_factor", factor, "--moe-expert-capacity-factor", raw,
              "token dropping: an expert takes at most this times its balanced share")
    if m.get("--moe-pad-expert-input-to-capacity"):
        if "capacity_factor" not in m.spec["model"]:
            raise SpecError("--moe-pad-expert-input-to-capacity", True,
                            "needs --moe-expert-capacity-factor (Megatron-Core refuses it without one)")
        m.put("model.pad_to_capacity", True, "--moe-pad-expert-input-to-capacity", True,
              "every expert's input padded to its capacity")
