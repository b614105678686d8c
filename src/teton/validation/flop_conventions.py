"""The FLOP conventions published throughput tables count in, to turn TFLOP/s back into tokens/s.

A source's "model TFLOP/s per GPU" is tokens/s x its own FLOPs per token; the conventions differ
(causal halving of attention, recompute counted or not), so teton compares step times, never the
sources' TFLOP/s (``teton.validation.training_set2``). Where a row gives only TFLOP/s, its tokens/s
is ``TFLOP/s / flops_per_token``, with the formula of that source:

* ``nemo-noncausal``: NeMo <= 25.07, ``nemo/utils/flops_formulas.py`` (r2.2.0-r2.4.0). Llama-style:
  ``L h^2 (12 + 12 G/H + 18 F/h + 12 s/h + 6 V/(L h))`` per token (12 F/h for Nemotron's
  non-gated squared ReLU); GPT-3: ``((24 s h^2 + 4 s^2 h) 3 L + 6 s h V) / s``. No causal halving.
* ``nemo-causal``: NeMo >= 25.09 / Megatron-Bridge: the same with the attention term halved
  (NeMo commit 6251117f4c, "Discount FLOPs in dot-product att"). NeMo 25.07's Llama 4 Scout rows
  count this way too: their TFLOP/s / tokens/s is the causal count to 0.1 % (the undiscounted one
  is 11 % off), so the bundled CSV gives them ``nemo-causal``. Megatron-Bridge's GPT-OSS 120B rows
  of 25.11-26.04.01 publish 0.83-0.89x the per-layer-type count (a formula of their own, not
  published); from 26.06 they match it. Every one of them gives its tokens/s, which is used.
* ``megatron-core-0.8``: Megatron-LM's ``num_floating_point_operations`` at core_r0.8.0:
  ``12 L h^2 ((1 + G/H + s/h) q + F/h k (1.5 if SwiGLU) + V/(2 L h))`` per token, q the query
  projection ratio, k the experts per token.

(``bloom-hardware`` and ``mt-nlg-paper`` rows publish their step times, which are used instead.)

MoE models, models whose layers differ (a hybrid pattern, a dense prefix, MoE every N-th layer,
windows) and models that use MLA are counted per layer type in both NeMo conventions (``nemo-noncausal``
without the causal discount), Megatron-Bridge's
``training/utils/flop_utils.py`` hybrid formula (NVIDIA-NeMo/Megatron-Bridge@067f987),
three times the forward terms: Mamba ``2 h (2 d_in + 2 G N + H) + 7 d_in N + 2 d_in h``,
attention ``4 h p (h + h g / a) + 2 h p s_core`` (``p h`` the query width; ``s_core = s``, ``2 w``
for a window ``w``), MLP ``4 F h f`` (``f`` 1.5 for SwiGLU), MoE ``4 h F_e f (k + shared)``, logits
``2 h V (1 + mtp_depth)``; an MLA layer's attention as its projections' ``2 x`` parameters plus
``s heads (d_qk + d_v)`` (Megatron-Bridge 0.6.0's ``flop_utils.py`` MLA branch: its q and kv
terms are the down- and up-projections' and latent norms' parameters, ``d_qk`` with the rotary
dimensions, the core halved for causality as ``s_core / 2`` per matmul). The
older conventions predate these models and refuse them.
"""

from __future__ import annotations

from teton.errors import SpecError
from teton.spec.model import ModelSpec

CONVENTIONS = ("nemo-noncausal", "nemo-causal", "megatron-core-0.8", "bloom-hardware", "mt-nlg-paper")


def flops_per_token(convention: str, model: ModelSpec, seq_len: int) -> float:
    """FLOPs per token of ``model`` at ``seq_len`` as ``convention`` counts them."""
    L, h, F, s = model.layers, model.hidden, model.ffn_hidden, seq_len
    H, G, V = model.heads, model.n_kv_heads, model.vocab
    mixed = (not model.uniform or model.mla or model.mixer != "attention" or model.ffn == "none"
             or model.mtp_depth)
    if (mixed or model.experts > 1) and convention in ("nemo-noncausal", "nemo-causal"):
        return _bridge_per_layer_type(model, seq_len, causal=convention == "nemo-causal")
    if mixed:  # megatron-core-0.8's formula knows uniform attention layers (MoE or dense) only
        raise SpecError("flop_convention", convention, "nemo-causal or nemo-noncausal (the per-layer-type count) "
                                                      f"for {model.name}'s mixed / MLA / hybrid layers")
    if convention in ("nemo-noncausal", "nemo-causal"):
        causal = 0.5 if convention == "nemo-causal" else 1.0
        if model.mlp == "gelu" and model.position_embedding == "learned":  # NeMo's GPT-3 formula
            return ((24 * s * h * h + causal * 4 * s * s * h) * 3 * L + 6 * s * h * V) / s
        mlp = 18.0 if model.mlp == "swiglu" else 12.0
        return L * h * h * (12 + 12 * G / H + mlp * F / h + causal * 12 * s / h + 6 * V / (L * h))
    if convention == "megatron-core-0.8":
        q_ratio = model.q_width / h
        k = model.top_k if model.experts > 1 else 1
        mlp = F / h * k * (1.5 if model.mlp == "swiglu" else 1.0)
        return 12 * L * h * h * ((1 + G / H + s / h) * q_ratio + mlp + V / (2 * L * h))
    raise SpecError("flop_convention", convention, f"one with a formula: {', '.join(CONVENTIONS[:3])}")


def _bridge_per_layer_type(model: ModelSpec, s: int, causal: bool = True) -> float:
    """Megatron-Bridge's hybrid count (module docstring), summed over the model's layer types, each
    multi-token prediction module counted as one more layer of the model's last type plus its
    ``2h -> h`` projection (``4 h^2`` forward: that reproduces the DeepSeek-V3 rows' published
    TFLOP/s, with and without MTP, within 0.1 %). ``causal`` False: NeMo <= 25.07's undiscounted
    attention core (twice the ``s_core`` term)."""
    fwd = 2.0 * model.hidden * model.vocab * (1 + model.mtp_depth)
    for kind, n in model.layer_type_counts().items():
        fwd += n * _layer_fwd(model.as_layer(kind), kind, s, causal)
    last = model.layer_types()[-1]
    fwd += model.mtp_depth * (_layer_fwd(model.as_layer(last), last, s, causal) + 4 * model.hidden ** 2)
    return 3 * fwd


def _layer_fwd(m: ModelSpec, kind, s: int, causal: bool) -> float:
    """Forward FLOPs per token of one layer of ``kind`` (``m``: the model with every layer of it)."""
    h, f = m.hidden, 1.5 if m.mlp == "swiglu" else 1.0
    core = 1.0 if causal else 2.0
    fwd = 0.0
    if kind.mixer == "mamba":
        d_in, gn = m.mamba_inner, m.mamba_groups * m.mamba_state_dim
        fwd += 2 * h * (2 * d_in + 2 * gn + m.n_mamba_heads) + 7 * d_in * m.mamba_state_dim + 2 * d_in * h
    elif kind.mixer == "attention":
        s_core = 2 * m.sliding_window if kind.windowed and m.sliding_window else s
        fwd += (2 * m.attention_params() + core * s_core * m.heads * (m.qk_head_dim + m.v_dim) if m.mla
                else 4 * h * (m.q_width + m.kv_width) + core * 2 * m.q_width * s_core)
    if kind.ffn == "dense":
        fwd += 4 * m.ffn_hidden * h * f
    elif kind.ffn == "moe":
        fwd += 4 * h * m.expert_ffn * f * (m.top_k + m.shared_experts)
    return fwd
