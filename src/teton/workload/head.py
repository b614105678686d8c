"""The output head: final norm, vocab-parallel output projection and the cross-entropy kernel.

The loss runs over this TP rank's vocab shard of the logits, ``tokens x vocab / tp`` of them, with
the stack's kernel (``software.cross_entropy``; bytes per logit, peak memory and passes in
``hardware.kernels.CROSS_ENTROPY``, each with its code path):

* ``eager``: PyTorch's ``F.cross_entropy(logits.float(), labels)``, 18 B forward, 26 backward;
  two small TP all-reduces (max, sum-exp).
* ``vocab_parallel``: Megatron-Core's ``_VocabParallelCrossEntropy`` on ``logits.float()``, 38 B
  forward in six in-place fp32 passes, 14 backward; three small TP all-reduces (max, the
  predicted logit, sum-exp: ``megatron/core/tensor_parallel/cross_entropy.py``).
* ``fused``: Transformer Engine's Triton ``parallel_cross_entropy``, 6 B forward (online max /
  sum-exp, then loss and gradient in place of the logits), 4 backward; one small TP all-gather
  of each rank's (max, sum-exp, predicted logit) per token (its ``all_gather_into_tensor`` of
  ``m_d_X_y``).

The logits are held only while the head runs (1F1B runs a micro-batch's head backward right
after its forward): ``workload.memory`` counts the kernel's peak bytes per logit as a working
buffer of the last pipeline rank.
"""

from __future__ import annotations

from teton.hardware.kernels import CROSS_ENTROPY
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.workload.elementwise import elementwise_bytes
from teton.workload.gradients import accum_bytes, grad_accumulate
from teton.workload.items import ACT_BYTES, FP32, Block, Collective, Item, gemm_ops, memory_op


def cross_entropy_items(job: JobSpec, logits: float) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of the stack's cross-entropy over ``logits`` logits of this rank
    (module docstring), with its TP collectives when the vocabulary is split over TP."""
    variant = job.software.cross_entropy
    k = CROSS_ENTROPY[variant]
    lay = job.layout
    fwd: list[Item] = [memory_op("cross_entropy", k.fwd_bytes * logits, kernels=k.fwd_kernels)]
    bwd: list[Item] = [memory_op("cross_entropy.bwd", k.bwd_bytes * logits, True, kernels=k.bwd_kernels)]
    if lay.tp > 1:
        small = FP32 * lay.tokens  # one fp32 per token
        if variant == "fused":
            fwd.append(Collective("tp.ce_stats", "all_gather", "tp", 3 * small * lay.tp))
        else:
            names = ("tp.ce_max", "tp.ce_predicted", "tp.ce_sum") if variant == "vocab_parallel" else (
                "tp.ce_max", "tp.ce_sum")
            fwd += [Collective(n, "all_reduce", "tp", small) for n in names]
    return fwd, bwd


def head_block(model: ModelSpec, job: JobSpec) -> Block:
    """Final norm, vocab-parallel output projection and cross-entropy (:func:`cross_entropy_items`).

    The output layer stays bf16 under fp8 recipes (Megatron's output_layer is a plain
    ColumnParallelLinear, outside Transformer Engine's fp8 autocast); its shard has ceil(v / tp)
    rows (the last one padded). The block is eager unless the whole step is a CUDA graph
    (``software.cuda_graphs: full``)."""
    lay = job.layout
    t, sp, tok, tok_e = lay.tp, lay.sequence_parallel, lay.tokens, lay.elementwise_tokens
    h, v = model.hidden, model.vocab
    act_in = ACT_BYTES * tok * h
    logits = gemm_ops("lm_head", tok, lay.local_vocab(v), h, accum_bytes(job), fp8=False)
    ce_fwd, ce_bwd = cross_entropy_items(job, tok * v / t)
    norm_bytes, norm_bwd_bytes = elementwise_bytes(model.norm, job.kernel_fusion, tok_e * h)
    fwd: list[Item] = [
        memory_op("final_norm", norm_bytes),
        *([Collective("tp.ag_head", "all_gather", "tp", act_in)] if sp else []),
        logits[0], *ce_fwd,
    ]
    bwd: list[Item] = [
        *ce_bwd, logits[1], logits[2],
        *([Collective("tp.rs_head_grad", "reduce_scatter" if sp else "all_reduce", "tp", act_in)] if t > 1 else []),
        memory_op("final_norm.bwd", norm_bwd_bytes, True),
        *grad_accumulate(job, v * h / t + model.norm_params()),
    ]
    return Block("head", tuple(fwd), tuple(bwd), graphed=job.software.cuda_graphs == "full")


def head_peak_bytes(model: ModelSpec, job: JobSpec) -> float:
    """Bytes the loss holds at its peak on the last pipeline rank: the cross-entropy kernel's
    peak bytes per logit (``hardware.kernels.CROSS_ENTROPY``) over this rank's vocab shard."""
    lay = job.layout
    return CROSS_ENTROPY[job.software.cross_entropy].peak_bytes * lay.tokens * lay.local_vocab(model.vocab)
