"""The software stack a job runs on: framework, version, and the choices in it that change time.

Two jobs with the same layout on the same GPUs differ by tens of percent between stacks: one
fuses its norms into the GEMMs' fp8 casts and hides its TP collectives under the GEMMs, another
runs PyTorch's ops one by one. A spec names its stack in the top-level ``software:`` section: a
preset (``teton presets``), or a mapping with ``base: <preset>`` and overrides. Two kinds of field:

* **job defaults**: framework choices the job section already has (elementwise fusion, attention
  kernel, TP overlap, CP exchange, pipeline p2p, gradient accumulation, DP overlap). The stack
  sets their defaults; a field the job gives wins (:meth:`SoftwareSpec.job_defaults`).
* **mechanisms** the job section does not have: the cross-entropy kernel, norm + fp8-cast fusion,
  the fp8 recipe and which GEMMs / attention it covers, CUDA graphs, CPU activation offload and
  the dtype gradients are reduced in. ``teton.workload`` and ``teton.engine`` read them from
  ``job.software``.

The stack's ``name`` also keys the in-situ parameters (``teton.hardware.in_situ``): a stack
``teton fit`` saw in training uses its own values, any other (``unknown``, a custom name) the
across-stack prior, with a wider band.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from teton.spec.fields import MAX_LAYERS, Section

FP8_RECIPES = ("delayed", "current", "blockwise", "mxfp8", "nvfp4")


class SoftwareSpec(Section):
    """A training software stack (``software:``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # the stack's name: a preset's, or your own; it keys the fitted in-situ values (unknown: the prior)
    name: str = "unknown"
    framework: str = "unknown"  # e.g. nemo, megatron-bridge, megatron-lm, megatron-deepspeed, pytorch
    version: str = ""
    # --- job defaults (a job field of the same meaning wins) ------------------------------------
    # elementwise kernels fused (Megatron / TE / torch.compile) or run op by op (reference PyTorch)
    elementwise: Literal["fused", "eager"] = "fused"
    # attention kernel: unfused (s x s scores in HBM, Megatron 2021-22), FlashAttention-2, -3, or
    # cuDNN's fused attention (TE's FusedAttention; job.attention_kernel cudnn: priced at
    # FlashAttention-3's figures on Hopper, FlashAttention-2's elsewhere, times the fitted
    # cudnn_attention_in_situ)
    attention: Literal["unfused", "fa2", "fa3", "cudnn"] = "fa2"
    tp_comm_overlap: Literal["none", "bwd", "full"] = "none"  # job.tp_overlap
    cp_comm: Literal["all_gather", "ring", "a2a", "a2a+p2p"] = "all_gather"  # job.cp_algo
    pp_p2p: Literal["async", "blocking"] = "async"  # job.pp_p2p
    pp_scatter_gather: bool = False  # job.pp_scatter_gather
    grad_accum_fusion: bool = True  # job.grad_accum_fusion
    overlap_dp_comm: bool = True  # job.overlap_dp_comm
    overlap_param_gather: bool = True  # job.overlap_param_gather
    # dtype gradients are accumulated and reduced over DP in (job.grad_accum_dtype): Megatron-Core's
    # DDP keeps main_grad in fp32 only with grad_reduce_in_fp32
    grad_accum_dtype: Literal["fp32", "bf16"] = "fp32"
    grad_bucket_params: float | None = Field(
        default=None, ge=1e5, le=1e13,
        description="parameters per DP gradient bucket, each a collective of its own; default: the framework's "
                    "(Megatron max(40M, 1M x DP), PyTorch DDP 25 MiB, DeepSpeed 5e8; teton.engine.scale)")
    # --- mechanisms -----------------------------------------------------------------------------
    # cross-entropy over the vocab-parallel logits: eager (logits.float() + F.cross_entropy),
    # vocab_parallel (Megatron's in-place fp32 passes), fused (one kernel, gradient in the forward)
    cross_entropy: Literal["eager", "vocab_parallel", "fused"] = "vocab_parallel"
    # the norm before QKV and MLP-up writes the GEMM's fp8 operand itself (TE LayerNormLinear /
    # LayerNormMLP): no separate cast kernel for those two GEMMs' inputs
    fused_norm_linear: bool = False
    # fp8 scaling recipe (job.precision fp8): delayed (amax history), current (per-tensor, this
    # step's amax), blockwise (1x128 / 128x128 blocks), mxfp8 (32-element blocks, Blackwell),
    # nvfp4 (fp4 with 16-element blocks, Blackwell)
    fp8_recipe: Literal["delayed", "current", "blockwise", "mxfp8", "nvfp4"] = "delayed"
    fp8_attention: bool = False  # dot-product attention in fp8 too (cuDNN fp8 attention)
    # MoE token dispatch (and the combine's gradient, towards the experts) all-to-all in fp8 with
    # 1x128 scales, the combine in bf16 (DeepSeek-V3 Sec. 3.3.2, DeepEP); needs job.precision fp8
    moe_fp8_dispatch: bool = False
    # NCCL's PAT (Parallel Aggregated Trees, NCCL 2.23, September 2024) for all-gather and
    # reduce-scatter over groups of one GPU per host: ceil(log2 n) latency steps instead of the
    # ring's n - 1 (teton.collectives.algorithms.auto_steps); off for stacks of older NCCL
    nccl_pat: bool = True
    # activations a Linear keeps for its backward cached in fp8 with 1x128 scales (DeepSeek-V3 Sec.
    # 3.3.2, "Low-Precision Storage": the GEMM inputs, and the MoE SwiGLU's inputs, its output
    # recomputed; the output projection's input, kept in E5M6, stays at two bytes here); needs
    # job.precision fp8 (teton.workload.activations)
    fp8_activation_cache: bool = False
    # a Linear under an fp8 recipe keeps the quantised (columnwise) copy of its input for the
    # weight-gradient GEMM, not the bf16 input: Transformer Engine's modules do ("Cache state for
    # backward pass" in TE 2.9 pytorch/module/linear.py, grouped_linear.py: the quantised input's
    # rowwise data discarded, its columnwise copy saved); torchao's float8 linear keeps the bf16
    # input and re-casts it in backward (teton.workload.fp8.saved_input_bytes)
    fp8_saves_quantized: bool = False
    # the sequence-parallel all-gather of an fp8 GEMM's input (and of a row-parallel GEMM's output
    # gradient) carries the quantised shard, cast on this rank before the gather (TE 2.9
    # pytorch/module/linear.py, "Cast local input tensor if needed" ahead of the NCCL or userbuffers
    # all-gather); off: gathered in bf16 and cast whole (teton.workload.fp8.gather_bytes)
    fp8_gather_quantized: bool = False
    # a gated MLP's product (the SwiGLU output, the down projection's input) is kept for the down
    # projection's weight gradient: Megatron-Core's fused bias-SwiGLU returns it and Transformer
    # Engine's row-parallel Linear saves its input (TE 2.9 pytorch/module/linear.py, "Cache state
    # for backward pass"); recompute_modules moe_act (the experts) or mlp drop it. Off: the MLP is
    # compiled and recomputes the product from gate and up in backward (torch.compile's min-cut
    # partitioner rematerialises pointwise ops) (teton.workload.activations)
    glu_product_saved: bool = False
    # an fp8 job keeps its transformer layers' weights only in the recipe's quantised form, the
    # fp32 master copy in the optimizer (Megatron's --fp8-param-gather; NeMo 2.0's and
    # Megatron-Bridge's fp8_param_gather, fp4_param_gather under NVFP4): no bf16 weights, and the
    # ZeRO / FSDP parameter all-gather moves the quantised bytes (teton.workload.fp8.weight_bytes)
    fp8_param_gather: bool = False
    # the MoE all-to-all overlapped with compute by the schedule (Megatron-Core's
    # --overlap-moe-expert-parallel-comm): each steady-state forward runs together with an earlier
    # micro-batch's backward, one's dispatch and combine under the other's compute (with ep > 1)
    ep_comm_overlap: bool = False
    # the routed experts weight each token copy by its routing probability inside their activation
    # (Megatron-Core 0.13 on: TEGroupedMLP's activation_func_with_probs; the unpermute a plain sum,
    # keeping nothing); off: the combine's unpermute weights and sums the copies and keeps them for
    # the probabilities' gradient (Megatron-Core 0.10-0.12's MoEAlltoAllTokenDispatcher:
    # unpermute(..., probs=self.probs)) (teton.workload.moe.moe_saved_bytes)
    moe_probs_in_experts: bool = True
    # YaRN's rotary (model.position_embedding: yarn) in one fused kernel; off: Megatron-Core's eager
    # rotary, since Transformer Engine's fused RoPE takes no attention temperature (mscale) and
    # Megatron-Bridge turns apply_rope_fusion off for any position embedding but rope
    # (teton.workload.elementwise.rope_bytes)
    fused_yarn_rope: bool = True
    # transformer layers at each end of the model kept in bf16 under an fp8 recipe
    fp8_bf16_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    # CUDA graphs: none (every kernel launched by the CPU), layers (each layer's forward and
    # backward captured), full (the whole iteration)
    cuda_graphs: Literal["none", "layers", "full"] = "none"
    # transformer layers per pipeline chunk whose saved activations go to host memory in forward
    # and come back for backward (Megatron's cpu_offloading_num_layers)
    cpu_offload_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    description: str = ""

    def job_defaults(self, precision: str = "bf16") -> dict:
        """The job fields this stack sets the defaults of (``precision``: the job's): a cuDNN stack
        runs ``attention_kernel: cudnn`` (priced by ``engine.compute`` at the GPU's flash figures
        times the fitted ``cudnn_attention_in_situ``), a FlashAttention one its own. An NVFP4
        job runs the TP collectives without the userbuffers overlap: Transformer Engine 2.9's
        userbuffers take fp8 and MXFP8 quantisers only (``pytorch/module/base.py``,
        ``fill_userbuffers_buffer_for_all_gather``: "Unsupported quantizer for Userbuffers"), and
        every NVFP4 recipe of Megatron-Bridge 0.6 sets ``tp_comm_overlap = False``; what remains is
        TE's async backward gathers and scatters (``bwd``)."""
        kernel = {"fa3": "fa3", "cudnn": "cudnn"}.get(self.attention, "fa2")
        nvfp4 = precision == "fp8" and self.fp8_recipe == "nvfp4"
        tp_overlap = "bwd" if nvfp4 and self.tp_comm_overlap == "full" else self.tp_comm_overlap
        return {"kernel_fusion": self.elementwise, "flash_attention": self.attention != "unfused",
                "attention_kernel": kernel,  # an explicit fa3 on a GPU without it fails the job checks
                "tp_overlap": tp_overlap, "cp_algo": self.cp_comm, "pp_p2p": self.pp_p2p,
                "pp_scatter_gather": self.pp_scatter_gather, "grad_accum_fusion": self.grad_accum_fusion,
                "overlap_dp_comm": self.overlap_dp_comm, "overlap_param_gather": self.overlap_param_gather,
                "grad_accum_dtype": self.grad_accum_dtype}


# Job fields a stack sets the default of (their meaning is the stack field's; see job_defaults).
STACK_JOB_FIELDS = ("kernel_fusion", "flash_attention", "attention_kernel", "tp_overlap", "cp_algo", "pp_p2p",
                    "pp_scatter_gather", "grad_accum_fusion", "overlap_dp_comm", "overlap_param_gather", "grad_accum_dtype")


def _megatron_core(**fields) -> dict:
    """What Megatron-Core with Transformer Engine runs by default in NVIDIA's performance recipes
    (Megatron-LM ``--transformer-impl transformer_engine``; NeMo / Megatron-Bridge perf scripts):
    TE's LayerNormLinear / LayerNormMLP (norm fused with the fp8 cast), fused RoPE (not YaRN's:
    ``fused_yarn_rope`` off) and SwiGLU,
    cuDNN fused attention, TP communication overlap with userbuffers (``--tp-comm-overlap``), TE's
    p2p (ring) context parallelism (``cp_comm_type: p2p``), the weight-gradient GEMMs accumulating
    into fp32 ``main_grad`` (``gradient_accumulation_fusion``), overlapped p2p, and the distributed
    optimizer with bucketed, overlapped gradient reduce-scatter and parameter all-gather
    (``--overlap-grad-reduce --overlap-param-gather``); TE's Linear modules keep the quantised copy of
    an fp8 GEMM's input for its backward and all-gather a sequence-parallel operand quantised, and
    the down projection keeps the SwiGLU product it takes."""
    return {**dict(elementwise="fused", attention="cudnn", tp_comm_overlap="full", cp_comm="ring", pp_p2p="async",
                   fused_yarn_rope=False,
                   grad_accum_fusion=True, overlap_dp_comm=True, overlap_param_gather=True, fused_norm_linear=True,
                   fp8_saves_quantized=True, fp8_gather_quantized=True, glu_product_saved=True),
            **fields}


# Stacks of 2021 to mid-2024 ran NCCL before 2.23 (PAT's release, September 2024): nccl_pat False.
SOFTWARE_PRESETS: dict[str, dict] = {
    "unknown": dict(description="a stack teton has no runs of: the job section's defaults and the across-stack "
                                "prior of the in-situ values"),
    # Llama 3 herd paper (arXiv 2407.21783, Sec. 3.3.2-3.3.4): Meta's PyTorch stack of 2024 on H100,
    # FSDP with gradients accumulated and reduce-scattered in fp32 by separate kernels (autograd's bf16
    # weight gradient added into the fp32 buffer: grad_accum_fusion off), all-gather context
    # parallelism, TP without communication overlap. Cross-entropy: ASSUMPTION, PyTorch's on fp32
    # logits (as torchtitan, Meta's open training stack, computes it).
    "meta-llama3-2024": dict(framework="pytorch", version="Llama 3 (2024)", grad_accum_fusion=False, nccl_pat=False,
                             cross_entropy="eager",
                             description="Meta's Llama 3 training stack (PyTorch FSDP + TP/CP/PP), H100"),
    # Korthikanti et al. 2022 (arXiv 2205.05198) on Megatron-LM of 2022: Megatron's fused softmax
    # keeps the s x s scores (no flash attention); LinearWithGradAccumulationAndAsyncCommunication
    # overlaps the backward TP collectives (tp_overlap bwd); scatter_gather_tensors_in_pipeline;
    # p2p_communication waits for every exchange and synchronises (blocking); fused wgrad
    # accumulation into fp32 main_grad.
    "megatron-lm-2022": dict(framework="megatron-lm", version="2022 (v3.0)", attention="unfused", tp_comm_overlap="bwd",
                             nccl_pat=False,
                             pp_p2p="blocking", pp_scatter_gather=True, grad_accum_fusion=True,
                             description="Megatron-LM of 2022 (Korthikanti et al.), A100"),
    # Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed; bigscience's fork for BLOOM, PyTorch 1.11):
    # Megatron-LM of 2021 under DeepSpeed's pipeline engine: fused softmax without flash attention,
    # blocking p2p, scatter-gather p2p, no async TP; DeepSpeed's bf16 optimizer / fp16 loss scaler
    # accumulates fp32 gradients with separate kernels (grad_accum_fusion off). The engine's
    # TrainSchedule reduces the gradients (ReduceTiedGrads, ReduceGrads) as instructions after the
    # last backward of the step, before OptimizerStep (deepspeed/runtime/pipe/schedule.py): no DP
    # overlap.
    "megatron-deepspeed": dict(framework="megatron-deepspeed", version="2021-22", attention="unfused", nccl_pat=False,
                               pp_p2p="blocking", pp_scatter_gather=True, grad_accum_fusion=False,
                               overlap_dp_comm=False, overlap_param_gather=False,
                               description="Megatron-DeepSpeed (MT-NLG 2021, BLOOM 2022), A100"),
    # Megatron-LM README @ f2e5db40 (core_r0.8.0): "--overlap-grad-reduce --overlap-param-gather,
    # --tp-comm-overlap"; bf16 gradients accumulated and reduced in fp32 (Megatron's default for
    # bf16, accumulate_allreduce_grads_in_fp32); vocab-parallel cross-entropy (no loss fusion in 0.8).
    "megatron-core-0.8": _megatron_core(framework="megatron-lm", version="core_r0.8.0", nccl_pat=False,
                                        description="Megatron-LM / Megatron-Core r0.8.0 with TE (mid 2024), H100"),
    # NeMo 24.03 / 24.07 (NeMo 1.x on Megatron-Core 0.6 / 0.8, TE): the perf configs' Apex
    # distributed Adam (overlap_grad_sync, overlap_param_sync, grad_sync_dtype: bf16, gradients in
    # the parameters' dtype); fp8 recipe:
    # TE's delayed scaling (DelayedScaling, NeMo's fp8_amax_history_len 1024), the default then.
    "nemo-24.03": _megatron_core(framework="nemo", version="24.03.01", grad_accum_dtype="bf16", nccl_pat=False,
                                 description="NeMo 24.03 (Megatron-Core 0.6, TE), H100"),
    "nemo-24.07": _megatron_core(framework="nemo", version="24.07", grad_accum_dtype="bf16", nccl_pat=False,
                                 description="NeMo 24.07 (Megatron-Core 0.8, TE), H100"),
    # NeMo 2.0 (25.02-25.07, Megatron-Core 0.11-0.13; the MoE unpermute weights the expert outputs
    # up to 0.12, moe_probs_in_experts off): perf scripts keep and reduce gradients in
    # bf16 (grad_reduce_in_fp32 False: Megatron-Core's DDP main_grad in bf16) and GPTConfig fuses the cross-entropy (cross_entropy_loss_fusion);
    # 25.02 scales fp8 with delayed scaling, 25.04 and 25.07 with per-tensor current scaling (the
    # performance summary pages say so); fp8 weights only (NeMo 2.4's recipes/precision/mixed_precision.py:
    # fp8_param_gather True in every fp8 recipe).
    "nemo-25.02": _megatron_core(framework="nemo", version="25.02", grad_accum_dtype="bf16", cross_entropy="fused",
                                 fp8_param_gather=True, moe_probs_in_experts=False,
                                 description="NeMo 25.02 (NeMo 2.0, Megatron-Core 0.11, TE)"),
    "nemo-25.04": _megatron_core(framework="nemo", version="25.04", grad_accum_dtype="bf16", cross_entropy="fused",
                                 fp8_param_gather=True, moe_probs_in_experts=False,
                                 fp8_recipe="current", description="NeMo 25.04 (NeMo 2.0, Megatron-Core 0.12, TE)"),
    "nemo-25.07": _megatron_core(framework="nemo", version="25.07", grad_accum_dtype="bf16", cross_entropy="fused",
                                 fp8_param_gather=True,
                                 fp8_recipe="current", description="NeMo 25.07 (NeMo 2.0, Megatron-Core 0.13, TE)"),
    # Megatron-LM examples/llama (README @ bd32927e, mid 2025): "follows NeMo Framework's performance
    # scripts" (fp8 hybrid; delayed scaling: the README names no recipe, and delayed is
    # Megatron-Core's TransformerConfig.fp8_recipe default, 0.16 sdist).
    "megatron-lm-2025": _megatron_core(framework="megatron-lm", version="examples/llama (2025)",
                                       grad_accum_dtype="bf16", cross_entropy="fused",
                                       description="Megatron-LM's Llama example of 2025 (Megatron-Core + TE), H100"),
}
# Megatron-Bridge (NeMo containers 25.09 -> 26.08): recipes in scripts/performance: gradients in
# bf16 (grad_reduce_in_fp32 False), TE's fused cross-entropy (cross_entropy_fusion_impl "te"); fp8 "FP8" = per-tensor current
# scaling (Megatron-Bridge performance summary nomenclature); fp8 weights only (training/mixed_precision.py:
# every fp8 recipe sets fp8_param_gather, bf16_with_nvfp4_mixed fp4_param_gather).
for _release in ("25.09", "25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06", "26.06.01", "26.08"):
    SOFTWARE_PRESETS[f"megatron-bridge-{_release}"] = _megatron_core(
        framework="megatron-bridge", version=_release, grad_accum_dtype="bf16", cross_entropy="fused",
        fp8_recipe="current", fp8_param_gather=True, description=f"Megatron-Bridge in the NeMo {_release} container")
for _name, _fields in SOFTWARE_PRESETS.items():
    _fields.setdefault("name", _name)
