"""The software stack's kernels: what each variant moves through HBM, and what the CPU pays to issue one.

The constants here belong to kernels a training stack chooses between (``job.software``): the
cross-entropy implementations, the fp8 scaling recipes' quantisation kernels, the CPU time to
launch a kernel from eager PyTorch, and the host copies of CPU activation offload. Byte counts
are read off the kernels' code (each entry names the code path); the launch time is measured
from the real PyTorch profiler traces in ``tests/data/traces`` (a test re-measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

from teton.hardware.gpus import GPU
from teton.hardware.hosts import Host
from teton.hardware.storage import d2h_bytes_s_per_gpu

# --- kernel launches ------------------------------------------------------------------------------
# CPU time to issue one kernel from eager PyTorch: the 25th percentile of the intervals between
# consecutive kernel launches (cudaLaunchKernel / cudaLaunchKernelExC) on the thread that launches
# the most, in the two Kineto traces of tests/data/traces (Holistic Trace Analysis test data, A100):
# 11.0 us (a100-16rank-rank0, the main thread) and 14.7 us (a100-2rank-nccl, the autograd thread);
# cudaLaunchKernel itself takes 4-10 us of that, the rest is the dispatcher and Python between
# ops. The lower quartile is the pace of back-to-back launches (the median includes Python work
# between ops). The value is the two traces' mid-point; tests/workload/test_stack_mechanisms.py
# re-measures both and checks it lies between them.
EAGER_LAUNCH_S = 13e-6
# GPU idle time after each kernel of an eager pass whose CPU is ahead (the front end starting the
# next queued kernel): the 25th percentile of the idle gaps under 1 ms between consecutive kernels
# on the stream that runs the GEMMs, in the same two traces (``teton.validation.trace``'s gap
# reader): 3.0 us (a100-16rank-rank0: quartiles 3, 3, 4 us of 7,148 gaps; whole-microsecond
# timestamps) and 2.0 us (a100-2rank-nccl, whose median, 55 us, is CPU-bound). The two traces'
# mid-point, as for the launches; tests/workload/test_stack_mechanisms.py re-measures both.
# ASSUMPTION: the same on Hopper and Blackwell (no trace of theirs is bundled); a CUDA graph's
# replay is taken to have none.
EAGER_KERNEL_GAP_S = 2.5e-6


# --- cross-entropy ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrossEntropyKernel:
    """One cross-entropy implementation over this TP rank's vocab shard of the logits, per logit."""

    fwd_bytes: float  # HBM bytes per logit, forward
    bwd_bytes: float  # HBM bytes per logit, backward
    # bytes per logit held at the head's peak: what the loss saves for backward plus the tensors
    # alive with it (the bf16 logits while the loss runs, an fp32 copy)
    peak_bytes: float
    fwd_kernels: int  # full passes over the logits (one launch each)
    bwd_kernels: int


CROSS_ENTROPY: dict[str, CrossEntropyKernel] = {
    # PyTorch eager, F.cross_entropy(logits.float(), labels) (HF transformers, torchtitan), counted
    # by teton's byte-counting dispatch mode on the reference code: to(fp32) 2+4, log_softmax 4+4,
    # nll_loss 4 = 18; backward nll_loss_backward, log_softmax_backward, to(bf16) = 26. Peak: the
    # bf16 logits 2 + their fp32 copy 4 + the saved fp32 log-softmax 4 = 10.
    "eager": CrossEntropyKernel(18.0, 26.0, 10.0, 3, 3),
    # Megatron-Core's _VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py)
    # on logits.float(): the cast r2 w4, max r4, in-place subtract r4 w4, in-place exp r4 w4, sum
    # r4, in-place divide r4 w4 = 38; it saves the fp32 softmax (the cast's buffer, overwritten in
    # place). Backward: in-place multiply by grad_output r4 w4, the cast's backward to bf16 r4 w2
    # = 14. Peak: the bf16 logits 2 + the fp32 softmax 4 = 6. (The gather of each token's
    # predicted logit and the one-hot update touch one element per token: not counted.)
    "vocab_parallel": CrossEntropyKernel(38.0, 14.0, 6.0, 6, 2),
    # Transformer Engine's Triton parallel_cross_entropy (transformer_engine/pytorch/triton/
    # cross_entropy.py, the Liger-kernel design) on the bf16 logits: pass 1 the online max and
    # sum-exp, read 2; pass 2 the loss and the gradient written in place of the logits, read 2
    # write 2 = 6. Backward scales the stored gradient by grad_output, read 2 write 2 = 4. It
    # saves only that bf16 gradient: peak 2.
    "fused": CrossEntropyKernel(6.0, 4.0, 2.0, 2, 1),
}


# --- fp8 recipes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fp8Recipe:
    """The quantisation kernels of one fp8 recipe, per element of a GEMM operand cast to fp8.

    Source for all of them: Transformer Engine's documentation, "Using FP8 with Transformer
    Engine" (recipes ``DelayedScaling``, ``Float8CurrentScaling``, ``Float8BlockScaling``,
    ``MXFP8BlockScaling``) and its cast kernels (``transformer_engine/common/cast``,
    ``transpose/cast_transpose*``).
    """

    amax_bytes: float  # a separate read pass for the tensor's amax before it is cast (0: none)
    read_bytes: float  # the quantise kernel(s) read the bf16 tensor
    write_bytes: float  # and writes the fp8 tensor, its transposed (columnwise) copy and scales
    # the norm before a GEMM can write that GEMM's fp8 operand itself (TE LayerNormLinear /
    # LayerNormMLP with the recipe): the scale must be known before the norm runs
    norm_fusable: bool
    # per-tensor scale from this step's amax: a sequence-sharded tensor's amax is all-reduced over TP
    amax_all_reduce: bool
    # of ``write_bytes``, the transposed fp8 copy that only a GPU whose fp8 GEMMs take TN operands
    # needs (Hopper, Ada: cuBLASLt's fp8 GEMMs are TN-only, so the weight-gradient and data-gradient
    # GEMMs read a transposed fp8 copy). A per-tensor scale is the same for both layouts, so on a
    # GPU whose fp8 GEMMs take any layout (``GPU.fp8_any_layout``: Blackwell) Transformer Engine
    # quantises rowwise only and the GEMM reads that copy transposed (TE's
    # ``is_non_tn_fp8_gemm_supported``, compute capability 10.x); a block-scaled recipe's scales run
    # along one axis, so its columnwise copy is a separate quantisation everywhere (0 here).
    transpose_bytes: float = 0.0
    # the tensor-core precision the recipe's GEMMs run at (``GPU.peak_tflops`` key): fp8, or fp4
    # for NVFP4
    gemm_precision: str = "fp8"
    # the in-situ factor (``hardware.in_situ``) of the recipe's GEMMs, whose operands carry per-block
    # scale factors the main loop loads beside them (MXFP8, NVFP4); None: the per-tensor rate
    gemm_in_situ: str | None = None
    # bytes per element of the quantised copy of a GEMM input a layer keeps for its weight-gradient
    # GEMM (the columnwise copy with its scales), where the stack keeps that copy instead of the bf16
    # input (``software.fp8_saves_quantized``)
    saved_bytes: float = 1.0
    # a weight held quantised only (``software.fp8_param_gather``), bytes per parameter: its
    # rowwise copy for the forward GEMM and its columnwise (transposed) copy for the data gradient;
    # a per-tensor weight's transposed copy is what a TN-only GPU (Hopper) caches, counted on every
    # GPU (the memory model does not see which: an upper bound on Blackwell by 1 byte)
    weight_bytes: float = 2.0
    # and what the ZeRO / FSDP parameter all-gather moves per parameter: the rowwise copy
    param_gather_bytes: float = 1.0

    @property
    def operand_bytes(self) -> float:
        """HBM bytes per element of one quantised GEMM operand as the GEMM reads it, scales
        included: the quantised copy's (``saved_bytes``: 1 per-tensor, 1 + 4/128 blockwise,
        1 + 1/32 MXFP8, 1/2 + 1/16 NVFP4)."""
        return self.saved_bytes

    @property
    def cast_bytes(self) -> float:
        """HBM bytes per element of the quantise kernel (without the amax pass)."""
        return self.read_bytes + self.write_bytes


FP8_RECIPES: dict[str, Fp8Recipe] = {
    # DelayedScaling: the scale comes from an amax history, and the fused cast-transpose kernel
    # records this tensor's amax as it casts: read bf16 2, write fp8 1 + transposed fp8 1 = 4.
    "delayed": Fp8Recipe(0.0, 2.0, 2.0, True, False, transpose_bytes=1.0),
    # Float8CurrentScaling: the tensor's own amax sets its scale, so it is known only after a
    # full read (2), then the cast-transpose (4): 6. With sequence parallelism each rank holds
    # a shard of the tensor and the amax is all-reduced over the TP group before the cast (TE
    # Linear's current-scaling quantizers set with_amax_reduction for the SP-sharded input of a
    # column-parallel and the output gradient of a row-parallel layer).
    "current": Fp8Recipe(2.0, 2.0, 2.0, False, True, transpose_bytes=1.0),
    # Float8BlockScaling (Hopper; DeepSeek-V3's recipe): 1x128 activation / 128x128 weight blocks,
    # each with an fp32 scale; one kernel quantises rowwise and columnwise: read 2, write 1 + 1
    # plus a 4-byte scale per 128 elements for each copy (4/128 x 2).
    "blockwise": Fp8Recipe(0.0, 2.0, 2.0 + 2 * 4 / 128, True, False, saved_bytes=1 + 4 / 128,
                           weight_bytes=2 * (1 + 4 / 128 ** 2), param_gather_bytes=1 + 4 / 128 ** 2),
    # MXFP8BlockScaling (Blackwell): 32-element blocks with 1-byte E8M0 scales, rowwise and
    # columnwise: read 2, write 1 + 1 plus 1/32 x 2.
    # Its parameters are all-gathered in bf16 through the gradient buffer and quantised after
    # (NeMo's and Megatron-Bridge's MXFP8 recipes: reuse_grad_buf_for_mxfp8_param_ag).
    "mxfp8": Fp8Recipe(0.0, 2.0, 2.0 + 2 * 1 / 32, True, False, gemm_in_situ="mxfp8_gemm_in_situ",
                       saved_bytes=1 + 1 / 32, weight_bytes=2 * (1 + 1 / 32), param_gather_bytes=2.0),
    # NVFP4BlockScaling (Blackwell; NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv
    # 2509.25149, Sec. 4; Transformer Engine 2.9's recipe and ``NVFP4Quantizer::quantize_impl``,
    # transformer_engine/pytorch/csrc/quantizer.cpp): E2M1 values (half a byte) in 16-element
    # blocks, each with an E4M3 scale (1 byte), under a per-tensor fp32 scale from the tensor's
    # amax. fprop, dgrad and wgrad all run on the fp4 tensor cores. An input or output gradient is
    # cast by three kernels: ``nvte_hadamard_transform_amax`` (read 2: the amax of the tensor and of
    # its 16-point random-Hadamard-transformed transpose), the rowwise quantise (read 2, write
    # 1/2 + 1/16) and the RHT-cast fusion for the columnwise copy the wgrad GEMM reads (read 2,
    # write 1/2 + 1/16); gradients are stochastically rounded (arithmetic, no bytes). The amaxes
    # of a sequence-sharded tensor are all-reduced over TP (``with_amax_reduction``), and no norm
    # writes the operand (TE's norm+quantise under RHT is UNFUSED: the norm runs in bf16 first).
    # Weights take 16x16 2D blocks and are cast once per step (not charged, as for every recipe).
    "nvfp4": Fp8Recipe(2.0, 4.0, 2 * (0.5 + 1 / 16), False, True, gemm_precision="fp4",
                       gemm_in_situ="nvfp4_gemm_in_situ", saved_bytes=0.5 + 1 / 16,
                       weight_bytes=2 * (0.5 + 1 / 256), param_gather_bytes=0.5 + 1 / 256),
}


MXFP8_FAMILIES = ("blackwell", "blackwell-ultra")  # GPU families with block-scaled (MX) tensor cores


def fp8_recipe_unsupported(recipe: str, gpu: GPU) -> str | None:
    """Why ``gpu`` cannot run the fp8 ``recipe`` (a one-line reason), or None when it can.

    NVFP4 (TE's ``NVFP4BlockScaling``) runs its GEMMs on fp4 tensor cores (a GPU whose
    ``GPU.peak_tflops`` lists ``fp4``: the Blackwell parts); MXFP8 needs Blackwell's block-scaled
    tensor cores (TE docs: MXFP8 is supported on Blackwell and later; TE's ``check_mxfp8_support`` asks for
    compute capability 10.0), here a GPU whose catalog family is ``blackwell`` or
    ``blackwell-ultra``. The GPU's fp8 tensor cores themselves are checked with
    ``job.precision``.
    """
    from teton.hardware.efficiency import family_of

    blackwell = family_of(gpu) in MXFP8_FAMILIES
    if recipe == "nvfp4" and "fp4" not in gpu.peak_tflops:
        usable = "delayed, current, blockwise or mxfp8" if blackwell else "delayed, current or blockwise"
        return f"needs fp4 tensor cores, which {gpu.name} does not list; use {usable}"
    if recipe == "mxfp8" and not blackwell:
        return f"MXFP8 block scaling needs Blackwell tensor cores ({gpu.name} is not); use delayed, current or blockwise"
    return None


# --- CPU activation offload ----------------------------------------------------------------------------
def host_copy_bytes_s(host: Host) -> float:
    """Rate of one GPU's copies to or from host memory while every GPU of the host copies: its
    x16 PCIe link (``hardware.hosts``) at the pinned-memory cudaMemcpy efficiency
    (``hardware.storage.PCIE_D2H_EFFICIENCY``, nvbandwidth's device-to-host figure; host-to-device
    taken to be the same: ASSUMPTION, PCIe is symmetric), shared by the GPUs behind one switch."""
    return d2h_bytes_s_per_gpu(host)
