"""The job part of a spec: parallel layout, batch, precision, memory-saving and overlap choices,
and the cross-field rules it must satisfy against its model and cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from teton.errors import SpecError
from teton.hardware import GPUS
from teton.hardware.efficiency import cluster_efficiency
from teton.memo import IdentityMemo
from teton.spec.cluster import ClusterSpec
from teton.spec.fields import MAX_GPUS, MAX_SEQ_LEN, Section
from teton.spec.headroom import HeadroomSpec
from teton.spec.job_rules import (
    check_cp_kernel,
    check_cp_levels,
    check_head_split,
    check_offload,
    check_recompute,
    check_seq_len,
)
from teton.spec.layout import BASE_AXES, Layout, data_parallel_degree, default_order
from teton.spec.model import ModelSpec
from teton.spec.pipeline_layout import parse as parse_pp_layout
from teton.spec.software import SoftwareSpec

# Megatron-Core 0.16's TransformerConfig.recompute_modules choices
RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe", "shared_experts"]
RECOMPUTE_INTERVAL_DEFAULT = 2  # job.recompute_interval (torchtitan's selective_ac_option default "2")

_LAYOUTS = IdentityMemo(4096)  # JobSpec -> its Layout (JobSpec.layout)


class JobSpec(Section):
    """A training job: parallel layout, batch, precision, memory-saving and overlap choices."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: int = Field(gt=0, le=MAX_GPUS)
    tp: int = Field(default=1, gt=0, le=MAX_GPUS)
    cp: int = Field(default=1, gt=0, le=MAX_GPUS)
    pp: int = Field(default=1, gt=0, le=MAX_GPUS)
    dp: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    ep: int = Field(default=1, gt=0, le=MAX_GPUS)
    # expert tensor parallelism: the TP degree of the routed experts' GEMMs (Megatron-Core's
    # expert_tensor_parallel_size); default tp
    etp: int | None = Field(default=None, gt=0, le=MAX_GPUS)
    # how evenly an MoE router spreads tokens over the experts: aux_loss (a load-balancing loss, even
    # in expectation: the most loaded EP rank sets the pace, teton.workload.moe.router_imbalance) or
    # forced (every expert its equal share: Megatron-Core's moe_router_force_load_balancing, what
    # NVIDIA's MoE benchmark tables run: "we force-balance the token distribution among experts")
    moe_router_balance: Literal["aux_loss", "forced"] = "aux_loss"
    seq_len: int = Field(default=8192, gt=0, le=MAX_SEQ_LEN)
    micro_batch: int = Field(default=1, gt=0)
    global_batch: int | None = Field(default=None, gt=0)  # sequences per step
    global_batch_tokens: int | None = Field(default=None, gt=0)
    precision: Literal["bf16", "fp8"] = "bf16"
    # Activation recomputation (docs/recompute.md). none: every layer keeps what its backward
    # needs. selective: Megatron-LM's (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 5): the
    # attention core (s x s scores, softmax, dropout, P V) is recomputed; with flash attention
    # there are no scores to drop and nothing is recomputed. full: every layer keeps only its
    # input and replays its forward in backward. The two torchtitan modes (activation_checkpoint
    # .mode = "selective"; torchtitan/distributed/activation_checkpoint.py,
    # _apply_ac_to_transformer_block, v0.2): selective_op (selective_ac_option = "op",
    # _apply_op_sac / _custom_policy with the model's _save_list): every block is checkpointed
    # and saves the outputs of aten.mm, the SDPA kernel and reduce-scatters, except every second
    # mm of the block (Llama: wk, wo, w3 recomputed; wq, wv, w1, w2 saved); everything else is
    # recomputed. selective_layer (selective_ac_option = N, _apply_layer_sac): every N-th block
    # is fully checkpointed (as full), the others keep everything (as none).
    recompute: Literal["none", "selective", "full", "selective_op", "selective_layer"] = "none"
    # Megatron-Core's recompute_modules under selective (TransformerConfig.recompute_modules;
    # teton.workload.activations): core_attn (the default: the attention core, as selective
    # above), layernorm (the pre-attention and pre-MLP norms' outputs are not kept and the norms run
    # again in backward), mla_up_proj (MLA's latent norms, up-projections and rotary: Q, K, V and the
    # normed latents are not kept), moe_act (the routed experts' activation: teton's fused SwiGLU
    # already keeps only gate and up); and, checkpointed whole (their input kept, their forward
    # replayed in backward: Megatron-Core 0.16's TransformerLayer / MoELayer / SharedExpertMLP), mlp
    # (a dense layer's MLP), moe (an MoE layer's router, dispatch, experts, combine and shared
    # experts) and shared_experts. DeepSeek-V3 (arXiv 2412.19437, Sec. 3.2.3) recomputes its
    # RMSNorms and MLA up-projections: [layernorm, mla_up_proj].
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    # Adam's first and second moments in fp32 (12 bytes of optimizer state per parameter with the
    # fp32 master weights) or bf16 (8 bytes; DeepSeek-V3 Sec. 3.3.2, "Low-Precision Optimizer
    # States"; Megatron-Core's --exp-avg-dtype / --exp-avg-sq-dtype bf16)
    adam_moments: Literal["fp32", "bf16"] = "fp32"
    # N of selective_layer. torchtitan counts the blocks each process wraps, 1, 2, ..., over its
    # pipeline stages in order, and checkpoints those whose count is a multiple of N
    recompute_interval: int = Field(default=RECOMPUTE_INTERVAL_DEFAULT, ge=1)
    sequence_parallel: bool = True
    flash_attention: bool = True
    # FlashAttention-2, -3 (Hopper only), or cuDNN's fused attention (Transformer Engine's
    # FusedAttention: priced at FA3's figures where the GPU has them, else FA2's, times the fitted
    # cudnn_attention_in_situ; teton.engine.compute)
    attention_kernel: Literal["fa2", "fa3", "cudnn"] = "fa2"
    # elementwise kernels: fused (Megatron/TE/torch.compile) or eager PyTorch (HF reference code)
    kernel_fusion: Literal["fused", "eager"] = "fused"
    # DualPipe (DeepSeek-V3): bidirectional, two mirrored stages per rank (teton.workload.dualpipe)
    pp_schedule: Literal["1f1b", "interleaved", "dualpipe"] = "1f1b"
    virtual_stages: int = Field(default=1, gt=0)
    # Interleaved schedule: micro-batches a rank runs through one chunk before the next (Llama 3's
    # N, Sec. 3.3.2); default pp (Megatron-LM, which needs micro-batches divisible by pp). Any
    # N >= pp that divides the micro-batches per DP rank works (N = m runs any m >= pp); the
    # bubble stays (p-1)/(v*m), and larger N holds more micro-batches in flight.
    pp_round: int | None = Field(default=None, gt=0)
    # Embedding and output head each take one layer's slot in the pipeline split (Llama 3:
    # "one transformer layer removed from the first and the last stages").
    pp_embedding_slots: bool = False
    # An uneven pipeline split (Megatron-Core's --decoder-first-pipeline-num-layers /
    # --decoder-last-pipeline-num-layers, TransformerConfig.num_layers_in_first_pipeline_stage /
    # _last_): the first / last stage holds this many layers, the middle stages the rest evenly
    # (it must divide, as in Megatron-Core); one chunk per rank (1f1b or dualpipe)
    pp_first_stage_layers: int | None = Field(default=None, ge=0)
    # the last stage's layers (Megatron-Core's --decoder-last-pipeline-num-layers), as above
    pp_last_stage_layers: int | None = Field(default=None, ge=0)
    # even: the layers split evenly (or as the two fields above say); balanced: teton picks the end
    # stages' layers that even out the ranks' training FLOPs (the first dense layers of an MoE model,
    # the output head and multi-token prediction on the last stage, DualPipe's mirrored pairs), the
    # middle stages even (teton.workload.pipeline.balanced_ends); pipelines of one chunk per rank
    pp_split: Literal["even", "balanced"] = "even"
    # The layers of every virtual stage, in Megatron-Core's --pipeline-model-parallel-layout
    # syntax (e.g. DeepSeek-V3's "Et*4|(t*4|)*14tmL": E embedding, t layer, m multi-token
    # prediction, L loss; teton.spec.pipeline_layout); the embedding opens the first stage, the
    # loss closes the last
    pp_layout: str | None = Field(default=None, min_length=1, max_length=4096)
    # Without sequence parallelism, each TP rank sends only its 1/tp slice of the (replicated)
    # hidden state to the next stage, which all-gathers it over NVLink (Megatron-LM's
    # scatter_gather_tensors_in_pipeline; Narayanan et al. 2021, Sec. 4.1). Off: every TP rank
    # sends the whole tensor (PyTorch pipelining).
    pp_scatter_gather: bool = False
    # Point-to-point transfers between stages: asynchronous (the rank computes while its output
    # travels: PyTorch pipelining, Megatron-Core's overlapped p2p) or blocking (Megatron-LM of
    # 2021-22 waits for each exchange and synchronises the device before the next op).
    pp_p2p: Literal["async", "blocking"] = "async"
    zero: Literal[0, 1, 2, 3] = 1
    overlap_dp_comm: bool = True  # gradient reduce-scatter overlapped with backward
    overlap_param_gather: bool = True  # parameter all-gather prefetched under forward compute
    grad_accum_dtype: Literal["fp32", "bf16"] = "fp32"
    # Weight-gradient GEMMs accumulate into the gradient buffer in their epilogue (Megatron's
    # gradient_accumulation_fusion), or write a bf16 gradient that a separate elementwise kernel
    # adds into the buffer every micro-batch (PyTorch autograd / FSDP2 with an fp32 reduce_dtype).
    grad_accum_fusion: bool = True
    # TP collectives under sequence parallelism: all exposed (none); the backward re-gather and
    # gradient reduce-scatter under the independent GEMMs (bwd: Megatron's async TP); or also the
    # forward gathers / scatters decomposed with their GEMMs (full: TransformerEngine userbuffers,
    # PyTorch async-TP).
    tp_overlap: Literal["none", "bwd", "full"] = "none"
    # Context parallelism: all-gather K/V then attend (Llama 3), pass K/V blocks round a ring
    # under the attention blocks (ring attention; TransformerEngine's p2p context parallelism), or
    # all-to-all Q, K, V from sequence- to head-sharded and the output back (a2a: DeepSpeed-Ulysses,
    # TransformerEngine's a2a; the heads of a TP rank must divide by cp), or both, hierarchically
    # (a2a+p2p: all-to-all inside groups of cp_a2a consecutive CP ranks, a ring across them).
    cp_algo: Literal["all_gather", "ring", "a2a", "a2a+p2p"] = "all_gather"
    # a2a+p2p: the CP ranks of one all-to-all group (Megatron's --hierarchical-context-parallel-sizes
    # a b: a), a divisor of cp between 2 and cp / 2; the ring runs over cp / cp_a2a of them
    cp_a2a: int | None = Field(default=None, ge=2, le=MAX_GPUS)
    # all_gather CP: keep the gathered K/V for backward (what autograd does), or keep only this
    # rank's chunk and all-gather K/V again in backward (as Megatron re-gathers SP inputs).
    cp_regather_kv: bool = False
    # When gradients are reduced over DP: once per step after accumulating all micro-batches
    # (Megatron distributed optimizer; PyTorch FSDP with gradient sync only on the last
    # micro-batch, as Llama 3 runs it), or after every micro-batch (DeepSpeed ZeRO-2/3). Default:
    # per_step for zero <= 2, per_microbatch for zero 3.
    grad_reduce: Literal["per_step", "per_microbatch"] | None = None
    placement: Literal["topology-aware", "linear", "random", "fragmented"] = "topology-aware"
    # innermost first; not given: Llama 3's (tp, cp, pp, dp), or Megatron-Core's (tp, cp, ep, dp, pp)
    # for a job on an MoE model (check_job, teton.spec.layout.default_order)
    parallel_order: tuple[str, ...] = BASE_AXES
    # HBM kept free on every GPU (CUDA context, NCCL buffers, fragmentation, a reserve): what
    # `fits` leaves (teton.spec.headroom)
    headroom: HeadroomSpec = HeadroomSpec()
    # the software stack (the spec's top-level software: section, put here by load_spec)
    software: SoftwareSpec = SoftwareSpec()

    @model_validator(mode="after")
    def _check(self) -> JobSpec:
        base = [a for a in self.parallel_order if a != "ep"]
        if sorted(base) != sorted(BASE_AXES) or len(self.parallel_order) - len(base) > 1:
            raise SpecError("job.parallel_order", list(self.parallel_order),
                            "must be an ordering of tp, cp, pp, dp, optionally with ep (innermost first)")
        if self.pp_schedule == "1f1b" and self.virtual_stages != 1:
            raise SpecError("job.virtual_stages", self.virtual_stages,
                            "needs job.pp_schedule = interleaved (1f1b has one stage per rank)")
        if self.pp_schedule == "dualpipe":
            self._check_dualpipe()
        if self.recompute_interval != RECOMPUTE_INTERVAL_DEFAULT and self.recompute != "selective_layer":
            raise SpecError("job.recompute_interval", self.recompute_interval,
                            f"only applies to job.recompute = selective_layer (is {self.recompute})")
        if self.pp_first_stage_layers is not None or self.pp_last_stage_layers is not None:
            self._check_stage_layers()
        if self.pp_split == "balanced":
            self._check_balanced()
        if self.pp_layout is not None:
            self._check_pp_layout()
        if self.recompute_modules is not None and self.recompute != "selective":
            raise SpecError("job.recompute_modules", list(self.recompute_modules),
                            f"only applies to job.recompute = selective (is {self.recompute})")
        if self.recompute_modules is not None and len(set(self.recompute_modules)) != len(self.recompute_modules):
            raise SpecError("job.recompute_modules", list(self.recompute_modules), "lists a module twice")
        if self.global_batch and self.global_batch_tokens:
            raise SpecError("job.global_batch_tokens", self.global_batch_tokens,
                            "give either job.global_batch (sequences) or job.global_batch_tokens, not both")
        return self

    def _check_stage_layers(self) -> None:
        field = "job.pp_first_stage_layers" if self.pp_first_stage_layers is not None else "job.pp_last_stage_layers"
        value = self.pp_first_stage_layers if self.pp_first_stage_layers is not None else self.pp_last_stage_layers
        if self.pp < 2:
            raise SpecError(field, value, f"needs a pipeline (job.pp >= 2, is {self.pp})")
        if self.virtual_stages != 1:
            raise SpecError(field, value, "an uneven first / last stage is modelled with one chunk per rank "
                            f"(job.virtual_stages = 1, is {self.virtual_stages})")
        if self.pp_embedding_slots:
            raise SpecError(field, value, "give either the stage sizes or job.pp_embedding_slots, not both")

    def _check_balanced(self) -> None:
        for field, value, bad in (("job.pp_first_stage_layers", self.pp_first_stage_layers, lambda v: v is not None),
                                  ("job.pp_last_stage_layers", self.pp_last_stage_layers, lambda v: v is not None),
                                  ("job.pp_embedding_slots", self.pp_embedding_slots, bool),
                                  ("job.virtual_stages", self.virtual_stages, lambda v: v != 1)):
            if bad(value):
                raise SpecError(field, value, "job.pp_split = balanced picks the end stages' layers itself, with one "
                                "chunk per rank: leave this out")

    def _check_pp_layout(self) -> None:
        parse_pp_layout(self.pp_layout)
        for field, value, bad in (("job.pp_first_stage_layers", self.pp_first_stage_layers, lambda v: v is not None),
                                  ("job.pp_last_stage_layers", self.pp_last_stage_layers, lambda v: v is not None),
                                  ("job.pp_embedding_slots", self.pp_embedding_slots, bool),
                                  ("job.pp_split", self.pp_split, lambda v: v != "even"),
                                  ("job.pp_schedule", self.pp_schedule, lambda v: v == "dualpipe")):
            if bad(value):
                raise SpecError(field, value, "job.pp_layout places every stage's layers itself: leave this out "
                                "(or the layout)")

    def _check_dualpipe(self) -> None:
        why = "with job.pp_schedule = dualpipe"
        if self.pp < 2 or self.pp % 2:
            raise SpecError("job.pp", self.pp, f"must be even and at least 2 {why} (rank r holds stage r and "
                            "its mirror p-1-r)")
        if self.virtual_stages != 1:
            raise SpecError("job.virtual_stages", self.virtual_stages, f"must be 1 {why}: each rank already "
                            "holds two mirrored stages")
        if self.zero == 3:
            raise SpecError("job.zero", 3, f"must be 0-2 {why} (DeepSeek-V3 ran it with ZeRO-1)")
        if self.pp_p2p == "blocking":
            raise SpecError("job.pp_p2p", "blocking", f"must be async {why}")

    @property
    def recomputed_modules(self) -> frozenset[str]:
        """The modules a selective job recomputes (``recompute_modules``, default the attention core);
        empty under any other recompute mode."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules or ("core_attn",))

    @property
    def layout(self) -> Layout:
        """The job's parallel layout (``teton.spec.layout``): degrees, axis order, per-rank shapes.
        Memoised by the job's identity (a frozen model: ``model_copy`` makes another object, with
        its own layout); the engine reads it a few dozen times a step, and building it is 5 us."""
        return _LAYOUTS.of(self, Layout.of)

    @property
    def pp_round_size(self) -> int:
        """N: consecutive micro-batches per chunk in the interleaved schedule (default pp)."""
        return self.layout.pp_round_size

    @property
    def grad_reduce_mode(self) -> str:
        return self.grad_reduce or ("per_microbatch" if self.zero == 3 else "per_step")

    @property
    def dp_degree(self) -> int:
        assert self.dp is not None
        return self.dp

    @property
    def sequences_per_step(self) -> int:
        return self.layout.sequences_per_step

    @property
    def micro_batches(self) -> int:
        """Micro-batches per DP rank per step (the gradient-accumulation count, m)."""
        return self.layout.micro_batches

    @property
    def tokens_per_step(self) -> int:
        return self.layout.tokens_per_step


BATCH_FIELDS = ("global_batch", "global_batch_tokens")  # two ways to give one batch


def job_defaults(job: JobSpec) -> tuple[str, ...]:
    """``job.<field>`` of every field not in ``job.model_fields_set`` (call it before
    :func:`check_job`, which fills ``dp`` in); the batch counts as given when either of
    ``global_batch`` / ``global_batch_tokens`` is."""
    given = set(job.model_fields_set)
    if given & set(BATCH_FIELDS):
        given |= set(BATCH_FIELDS)
    return tuple(f"job.{name}" for name in JobSpec.model_fields if name not in given and name != "software")


def check_job(job: JobSpec, model: ModelSpec, cluster: ClusterSpec) -> JobSpec:
    """Cross-field rules between job, model and cluster; returns the job with dp filled in, and the
    order an MoE model's job takes when its spec gives none (Megatron-Core's tp-cp-ep-dp-pp:
    ``teton.spec.layout.default_order``). The degrees' and the batch's rules are the Layout's
    (``Layout.check``)."""
    update = {} if job.dp is not None else {"dp": data_parallel_degree(job)}
    if "parallel_order" not in job.model_fields_set and job.parallel_order != default_order(model.experts):
        update["parallel_order"] = default_order(model.experts)
    if update:
        job = job.model_copy(update=update)
    if job.gpus > cluster.gpus:
        raise SpecError("job.gpus", job.gpus, f"cluster {cluster.name} has only {cluster.gpus} GPUs")
    job.layout.check(job, model, cluster.domain_gpus)
    check_seq_len(job, model)
    check_cp_levels(job)
    check_head_split(job, model)
    check_cp_kernel(job, model)
    if job.pp_schedule == "dualpipe":  # again: a search's model_copy(update=...) skips the validators
        job._check_dualpipe()
    _check_kernels(job, cluster)
    check_recompute(job, model)
    check_offload(job, model)
    return job


def _check_kernels(job: JobSpec, cluster: ClusterSpec) -> None:
    """The GPU has what the job's precision, fp8 recipe and attention kernel need."""
    gpu = cluster.gpu_spec
    if job.precision != "bf16" and job.precision not in gpu.peak_tflops:
        raise SpecError("job.precision", job.precision,
                        f"{gpu.name} has no {job.precision} tensor cores; use bf16 or a GPU that has "
                        f"({', '.join(n for n, g in GPUS.items() if job.precision in g.peak_tflops)})")
    if job.software.fp8_activation_cache and job.precision != "fp8":
        raise SpecError("software.fp8_activation_cache", True, "caches the fp8 GEMMs' inputs; needs job.precision fp8")
    if job.software.moe_fp8_dispatch and job.precision != "fp8":
        raise SpecError("software.moe_fp8_dispatch", True, "quantizes the experts' fp8 GEMM input; needs job.precision fp8")
    if job.precision == "fp8":
        from teton.hardware.kernels import fp8_recipe_unsupported

        why = fp8_recipe_unsupported(job.software.fp8_recipe, gpu)
        if why:
            raise SpecError("software.fp8_recipe", job.software.fp8_recipe, why)
    if job.attention_kernel == "fa3" and cluster_efficiency(gpu, cluster.efficiency).attn_fa3_fwd is None:
        raise SpecError("job.attention_kernel", job.attention_kernel,
                        f"FlashAttention-3 needs a Hopper GPU, and {gpu.name} has no fa3 efficiency; use fa2")
