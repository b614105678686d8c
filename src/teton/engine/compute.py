"""Compute model: the time of one operation on one GPU (roofline x microbenchmark efficiency)."""

from __future__ import annotations

from dataclasses import dataclass

from teton.hardware import GPU, Efficiency, cluster_efficiency
from teton.hardware.efficiency import ATTN_REF_SEQ, ATTN_S_HALF
from teton.workload.ops import ComputeOp


@dataclass(frozen=True)
class ComputeModel:
    """Times ``ComputeOp`` s on ``gpu``.

    GEMM:      t = max(F / (P_prec * e_gemm(m, n, k) * r), B / (BW * e_mem))   (see hardware.efficiency)
    attention: t = F / (P_bf16 * e_attn(pass) * f(s_kv) * r),  f(s) = s/(s + S_HALF) / (16384/(16384 + S_HALF))
    r = sustained / burst tensor-core throughput (``Efficiency.sustained_ratio``).
    memory:    t = B / (BW * e_mem)
    P_prec is the dense peak of the job's precision for fp8-eligible GEMMs (Transformer Engine
    runs the linear layers in fp8; attention and the rest stay in bf16).
    """

    gpu: GPU
    eff: Efficiency
    precision: str = "bf16"
    seq_len: int = 8192
    attention_kernel: str = "fa2"

    @classmethod
    def for_gpu(cls, gpu: GPU, precision: str = "bf16", seq_len: int = 8192,
                overrides: dict[str, float] | None = None, attention_kernel: str = "fa2") -> ComputeModel:
        return cls(gpu, cluster_efficiency(gpu, overrides), precision, seq_len, attention_kernel)

    def gemm_s(self, op: ComputeOp) -> float:
        prec = self.precision if (op.fp8 and self.precision == "fp8") else "bf16"
        peak = self.gpu.peak_flops(prec)
        e = self.eff.gemm(prec, self.gpu, op.m, op.n, op.k) * self.eff.sustained_ratio
        return max(op.flops / (peak * e), op.bytes / (self.gpu.hbm_bw_bytes_s * self.eff.mem))

    def attention_s(self, op: ComputeOp) -> float:
        """Flash attention: ``flops / (peak * e_attn(pass) * s/(s + S_HALF) / norm)``, the kernel
        benchmark's efficiency at the job's key length. Unfused attention (``op.k`` = head dim):
        batched GEMMs on the GEMM curve, half shaped like Q K^T (m, n = keys, k = head dim) and half
        like P V (m, n = head dim, k = keys)."""
        if op.k:
            peak = self.gpu.peak_flops("bf16") * self.eff.sustained_ratio
            halves = (self.eff.gemm("bf16", self.gpu, op.m, op.n, op.k),
                      self.eff.gemm("bf16", self.gpu, op.m, op.k, op.n))
            return sum(op.flops / 2 / (peak * e) for e in halves)
        e = self.eff.attention(self.attention_kernel, op.backward) * self.eff.sustained_ratio
        s = float(self.seq_len)
        e *= (s / (s + ATTN_S_HALF)) / (ATTN_REF_SEQ / (ATTN_REF_SEQ + ATTN_S_HALF))
        return op.flops / (self.gpu.peak_flops("bf16") * e)

    def memory_s(self, op: ComputeOp) -> float:
        return op.bytes / (self.gpu.hbm_bw_bytes_s * self.eff.mem)

    def time_s(self, op: ComputeOp) -> float:
        if op.kind == "gemm":
            return self.gemm_s(op)
        if op.kind == "attention":
            return self.attention_s(op)
        return self.memory_s(op)
