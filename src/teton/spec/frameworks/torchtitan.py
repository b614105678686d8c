"""torchtitan: a job TOML (torchtitan/models/llama3/train_configs/*.toml; ``torchtitan/config/job_config.py``
for the keys and defaults). Versions before 2025 keep the parallel degrees in ``[training]``;
both places are read.

``[model] name / flavor`` names the model (``llama3`` ``70B`` -> ``llama3-70b``). FSDP2
(``data_parallel_shard_degree`` > 1) is ZeRO-3, plain replication (DDP) ZeRO-0; both at once
(HSDP) is an error, as teton shards over the whole DP group. The stack is PyTorch's: FSDP2
accumulating autograd's bf16 weight gradients into an fp32 buffer (``grad_accum_fusion`` off),
cross-entropy on fp32 logits, SDPA's FlashAttention-2 kernel, and elementwise ops fused only under
``torch.compile``.
"""

from __future__ import annotations

from typing import Any

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, Why, as_bool, as_int, choice, flatten

# torchtitan [model] name -> {flavor: teton preset}
FLAVORS = {
    "llama3": {"8B": "llama3-8b", "70B": "llama3-70b", "405B": "llama3-405b"},
    "llama2": {"7B": "llama2-7b", "13B": "llama2-13b", "70B": "llama2-70b"},
}
NO_MEANING = {
    **dict.fromkeys(("optimizer.", "lr_scheduler.", "training.max_norm", "training.steps", "training.warmup_steps",
                     "training.seed", "training.deterministic", "training.gc_freq", "training.gc_debug"), Why.TRAINING),
    **dict.fromkeys(("model.tokenizer_path", "model.hf_assets_path", "training.dataset", "training.dataset_path"), Why.DATA),
    **dict.fromkeys(("job.", "profiling.", "metrics.", "checkpoint.", "validation.", "comm.", "memory_estimation.",
                     "fault_tolerance.", "experimental."), Why.LOGGING),
    **dict.fromkeys(("float8.filter_fqns", "float8.precompute_float8_dynamic_scale_for_fsdp"), Why.FP8_KNOB),
    "float8.enable_fsdp_float8_all_gather": Why.NOT_MODELLED + " (parameters are all-gathered in bf16)",
    "parallelism.fsdp_reshard_after_forward": Why.NOT_MODELLED + " (ZeRO-3 re-gathers parameters in backward)",
    "parallelism.disable_loss_parallel": Why.NOT_MODELLED,
    "parallelism.enable_compiled_autograd": Why.RUNTIME,
    "model.print_after_conversion": Why.LOGGING,
}


def import_torchtitan(data: dict[str, Any], gpus: int | None = None) -> Mapper:
    m = Mapper("torchtitan", flatten(data), NO_MEANING)
    m.gpus_option = gpus
    _model(m)
    _layout(m)
    _batch(m)
    _precision(m)
    _stack(m)
    _recompute(m)
    m.leftovers()
    return m


def _par(m: Mapper, name: str) -> tuple[str | None, Any]:
    """A parallelism key, from ``[parallelism]`` or (before 2025) ``[training]``."""
    return m.first(f"parallelism.{name}", f"training.{name}")


def _model(m: Mapper) -> None:
    name, flavor = m.get("model.name"), m.get("model.flavor")
    if not isinstance(name, str) or name not in FLAVORS:
        raise SpecError("model.name", name, f"one of {', '.join(FLAVORS)} (the torchtitan models teton has presets "
                        "for)")
    preset = FLAVORS[name].get(str(flavor))
    if preset is None:
        raise SpecError("model.flavor", flavor, f"one of {', '.join(FLAVORS[name])} for {name}")
    m.put("model", preset, "model.name x model.flavor", f"{name} {flavor}")


def _degree(m: Mapper, name: str, field: str | None) -> int | None:
    """A positive degree (mapped to ``job.<field>`` when given), -1 (None: filled), or 1."""
    key, raw = _par(m, name)
    if key is None:
        return 1
    value = as_int(key, raw, allow=(-1,))
    if value == -1:
        return None
    if field:
        m.put(f"job.{field}", value, key, raw)
    return value


def _layout(m: Mapper) -> None:
    tp, pp, cp = (_degree(m, n, f) for n, f in (("tensor_parallel_degree", "tp"), ("pipeline_parallel_degree", "pp"),
                                                  ("context_parallel_degree", "cp")))
    replicate, shard = _degree(m, "data_parallel_replicate_degree", None), _degree(m, "data_parallel_shard_degree", None)
    if None in (tp, pp, cp, replicate):
        raise SpecError("parallelism", -1, "only data_parallel_shard_degree may be -1 (filled from the GPU count)")
    if shard is None:
        if m.gpus_option is None:
            raise SpecError("gpus", None, "data_parallel_shard_degree is -1: torchtitan fills it from the GPU count "
                            "the launcher gives; give --gpus N")
        fixed = tp * pp * cp * replicate
        if m.gpus_option % fixed:
            raise SpecError("gpus", m.gpus_option, f"must be a multiple of tp x pp x cp x replicate = {fixed}")
        shard = m.gpus_option // fixed
        key = _par(m, "data_parallel_shard_degree")[0] or "parallelism.data_parallel_shard_degree"
        m.put("job.gpus", m.gpus_option, "option gpus", m.gpus_option, f"{key} -1 filled: {shard}")
    else:
        m.put("job.gpus", tp * pp * cp * replicate * shard, "the product of the degrees", "tp x pp x cp x dp")
    if replicate > 1 and shard > 1:
        raise SpecError("parallelism.data_parallel_replicate_degree", replicate, "HSDP (replicate x shard) is not "
                        "modelled: teton shards ZeRO-3 over the whole DP group; use one of the two")
    keys = [k for k in (_par(m, "data_parallel_replicate_degree")[0], _par(m, "data_parallel_shard_degree")[0]) if k]
    m.put("job.dp", replicate * shard, " x ".join(keys) or "data_parallel_shard_degree (default -1)",
          f"{replicate} x {shard}")
    m.put("job.zero", 3 if shard > 1 else 0, keys[-1] if keys else "data_parallel_shard_degree", shard,
          "FSDP2: parameters, gradients and optimizer state sharded" if shard > 1 else "DDP")
    m.put("job.sequence_parallel", True, "tensor_parallel_degree", tp, "torchtitan's TP shards norms over the "
          "sequence (SequenceParallel)")
    _pipeline(m, pp)
    key, raw = _par(m, "context_parallel_rotate_method")
    if key is not None:
        m.put("software.cp_comm", choice(key, raw, {"allgather": "all_gather", "alltoall": "ring"}), key, raw)
    elif cp > 1:
        m.default("software.cp_comm", "all_gather", "torchtitan's context_parallel_rotate_method default: allgather")
    key, raw = _par(m, "enable_async_tensor_parallel")
    if key is not None:
        m.put("software.tp_comm_overlap", "full" if as_bool(key, raw) else "none", key, raw, "PyTorch async-TP")
    else:
        m.default("software.tp_comm_overlap", "none", "torchtitan's default: no async TP")


def _pipeline(m: Mapper, pp: int) -> None:
    key, raw = _par(m, "pipeline_parallel_schedule")
    if key is None:
        return
    schedule = choice(key, raw, {"1F1B": "1f1b", "Interleaved1F1B": "interleaved"},
                      "GPipe, zero-bubble, looped-BFS and DualPipe schedules are not modelled")
    m.put("job.pp_schedule", schedule, key, raw)
    if schedule == "interleaved":
        split_key, splits = _par(m, "pipeline_parallel_split_points")
        per_key, per = _par(m, "pipeline_parallel_layers_per_stage")
        if split_key is not None and isinstance(splits, list):
            stages, why_key, why = len(splits) + 1, split_key, splits
        elif per_key is not None:
            layers = {"llama3-8b": 32, "llama3-70b": 80, "llama3-405b": 126}.get(m.spec["model"], 0)
            per_n = as_int(per_key, per)
            if not layers or layers % per_n:
                raise SpecError(per_key, per, "must divide the model's layers")
            stages, why_key, why = layers // per_n, per_key, per
        else:
            stages, why_key, why = 2 * pp, key, raw
            m.default("job.virtual_stages", 2, "torchtitan's default for a looped schedule: two stages per rank",
                      write=False)
        if stages % pp:
            raise SpecError(why_key, why, f"gives {stages} stages: not a multiple of pipeline_parallel_degree ({pp})")
        m.put("job.virtual_stages", stages // pp, why_key, why, "stages per pipeline rank")


def _batch(m: Mapper) -> None:
    key, raw = m.first("training.local_batch_size", "training.batch_size")
    if key is None:
        raise SpecError("training.local_batch_size", None, "missing: the per-rank batch (older: training.batch_size)")
    local = as_int(key, raw)
    pp = m.spec["job"].get("pp", 1)
    mb_key, mb = _par(m, "pipeline_parallel_microbatch_size")
    micro = as_int(mb_key, mb) if mb_key else 1
    if pp > 1:
        if local % micro:
            raise SpecError(key, raw, f"must be a multiple of pipeline_parallel_microbatch_size ({micro})")
        m.put("job.micro_batch", micro, mb_key or key, mb if mb_key else raw,
              "" if mb_key else "torchtitan's pipeline_parallel_microbatch_size default: 1")
    else:
        m.put("job.micro_batch", local, key, raw, "one micro-batch per rank without pipelining")
    dp = m.spec["job"]["gpus"] // (m.spec["job"].get("tp", 1) * pp * m.spec["job"].get("cp", 1))
    g_key, g = m.first("training.global_batch_size")
    if g_key is not None and as_int(g_key, g, allow=(-1,)) != -1:
        m.put("job.global_batch", as_int(g_key, g), g_key, g, "gradient accumulation over the rest")
    else:
        m.put("job.global_batch", local * dp, key, raw, f"x dp {dp}: no gradient accumulation")
    s_key, seq = m.first("training.seq_len")
    if s_key is None:
        m.default("job.seq_len", 2048, "torchtitan's training.seq_len default")
    else:
        m.put("job.seq_len", as_int(s_key, seq), s_key, seq)


def _precision(m: Mapper) -> None:
    key, raw = m.first("training.mixed_precision_param")
    if key is not None:
        choice(key, raw, {"bfloat16": 1}, "teton prices bf16 and fp8 (float32 parameters are not priced)")
        m.put("job.precision", "bf16", key, raw)
    else:
        m.default("job.precision", "bf16", "torchtitan's mixed_precision_param default: bfloat16")
    r_key, reduce = m.first("training.mixed_precision_reduce")
    if r_key is not None:
        m.put("software.grad_accum_dtype", choice(r_key, reduce, {"float32": "fp32", "bfloat16": "bf16"}), r_key, reduce)
    else:
        m.default("software.grad_accum_dtype", "fp32", "torchtitan's mixed_precision_reduce default: float32")
    converters = m.get("model.converters") or []
    if not (isinstance(converters, list) and all(isinstance(c, str) for c in converters)):
        raise SpecError("model.converters", converters, 'a list of names, like ["float8"]')
    fp8 = "float8" in converters or as_bool("float8.enable_float8_linear", m.get("float8.enable_float8_linear", False))
    if fp8:
        m.put("job.precision", "fp8", "model.converters" if "float8" in converters else "float8.enable_float8_linear",
              converters or True, "torchao Float8Linear")
        r_key, recipe = m.first("float8.recipe_name", "float8.scaling_type_input")
        if r_key is None:
            m.default("software.fp8_recipe", "current", "torchao's default: tensorwise dynamic scaling")
        else:
            m.put("software.fp8_recipe", choice(r_key, recipe, {"tensorwise": "current", "dynamic": "current",
                                                                "delayed": "delayed"},
                                                "rowwise scaling is not modelled"), r_key, recipe)
    elif converters:
        m.ignore("model.converters", converters, Why.NOT_MODELLED)


def _stack(m: Mapper) -> None:
    m.default("software.base", "unknown", "torchtitan has no teton preset: the across-stack prior")
    m.default("software.framework", "torchtitan", "the framework the config is for")
    m.default("software.grad_accum_fusion", False, "FSDP2 / autograd: the bf16 weight gradient added into the "
              "fp32 buffer by a separate kernel")
    m.default("software.cross_entropy", "eager", "torchtitan's cross-entropy on fp32 logits")
    m.default("software.attention", "fa2", "PyTorch SDPA's flash kernel (FlashAttention-2)")
    key, raw = m.first("compile.enable", "training.compile")
    on = key is not None and as_bool(key, raw)
    components = m.get("compile.components")
    if components is not None and not (isinstance(components, list) and all(isinstance(c, str) for c in components)):
        raise SpecError("compile.components", components, 'a list of names, like ["model", "loss"]')
    if key is None:
        m.default("software.elementwise", "eager", "torch.compile off by default: PyTorch ops one by one")
    else:
        m.put("software.elementwise", "fused" if on else "eager", key, raw,
              "torch.compile fuses the elementwise ops" if on else "")
    if components is not None and on and "model" not in components:
        raise SpecError("compile.components", components, "teton's fusion is the model's: include \"model\"")
    if components is not None:
        m.put("software.elementwise", "fused" if on else "eager", "compile.components", components)


def _recompute(m: Mapper) -> None:
    key, raw = m.first("activation_checkpoint.mode")
    if key is None:
        m.default("job.recompute", "selective_layer", "torchtitan's activation_checkpoint default: selective, "
                  "every 2nd layer")
        return
    mode = choice(key, raw, {"none": "none", "full": "full", "selective": "selective"})
    if mode != "selective":
        m.put("job.recompute", mode, key, raw)
        return
    o_key, option = m.first("activation_checkpoint.selective_ac_option")
    option = "2" if o_key is None else str(option)
    if option == "op":
        m.put("job.recompute", "selective_op", o_key, option, "torchtitan's per-op policy")
        return
    m.put("job.recompute", "selective_layer", o_key or key, option, "every N-th block fully checkpointed")
    if as_int(o_key or key, option) != 2:
        m.put("job.recompute_interval", as_int(o_key or key, option), o_key or key, option)
