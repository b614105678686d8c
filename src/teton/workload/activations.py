"""The activations one transformer layer keeps for its backward, per micro-batch on one GPU.

The model and its sources are ``workload.memory``'s (Korthikanti et al. 2022, op by op, with the
recompute modes of docs/recompute.md); this module holds the per-layer counts that the step's
work (CPU offload's copies, ``workload.step_work``) and the memory model both read.
"""

from __future__ import annotations

from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.workload.elementwise import clamped_copy_bytes, eager_saved_bytes
from teton.workload.fp8 import quantized_copy_bytes, saved_input_bytes
from teton.workload.items import ACT_BYTES, FP32
from teton.workload.mamba import mamba_saved_bytes
from teton.workload.mixers import mla_saved_bytes
from teton.workload.moe import moe_ffn_elements, moe_saved_bytes
from teton.workload.recompute import sac_op_saved_bytes


def layer_activation_bytes(model: ModelSpec, job: JobSpec, modules: frozenset[str] | None = None) -> float:
    """Bytes one layer saves for backward for one micro-batch on one GPU: without recompute (also
    a selective_layer layer that is not checkpointed), without the scores (selective, full),
    or what torchtitan's per-op policy saves (selective_op). Full recompute's checkpoints are
    :func:`checkpoint_bytes`. A layer type without attention or without an MLP (``model.mixer``,
    ``model.ffn``) keeps only its sub-block's tensors; an MLA or Mamba-2 mixer's are
    ``workload.mixers.mla_saved_bytes`` / ``workload.mamba.mamba_saved_bytes``.

    Megatron-Core's ``recompute_modules`` under selective (``modules``, default
    ``job.recomputed_modules``): ``core_attn`` drops the scores, ``layernorm`` the two pre-norms'
    outputs (the QKV / down-projection and MLP-up / router inputs), ``mla_up_proj`` MLA's normed
    latents and Q, K, V; ``moe_act`` drops nothing more (the fused SwiGLU already keeps only gate
    and up); ``mlp`` a dense MLP's tensors but its input, ``moe`` and ``shared_experts`` an MoE
    layer's or its shared experts' (whole-module checkpoints: ``workload.ops.checkpointed_ffn``).
    ``software.fp8_activation_cache`` (DeepSeek-V3 Sec. 3.3.2) keeps GEMM inputs in fp8
    with 1x128 scales: the QKV and dense MLP-up inputs, MLA's projections' and the experts'
    (``workload.moe.moe_saved_bytes``); the attention output stays two bytes (DeepSeek's E5M6), as
    does an MoE layer's norm output (the bf16 router's input). An fp8 job of a Transformer Engine
    stack (``software.fp8_saves_quantized``) keeps each GEMM input as the recipe's quantised copy
    (``workload.fp8.saved_input_bytes``), and the attention output, which the attention kernel
    keeps in bf16 for its own backward, twice: that and the output projection's quantised copy.
    With ``model.qk_norm`` the per-head norms keep their inputs (Q and K before the norm) and rstd."""
    if job.recompute == "selective_op":
        return sac_op_saved_bytes(model, job)
    mods = job.recomputed_modules if modules is None else modules
    norm_out = 0 if "layernorm" in mods else 1
    kind = model.first_layer_type
    attn = int(kind.mixer == "attention")
    gqa = int(attn and not model.mla)  # the attention terms below are grouped-query attention's
    ff = int(kind.ffn != "none")
    lay = job.layout
    t, c, b, s = lay.tp, lay.cp, lay.micro_batch, lay.seq_len
    a = ACT_BYTES
    h, q, kv, f = model.hidden, model.q_width, model.kv_width, model.ffn_hidden
    tok = lay.tokens
    tok_e = lay.elementwise_tokens  # exact: the Layout's rules make b s / cp divide by tp under SP
    drop = 1 if model.dropout else 0
    g = saved_input_bytes(job)  # a kept GEMM input
    # the MLP norm's output: the router's bf16 input in an MoE layer, the checkpoint's bf16 input
    # under mlp recompute (te_checkpoint keeps the module's input, not the GEMM's quantised copy)
    ff_in = a if model.experts > 1 or "mlp" in mods else g
    hidden_saved = (
        gqa * a * tok_e * h  # attention-norm input
        + gqa * norm_out * g * tok_e * h  # QKV GEMM input (SP: the shard; re-gathered in backward)
        + gqa * a * tok * (q + 2 * kv) / t  # Q, K, V (post-rotary)
        + gqa * model.qk_norm * a * tok * (q + kv) / t  # Q, K before their per-head norms (model.qk_norm)
        + gqa * (a + quantized_copy_bytes(job)) * tok * q / t  # attention output (+ its fp8 copy: out-proj input)
        + gqa * drop * tok_e * h  # dropout mask after the output projection
        + ff * a * tok_e * h  # MLP-norm input
        + ff * norm_out * ff_in * tok_e * h  # MLP-up GEMM input
        + ff * drop * tok_e * h  # dropout mask after the MLP
    )
    # SwiGLU: gate and up projections (the fused SwiGLU's input), and the product the down
    # projection keeps for its weight gradient (software.glu_product_saved; its quantised copy in a
    # Transformer Engine fp8 job; eager code's is in eager_saved_bytes); GELU / squared ReLU: the
    # activation's input and output (= down-projection input)
    product = g if model.mlp == "swiglu" and job.software.glu_product_saved and job.kernel_fusion != "eager" else 0.0
    mlp_saved = (2 * (a + clamped_copy_bytes(model, mods)) + product) * tok * f / t
    if model.experts > 1:  # the router's, the routed and the shared experts' (workload.moe)
        mlp_saved = moe_saved_bytes(model, job, mods)
    elif "mlp" in mods:  # checkpointed whole: its input (the norm's output, above) alone kept
        mlp_saved = 0.0
    mlp_saved = mlp_saved if ff else 0.0
    if gqa and c > 1 and job.cp_algo == "all_gather" and not job.cp_regather_kv:
        hidden_saved += a * b * s * 2 * kv / t  # gathered K, V of the whole sequence (a ring keeps its own)
    stats = FP32 * tok_e * kind.sub_blocks + attn * FP32 * tok * model.heads / t  # norm rstd, softmax log-sum-exp
    stats += gqa * model.qk_norm * FP32 * tok * (model.heads + model.n_kv_heads) / t  # the QK norms' rstd
    scores = 0.0
    if attn and not job.flash_attention and job.recompute != "full" and "core_attn" not in mods:
        # softmax output (bf16), plus dropout mask and dropped-out probabilities with dropout
        scores = (a + drop * (1 + a)) * b * (model.heads / t) * (s / c) * s
    eager = (eager_saved_bytes(model, tok, tok_e, t, moe_ffn_elements(model, job) if model.experts > 1 else None)
             if job.kernel_fusion == "eager" and gqa and ff else 0.0)
    mixer = (mamba_saved_bytes(model, job) if kind.mixer == "mamba" else
             mla_saved_bytes(model, job, mods) if attn and not gqa else 0.0)
    return hidden_saved + mlp_saved + stats + scores + eager + mixer


def layer_saved_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes one layer of ``job`` keeps for its backward per micro-batch: its checkpoint under full
    recompute (:func:`checkpoint_bytes`), else :func:`layer_activation_bytes`."""
    return checkpoint_bytes(model, job) if job.recompute == "full" else layer_activation_bytes(model, job)


def checkpoint_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes a fully checkpointed layer keeps per micro-batch: its input hidden state (SP-sharded)."""
    lay = job.layout
    return ACT_BYTES * lay.elementwise_tokens * model.hidden
