"""Model FLOPs per token: what MFU divides by, for any mix of layer types.

PaLM (Chowdhery et al. 2022, Appendix B): ``6 N`` for the matmul parameters a token touches
(``ModelSpec.matmul_params``: each layer type's, the multi-token prediction modules' and the
output head's) plus ``12 L s d_attn`` for the attention scores and values over the full ``s x s``
matrix (teton's convention: no causal halving). Per layer type, training (forward + backward):

* grouped-query attention: ``12 s q_width`` (``6 s`` keys x ``(d_qk + d_v)`` per head);
* MLA: ``6 s heads (qk_head_dim + v_head_dim)`` (its Q/K and V head dims differ);
* a windowed layer: ``min(window, s)`` keys in place of ``s``;
* Mamba-2: the scan's ``3 x 7 d_in N`` (Megatron-Bridge's ``flop_utils.py`` hybrid count at
  NVIDIA-NeMo/Megatron-Bridge@067f987; its kernel: ``workload.mamba``);
* no mixer: nothing beyond its matmuls.

Multi-token prediction (DeepSeek-V3, Sec. 2.2): each module's layer as above, and its pass through
the shared output head, ``6 V h`` (a matmul the shared weights run again; Megatron-Bridge counts
the logits ``(1 + mtp_depth)`` times).
"""

from __future__ import annotations

from teton.memo import cached
from teton.spec.layer_types import LayerType
from teton.spec.model import ModelSpec


def plain_attention(model: ModelSpec) -> bool:
    """Every layer one grouped-query attention + MLP block (PaLM's count applies as it is)."""
    return not model.mla and model.uniform and model.mixer == "attention"

SCAN_FLOPS_PER_STATE = 7  # Megatron-Bridge flop_utils: the Mamba-2 scan's 7 B s d_in N forward


def mamba_scan_model_flops(model: ModelSpec) -> float:
    """Training FLOPs per token of one Mamba-2 layer's scan in Megatron-Bridge's count (3 x 7 d_in N);
    its in_proj and out_proj are matmul parameters (``ModelSpec.mamba_params``)."""
    return 3.0 * SCAN_FLOPS_PER_STATE * model.mamba_inner * model.mamba_state_dim


def _mixer_flops(model: ModelSpec, kind: LayerType, n: int, seq_len: int) -> float:
    """Training FLOPs per token of ``n`` layers of ``kind`` beyond their matmul parameters."""
    if kind.mixer == "mamba":
        return n * mamba_scan_model_flops(model)
    if kind.mixer != "attention":
        return 0.0
    keys = min(model.sliding_window, seq_len) if kind.windowed and model.sliding_window else seq_len
    if model.mla:
        return 6.0 * n * keys * model.heads * (model.qk_head_dim + model.v_dim)
    return 12.0 * n * keys * model.q_width


@cached(256)
def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training FLOPs per token at ``seq_len`` (module docstring); a uniform attention model's is
    PaLM's ``6 N + 12 L s q_width`` exactly. Memoised: a search asks it for every layout."""
    mixers = sum(_mixer_flops(model, kind, n, seq_len) for kind, n in model.layer_type_counts().items())
    if model.mtp_depth:
        last = model.layer_types()[-1]
        mixers += _mixer_flops(model, last, model.mtp_depth, seq_len) + 6.0 * model.mtp_depth * model.vocab * model.hidden
    return 6.0 * model.matmul_params() + mixers


def layer_flops_per_token(model: ModelSpec, kind: LayerType, seq_len: int) -> float:
    """Training FLOPs per token of one layer of ``kind``: its share of :func:`model_flops_per_token`
    (6 x its active matmul parameters, plus its attention or scan)."""
    return 6.0 * model.as_layer(kind).layer_active_params() + _mixer_flops(model, kind, 1, seq_len)


def last_stage_extra_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training FLOPs per token the last pipeline stage runs beyond its layers: the output head and
    the multi-token prediction modules (the first stage's embedding lookup is no matmul)."""
    extra = 6.0 * (model.vocab * model.hidden + model.norm_params())
    if model.mtp_depth:
        last = model.layer_types()[-1]
        extra += (6.0 * model.mtp_params(active=True) + _mixer_flops(model, last, model.mtp_depth, seq_len)
                  + 6.0 * model.mtp_depth * model.vocab * model.hidden)
    return extra
