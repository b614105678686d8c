"""The FLOP conventions published throughput tables count in, to turn TFLOP/s back into tokens/s.

A source's "model TFLOP/s per GPU" is tokens/s x its own FLOPs per token; the conventions differ
(causal halving of attention, recompute counted or not), so teton compares step times, never the
sources' TFLOP/s (``teton.validation.training_set2``). Where a row gives only TFLOP/s, its tokens/s
is ``TFLOP/s / flops_per_token``, with the formula of that source:

* ``nemo-noncausal``: NeMo <= 25.07, ``nemo/utils/flops_formulas.py`` (r2.2.0-r2.4.0). Llama-style:
  ``L h^2 (12 + 12 G/H + 18 F/h + 12 s/h + 6 V/(L h))`` per token (12 F/h for Nemotron's
  non-gated squared ReLU); GPT-3: ``((24 s h^2 + 4 s^2 h) 3 L + 6 s h V) / s``. No causal halving.
* ``nemo-causal``: NeMo >= 25.09 / Megatron-Bridge: the same with the attention term halved
  (NeMo commit 6251117f4c, "Discount FLOPs in dot-product att").
* ``megatron-core-0.8``: Megatron-LM's ``num_floating_point_operations`` at core_r0.8.0:
  ``12 L h^2 ((1 + G/H + s/h) q + F/h k (1.5 if SwiGLU) + V/(2 L h))`` per token, q the query
  projection ratio, k the experts per token.

(``bloom-hardware`` and ``mt-nlg-paper`` rows publish their step times, which are used instead.)
"""

from __future__ import annotations

from teton.errors import SpecError
from teton.spec.model import ModelSpec

CONVENTIONS = ("nemo-noncausal", "nemo-causal", "megatron-core-0.8", "bloom-hardware", "mt-nlg-paper")


def flops_per_token(convention: str, model: ModelSpec, seq_len: int) -> float:
    """FLOPs per token of ``model`` at ``seq_len`` as ``convention`` counts them."""
    L, h, F, s = model.layers, model.hidden, model.ffn_hidden, seq_len
    H, G, V = model.heads, model.n_kv_heads, model.vocab
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
