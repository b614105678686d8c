"""Cross-field rules between a job and its model (``teton.spec.job.check_job`` runs them at load):
what the frameworks refuse, or what the model has nothing for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from teton.errors import SpecError

if TYPE_CHECKING:
    from teton.spec.job import JobSpec
    from teton.spec.model import ModelSpec


def _module_missing(module: str, model: ModelSpec) -> str | None:
    """Why ``model`` has nothing for the recompute module to recompute (None: it has)."""
    kinds = model.layer_type_counts()
    if module == "mla_up_proj" and not model.mla:
        return f"mla_up_proj recomputes MLA's up-projections; {model.name} has no MLA (model.kv_lora_rank)"
    if module == "mlp" and not any(k.ffn == "dense" for k in kinds):
        return f"mlp recomputes a dense layer's MLP; every feed-forward layer of {model.name} is MoE (use moe)"
    if module == "moe" and not model.has_moe:
        return f"moe recomputes an MoE layer; {model.name} has none (model.experts)"
    if module == "shared_experts" and not (model.has_moe and model.shared_experts):
        return f"shared_experts recomputes the shared experts; {model.name} has none (model.shared_experts)"
    return None


def check_cp_levels(job: JobSpec) -> None:
    """``job.cp_a2a``, the all-to-all groups of a2a+p2p CP (with the stack's default CP algorithm
    applied: checked at load, not by the section's own validator)."""
    if job.cp_a2a is not None and job.cp_algo != "a2a+p2p":
        raise SpecError("job.cp_a2a", job.cp_a2a, f"applies only to job.cp_algo = a2a+p2p (is {job.cp_algo})")
    if job.cp_algo == "a2a+p2p" and job.cp > 1 and job.cp_a2a is None:
        raise SpecError("job.cp_a2a", None, "a2a+p2p needs the size of its all-to-all groups (Megatron's "
                        "--hierarchical-context-parallel-sizes a b: a)")
    if job.cp_a2a is not None and (job.cp % job.cp_a2a or job.cp_a2a >= job.cp):
        raise SpecError("job.cp_a2a", job.cp_a2a, f"must divide job.cp ({job.cp}) and be smaller: a2a+p2p runs "
                        "a ring of cp / cp_a2a all-to-all groups")


def check_head_split(job: JobSpec, model: ModelSpec) -> None:
    """The heads and groups TP and CP split: a Mamba-2 layer's heads and B/C groups over TP, then
    its heads over CP, its groups divided among the CP ranks or repeated on them (Megatron-Core
    0.16 ``MambaContextParallel``); under ``cp_algo: a2a`` the query and key / value heads of a TP
    rank over CP (Transformer Engine 2.9's ``AttnFuncWithCPAndQKVOA2A``), under ``a2a+p2p`` over
    its all-to-all groups (``job.cp_a2a``; ``AttnFuncWithCPAndKVP2P``)."""
    lay = job.layout
    kinds = model.layer_type_counts()
    if any(k.mixer == "mamba" for k in kinds):
        for field, n in (("mamba_groups", model.mamba_groups), ("mamba_heads", model.n_mamba_heads)):
            if n % lay.tp:
                raise SpecError("job.tp", lay.tp, f"must divide model.{field} ({n}) for Mamba-2 layers")
        heads, groups = model.n_mamba_heads // lay.tp, model.mamba_groups // lay.tp
        if heads % lay.cp:
            raise SpecError("job.cp", lay.cp, f"must divide the Mamba-2 heads of a TP rank ({heads}: "
                            "model.mamba_heads / job.tp) for Mamba-2 context parallelism")
        if groups % lay.cp and lay.cp % groups:
            raise SpecError("job.cp", lay.cp, f"must divide, or be a multiple of, the Mamba-2 groups of a TP rank "
                            f"({groups}: model.mamba_groups / job.tp)")
    if lay.cp > 1 and job.cp_algo in ("a2a", "a2a+p2p") and any(k.mixer == "attention" for k in kinds):
        kv = model.cp_kv_heads
        field, split = ("job.cp", lay.cp) if job.cp_algo == "a2a" else ("job.cp_a2a", lay.cp_a2a)
        for what, n in (("query", model.heads), ("key / value", kv)):
            if (n // lay.tp) % split:
                raise SpecError(field, split, f"must divide the {what} heads of a TP rank ({n // lay.tp}) under "
                                f"job.cp_algo {job.cp_algo} (Transformer Engine splits the heads over its all-to-all)")


def check_cp_kernel(job: JobSpec, model: ModelSpec) -> None:
    """What Transformer Engine 2.9's context-parallel attention refuses (``attn_forward_func_with_cp``),
    for a job that runs its attention there (``job.attention_kernel: cudnn``, TE's fused attention):
    sliding-window layers under ring (p2p) or a2a+p2p CP, and MLA under all-gather or a2a CP.
    a2a+p2p is Transformer Engine's alone: its refusal of sliding windows holds for every kernel."""
    if job.layout.cp == 1 or not any(k.mixer == "attention" for k in model.layer_type_counts()):
        return
    if job.cp_algo == "a2a+p2p" and model.sliding_window:
        raise SpecError("job.cp_algo", "a2a+p2p", "Transformer Engine refuses hierarchical (a2a+p2p) CP with "
                        "sliding-window layers: use a2a or all_gather")
    if job.attention_kernel != "cudnn":
        return
    if model.sliding_window and job.cp_algo == "ring":
        raise SpecError("job.cp_algo", "ring", "Transformer Engine's attention (job.attention_kernel cudnn) refuses "
                        "ring CP with sliding-window layers: use a2a or all_gather")
    if model.mla and job.cp_algo in ("all_gather", "a2a"):
        raise SpecError("job.cp_algo", job.cp_algo, "Transformer Engine's attention (job.attention_kernel cudnn) runs "
                        "MLA only under ring CP (p2p) or a2a+p2p")


# The recompute modes a framework has (job.recompute): Megatron-LM's --recompute-granularity full |
# selective (megatron/training/arguments.py), which NeMo, Megatron-Bridge and Megatron-DeepSpeed
# take over; torchtitan's activation_checkpoint.mode none | full | selective, per op or every N-th
# layer. A framework not listed here may run any of them.
_MEGATRON_RECOMPUTE = ("none", "selective", "full")
FRAMEWORK_RECOMPUTE: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("megatron-lm", "nemo", "megatron-bridge", "megatron-deepspeed"), _MEGATRON_RECOMPUTE),
    "torchtitan": ("none", "selective_op", "selective_layer", "full")}


def check_recompute(job: JobSpec, model: ModelSpec) -> None:
    """The recompute modules the model has, the modes its framework has, and torchtitan's per-op
    policy where it applies."""
    for module in sorted(job.recomputed_modules):
        if (why := _module_missing(module, model)) is not None:
            raise SpecError("job.recompute_modules", list(job.recompute_modules), why)
    modes = FRAMEWORK_RECOMPUTE.get(job.software.framework)
    if modes is not None and job.recompute not in modes:
        raise SpecError("job.recompute", job.recompute,
                        f"{job.software.framework} has recompute {' / '.join(modes)} (software.framework)")
    if job.recompute == "selective_op":  # torchtitan's policy counts and saves aten.mm of dense blocks
        why = ("MoE layers (grouped expert GEMMs are not aten.mm)" if model.experts > 1 else
               "Linear biases (aten.addmm is not in its save list)" if model.bias else
               "fp8 (the GEMMs run torch._scaled_mm, not aten.mm)" if job.precision == "fp8" else "")
        if why:
            raise SpecError("job.recompute", job.recompute,
                            f"models torchtitan's per-op policy on bf16 dense bias-free blocks, not {why}; "
                            "use selective_layer or full")


def check_seq_len(job: JobSpec, model: ModelSpec) -> None:
    """A learned position embedding has a row per position: no sequence past ``max_seq_len``."""
    if model.position_embedding == "learned" and job.seq_len > model.max_seq_len:
        raise SpecError("job.seq_len", job.seq_len, f"at most model.max_seq_len ({model.max_seq_len}): the model's "
                        "learned position embedding has a row per position (raise max_seq_len to train longer)")


def check_offload(job: JobSpec, model: ModelSpec) -> None:
    """CPU activation offload (``software.cpu_offload_layers``) as Megatron-Core's TransformerConfig
    (0.16 to 0.19, ``__post_init__``) allows it: fewer layers than the model has ("CPU offloading can
    be done only for layers less than num_layers"), and, for the Megatron stacks, neither with
    pipeline parallelism ("no support for Pipeline parallelism with CPU offloading") nor with
    activation recompute ("CPU offloading does not work when activation recomputation is enabled")."""
    n = job.software.cpu_offload_layers
    if not n:
        return
    if n >= model.layers:
        raise SpecError("software.cpu_offload_layers", n, f"fewer than model.layers ({model.layers})")
    chunks = job.layout.pp * job.layout.virtual_stages
    smallest = model.layers // chunks  # the fewest layers a pipeline chunk gets
    if n >= smallest:
        split = (f"{model.layers} layers over {chunks} pipeline chunks (pp {job.layout.pp} x virtual stages "
                 f"{job.layout.virtual_stages})")
        allowed = (f"fewer than the smallest chunk's {smallest} layers ({split}): a chunk keeps its last layer's "
                   "activations on the GPU" if smallest > 1 else
                   f"no layer can be offloaded: {split} leave a chunk at most {-(-model.layers // chunks)} "
                   "layer(s), and a chunk keeps its last layer's activations on the GPU")
        raise SpecError("software.cpu_offload_layers", n, allowed)
    if FRAMEWORK_RECOMPUTE.get(job.software.framework) is not _MEGATRON_RECOMPUTE:
        return
    if job.layout.pp > 1:
        raise SpecError("software.cpu_offload_layers", n, f"Megatron-Core offloads without pipeline parallelism "
                        f"only (job.pp is {job.layout.pp})")
    if job.recompute != "none":
        raise SpecError("software.cpu_offload_layers", n, f"Megatron-Core offloads without activation recompute "
                        f"only (job.recompute is {job.recompute})")
