"""torchtitan's two selective activation-checkpointing modes (docs/recompute.md).

torchtitan (``torchtitan/distributed/activation_checkpoint.py`` of v0.2, with each model's save
list in ``torchtitan/models/<model>/infra/parallelize.py``; torchtitan 0.1 kept all of it in the
Llama ``parallelize.py`` as ``_save_list``) dispatches ``activation_checkpoint.mode = "selective"``
in ``_apply_ac_to_transformer_block``:

* ``selective_ac_option = "op"`` (``_apply_op_sac``; teton's ``job.recompute = selective_op``):
  every transformer block runs under ``torch.utils.checkpoint`` (non-reentrant, ``early_stop``
  off) with ``create_selective_checkpoint_contexts(_custom_policy)``. The policy MUST_SAVEs the
  outputs of the ops in the save list (``aten.mm``, the SDPA kernels, ``_c10d_functional
  .reduce_scatter_tensor``, ``aten.max``) except every second ``aten.mm`` (a counter over the
  block's mm calls in forward order, the 2nd, 4th, ... recomputed), and PREFER_RECOMPUTEs all
  else. In backward the block's forward runs again: saved ops return their outputs, the others
  are recomputed. A layer holds its input and the saved outputs.
* ``selective_ac_option = N`` (``_apply_layer_sac``; ``selective_layer``, ``job.recompute_interval
  = N``): a module-level counter is bumped for every block the process wraps, starting at 1,
  and blocks whose count is a multiple of N are fully checkpointed; the others keep everything.
  The count is per process, over the blocks of the model parts it builds in order (its pipeline
  stages in order): not the global layer id.

torchtitan's Llama runs separate ``wq``, ``wk``, ``wv`` and ``w1``, ``w3`` Linears where teton
fuses QKV and gate-up into one GEMM, so the mm counter runs over the separate projections and
the fused GEMM is split into its saved and recomputed columns.
"""

from __future__ import annotations

import numpy as np

from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.workload.items import ACT_BYTES, FP32, Collective, Item, as_recompute, gemm_ops

# (teton GEMM, its torchtitan projections in forward order; w1 is SwiGLU's gate, w3 its up
# projection: ``w2(silu(w1(x)) * w3(x))`` calls w1 first)
_SAC_GEMMS = (("qkv", ("wq", "wk", "wv")), ("attn_out", ("wo",)), ("mlp_up", ("w1", "w3")), ("mlp_down", ("w2",)))


def sac_op_projections(model: ModelSpec) -> list[tuple[str, str, bool]]:
    """(teton GEMM, projection, saved) for every ``aten.mm`` of a block in forward order: the 1st,
    3rd, 5th ... are saved, the 2nd, 4th, 6th ... recomputed. SwiGLU (Llama): wq, wv, w1, w2
    saved; wk, wo, w3 recomputed. A GELU MLP (no w3): wq, wv, w1 saved; wk, wo, w2 recomputed."""
    out, count = [], 0
    for gemm, projections in _SAC_GEMMS:
        for proj in projections:
            if proj == "w3" and model.mlp != "swiglu":
                continue
            count += 1
            out.append((gemm, proj, count % 2 == 1))
    return out


def sac_op_widths(model: ModelSpec, tp: int) -> dict[str, int]:
    """Output columns per TP rank of each projection; the row-parallel wo and w2 write a partial
    sum over all ``hidden`` columns (before their reduce-scatter or all-reduce)."""
    q, kv, f, h = model.q_width // tp, model.kv_width // tp, model.ffn_hidden // tp, model.hidden
    return {"wq": q, "wk": kv, "wv": kv, "wo": h, "w1": f, "w3": f, "w2": h}


def sac_op_recompute(fwd: list[Item], model: ModelSpec, job: JobSpec, acc: int) -> list[Item]:
    """The forward items a layer's backward re-runs under per-op SAC, in forward order.

    With ``early_stop`` off the whole block runs again and every op the policy did not save is
    recomputed: the norms, rotary, SwiGLU / GELU and residual adds, the TP all-gathers (and,
    without sequence parallelism, the all-reduces: only ``reduce_scatter_tensor`` is in the save
    list), the all-gather of K and V under all-gather CP, and the recomputed projections' GEMMs
    (:func:`sac_op_projections`). The SDPA kernel's output is saved (with it a ring's K/V
    exchange, which runs inside it); without flash attention the core's ``aten.bmm``, softmax
    and dropout are not in the list and are recomputed.
    """
    lay = job.layout
    t = lay.tp
    tok = lay.tokens
    widths = sac_op_widths(model, t)
    recomputed: dict[str, list[str]] = {}
    for gemm, proj, saved in sac_op_projections(model):
        recomputed.setdefault(gemm, []).extend([] if saved else [proj])
    k_dim = {"qkv": model.hidden, "attn_out": model.q_width // t, "mlp_up": model.hidden,
             "mlp_down": model.ffn_hidden // t}
    out: list[Item] = []
    for it in fwd:
        if it.name in recomputed:
            projs = recomputed[it.name]
            if projs:  # one GEMM of the recomputed projections' columns
                n = sum(widths[p] for p in projs)
                out.append(as_recompute(gemm_ops(f"{it.name}.{'_'.join(projs)}", tok, n, k_dim[it.name], acc)[0]))
        elif it.name in ("attention", "cp.kv_ring"):
            if not job.flash_attention:
                out.append(as_recompute(it))
        elif not (isinstance(it, Collective) and it.op == "reduce_scatter"):
            out.append(as_recompute(it))
    return out


def sac_op_saved_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes one layer holds for backward under per-op SAC, one micro-batch on one GPU.

    The block's input (kept by the checkpoint; SP-sharded), the saved projections' outputs
    (Llama: wq ``q/t``, wv ``kv/t``, w1 ``f/t`` and w2's partial sum ``h`` per token), the flash
    kernel's output and fp32 log-sum-exp (what its backward needs) and, under sequence
    parallelism, the outputs of the two reduce-scatters. Nothing else: the norms' statistics,
    the rotary outputs, K, the SwiGLU product, dropout masks and a CP all-gather's K/V are
    recomputed."""
    lay = job.layout
    t, a, h = lay.tp, ACT_BYTES, model.hidden
    tok = lay.tokens
    tok_e = lay.elementwise_tokens
    widths = sac_op_widths(model, t)
    out = a * tok_e * h + a * tok * sum(widths[p] for _, p, saved in sac_op_projections(model) if saved)
    if job.flash_attention:
        out += a * tok * model.q_width / t + FP32 * tok * model.heads / t
    if lay.sequence_parallel:
        out += 2 * a * tok_e * h
    return out


def sac_op_recomputed_bytes(model: ModelSpec, job: JobSpec, plain_bytes: float) -> float:
    """Bytes the recompute of one layer brings back for its backward under per-op SAC: what the
    layer would keep without recompute (``plain_bytes``) less the tensors it keeps anyway (its
    input, V = wv's output, w1's output and the flash kernel's output and log-sum-exp)."""
    lay = job.layout
    t, a = lay.tp, ACT_BYTES
    tok = lay.tokens
    tok_e = lay.elementwise_tokens
    kept = a * tok_e * model.hidden + a * tok * (model.kv_width + model.ffn_hidden) / t
    if job.flash_attention:
        kept += a * tok * model.q_width / t + FP32 * tok * model.heads / t
    return max(0.0, plain_bytes - kept)


def checkpointed_layers(layers: np.ndarray, interval: int) -> np.ndarray:
    """(p, v) layers of each chunk that per-layer AC checkpoints (``job.recompute = selective_layer``).

    Each pipeline rank counts the blocks it wraps 1, 2, ... over its chunks in order (torchtitan's
    ``_layer_sac_count``, one per process) and checkpoints every ``interval``-th: a rank of ``L``
    layers checkpoints ``L // interval`` of them. ``interval = 1`` checkpoints every layer (as
    full); an interval above a rank's layer count none (as none)."""
    cum = np.cumsum(layers, axis=1)
    return cum // interval - (cum - layers) // interval
