"""Compute model: the time of one operation on one GPU (roofline x microbenchmark efficiency)."""

from __future__ import annotations

from dataclasses import dataclass

from teton.hardware import GPU, Efficiency, cluster_efficiency
from teton.hardware.efficiency import ATTN_REF_SEQ, ATTN_S_HALF
from teton.hardware.kernels import FP8_RECIPES
from teton.workload.items import ACT_BYTES, ComputeOp

# the in-situ factors of block-scaled recipes' GEMMs (``Fp8Recipe.gemm_in_situ``: MXFP8, NVFP4)
RECIPE_FACTORS = frozenset(r.gemm_in_situ for r in FP8_RECIPES.values() if r.gemm_in_situ)
# in-situ factors of one kernel each: those and cuDNN's attention (``job.attention_kernel: cudnn``)
KERNEL_FACTORS = RECIPE_FACTORS | {"cudnn_attention_in_situ"}


def in_situ_acts_on(key: str, job) -> bool:
    """Whether the in-situ parameter ``key`` can change ``job``'s step time: a block-scaled recipe's
    GEMM factor only that of an fp8 job under that recipe (:meth:`ComputeModel.gemm_roofline_s`),
    cuDNN's attention factor only that of a job running cuDNN's flash kernel
    (:meth:`ComputeModel.attention_s`); every other parameter any job's. A fit's surrogate grid and a calibrated band skip the
    simulations of a parameter that cannot act."""
    if key == "cudnn_attention_in_situ":
        return job.flash_attention and job.attention_kernel == "cudnn"
    if key not in RECIPE_FACTORS:
        return True
    return job.precision == "fp8" and FP8_RECIPES[job.software.fp8_recipe].gemm_in_situ == key


def gemm_precision(precision: str, fp8_recipe: str) -> str:
    """The tensor-core precision a job's fp8-eligible GEMMs run at: the recipe's (fp4 under NVFP4)
    in an fp8 job, else the job's precision."""
    return FP8_RECIPES[fp8_recipe].gemm_precision if precision == "fp8" else precision


@dataclass(frozen=True)
class ComputeModel:
    """Times ``ComputeOp`` s on ``gpu``.

    GEMM:      t = max(F / (P_prec * egemm(m, n, k) * r), B / (BW * e_mem))   (see hardware.efficiency)
    attention: t = max(F / (P_bf16 * e_attn(pass) * f(s_kv) * r * a * c), B / (BW * e_mem)),
               f(s) = s/(s + S_HALF) / (16384/(16384 + S_HALF)), s_kv the job's sequence or the op's window
    r = sustained / burst x in-situ tensor-core throughput (``Efficiency.tensor_core``), times the
        in-situ ``mxfp8_gemm_in_situ`` / ``nvfp4_gemm_in_situ`` for a GEMM under that block-scaled
        recipe (``Fp8Recipe.gemm_in_situ``);
    a = the in-situ attention factor (``Efficiency.attention_in_situ``, unfused attention too);
    c = cuDNN's fused attention against the flash figures it is priced at
        (``Efficiency.cudnn_attention_in_situ``) for ``attention_kernel: cudnn``, else 1.
    A GEMM that accumulates into its output (beta = 1) adds the rest of its C traffic after the
    main loop (``epilogue_s``). Every kernel is followed by the in-situ idle gap ``kernel_gap_s``
    (0 in the burst profile).
    memory:    t = B / (BW * e_mem), B without a cast's transposed fp8 copy on a GPU whose fp8
               GEMMs take any layout (Blackwell: ``moved_bytes``)
    P_prec is the dense peak of the job's precision for fp8-eligible GEMMs (Transformer Engine
    runs the linear layers in fp8, or in fp4 under NVFP4: :func:`gemm_precision`; attention and
    the rest stay in bf16). fp8 flash attention
    (``software.fp8_attention``: cuDNN's fp8 fused attention, an attention op with ``fp8`` set)
    runs at the fp8 dense peak times the same efficiency fractions as bf16 (ASSUMPTION: no
    public fp8 attention-kernel benchmark is in the repository; measure it before trusting it).
    """

    gpu: GPU
    eff: Efficiency
    precision: str = "bf16"
    seq_len: int = 8192
    attention_kernel: str = "fa2"
    fp8_recipe: str = "delayed"

    @classmethod
    def for_gpu(cls, gpu: GPU, precision: str = "bf16", seq_len: int = 8192,
                overrides: dict[str, float] | None = None, attention_kernel: str = "fa2",
                stack: str = "unknown", fp8_recipe: str = "delayed") -> ComputeModel:
        """The compute model of a job of software ``stack`` on ``gpu`` (its in-situ values)."""
        return cls(gpu, cluster_efficiency(gpu, overrides, stack), precision, seq_len, attention_kernel, fp8_recipe)

    def op_precision(self, op: ComputeOp) -> str:
        """The precision a GEMM op runs at: the recipe's for an fp8-eligible GEMM of an fp8 job
        (:func:`gemm_precision`), else bf16."""
        return gemm_precision(self.precision, self.fp8_recipe) if (op.fp8 and self.precision == "fp8") else "bf16"

    def gemm_s(self, op: ComputeOp) -> float:
        prec = self.op_precision(op)
        return self.gemm_roofline_s(prec, op.m, op.n, op.k, op.flops, self.gemm_bytes(op, prec), op.groups) \
            + self.epilogue_s(op)

    def gemm_bytes(self, op: ComputeOp, prec: str) -> float:
        """HBM bytes of a GEMM at ``prec``: its two inputs (``groups x (m k + k n)`` elements) in the
        recipe's quantised form (``Fp8Recipe.operand_bytes`` per element) where it runs on the
        low-precision tensor cores; the output as the op counts it (bf16, or the accumulated fp32
        gradient). A bf16 GEMM: the op's own bytes."""
        if prec == "bf16":
            return op.bytes
        inputs = op.groups * (op.m * op.k + op.k * op.n)
        return op.bytes - (ACT_BYTES - FP8_RECIPES[self.fp8_recipe].operand_bytes) * inputs

    def gemm_roofline_s(self, prec: str, m: int, n: int, k: int, flops: float, nbytes: float,
                        groups: int = 1) -> float:
        """An (m x k) @ (k x n) GEMM (``groups`` of them in one grouped kernel) of ``flops`` moving
        ``nbytes`` at precision ``prec``: ``max(F / (P_prec * egemm(m, n, k) * r), B / (BW * e_mem))``
        (the class docstring)."""
        peak = self.gpu.peak_flops(prec)
        e = self.eff.gemm(prec, self.gpu, m, n, k, groups) * self.eff.tensor_core
        factor = FP8_RECIPES[self.fp8_recipe].gemm_in_situ
        if factor and prec != "bf16" and self.precision == "fp8":
            e *= getattr(self.eff, factor)
        bw = self.gpu.hbm_bw_bytes_s * self.eff.mem
        return max(flops / (peak * e), nbytes / bw)

    def epilogue_s(self, op: ComputeOp) -> float:
        """The read-modify-write of C a beta = 1 GEMM adds after its main loop.

        A CUTLASS / cuBLAS GEMM runs its epilogue (read C, scale, add, write D) after each tile's
        main loop; with one large (128 x 256) tile per SM no other tile's math hides it (CUTLASS,
        "Efficient GEMM in CUDA": the epilogue is a separate phase after the mainloop). The GEMM
        sweep the catalog's MAMF comes from writes a fresh bf16 output, so what an accumulating
        GEMM adds is the rest of its C traffic: ``m n (2 c - 2)`` bytes at HBM bandwidth for a C
        of ``c`` bytes per element (fp32: 6 bytes per gradient element).
        """
        if not op.accumulate_bytes:
            return 0.0
        extra = op.m * op.n * (2 * op.accumulate_bytes - ACT_BYTES)
        return extra / (self.gpu.hbm_bw_bytes_s * self.eff.mem)

    def attention_s(self, op: ComputeOp) -> float:
        """Flash attention: ``flops / (peak * e_attn(pass) * s/(s + S_HALF) / norm)``, the kernel
        benchmark's efficiency at the job's key length (``op.n`` where set: a windowed layer's
        window), times cuDNN's fitted factor for ``attention_kernel: cudnn`` (the class docstring's
        ``c``), and no faster than its HBM bytes (a window's few keys, Mamba-2's scan). Unfused attention (``op.k`` = head dim):
        batched GEMMs on the GEMM curve, half shaped like Q K^T (m, n = keys, k = head dim) and half
        like P V (m, n = head dim, k = keys)."""
        if op.k:
            peak = self.gpu.peak_flops("bf16") * self.eff.tensor_core * self.eff.attention_in_situ
            halves = (self.eff.gemm("bf16", self.gpu, op.m, op.n, op.k),
                      self.eff.gemm("bf16", self.gpu, op.m, op.k, op.n))
            return sum(op.flops / 2 / (peak * e) for e in halves)
        e = self.eff.attention(self.attention_kernel, op.backward) * self.eff.tensor_core * self.eff.attention_in_situ
        if self.attention_kernel == "cudnn":
            e *= self.eff.cudnn_attention_in_situ
        s = float(op.n or self.seq_len)  # a windowed layer's kernel sees its window's keys (workload.mixers)
        e *= (s / (s + ATTN_S_HALF)) / (ATTN_REF_SEQ / (ATTN_REF_SEQ + ATTN_S_HALF))
        return max(op.flops / (self.gpu.peak_flops(self.attention_precision(op)) * e), self.memory_s(op))

    def attention_precision(self, op: ComputeOp) -> str:
        """The peak an attention op runs at: fp8 for fp8 flash attention in an fp8 job, else bf16."""
        return "fp8" if op.fp8 and not op.k and self.precision == "fp8" else "bf16"

    def moved_bytes(self, op: ComputeOp) -> float:
        """The HBM bytes ``op`` moves on this GPU: without a cast's transposed fp8 copy where the
        GPU's fp8 GEMMs take any layout (``GPU.fp8_any_layout``; ``ComputeOp.tn_only_bytes``); a
        GEMM's inputs in its precision's quantised form (:meth:`gemm_bytes`)."""
        if op.kind == "gemm":
            return self.gemm_bytes(op, self.op_precision(op))
        return op.bytes - op.tn_only_bytes if self.gpu.fp8_any_layout else op.bytes

    def memory_s(self, op: ComputeOp) -> float:
        return self.moved_bytes(op) / (self.gpu.hbm_bw_bytes_s * self.eff.mem)

    def time_s(self, op: ComputeOp) -> float:
        """The op's kernel time plus the in-situ idle gap ``kernel_gap_s`` after each of the
        ``op.kernels`` kernels it stands for (beyond the measured eager gap the block timer charges
        eager passes: ``engine.block_timer``)."""
        if op.kind == "gemm":
            return self.gemm_s(op) + op.kernels * self.eff.kernel_gap_s
        if op.kind == "attention":
            return self.attention_s(op) + op.kernels * self.eff.kernel_gap_s
        return self.memory_s(op) + op.kernels * self.eff.kernel_gap_s
