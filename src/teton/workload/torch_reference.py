"""Reference PyTorch layers on the meta device, to cross-check teton's FLOP model (``teton flops``).

A decoder layer is written the way the public reference code writes it and sharded the way
Megatron-LM shards it for one tensor-parallel (TP) rank, then run forward and backward on
``device="meta"`` (shapes only, nothing allocated) under ``torch.utils.flop_counter.FlopCounterMode``:

* Llama (Meta's ``llama/model.py``, HF ``LlamaAttention``): RMSNorm, ``wq``/``wk``/``wv``/``wo``
  Linear without bias, grouped-query attention through ``repeat_kv``, rotary embedding
  (``rotate_half`` form), causal SDPA, SwiGLU ``w2(silu(w1 x) * w3 x)``.
* GPT-3 (GPT-2 reference, Megatron ``GPTModel``): LayerNorm, Linear with biases, GELU (tanh) MLP,
  dropout on attention probabilities and both residual branches.
* TP (Shoeybi et al. 2019, Sec. 3): column-parallel q/k/v and MLP-up (``heads/tp``,
  ``kv_heads/tp``, ``ffn/tp`` output columns, bias sharded), row-parallel ``wo`` and MLP-down
  (``q_width/tp``, ``ffn/tp`` input rows; the bias is added once after the all-reduce, as
  Megatron's ``RowParallelLinear`` does). Sequence parallelism changes no GEMM shape (the
  all-gathered input has all the tokens) and is not modelled; collectives move no FLOPs.
* CP (Llama 3, Sec. 3.3.2): the rank holds ``s/cp`` query tokens and attends to the
  all-gathered K and V of all ``s`` tokens.

Counting conventions, and the exact relations the tests assert:

* GEMMs: FlopCounterMode counts ``2 m n k`` for ``aten.mm`` and for ``aten.addmm`` (the bias add
  is not counted), and autograd runs a data-gradient and a weight-gradient ``mm`` per Linear.
  teton's ``_gemm`` counts the same (Narayanan et al. 2021, eq. 2), so the forward and backward
  GEMM FLOPs of a layer are equal: ratio 1.
* Attention forward: FlopCounterMode ignores the causal mask (``sdpa_flop``: "We aren't
  accounting for causal attention here"; the math path multiplies the full ``s_q x s_k`` scores
  and masks afterwards), ``4 b h s_q s_k d``. teton counts the FLOPs a causal kernel executes,
  ``4 tokens (s/2) q_width/tp``. With ``tokens = b s_q`` and ``s_k = s``: teton = torch / 2.
* Attention backward depends on which kernel the SDPA call reaches:

  - ``attention_kernel="flash"`` calls ``aten._scaled_dot_product_flash_attention``, the op
    ``F.scaled_dot_product_attention`` dispatches to on a CUDA GPU for bf16 causal attention.
    FlopCounterMode's ``sdpa_backward_flop`` counts five ``bmm`` (score recomputation, dV, dP,
    dQ, dK) = 2.5x its forward, the FlashAttention-2 convention teton uses (Dao 2023, Sec. 3.2).
    teton = torch / 2 (causal half) for the backward too.
  - ``attention_kernel="math"`` calls ``F.scaled_dot_product_attention`` as the reference code
    does. On the meta device it takes the math path (``tril`` mask, ``bmm``, ``_safe_softmax``,
    ``bmm``), whose autograd backward is four ``bmm`` without recomputation = 2x its forward.
    teton's backward (2.5 x its forward) = 2.5 / 2 / 2 = 0.625 x torch's.

  On real CPU tensors SDPA dispatches to ``_scaled_dot_product_flash_attention_for_cpu``, which
  FlopCounterMode (torch 2.13) has no formula for: it counts 0 attention FLOPs there.

Norms, rotary, softmax, activations, dropout, residual adds and the cross-entropy are not
matmuls and FlopCounterMode counts none of them (teton models them as memory-bound ops, 0 FLOPs).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from teton.errors import SpecError
from teton.memo import cached
from teton.spec.model import ModelSpec

ATTENTION_KERNELS = ("flash", "math")
MATMUL_OPS = frozenset({"aten.mm", "aten.addmm"})
# Attention core ops: the fused SDPA kernels FlopCounterMode has formulas for, and aten.bmm,
# which only the math SDPA path issues in these layers (every Linear lowers to mm / addmm).
ATTENTION_OPS = frozenset({
    "aten.bmm",
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_flash_attention_backward",
    "aten._scaled_dot_product_efficient_attention", "aten._scaled_dot_product_efficient_attention_backward",
    "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_cudnn_attention_backward",
    "aten._flash_attention_forward", "aten._flash_attention_backward",
    "aten._efficient_attention_forward", "aten._efficient_attention_backward",
})
# teton attention FLOPs / FlopCounterMode attention FLOPs, per kernel (see the module docstring)
EXPECTED_ATTENTION_RATIO = {
    "flash": {"fwd": 0.5, "bwd": 0.5},
    "math": {"fwd": 0.5, "bwd": 0.625},
}
DROPOUT_P = 0.1  # GPT-2/3 reference dropout


def require_torch():
    """The ``torch`` module, or a one-line SpecError saying how to install it."""
    try:
        import torch
    except ImportError:
        raise SpecError("torch", "not installed", "teton flops needs PyTorch (the CPU build is enough): pip install -e "
                         "'.[torch]' --extra-index-url https://download.pytorch.org/whl/cpu") from None
    return torch


def _check_shards(model: ModelSpec, seq_len: int, micro_batch: int, tp: int, cp: int) -> None:
    if model.experts > 1:
        raise SpecError("model.experts", model.experts, "the PyTorch reference layer is dense (experts = 1)")
    if model.mla:
        raise SpecError("model.kv_lora_rank", model.kv_lora_rank, "the PyTorch reference layer has grouped-query "
                        "attention, not multi-head latent attention (kv_lora_rank unset)")
    if model.layer_pattern is not None:
        raise SpecError("model.layer_pattern", model.layer_pattern, "the PyTorch reference layer is one attention + "
                        "MLP layer, not a hybrid pattern (layer_pattern unset)")
    if model.sliding_window and model.sliding_window < seq_len:
        raise SpecError("model.sliding_window", model.sliding_window, "the PyTorch reference layer attends to the "
                        f"whole sequence: no window shorter than job.seq_len ({seq_len})")
    for name, value in (("job.tp", tp), ("job.cp", cp), ("job.seq_len", seq_len), ("job.micro_batch", micro_batch)):
        if value < 1:
            raise SpecError(name, value, "must be >= 1")
    checks = (("model.heads", model.heads), ("model.kv_heads", model.n_kv_heads), ("model.ffn_hidden", model.ffn_hidden))
    for field, width in checks:
        if width % tp:
            raise SpecError("job.tp", tp, f"must divide {field} ({width}) for Megatron's tensor-parallel shards")
    if seq_len % cp:
        raise SpecError("job.cp", cp, f"must divide job.seq_len ({seq_len})")


@cached(None)
def _modules():
    """The reference nn.Module classes (built on first use so that importing teton needs no torch):
    ``(torch, DecoderLayer, Head)``."""
    torch = require_torch()
    kw = dict(device="meta", dtype=torch.bfloat16)
    RMSNorm, RowParallelLinear = _linear_and_norm_classes(torch, kw)
    Attention = _attention_class(torch, kw, RowParallelLinear)
    MLP = _mlp_class(torch, kw, RowParallelLinear)

    def norm(m: ModelSpec):
        return RMSNorm(m.hidden) if m.norm == "rmsnorm" else torch.nn.LayerNorm(m.hidden, **kw)

    DecoderLayer, Head = _layer_classes(torch, kw, norm, Attention, MLP)
    return torch, DecoderLayer, Head


def _linear_and_norm_classes(torch, kw: dict):
    """Llama's RMSNorm and Megatron's RowParallelLinear on one rank, as nn.Module classes."""
    nn = torch.nn

    class RMSNorm(nn.Module):
        """Llama's RMSNorm (Zhang & Sennrich 2019), as in Meta's reference model.py."""

        def __init__(self, dim: int, eps: float = 1e-5):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim, **kw))

        def forward(self, x):  # HF LlamaRMSNorm: normalised in fp32, scaled in the input dtype
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(x.dtype)

    class RowParallelLinear(nn.Module):
        """Megatron's RowParallelLinear on one rank: input rows sharded, bias added after the all-reduce."""

        def __init__(self, in_shard: int, out: int, bias: bool):
            super().__init__()
            self.linear = nn.Linear(in_shard, out, bias=False, **kw)
            self.bias = nn.Parameter(torch.zeros(out, **kw)) if bias else None

        def forward(self, x):
            y = self.linear(x)  # all-reduce / reduce-scatter over TP here (no FLOPs)
            return y + self.bias if self.bias is not None else y

    return RMSNorm, RowParallelLinear


def _attention_class(torch, kw: dict, RowParallelLinear):
    """The attention block on one TP rank: column-parallel q/k/v, rotary (``rotate_half`` form),
    grouped-query attention through HF's ``repeat_kv``, SDPA, row-parallel ``wo``."""
    nn, F = torch.nn, torch.nn.functional

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(x, n_rep: int):
        """HF transformers' repeat_kv: (b, kv_heads, s, d) -> (b, kv_heads * n_rep, s, d)."""
        if n_rep == 1:
            return x
        b, kvh, s, d = x.shape
        return x[:, :, None].expand(b, kvh, n_rep, s, d).reshape(b, kvh * n_rep, s, d)

    class Attention(nn.Module):
        def __init__(self, m: ModelSpec, tp: int, seq_len: int, kernel: str):
            super().__init__()
            self.heads, self.kv_heads, self.d = m.heads // tp, m.n_kv_heads // tp, m.d_head
            self.seq_len, self.kernel = seq_len, kernel
            self.rope = m.rotary
            self.dropout_p = DROPOUT_P if m.dropout else 0.0
            self.wq = nn.Linear(m.hidden, self.heads * self.d, bias=m.bias, **kw)  # column-parallel
            self.wk = nn.Linear(m.hidden, self.kv_heads * self.d, bias=m.bias, **kw)
            self.wv = nn.Linear(m.hidden, self.kv_heads * self.d, bias=m.bias, **kw)
            self.wo = RowParallelLinear(self.heads * self.d, m.hidden, m.bias)

        def forward(self, x, kv_gather: int):
            b, s_q, _ = x.shape
            q = self.wq(x).view(b, s_q, self.heads, self.d).transpose(1, 2)
            k = self.wk(x).view(b, s_q, self.kv_heads, self.d).transpose(1, 2)
            v = self.wv(x).view(b, s_q, self.kv_heads, self.d).transpose(1, 2)
            if self.rope:
                cos = torch.empty(s_q, self.d, **kw)
                sin = torch.empty(s_q, self.d, **kw)
                q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if kv_gather > 1:  # CP: all-gather K and V of the whole sequence (no FLOPs)
                k = torch.cat([k] * kv_gather, dim=2)
                v = torch.cat([v] * kv_gather, dim=2)
            n_rep = self.heads // self.kv_heads
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
            o = self._core(q, k, v, cp_chunks=kv_gather > 1)
            return self.wo(o.transpose(1, 2).reshape(b, s_q, self.heads * self.d))

        def _core(self, q, k, v, cp_chunks: bool):
            if self.kernel == "flash":  # what F.scaled_dot_product_attention dispatches to on CUDA
                return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, self.dropout_p, True)[0]
            if cp_chunks:  # load-balanced causal mask of this rank's query chunks against all keys
                mask = torch.empty(q.shape[2], k.shape[2], dtype=torch.bool, device="meta")
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout_p)
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout_p, is_causal=True)

    return Attention


def _mlp_class(torch, kw: dict, RowParallelLinear):
    """The MLP on one TP rank: column-parallel up (and gate, SwiGLU), row-parallel down; SwiGLU
    ``w2(silu(w1 x) * w3 x)``, GELU (tanh) or squared ReLU ``w2(relu(w1 x)^2)``."""
    nn, F = torch.nn, torch.nn.functional

    class MLP(nn.Module):
        def __init__(self, m: ModelSpec, tp: int):
            super().__init__()
            self.swiglu, self.relu2 = m.mlp == "swiglu", m.mlp == "relu2"
            f = m.ffn_hidden // tp
            self.w1 = nn.Linear(m.hidden, f, bias=m.bias, **kw)  # column-parallel (gate for SwiGLU)
            if self.swiglu:
                self.w3 = nn.Linear(m.hidden, f, bias=m.bias, **kw)  # column-parallel up
            self.w2 = RowParallelLinear(f, m.hidden, m.bias)

        def forward(self, x):
            if self.swiglu:
                return self.w2(F.silu(self.w1(x)) * self.w3(x))
            if self.relu2:
                return self.w2(F.relu(self.w1(x)).square())
            return self.w2(F.gelu(self.w1(x), approximate="tanh"))

    return MLP


def _layer_classes(torch, kw: dict, norm, Attention, MLP):
    """The pre-norm decoder layer and the output head (final norm, vocab-parallel lm_head,
    cross-entropy in fp32), built from ``norm(model)``, ``Attention`` and ``MLP``."""
    nn, F = torch.nn, torch.nn.functional

    class DecoderLayer(nn.Module):
        """Pre-norm decoder layer: x + attn(norm(x)), then x + mlp(norm(x))."""

        def __init__(self, m: ModelSpec, tp: int, seq_len: int, kernel: str):
            super().__init__()
            self.attention_norm, self.ffn_norm = norm(m), norm(m)
            self.attention = Attention(m, tp, seq_len, kernel)
            self.feed_forward = MLP(m, tp)
            self.dropout_p = DROPOUT_P if m.dropout else 0.0

        def forward(self, x, kv_gather: int = 1):
            h = x + F.dropout(self.attention(self.attention_norm(x), kv_gather), self.dropout_p)
            return h + F.dropout(self.feed_forward(self.ffn_norm(h)), self.dropout_p)

    class Head(nn.Module):
        """Final norm, vocab-parallel lm_head (this rank's ceil(vocab/tp) rows), cross-entropy in fp32."""

        def __init__(self, m: ModelSpec, tp: int):
            super().__init__()
            self.norm = norm(m)
            self.output = nn.Linear(m.hidden, math.ceil(m.vocab / tp), bias=False, **kw)

        def forward(self, x, targets):
            logits = self.output(self.norm(x)).float()  # max / sum-exp all-reduces over TP here
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return DecoderLayer, Head


def _count(torch, run_forward) -> dict:
    """Forward and backward FLOPs of ``run_forward()`` (returns a tensor) by category and by op."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = run_forward()
        fwd = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
        out.backward(torch.empty_like(out) if out.dim() else None)
        total = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    bwd = {op: n - fwd.get(op, 0) for op, n in total.items() if n - fwd.get(op, 0)}

    def split(ops: dict[str, int]) -> tuple[int, int, int]:
        mm = sum(n for op, n in ops.items() if op in MATMUL_OPS)
        attn = sum(n for op, n in ops.items() if op in ATTENTION_OPS)
        return mm, attn, sum(ops.values()) - mm - attn

    (fm, fa, fo), (bm, ba, bo) = split(fwd), split(bwd)
    return {"fwd_matmul_flops": fm, "bwd_matmul_flops": bm, "fwd_attention_flops": fa, "bwd_attention_flops": ba,
            "other_flops": fo + bo, "fwd_by_op": fwd, "bwd_by_op": bwd}


# aten ops that move no data (views, metadata, allocation without a write)
VIEW_OPS = frozenset({
    "aten.view", "aten._unsafe_view", "aten.transpose", "aten.t", "aten.expand", "aten.slice",
    "aten.alias", "aten.detach", "aten.as_strided", "aten.unsqueeze", "aten.squeeze", "aten.permute",
    "aten.split", "aten.split_with_sizes", "aten.chunk", "aten.select", "aten._reshape_alias",
    "aten.unbind", "aten.empty", "aten.empty_like", "aten.new_empty", "aten.new_empty_strided",
})


def count_elementwise_bytes(run_forward, inputs) -> tuple[int, int]:
    """(forward, backward) HBM bytes of the data-moving aten ops other than matmuls and attention
    that ``run_forward()`` and its autograd backward (taken with respect to ``inputs``) issue: each
    op reads its tensor inputs and writes its outputs once (what one eager kernel does)."""
    torch = require_torch()
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    def nbytes(tree) -> int:
        return sum(x.numel() * x.element_size() for x in tree_leaves(tree) if isinstance(x, torch.Tensor))

    class ByteCounter(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func.overloadpacket)
            if name not in VIEW_OPS and name not in MATMUL_OPS and name not in ATTENTION_OPS:
                self.total += nbytes(args) + nbytes(kwargs or {}) + nbytes(out)
            return out

    counter = ByteCounter()
    with counter:
        out = run_forward()
        fwd = counter.total
        torch.autograd.grad(out, inputs, torch.empty_like(out))
    return fwd, counter.total - fwd


def torch_layer_eager_traffic(model: ModelSpec, seq_len: int, micro_batch: int, tp: int) -> dict:
    """What the eager reference decoder layer (flash attention, no sequence parallelism) moves and
    keeps on one TP rank for one micro-batch: ``fwd_bytes`` / ``bwd_bytes`` of its elementwise
    ops (:func:`count_elementwise_bytes`; the backward taken for the layer's input only, so no
    weight gradient) and ``saved_bytes``, the tensors autograd saves for backward (distinct
    storages, the layer's input and parameters excluded)."""
    _check_shards(model, seq_len, micro_batch, tp, 1)
    torch, DecoderLayer, _ = _modules()
    layer = DecoderLayer(model, tp, seq_len, "flash")
    x = torch.empty(micro_batch, seq_len, model.hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    fwd, bwd = count_elementwise_bytes(lambda: layer(x), [x])
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        saved[storage._cdata] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x)
    skip = {p.untyped_storage()._cdata for p in layer.parameters()} | {x.untyped_storage()._cdata}
    return {"fwd_bytes": fwd, "bwd_bytes": bwd, "saved_bytes": sum(n for k, n in saved.items() if k not in skip)}


def torch_layer_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int, cp: int = 1,
                      attention_kernel: str = "flash") -> dict:
    """FlopCounterMode's FLOPs of one reference decoder layer on one TP/CP rank, for one micro-batch.

    Returns ``fwd_matmul_flops``, ``bwd_matmul_flops`` (aten.mm / aten.addmm), ``fwd_attention_flops``,
    ``bwd_attention_flops`` (SDPA ops, or the math path's aten.bmm), ``other_flops`` (anything else
    FlopCounterMode counted: 0 for these layers) and the per-op counts ``fwd_by_op`` / ``bwd_by_op``.
    """
    if attention_kernel not in ATTENTION_KERNELS:
        raise SpecError("attention_kernel", attention_kernel, f"one of {', '.join(ATTENTION_KERNELS)}")
    _check_shards(model, seq_len, micro_batch, tp, cp)
    torch, DecoderLayer, _ = _modules()
    layer = DecoderLayer(model, tp, seq_len, attention_kernel)
    x = torch.empty(micro_batch, seq_len // cp, model.hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    return _count(torch, lambda: layer(x, kv_gather=cp))


def torch_head_flops(model: ModelSpec, seq_len: int, micro_batch: int, tp: int, cp: int = 1) -> dict:
    """FlopCounterMode's FLOPs of the final norm, vocab-parallel lm_head and cross-entropy on one rank."""
    _check_shards(model, seq_len, micro_batch, tp, cp)
    torch, _, Head = _modules()
    head = Head(model, tp)
    x = torch.empty(micro_batch, seq_len // cp, model.hidden, device="meta", dtype=torch.bfloat16, requires_grad=True)
    targets = torch.empty(micro_batch, seq_len // cp, device="meta", dtype=torch.long)
    return _count(torch, lambda: head(x, targets))


def _teton_sums(block) -> dict:
    """GEMM and attention FLOPs of a teton Block, backward without activation recomputation."""
    from teton.workload.items import ComputeOp

    def total(items, kind: str, recompute: bool | None = None) -> float:
        return sum(i.flops for i in items if isinstance(i, ComputeOp) and i.kind == kind
                   and (recompute is None or i.name.startswith("recompute.") == recompute))

    return {"fwd_gemm_flops": total(block.fwd, "gemm"), "bwd_gemm_flops": total(block.bwd, "gemm", False),
            "fwd_attention_flops": total(block.fwd, "attention"),
            "bwd_attention_flops": total(block.bwd, "attention", False),
            "recompute_flops": total(block.bwd, "gemm", True) + total(block.bwd, "attention", True)}


def compare_layer_flops(model: ModelSpec, job, attention_kernel: str = "flash",
                        progress: Callable[[int, int], None] | None = None) -> dict:
    """teton's ``layer_block`` / ``head_block`` FLOPs next to the PyTorch reference's, per category.

    Each row: ``teton_flops``, ``torch_flops``, ``ratio`` (teton / torch) and ``expected_ratio``
    (1 for GEMMs; the attention conventions of the module docstring). teton's backward excludes
    recomputed forward ops (reported as ``teton_recompute_flops``, for a checkpointed layer
    under ``job.recompute = selective_layer``; ``teton_recompute_per`` says which): the
    reference runs none. ``progress(done, total)`` after each of the reference layer and head.
    """
    from teton.workload.ops import head_block, layer_block

    lay = job.layout
    kw = dict(seq_len=lay.seq_len, micro_batch=lay.micro_batch, tp=lay.tp, cp=lay.cp)
    tick = progress or (lambda done, total: None)
    tick(0, 2)
    ref = torch_layer_flops(model, attention_kernel=attention_kernel, **kw)
    tick(1, 2)
    ref_head = torch_head_flops(model, **kw)
    tick(2, 2)
    per_layer = job.recompute != "selective_layer"  # else: the checkpointed layers replay as full's do
    layer_job = job if per_layer else job.model_copy(update={"recompute": "full"})
    ours, ours_head = _teton_sums(layer_block(model, layer_job)), _teton_sums(head_block(model, job))
    expect = EXPECTED_ATTENTION_RATIO[attention_kernel]
    spec_rows = [
        ("layer forward GEMM", ours["fwd_gemm_flops"], ref["fwd_matmul_flops"], 1.0),
        ("layer backward GEMM", ours["bwd_gemm_flops"], ref["bwd_matmul_flops"], 1.0),
        ("layer forward attention", ours["fwd_attention_flops"], ref["fwd_attention_flops"], expect["fwd"]),
        ("layer backward attention", ours["bwd_attention_flops"], ref["bwd_attention_flops"], expect["bwd"]),
        ("head forward GEMM", ours_head["fwd_gemm_flops"], ref_head["fwd_matmul_flops"], 1.0),
        ("head backward GEMM", ours_head["bwd_gemm_flops"], ref_head["bwd_matmul_flops"], 1.0),
    ]
    rows = [{"category": c, "teton_flops": t, "torch_flops": r, "ratio": t / r if r else math.nan,
             "expected_ratio": e} for c, t, r, e in spec_rows]
    return {"model": model.name, "tp": lay.tp, "cp": lay.cp, "seq_len": lay.seq_len,
            "micro_batch": lay.micro_batch, "attention_kernel": attention_kernel, "rows": rows,
            "teton_recompute_flops": ours["recompute_flops"],
            "teton_recompute_per": "layer" if per_layer else f"checkpointed layer (1 in {job.recompute_interval})",
            "torch_other_flops": ref["other_flops"] + ref_head["other_flops"],
            "torch_fwd_by_op": ref["fwd_by_op"], "torch_bwd_by_op": ref["bwd_by_op"]}
