"""Weight-gradient accumulation per micro-batch: fused into the GEMM's epilogue, or a kernel of its own."""

from __future__ import annotations

from teton.spec.job import JobSpec
from teton.workload.items import ACT_BYTES, FP32, ComputeOp, memory_op


def accum_bytes(job: JobSpec) -> int:
    """Gradient-buffer bytes per element a fused weight-gradient GEMM reads and writes; 0 if unfused."""
    if not job.grad_accum_fusion:
        return 0
    return FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES


def grad_accumulate(job: JobSpec, params: float) -> list[ComputeOp]:
    """The unfused gradient accumulation of ``params`` parameters after one micro-batch's backward.

    PyTorch autograd (and FSDP2's ``unsharded_accumulated_grad`` with an fp32 ``reduce_dtype``)
    adds each new bf16 gradient into the accumulation buffer with an elementwise kernel: read
    the bf16 gradient, read and write the buffer (2 + 2 x 4 bytes per parameter for fp32). With
    ``job.grad_accum_fusion`` the weight-gradient GEMM does this in its epilogue (Megatron's
    ``gradient_accumulation_fusion``) and no separate kernel runs.
    """
    if job.grad_accum_fusion:
        return []
    acc = FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES
    return [memory_op("grad_accumulate", (ACT_BYTES + 2 * acc) * params, backward=True)]
