"""Memory savings a published row does not state: the least that makes its job fit.

A row's table gives its layout and batch, rarely its activation recomputation or offload; teton
takes the least saving under which the job fits in its GPUs' memory, within the memory model's
tolerance (:func:`unstated_memory_saving`), unless the row's own recipe states it
(``teton.validation.recipes``) or Megatron-Bridge's recipes state the offload of its configuration
(:data:`STATED_OFFLOAD`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from teton.validation.recipes import recipe_of

# a row's spec mapping with a recompute, offloaded layers per chunk and fp8 weights (``training_set2.row_spec``)
RowSpec = Callable[..., dict]


class MemorySaving(NamedTuple):
    """What a row saves of its memory: its recompute (a mode, or the tuple of modules it recomputes
    selectively), offloaded layers per pipeline chunk, whether its fp8 weights are held only
    quantised (``software.fp8_param_gather``), and the note that says where that comes from."""

    recompute: str | tuple[str, ...]
    offload_layers: int
    note: str
    fp8_weights: bool = False

    def spec(self, row, row_spec: RowSpec) -> dict:
        """The row's spec mapping with this saving."""
        return row_spec(row, self.recompute, self.offload_layers, fp8_weights=self.fp8_weights)


# selective recompute of the attention core saves nothing under flash attention: the ladder is none,
# (an MoE row of Megatron-Bridge: the fastest fitting subset of the cheap modules,) (offload,) full.
# teton's memory model holds Korthikanti et al.'s Figure 1 terms within 5 %: a job whose allocations,
# CUDA context and NCCL buffers are within that of its GPUs' memory is taken to fit (fragmentation is
# inside the tolerance)
MEMORY_TOLERANCE = 0.05


# CPU activation offload (layers) Megatron-Bridge's performance recipes give Llama 3 70B on 64
# Grace-Blackwell GPUs under Megatron-FSDP (TP 1, PP 1, micro-batch 2) with fp8 current scaling, taken
# for that configuration's rows of every release whose table does not state it. GB200: 40 in the
# 25.11 scripts (Megatron-Bridge commit 5776a6d90, scripts/performance/configs/llama/
# llama3_workload_base_configs.py, LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_BASE_CONFIG) and in
# 0.6.0's perf_recipes (llama/gb200/llama3.py, llama3_70b_pretrain_64gpu_gb200_fp8cs_config): the
# same over the releases between. GB300: 20, 0.6.0's (llama/gb300/llama3.py,
# llama3_70b_pretrain_64gpu_gb300_fp8cs_config), the one value stated. The least that fits would
# be 34 and 5 (the recipes keep a margin).
STATED_OFFLOAD = {("DGX-GB200", "LLAMA3_70B"): (40, "25.11 and 26.08 recipes"),
                  ("DGX-GB300", "LLAMA3_70B"): (20, "26.08 recipe")}
_FP8_CURRENT = ("FP8", "FP8-CS", "FP8-CS (presumed)")  # Megatron-Bridge's tables: "FP8" is current scaling


def stated_offload(row) -> tuple[int, str] | None:
    """(layers, where stated) of :data:`STATED_OFFLOAD` for a Megatron-Bridge row of its
    configuration; None for any other row."""
    if row.source != "D" or row.precision not in _FP8_CURRENT or not row.fsdp or (row.tp, row.pp, row.mbs) != (1, 1, 2):
        return None
    return STATED_OFFLOAD.get((row.system, row.model))


def fits_within_tolerance(spec) -> bool:
    """Whether ``spec``'s fullest GPU holds its allocations, CUDA context and NCCL buffers within
    :data:`MEMORY_TOLERANCE` of its memory (fragmentation inside the tolerance)."""
    from teton.workload.headroom import memory_headroom
    from teton.workload.memory import memory_per_gpu

    room = memory_headroom(spec.job, spec.cluster)
    held = memory_per_gpu(spec.model, spec.job)[0].total + room.cuda_context_bytes + room.nccl_buffer_bytes
    return held <= (1 + MEMORY_TOLERANCE) * room.capacity_bytes


def _offload_host(spec) -> bool:
    """Whether the job's GPUs reach host memory over a link faster than their PCIe (Grace's
    NVLink-C2C), on which offloaded activations travel under the compute."""
    host = spec.cluster.host_spec
    return host.cpu_copy_link_bytes_s > host.pcie_x16_bytes_s


def _least_offload(row, spec, row_spec: RowSpec) -> int:
    """The fewest layers per pipeline chunk whose activations, offloaded, let the job fit (0: none do)."""
    from teton.spec import load_spec

    chunk_layers = -(-spec.model.layers // spec.job.layout.chunks)
    hi = chunk_layers - 1  # Megatron offloads fewer layers than the chunk has
    if hi < 1 or not fits_within_tolerance(load_spec(row_spec(row, "none", hi))):
        return 0
    lo = 0  # lo does not fit, hi does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits_within_tolerance(load_spec(row_spec(row, "none", mid))) else (mid, hi)
    return hi


def _fastest_cheap_subset(row, spec, row_spec: RowSpec) -> tuple[str, ...] | None:
    """Of the non-empty subsets of the model's cheap modules whose selective recompute makes the row
    fit, the one whose step is fastest (the recipes recompute one module or several: DeepSeek-V3's
    26.08 recipes ``mla_up_proj`` alone, ``moe_act`` alone, or ``mla_up_proj`` with ``mlp``); None
    if none fits."""
    from itertools import combinations

    from teton.engine.step import simulate_step
    from teton.spec import load_spec

    cheap = cheap_modules(spec.model)
    fitting = [load_spec(row_spec(row, subset)) for n in range(1, len(cheap) + 1)
               for subset in combinations(cheap, n)]
    fitting = [s for s in fitting if fits_within_tolerance(s)]
    if not fitting:
        return None
    best = min(fitting, key=lambda s: simulate_step(s).step_time_s)
    return tuple(m for m in cheap if m in best.job.recomputed_modules)


def _caches_fp8_weights(spec) -> bool:
    """Whether the row's job keeps Transformer Engine's quantised weight copies beside bf16 weights
    (``workload.fp8.fp8_weight_cache_bytes``): what fp8 weights only would save."""
    from teton.workload.fp8 import fp8_weight_cache_bytes

    return fp8_weight_cache_bytes(spec.job) > 0


def unstated_memory_saving(row, row_spec: RowSpec) -> MemorySaving:
    """The :class:`MemorySaving` of a row whose source does not state it: the least that makes the
    job fit in its GPUs' memory, within the memory model's tolerance. No saving if it fits; for an
    fp8 row of a Transformer Engine stack that keeps bf16 weights, its weights in fp8 only
    (``fp8_param_gather``: no step-time cost, and NeMo 2.0's and Megatron-Bridge's fp8 recipes all
    set it) where that fits; for an MoE row of Megatron-Bridge, selective recompute of some of its cheap
    modules (:func:`cheap_modules`): of the subsets that fit, the one with the fastest step
    (:func:`_fastest_cheap_subset`, returned as the tuple of them); on a host whose GPUs reach
    CPU memory over NVLink-C2C (Grace: GB200 /
    GB300 NVL72), CPU activation offload of the fewest layers that fits (it runs under the compute
    there, where full recompute costs a third more compute: the GB200 / GB300 FSDP rows measure as
    fast as their release's pipelined rows without recompute); else full recompute. ``row_spec``
    builds the row's spec mapping with a recompute and offloaded layers (``training_set2.row_spec``)."""
    from teton.spec import load_spec

    if row.source == "H":
        return MemorySaving("full", 0, "")
    if (stated := recipe_of(row)) is not None:
        inherited = "" if stated.release == row.release else f", the {stated.release} recipe of its layout"
        return MemorySaving(stated.job()["recompute"], 0,
                            f"settings from its recipe ({stated.recipe.split('/')[-1]}{inherited})")
    if (stated := stated_offload(row)) is not None:
        return MemorySaving("none", stated[0], (f"recompute unstated: none, with CPU activation offload of {stated[0]} "
                                                f"layers per chunk over NVLink-C2C (Megatron-Bridge's {stated[1]} for "
                                                "this configuration)"))
    spec = load_spec(row_spec(row, "none"))
    if fits_within_tolerance(spec):
        return MemorySaving("none", 0, "")
    if _caches_fp8_weights(spec) and fits_within_tolerance(load_spec(row_spec(row, "none", fp8_weights=True))):
        return MemorySaving("none", 0, "memory saving unstated: fp8 weights only (fp8_param_gather: no bf16 copy "
                            "beside Transformer Engine's cached fp8 weights; the least that fits in memory)", True)
    if row.source == "D" and spec.model.experts > 1 and (modules := _fastest_cheap_subset(row, spec, row_spec)):
        return MemorySaving(modules, 0, f"recompute unstated: selective of {', '.join(modules)} (the least that fits "
                            "in memory)")
    if _offload_host(spec) and (n := _least_offload(row, spec, row_spec)):
        return MemorySaving("none", n, (f"recompute unstated: none, with CPU activation offload of {n} layers per "
                                        "chunk over NVLink-C2C (the least that fits in memory)"))
    return MemorySaving("full", 0, "recompute unstated: full (the least that fits in memory)")


# An MoE row of Megatron-Bridge that needs memory saving its table does not state recomputes the
# cheap, output-discarding modules first: every MoE performance recipe of Megatron-Bridge 0.6.0
# that saves memory does so (perf_recipes/{deepseek,kimi,gpt_oss,qwen}/*: recompute_modules of
# mla_up_proj, moe_act, layernorm or mlp; none uses full recompute), and Megatron-Core recomputes
# moe_act, layernorm and mla_up_proj by output-discarding checkpointing (TransformerConfig)
def cheap_modules(model) -> tuple[str, ...]:
    """The output-discarding modules a model has: its norms, its experts' activation, MLA's up
    projections."""
    return ("layernorm", "moe_act") + (("mla_up_proj",) if model.kv_lora_rank else ())
