"""Megatron-LM's architecture flags past the dense GPT core (``teton.spec.frameworks.megatron``
reads that): MoE layer placement, capacity, routing and dispatch; multi-latent attention, QK
norms and sliding windows; multi-token prediction; and the Adam moments' dtype. Each flag is
mapped to the teton field that models it, or refused in one line where teton models no such
thing. Names and defaults: Megatron-Core 0.19 ``megatron/training/arguments.py`` and
``TransformerConfig``.
"""

from __future__ import annotations

import re

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, as_float, as_int, choice
from teton.spec.frameworks.mcore import put_model

MLA_FLAG = "--multi-latent-attention"
# Megatron flag -> (teton model field, Megatron-LM's default when the flag is absent under MLA)
MLA_DIMS = (("--kv-lora-rank", "kv_lora_rank", 32), ("--q-lora-rank", "q_lora_rank", None),
            ("--qk-head-dim", "head_dim", 128), ("--qk-pos-emb-head-dim", "qk_rope_head_dim", 64),
            ("--v-head-dim", "v_head_dim", 128))
# --moe-router-load-balancing-type: the balancing losses and the balancing algorithms spread the
# tokens evenly in expectation, which is what teton's aux_loss prices (a multinomial spread)
BALANCED = {"aux_loss": "", "seq_aux_loss": "per-sequence loss (DeepSeek-V2/V3)", "global_aux_loss": "global-batch loss",
            "sinkhorn": "Sinkhorn assignment (S-BASE)", "quantile_balancing": "per-expert bias (QB)"}
_DENSE_PREFIX = re.compile(r"^\(?\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\)?$")


def attention(m: Mapper) -> None:
    """Multi-latent attention, QK norms and sliding-window attention."""
    mla = bool(m.get(MLA_FLAG))
    if mla:
        _mla(m)
    else:
        for flag, _, _ in MLA_DIMS:
            if m.has(flag):
                m.ignore(flag, m.get(flag), f"read by Megatron-LM only with {MLA_FLAG}")
    if m.get("--qk-layernorm"):
        if mla:  # Megatron-Core's MLA spec: q_layernorm / kv_layernorm on the latents under qk_layernorm
            m.ignore("--qk-layernorm", True, f"with {MLA_FLAG} it norms MLA's Q and KV latents, which teton's MLA "
                     "always has (model.q_lora_rank, kv_lora_rank)")
        else:
            put_model(m, "qk_norm", True, "--qk-layernorm", True, "each query and key head normalised")
    _window(m)


def _mla(m: Mapper) -> None:
    """``--multi-latent-attention`` and its dimensions (Megatron-Core's MLATransformerConfig):
    ``--qk-head-dim`` is the no-RoPE part of a query / key head (teton's head_dim, over
    ``--kv-channels``, which MLA does not read), ``--qk-pos-emb-head-dim`` the RoPE part."""
    if m.get("--group-query-attention"):
        raise SpecError(MLA_FLAG, True, "Megatron-LM refuses it with --group-query-attention (MLA has no KV heads "
                        "to group)")
    if m.has("--kv-channels"):
        m.mapped[:] = [r for r in m.mapped if r.key != "--kv-channels"]
        if m.sources.get("model.head_dim") == "--kv-channels":
            del m.sources["model.head_dim"]
        m.ignore("--kv-channels", m.get("--kv-channels"), f"not read under {MLA_FLAG}: --qk-head-dim is the "
                 "head width")
    for flag, field, default in MLA_DIMS:
        raw = m.get(flag)
        if raw is not None and str(raw) != "None":
            put_model(m, field, as_int(flag, raw), flag, raw, "MLA" + (": the no-RoPE part of a query / key head"
                                                                      if field == "head_dim" else ""))
        elif default is None:
            m.default(f"model.{field}", None, f"no {flag}: Megatron-LM projects Q directly", write=False)
        else:
            m.default(f"model.{field}", default, f"no {flag}: Megatron-LM's default {default}")
    rank = m.spec["model"].get("kv_lora_rank")
    put_model(m, "kv_lora_rank", rank, MLA_FLAG, True, "MLA: teton's attention is latent when kv_lora_rank is set")


def _window(m: Mapper) -> None:
    """``--window-size L,R``: Megatron's (left, right) window as flash attention reads it (query i
    sees keys i - L .. i + R), so a causal window (R = 0) of L + 1 keys is teton's
    ``sliding_window``; L = -1 is an unbounded window (full attention). ``--window-attn-skip-freq
    N`` makes every N-th layer full (Megatron's layer_number % N == 0, 1-based: teton's
    ``global_attention_every``, (i + 1) % N == 0); a list pattern is refused."""
    raw, skip = m.get("--window-size"), m.get("--window-attn-skip-freq")
    if raw is None:
        if skip is not None:
            m.ignore("--window-attn-skip-freq", skip, "read by Megatron-LM only with --window-size")
        return
    parts = str(raw).strip().strip("()").split(",") if isinstance(raw, str) else []
    try:
        left, right = (int(p) for p in parts)
    except ValueError:
        raise SpecError("--window-size", raw, "two integers LEFT,RIGHT (Megatron's window, e.g. 4096,0)") from None
    if right != 0:
        raise SpecError("--window-size", raw, "a causal window LEFT,0: teton's windowed layers see only earlier "
                        "keys (a right window is not modelled)")
    if left == -1:
        m.ignore("--window-size", raw, "an unbounded window: every layer attends to the whole sequence")
        return
    if left < 0:
        raise SpecError("--window-size", raw, "LEFT must be -1 (unbounded) or >= 0")
    put_model(m, "sliding_window", left + 1, "--window-size", raw, f"query i sees keys i-{left}..i: {left + 1} keys")
    if skip is not None:
        if not str(skip).strip().isdigit():
            raise SpecError("--window-attn-skip-freq", skip, "an integer N (every N-th layer full); other patterns "
                            "are not modelled")
        put_model(m, "global_attention_every", as_int("--window-attn-skip-freq", skip), "--window-attn-skip-freq", skip,
                  "every N-th layer attends to the whole sequence")


def mtp(m: Mapper) -> None:
    """``--mtp-num-layers N``: N multi-token prediction modules (``model.mtp_depth``)."""
    raw = m.get("--mtp-num-layers")
    if raw is not None and str(raw) != "None":
        put_model(m, "mtp_depth", as_int("--mtp-num-layers", raw, minimum=0), "--mtp-num-layers", raw,
                  "multi-token prediction modules on the last stage")


def adam_moments(m: Mapper) -> None:
    """``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` (Megatron-Core's precision-aware optimizer):
    both bf16 (or fp16, the same two bytes) is ``job.adam_moments: bf16``; fp8 moments, or the two
    moments in different dtypes, are not modelled. Megatron-Core asserts fp32 moments without
    ``--use-precision-aware-optimizer``."""
    keys = ("--exp-avg-dtype", "--exp-avg-sq-dtype")
    given = {k: m.get(k) for k in keys if m.has(k)}
    aware = bool(m.get("--use-precision-aware-optimizer"))
    if aware:
        m.ignore("--use-precision-aware-optimizer", True, "lets Megatron-Core keep the Adam moments in "
                 "--exp-avg-dtype / --exp-avg-sq-dtype (read with them); no cost of its own")
    if not given:
        return
    dtypes = {k: choice(k, v, {"fp32": "fp32", "bf16": "bf16", "fp16": "bf16"},
                        "fp8 moments are not modelled (job.adam_moments: fp32 or bf16)") for k, v in given.items()}
    moments = {k: dtypes.get(k, "fp32") for k in keys}
    if "bf16" in moments.values() and not aware:
        key = next(k for k in keys if moments[k] == "bf16")
        raise SpecError(key, given[key], "needs --use-precision-aware-optimizer (without it Megatron-Core asserts "
                        "fp32 moments)")
    if moments[keys[0]] != moments[keys[1]]:
        raise SpecError(keys[1], given.get(keys[1], "fp32"), f"must match --exp-avg-dtype "
                        f"({given.get(keys[0], 'fp32')}): teton keeps both Adam moments in one dtype (job.adam_moments)")
    for key, raw in given.items():
        m.put("job.adam_moments", moments[key], key, raw, "" if raw != "fp16" else "fp16: the same two bytes as bf16")


def moe_routing(m: Mapper) -> None:
    """How the router balances the experts (``job.moe_router_balance``) and how tokens reach them:
    teton prices the EP dispatch as an all-to-all (Megatron-Core's ``alltoall``, or ``flex``:
    DeepEP / HybridEP, hierarchical under ``model.moe_max_nodes``); the ``allgather``
    dispatcher over an EP group is not modelled."""
    keys = ("--moe-router-force-load-balancing", "--moe-router-load-balancing-type", "--moe-token-dispatcher-type")
    model = m.spec.get("model") or {}
    if model.get("experts", 1) <= 1:
        for key in keys:
            if m.has(key):
                m.ignore(key, m.get(key), "read by Megatron-LM only for an MoE model (--num-experts)")
        return
    _balance(m)
    ep = m.spec["job"].get("ep", 1)
    raw = m.get("--moe-token-dispatcher-type")
    if raw is None:
        if ep > 1:
            m.default("model.experts (token dispatcher)", "alltoall", "no --moe-token-dispatcher-type: Megatron-Core's "
                      "default is allgather, which teton does not model; priced as the alltoall dispatcher", write=False)
        return
    kind = choice("--moe-token-dispatcher-type", raw, {"alltoall": "alltoall", "flex": "flex", "allgather": "allgather"})
    if kind == "allgather" and ep > 1:
        raise SpecError("--moe-token-dispatcher-type", raw, f"alltoall or flex with --expert-model-parallel-size {ep}: "
                        "teton prices the EP dispatch as an all-to-all; the allgather dispatcher (every EP rank "
                        "gathers every token) is not modelled")
    m.ignore("--moe-token-dispatcher-type", raw, {
        "alltoall": "no field of its own: teton prices the EP dispatch as this all-to-all",
        "flex": "no field of its own: DeepEP / HybridEP, priced as teton's all-to-all (hierarchical with "
                "model.moe_max_nodes)",
        "allgather": "no EP all-to-all with --expert-model-parallel-size 1: nothing to price"}[kind])


def _balance(m: Mapper) -> None:
    raw = m.get("--moe-router-load-balancing-type")
    if m.get("--moe-router-force-load-balancing"):
        m.put("job.moe_router_balance", "forced", "--moe-router-force-load-balancing", True,
              "every expert its equal share")
        if raw is not None:
            m.ignore("--moe-router-load-balancing-type", raw, "superseded by --moe-router-force-load-balancing "
                     "(the routing is forced even; the balancing loss has no cost teton prices)")
        return
    if raw is None:
        m.default("job.moe_router_balance", "aux_loss", "Megatron-LM's --moe-router-load-balancing-type default")
        return
    names = raw if isinstance(raw, list) else [raw]
    kinds = [choice("--moe-router-load-balancing-type", n, {**dict.fromkeys(BALANCED, n), "none": "none"}) for n in names]
    if all(k == "none" for k in kinds):
        raise SpecError("--moe-router-load-balancing-type", raw, f"one of {', '.join(BALANCED)}, or "
                        "--moe-router-force-load-balancing: a router without load balancing is not modelled")
    notes = [BALANCED[k] for k in kinds if k != "none" and BALANCED[k]]
    m.put("job.moe_router_balance", "aux_loss", "--moe-router-load-balancing-type", raw,
          "balanced in expectation" + (f": {', '.join(notes)}" if notes else ""))


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
