"""HBM bytes of a layer's elementwise (memory-bound) kernels, fused or eager (``job.kernel_fusion``).

An elementwise op's time is its HBM traffic over the achievable bandwidth, so what matters is how
many times each element crosses HBM: once per kernel that reads or writes it.

``fused`` (the default): one kernel per op, reading its inputs once and writing its output once.
That is what Megatron-LM / Transformer Engine (fused RMSNorm / LayerNorm, fused rotary, fused
SwiGLU), Apex and ``torch.compile`` run.

``eager``: the reference PyTorch code run op by op, as in HF transformers' Llama (``LlamaRMSNorm``,
``rotate_half`` rotary, ``act_fn(gate_proj(x)) * up_proj(x)``, cross-entropy on ``logits.float()``).
Each aten op is one kernel with its own round trip through HBM, and autograd's backward adds its
own. LayerNorm and GELU are single aten kernels (``native_layer_norm``, ``gelu``), so eager and
fused coincide for them.

The figures are bytes per element of the op's activation (bf16 activations, fp32 where the code
upcasts), forward and backward. A fused kernel reads each input once and writes each output once
(a norm's backward reads x and dy and writes dx; its weight gradient's reduction rides along).
The eager ones were counted by running the reference code (:mod:`teton.workload.torch_reference`)
on the meta device under a byte-counting ``TorchDispatchMode`` (every aten op that moves data:
inputs read plus outputs written; views move nothing), which the tests repeat. Backward counts
are for the activations' gradients: the weight and bias gradients' reductions (a read of each
element) are left out of both columns alike.

* RMSNorm (HF): ``x.to(fp32)`` 2+4, ``pow(2)`` 4+4, ``mean`` 4, ``* rsqrt`` 4+4, ``.to(bf16)``
  4+2, ``weight *`` 2+2 = 36 forward; its autograd backward 88.
* rotary, ``q * cos + rotate_half(q) * sin`` in bf16: two ``mul`` 2+2 each, ``neg`` of a half
  1+1, ``cat`` 2+2, ``add`` 4+2 = 20 per q/k element (cos and sin are (s, d) tables, read per
  head: negligible); backward the same 20.
* SwiGLU ``silu(g) * u``: ``silu`` 2+2, ``mul`` 4+2 = 10; backward (``mul``'s two products,
  ``silu_backward``) 18.
* bias, dropout and residual, ``x + dropout(y + b)``: ``add`` 2+2, the mask's ``bernoulli_``
  and scaling ``div_`` 4+4, ``mul`` 4+2, ``add`` 4+2 = 24; backward (the masked gradient's
  ``mul`` 6, the residual fork's ``add`` 6) 12.

The cross-entropy is not an elementwise op of this table: the stack picks its kernel
(``software.cross_entropy``: eager, Megatron's vocab-parallel or TE's fused one), whatever
``job.kernel_fusion`` says (``workload.head``, figures in ``hardware.kernels.CROSS_ENTROPY``).
"""

from __future__ import annotations

from teton.spec.model import ModelSpec
from teton.workload.items import ACT_BYTES

# op -> fusion -> (forward, backward) bytes per element
BYTES_PER_ELEMENT: dict[str, dict[str, tuple[float, float]]] = {
    "rmsnorm": {"fused": (4.0, 6.0), "eager": (36.0, 88.0)},
    "layernorm": {"fused": (4.0, 6.0), "eager": (4.0, 6.0)},
    "rope": {"fused": (4.0, 4.0), "eager": (20.0, 20.0)},
    "swiglu": {"fused": (6.0, 10.0), "eager": (10.0, 18.0)},
    "gelu": {"fused": (4.0, 6.0), "eager": (4.0, 6.0)},
    # squared ReLU (Nemotron): fused, one kernel as GELU; eager ``relu(x).square()``: relu 2+2,
    # square 2+2 = 8; backward: square's (grad, input -> grad) 2+2+2, relu's threshold_backward 2+2+2 = 12
    "relu2": {"fused": (4.0, 6.0), "eager": (8.0, 12.0)},
    # the residual add; backward: the gradient summed where the residual forks (read 2, write 1)
    "residual": {"fused": (6.0, 6.0), "eager": (6.0, 6.0)},
    # GPT-style: the row-parallel output's bias, dropout (a 1-byte mask) and the residual add.
    # Fused (Megatron's bias_dropout_add_fused): read y and the residual, write out and the mask
    # = 7; backward: the masked gradient (read 2 + 1, write 2) and the residual fork's add (6).
    "bias_dropout_add": {"fused": (7.0, 11.0), "eager": (24.0, 12.0)},
}


# A gated MLP whose inputs are clamped first (``model.glu_clamp``: GPT-OSS), the bytes beyond the
# plain SwiGLU's per element of the FFN width, counted like the table (the tests repeat both):
# * fused: Megatron-Core's path (0.16 ``fused_bias_geglu.weighted_bias_quick_geglu_impl``, which
#   its experts and MLP take with ``activation_func_clamp_value``, Megatron-Bridge's GPT-OSS
#   provider setting 7.0 with ``bias_activation_fusion``) clamps the gate and the linear half and
#   ``cat``s them back eagerly before the fused activation: clamp 2+2 twice, cat 4+4 = 16;
#   backward the clamps' masked gradients and the chunk's concatenated gradient = 30.
# * eager: HF transformers' GptOssExperts (4.57 wheel, models/gpt_oss/modeling_gpt_oss.py, the
#   training path), ``gate_up[..., ::2]`` / ``[..., 1::2]``, the two clamps, ``gate * sigmoid(gate
#   * alpha)`` and ``(up + 1) * glu``: 32 forward and 86 backward in all, 22 and 68 over the plain
#   SwiGLU's 10 and 18.
GLU_CLAMP_BYTES: dict[str, tuple[float, float]] = {"fused": (16.0, 30.0), "eager": (22.0, 68.0)}


# Megatron-Core's eager rotary (0.13-0.16 ``models/common/embeddings/rope_utils.py``,
# ``_apply_rotary_pos_emb_bshd``), which it runs for YaRN (``software.fused_yarn_rope`` off):
# ``t * cos`` 2+2, ``_rotate_half``'s ``neg`` of a half 1+1 and ``cat`` 2+2, ``* sin`` 2+2, the add
# 4+2 and the closing ``cat((t, t_pass))`` 2+2 = 24 per Q / K element forward; its autograd
# backward 28 (counted like the table; the (s, d) cos and sin tables, scaled by YaRN's mscale,
# are left out)
MEGATRON_EAGER_ROPE_BYTES = (24.0, 28.0)


def rope_bytes(model: ModelSpec, fused_yarn_rope: bool, fusion: str, elements: float) -> tuple[float, float]:
    """(forward, backward) bytes of the rotary embedding over ``elements`` Q and K elements: the
    table's ``rope`` for RoPE and for YaRN (the same per-element work: YaRN's frequencies and
    attention temperature live in the cos / sin tables); a fused stack without a fused YaRN kernel
    (``software.fused_yarn_rope`` off: Megatron-Core, whose Transformer Engine fused RoPE takes no
    ``mscale``, so ``apply_rotary_pos_emb`` takes its eager path, and Megatron-Bridge's
    ``GPTModelProvider.provide`` turns ``apply_rope_fusion`` off for any position embedding but
    rope) runs :data:`MEGATRON_EAGER_ROPE_BYTES`; 0 without rotary embeddings."""
    if not model.rotary:
        return 0.0, 0.0
    if model.position_embedding == "yarn" and fusion == "fused" and not fused_yarn_rope:
        return MEGATRON_EAGER_ROPE_BYTES[0] * elements, MEGATRON_EAGER_ROPE_BYTES[1] * elements
    return elementwise_bytes("rope", fusion, elements)


def elementwise_bytes(op: str, fusion: str, elements: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes of elementwise ``op`` over ``elements`` activation elements."""
    fwd, bwd = BYTES_PER_ELEMENT[op][fusion]
    return fwd * elements, bwd * elements


def mlp_activation_bytes(model: ModelSpec, fusion: str, elements: float) -> tuple[float, float]:
    """(forward, backward) bytes of the model's MLP activation over ``elements`` elements of the FFN
    width: its ``model.mlp`` op, and the clamps of a ``model.glu_clamp`` (:data:`GLU_CLAMP_BYTES`)."""
    fwd, bwd = elementwise_bytes(model.mlp, fusion, elements)
    if model.glu_clamp is not None:
        extra_f, extra_b = GLU_CLAMP_BYTES[fusion]
        fwd, bwd = fwd + extra_f * elements, bwd + extra_b * elements
    return fwd, bwd


def clamped_copy_bytes(model: ModelSpec, modules: frozenset[str] = frozenset()) -> float:
    """Bytes per gate or up element of the clamped copy a ``model.glu_clamp`` activation keeps:
    the clamps keep their input (the up-projection's output) and Megatron-Core's fused activation
    its clamped ``cat``, a second bf16 copy (:data:`GLU_CLAMP_BYTES`); none when
    ``moe_act`` recomputes the activation (its checkpoint keeps the input alone)."""
    return ACT_BYTES if model.glu_clamp is not None and "moe_act" not in modules else 0.0


def eager_copy_bytes(model: ModelSpec, tokens: int, tp: int) -> dict[str, tuple[float, float]]:
    """(forward, backward) bytes of the copies and sums eager reference code adds to a layer, on
    one TP rank for ``tokens`` tokens (counted like the table above):

    * ``qkv_input_grad_sum``, ``mlp_input_grad_sum``: separate ``q_proj`` / ``k_proj`` /
      ``v_proj`` (and ``gate_proj`` / ``up_proj``) Linears each return a gradient of their shared
      input, which autograd sums: one ``add`` (4+2 per hidden element) per extra projection. A
      fused QKV / gate-up GEMM returns one.
    * ``repeat_kv``: grouped-query attention through ``repeat_kv`` materialises K and V at the
      query heads' count (``clone`` 2+2 per element; with one local KV head the expansion is a
      view); backward ``sum``s them back (2 read per query-width element, 2 written per
      KV-width element, each of K and V).
    * ``attn_out_grad_copy``: the attention output's ``transpose(1, 2).reshape`` makes its
      gradient non-contiguous, and the flash backward takes a contiguous copy (2+2 per element).
    """
    q, kv, h = model.q_width / tp, model.kv_width / tp, model.hidden
    out = {"qkv_input_grad_sum": (0.0, 6.0 * 2 * tokens * h),
           "mlp_input_grad_sum": (0.0, 6.0 * (model.mlp == "swiglu") * tokens * h),
           "attn_out_grad_copy": (0.0, 4.0 * tokens * q)}
    if model.heads > model.n_kv_heads:  # one local KV head expands as a view: no forward copy
        copy = 2 * 4.0 * tokens * q if model.n_kv_heads // tp > 1 else 0.0
        out["repeat_kv"] = (copy, 2 * (2.0 * tokens * q + 2.0 * tokens * kv))
    return out


def eager_saved_bytes(model: ModelSpec, tokens: int, norm_tokens: float, tp: int,
                      ffn_elements: float | None = None) -> float:
    """Activation bytes eager reference code saves for backward beyond what fused kernels save, per
    layer and micro-batch on one TP rank (counted with ``torch.autograd.graph.saved_tensors_hooks``
    on the reference layer):

    * each RMSNorm keeps its fp32 upcast (4 B) and the normalised bf16 tensor (2 B) where a fused
      norm keeps its bf16 input (2 B): +4 B per element, twice;
    * ``repeat_kv``'s copies make the attention kernel save K and V at the query heads' width;
    * ``silu(g) * u`` keeps ``silu(g)`` and the product besides ``g`` and ``u``, where a fused
      SwiGLU keeps ``g`` and ``u`` and recomputes the rest: +2 x 2 B per FFN element
      (``ffn_elements``: ``tokens ffn_hidden / tp`` for a dense MLP; an MoE layer's experts'
      ``workload.moe.moe_ffn_elements``).
    LayerNorm and GELU are single kernels that save what their fused forms save.
    """
    q, kv, f = model.q_width / tp, model.kv_width / tp, model.ffn_hidden / tp
    saved = 2 * 4.0 * norm_tokens * model.hidden if model.norm == "rmsnorm" else 0.0
    if model.heads > model.n_kv_heads and model.n_kv_heads // tp > 1:
        saved += 2 * 2.0 * tokens * (q - kv)
    if model.mlp == "swiglu":
        saved += 2 * 2.0 * (tokens * f if ffn_elements is None else ffn_elements)
    return saved
