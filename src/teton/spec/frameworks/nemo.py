"""NeMo: a NeMo 2.0 recipe dump (the YAML / JSON of a ``run.Partial(pretrain, ...)`` or a
checkpoint's ``context/``: ``trainer.strategy``, ``data``, ``model.config``, ``trainer.plugins``,
``trainer.callbacks``), or a NeMo 1.0 hydra config (``megatron_gpt_config.yaml``: ``trainer`` and a
flat ``model`` section).

NeMo 2.0 names its model by class (``model.config._target_: ...Llama3Config70B``): a teton preset
where there is one, else the architecture fields. The stack is ``nemo-25.04`` for 2.0 dumps and
``nemo-24.07`` for 1.0 configs (neither names its release), with what the config says over it.
"""

from __future__ import annotations

import re
from typing import Any

import teton.spec.frameworks.mcore as mcore
import teton.spec.frameworks.mcore_optim as optim
import teton.spec.frameworks.megatron_arch as arch
from teton.errors import SpecError
from teton.spec.frameworks.common import (
    Mapper,
    Why,
    as_bool,
    as_int,
    choice,
    flatten,
    padded_vocab,
    tokenizer_vocab,
)

# NeMo 2.0 model config classes (nemo/collections/llm/gpt/model/*.py) -> teton presets
CONFIG_PRESETS = {
    "Llama3Config8B": "llama3-8b", "Llama3Config70B": "llama3-70b", "Llama31Config8B": "llama3.1-8b",
    "Llama31Config70B": "llama3.1-70b", "Llama31Config405B": "llama3.1-405b", "Llama2Config7B": "llama2-7b",
    "Llama2Config13B": "llama2-13b", "Llama2Config70B": "llama2-70b", "GPTConfig5B": "gpt3-5b",
    "GPTConfig20B": "gpt3-20b", "GPTConfig175B": "gpt3-175b", "Nemotron3Config8B": "nemotron3-8b",
    "Nemotron3Config22B": "nemotron3-22b", "Nemotron4Config15B": "nemotron4-15b",
    "Nemotron4Config340B": "nemotron4-340b", "MixtralConfig8x7B": "mixtral-8x7b", "MixtralConfig8x22B": "mixtral-8x22b",
    "Qwen3Config30B_A3B": "qwen3-30b-a3b", "Qwen3Config235B_A22B": "qwen3-235b-a22b",
}
_STRUCTURE = "NeMo-Run / hydra structure (a class or call marker), not a setting"
NO_MEANING = {
    **dict.fromkeys(("_target_", "_call_", "_partial_", "accelerator", "_name_"), _STRUCTURE),
    **dict.fromkeys(("optim.", "model.optim.", "lr", "weight_decay", "init_method_std", "seed", "max_steps",
                     "max_epochs", "rotary_base", "layernorm_epsilon", "norm_eps", "gradient_clip_val",
                     "use_scaled_init_method", "apply_query_key_layer_scaling", "hysteresis", "native_amp_init_scale",
                     "native_amp_growth_interval", "trainer.max_time", "model.megatron_amp_O2", "rampup_batch_size",
                     "accumulate_grad_batches", "restore_from_path", "resume_from_checkpoint", "name"), Why.TRAINING),
    **dict.fromkeys(("data.", "model.data.", "data_prefix", "num_workers", "model.tokenizer.", "tokenizer."), Why.DATA),
    **dict.fromkeys(("log.", "exp_manager.", "trainer.logger", "trainer.enable_checkpointing", "log_every_n_steps",
                     "trainer.log_every_n_steps", "model.nsys_profile.", "resume.", "limit_val_batches",
                     "limit_test_batches", "val_check_interval", "check_for_nan_in_grad", "trainer.num_sanity_val_steps",
                     "trainer.enable_progress_bar", "trainer.benchmark", "trainer.use_distributed_sampler"), Why.LOGGING),
    "make_vocab_size_divisible_by": "read with the vocabulary: it pads model.vocab",
    **dict.fromkeys(("fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_margin", "fp8_interval", "fp8_hybrid",
                     "fp8_e4m3", "reduce_amax"), Why.FP8_KNOB),
    **dict.fromkeys(("defer_embedding_wgrad_compute", "wgrad_deferral_limit", "overlap_param_gather_with_optimizer_step",
                     "tp_comm_overlap_cfg", "tp_comm_bootstrap_backend"), Why.NOT_MODELLED),
    **dict.fromkeys(("trainer.strategy.ckpt_", "trainer.strategy.gradient_as_bucket_view", "trainer.strategy.ddp.check_",
                     "trainer.strategy.ddp.average_in_collective", "model.config.apply_rope_fusion",
                     "model.config.bias_activation_fusion", "model.config.bias_dropout_fusion",
                     "model.config.masked_softmax_fusion", "model.config.persist_layer_norm", "model.bias_activation_fusion",
                     "model.bias_dropout_add_fusion", "model.masked_softmax_fusion", "model.apply_rope_fusion",
                     "model.persist_layer_norm", "model.mcore_gpt", "trainer.strategy.pipeline_dtype",
                     "trainer.plugins.params_dtype", "trainer.plugins.pipeline_dtype", "trainer.plugins.autocast_enabled",
                     "model.overlap_p2p_comm",
                     "model.batch_p2p_comm", "model.gc_interval", "trainer.strategy.ckpt_async_save"), Why.RUNTIME),
}
# NeMo 1.0 activation names -> teton model.mlp
ACTIVATIONS = {"fast-swiglu": "swiglu", "swiglu": "swiglu", "gelu": "gelu", "fast-geglu": "gelu",
               "squared-relu": "relu2", "relu2": "relu2"}


def import_nemo(data: dict[str, Any], gpus: int | None = None) -> Mapper:
    if "trainer" not in data and isinstance(data.get("config"), dict):  # a checkpoint's context/model.yaml
        data = {"model": data}
    flat = flatten(data)
    v2 = any(k.startswith(("trainer.strategy.", "model.config.")) for k in flat)
    m = Mapper("nemo", flat, NO_MEANING)
    m.gpus_option = gpus
    _gpus(m)
    (_v2 if v2 else _v1)(m)
    m.leftovers()
    return m


def find(m: Mapper, prefix: str, name: str) -> str | None:
    """The key ``prefix.name`` or ``prefix.<i>.name`` (a list of plugins / callbacks), if given."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\.\d+)?\.{re.escape(name)}$")
    return next((k for k in m.config if pattern.match(k)), None)


def _gpus(m: Mapper) -> None:
    dev_key, devices = m.first("trainer.devices")
    nodes_key, nodes = m.first("trainer.num_nodes")
    if dev_key is None:
        return
    n = as_int(nodes_key, nodes) if nodes_key else 1
    d = as_int(dev_key, devices)
    m.put("job.gpus", n * d, "trainer.num_nodes x trainer.devices", f"{n} x {d}")


def _put_int(m: Mapper, keys: str | tuple[str, ...], field: str, note: str = "") -> int | None:
    """``field`` from the first of ``keys`` the config gives (not null); the same value under a
    second key is named, a different one an error."""
    given = [k for k in ((keys,) if isinstance(keys, str) else keys) if m.has(k) and m.config[k] is not None]
    for k in (keys,) if isinstance(keys, str) else keys:
        m.get(k)
    if not given:
        return None
    value = as_int(given[0], m.config[given[0]])
    m.put(field, value, given[0], m.config[given[0]], note)
    for other in given[1:]:
        if as_int(other, m.config[other]) != value:
            raise SpecError(other, m.config[other], f"differs from {given[0]} ({value}); give one value")
        m.ignore(other, m.config[other], f"the same as {given[0]}, which is used")
    return value


def _layout(m: Mapper, *prefixes: str) -> None:
    """Degrees and sequence parallelism under the first of ``prefixes`` that gives each
    (``trainer.strategy.``, then ``model.config.``; NeMo 1.0: ``model.``)."""
    def keys(name: str) -> tuple[str, ...]:
        return tuple(p + name for p in prefixes)

    for name, field in (("tensor_model_parallel_size", "tp"), ("pipeline_model_parallel_size", "pp"),
                        ("context_parallel_size", "cp"), ("expert_model_parallel_size", "ep"),
                        ("expert_tensor_parallel_size", "etp")):
        _put_int(m, keys(name), f"job.{field}")
    v = _put_int(m, keys("virtual_pipeline_model_parallel_size"), "job.virtual_stages", "chunks per pipeline rank")
    if v and v > 1:
        m.put("job.pp_schedule", "interleaved", keys("virtual_pipeline_model_parallel_size")[0], v)
    def given(name: str) -> str:
        return next((k for k in keys(name) if m.has(k) and m.config[k] is not None), keys(name)[0])

    mcore.pipeline_split(m, given("num_layers_in_first_pipeline_stage"), given("num_layers_in_last_pipeline_stage"),
                         given("pipeline_model_parallel_layout"), (given("account_for_embedding_in_pipeline_split"),
                                                                  given("account_for_loss_in_pipeline_split")))
    key, raw = m.first(*keys("sequence_parallel"))
    if key is not None:
        m.put("job.sequence_parallel", as_bool(key, raw), key, raw)
        for other in keys("sequence_parallel"):
            if other != key and m.has(other):
                m.ignore(other, m.config[other], f"{key} is used")
    else:
        m.default("job.sequence_parallel", False, f"{prefixes[0]}sequence_parallel not given: NeMo's default is off")


def _v2(m: Mapper) -> None:
    _layout(m, "trainer.strategy.", "model.config.")
    m.default("software.base", "nemo-25.04", "a NeMo 2.0 dump names no release: NeMo 25.04")
    m.default("software.framework", "nemo", "the framework the config is for")
    _put_int(m, "data.micro_batch_size", "job.micro_batch")
    _put_int(m, "data.global_batch_size", "job.global_batch")
    _put_int(m, ("data.seq_length", "model.config.seq_length"), "job.seq_len")
    _model_v2(m)
    _precision_v2(m)
    _ddp_v2(m)
    optim.optimizer_dtypes(m, lambda n: "optim.config." + n, sets_grad_buffer=False)
    c = "model.config."
    _stack_common(m, c, tp_overlap_key=find(m, "trainer.callbacks", "tp_comm_overlap") or c + "tp_comm_overlap")
    mcore.recompute(m, (c + "recompute_granularity", c + "recompute_method", c + "recompute_num_layers"),
                    mcore.layers_per_chunk(m), "model.config.recompute_granularity not given: no recompute",
                    c + "recompute_modules")


def _model_v2(m: Mapper) -> None:
    c = "model.config."
    target = m.get(c + "_target_")
    cls = str(target or "").rsplit(".", 1)[-1]
    if cls in CONFIG_PRESETS:
        m.put("model", CONFIG_PRESETS[cls], c + "_target_", target)
    elif not m.has(c + "num_layers"):
        raise SpecError(c + "_target_", target, "not a model config teton has a preset for, and the dump gives no "
                        f"architecture (model.config.num_layers ...); presets: {', '.join(CONFIG_PRESETS)}")
    else:
        m.spec["model"] = {"name": cls or "nemo-import"}
    _arch(m, c, gqa=True)
    if m.has(c + "gated_linear_unit"):
        gated = as_bool(c + "gated_linear_unit", m.get(c + "gated_linear_unit"))
        act = str(m.get(c + "activation_func._target_", m.get(c + "activation_func", "")))
        mlp = "swiglu" if gated else ("relu2" if "squared_relu" in act else "gelu")
        mcore.put_model(m, "mlp", mlp, c + "gated_linear_unit", m.config[c + "gated_linear_unit"])
    if m.has(c + "add_bias_linear"):
        mcore.put_model(m, "bias", as_bool(c + "add_bias_linear", m.get(c + "add_bias_linear")), c + "add_bias_linear",
                        m.config[c + "add_bias_linear"])
    arch.qkv_bias(m, c + "add_qkv_bias", c + "add_bias_linear: false")
    mcore.dropout(m, lambda n: c + n, None, ("hidden_dropout", "attention_dropout"))
    arch.attention(m, lambda n: c + n, "MLATransformerConfig", gqa_key=None)
    arch.mtp(m, lambda n: c + n)
    arch.moe_routing(m, lambda n: c + n)


def _arch(m: Mapper, p: str, gqa: bool) -> None:
    """Architecture fields shared by NeMo 1.0 and 2.0 (prefix ``p``)."""
    mcore.arch_numbers(m, lambda n: p + n)
    mcore.kv_heads(m, lambda n: p + n, None)
    if m.has(p + "normalization"):
        raw = m.get(p + "normalization")
        mcore.put_model(m, "norm", choice(p + "normalization", raw, {"rmsnorm": "rmsnorm", "layernorm": "layernorm",
                                                                     "LayerNorm1P": "layernorm"}),
                        p + "normalization", raw)
    if m.has(p + "position_embedding_type"):
        raw = m.get(p + "position_embedding_type")
        mcore.put_model(m, "position_embedding", choice(p + "position_embedding_type", raw,
                                                        {"rope": "rope", "learned_absolute": "learned", "yarn": "yarn"}),
                        p + "position_embedding_type", raw)
    if m.has(p + "share_embeddings_and_output_weights"):
        raw = m.get(p + "share_embeddings_and_output_weights")
        mcore.put_model(m, "tied_embeddings", as_bool(p + "share_embeddings_and_output_weights", raw),
                        p + "share_embeddings_and_output_weights", raw)
    if m.has(p + "vocab_size") and m.config[p + "vocab_size"] is not None:
        raw = m.get(p + "vocab_size")
        mcore.put_model(m, "vocab", as_int(p + "vocab_size", raw), p + "vocab_size", raw)


def _precision_v2(m: Mapper) -> None:
    prec_key = find(m, "trainer.plugins", "precision")
    fp8_key = find(m, "trainer.plugins", "fp8")
    precision = m.get(prec_key) if prec_key else None
    fp8 = m.get(fp8_key) if fp8_key else None
    if fp8 not in (None, False, "null"):
        choice(fp8_key, fp8, {"hybrid": 1, "e4m3": 1})
        m.put("job.precision", "fp8", fp8_key, fp8, "TE fp8 GEMMs")
        if prec_key:
            choice(prec_key, precision, {"bf16-mixed": 1, "bf16": 1, "bf16-true": 1}, "fp8 runs over bf16 in teton")
            m.ignore(prec_key, precision, "the dtype of what fp8 does not cover: bf16, as teton prices it")
        recipe_key = find(m, "trainer.plugins", "fp8_recipe")
        if recipe_key:
            mcore.fp8_recipe(m, recipe_key, m.get(recipe_key))
        gather_key = find(m, "trainer.plugins", "fp8_param_gather")
        if gather_key:
            m.put("software.fp8_param_gather", as_bool(gather_key, m.get(gather_key)), gather_key,
                  m.config[gather_key], "the layers' weights kept in fp8 only and all-gathered in fp8")
    elif prec_key is None:
        m.default("job.precision", "bf16", "trainer.plugins.precision not given: NeMo's recipes train in bf16-mixed")
    else:
        _bf16(m, prec_key, precision)


def _bf16(m: Mapper, key: str, raw: Any) -> None:
    kind = choice(key, raw, {"bf16-mixed": "bf16", "bf16": "bf16", "16-mixed": "fp16", "16": "fp16",
                             "bf16-true": "bf16"}, "fp32 is not priced by teton")
    note = "priced as bf16 (the same tensor-core rate); the loss scaler is not modelled" if kind == "fp16" else ""
    m.put("job.precision", "bf16", key, raw, note)


def _ddp_v2(m: Mapper) -> None:
    d = "trainer.strategy.ddp."
    key, raw = m.first(d + "use_distributed_optimizer", "optim.config.use_distributed_optimizer")
    if key is not None and as_bool(key, raw):
        m.put("job.zero", 1, key, raw, "optimizer state sharded over DP")
    elif key is not None:
        m.put("job.zero", 0, key, raw)
    else:
        m.default("job.zero", 0, "Megatron-Core's OptimizerConfig default: use_distributed_optimizer false")
    for name, field in (("overlap_grad_reduce", "overlap_dp_comm"), ("overlap_param_gather", "overlap_param_gather")):
        if m.has(d + name):
            m.put(f"software.{field}", as_bool(d + name, m.get(d + name)), d + name, m.config[d + name])
        else:
            m.default(f"software.{field}", False, f"{d}{name} not given: Megatron-Core's DDP default is off")
    plugin = find(m, "trainer.plugins", "grad_reduce_in_fp32") or "-"
    key, raw = m.first(d + "grad_reduce_in_fp32", plugin)
    if key is not None:
        m.put("software.grad_accum_dtype", "fp32" if as_bool(key, raw) else "bf16", key, raw)
    if key != plugin and m.has(plugin):
        m.ignore(plugin, m.config[plugin], f"superseded by {key}")


def _stack_common(m: Mapper, c: str, tp_overlap_key: str) -> None:
    """Stack fields NeMo 1.0 (``model.``) and 2.0 (``model.config.``) spell alike."""
    if m.has(tp_overlap_key) and as_bool(tp_overlap_key, m.get(tp_overlap_key)):
        m.put("software.tp_comm_overlap", "full", tp_overlap_key, True, "TE userbuffers")
    else:
        m.get(tp_overlap_key)
        m.default("software.tp_comm_overlap", "bwd", "no TP communication overlap configured: only the backward "
                  "all-gather / reduce-scatter overlap the GEMMs")
    for name, field, values in (("cross_entropy_loss_fusion", "cross_entropy", ("fused", "vocab_parallel")),
                                ("gradient_accumulation_fusion", "grad_accum_fusion", (True, False)),
                                ("enable_cuda_graph", "cuda_graphs", ("layers", "none"))):
        if m.has(c + name):
            on = as_bool(c + name, m.get(c + name))
            m.put(f"software.{field}", values[0] if on else values[1], c + name, m.config[c + name])
    if m.has(c + "attention_backend"):
        raw = m.get(c + "attention_backend")
        name = str(raw).rsplit(".", 1)[-1]
        m.put("software.attention", choice(c + "attention_backend", name, {"auto": "cudnn", "fused": "cudnn",
                                                                           "flash": "fa2", "unfused": "unfused",
                                                                           "local": "unfused"}), c + "attention_backend", raw)
    mcore.cpu_offload(m, c + "cpu_offloading", c + "cpu_offloading_num_layers")
    mcore.cp_comm_type(m, c + "cp_comm_type", c + "hierarchical_context_parallel_sizes")


def _v1(m: Mapper) -> None:
    p = "model."
    _layout(m, p)
    m.default("software.base", "nemo-24.07", "a NeMo 1.0 config names no release: NeMo 24.07")
    m.default("software.framework", "nemo", "the framework the config is for")
    _put_int(m, p + "micro_batch_size", "job.micro_batch")
    _put_int(m, p + "global_batch_size", "job.global_batch")
    _put_int(m, p + "encoder_seq_length", "job.seq_len")
    if not m.has(p + "num_layers"):
        raise SpecError(p + "num_layers", None, "missing: a NeMo 1.0 config gives the architecture in model.*")
    m.spec["model"] = {"name": "nemo-import"}
    _arch(m, p, gqa=True)
    _v1_model(m, p)
    _v1_precision(m, p)
    _v1_optim(m, p)
    _stack_common(m, p, tp_overlap_key=p + "ub_tp_comm_overlap")
    if m.has(p + "use_flash_attention"):
        on = as_bool(p + "use_flash_attention", m.get(p + "use_flash_attention"))
        m.put("software.attention", "cudnn" if on else "unfused", p + "use_flash_attention", m.config[p + "use_flash_attention"],
              "TE's fused / flash attention" if on else "NeMo sets NVTE_FLASH_ATTN=0 NVTE_FUSED_ATTN=0")
    if m.has(p + "transformer_engine"):
        te = as_bool(p + "transformer_engine", m.get(p + "transformer_engine"))
        m.put("software.fused_norm_linear", te, p + "transformer_engine", m.config[p + "transformer_engine"],
              "TE's LayerNormLinear / LayerNormMLP" if te else "")
        m.put("software.fp8_saves_quantized", te, p + "transformer_engine", m.config[p + "transformer_engine"],
              "TE's Linear keeps the fp8 copy of its input" if te else "")
        m.put("software.fp8_gather_quantized", te, p + "transformer_engine", m.config[p + "transformer_engine"],
              "TE casts its SP shard, then gathers it quantised" if te else "")
    mcore.recompute(m, (p + "activations_checkpoint_granularity", p + "activations_checkpoint_method",
                        p + "activations_checkpoint_num_layers"), mcore.layers_per_chunk(m),
                    "model.activations_checkpoint_granularity null: no recompute")


def _v1_model(m: Mapper, p: str) -> None:
    if m.has(p + "activation"):
        raw = m.get(p + "activation")
        m.put("model.mlp", choice(p + "activation", raw, ACTIVATIONS), p + "activation", raw)
    if m.has(p + "bias"):
        m.put("model.bias", as_bool(p + "bias", m.get(p + "bias")), p + "bias", m.config[p + "bias"])
    mcore.dropout(m, lambda n: p + n, 0.1)
    if "vocab" not in m.spec["model"]:
        key = next((k for k in (p + "tokenizer.type", p + "tokenizer.model") if tokenizer_vocab(m.config.get(k))), None)
        if key is None:
            m.missing["model.vocab"] = SpecError(p + "tokenizer.type", m.config.get(p + "tokenizer.type"),
                                                 "teton needs the vocabulary and cannot read tokenizer files: "
                                                 "import with --set model.vocab=N")
            return
        vocab = tokenizer_vocab(m.get(key))
        div = as_int(p + "make_vocab_size_divisible_by", m.get(p + "make_vocab_size_divisible_by", 128))
        padded = padded_vocab(vocab, div, m.spec["job"].get("tp", 1))
        m.put("model.vocab", padded, key, m.config[key], f"the tokenizer's {vocab}, padded to a multiple of {div} x tp")
    if "max_seq_len" not in m.spec["model"] and "seq_len" in m.spec["job"]:
        m.default("model.max_seq_len", m.spec["job"]["seq_len"], "model.encoder_seq_length")


def _v1_precision(m: Mapper, p: str) -> None:
    if m.has(p + "fp8") and as_bool(p + "fp8", m.get(p + "fp8")):
        m.put("job.precision", "fp8", p + "fp8", True, "TE fp8 GEMMs")
        m.default("software.fp8_recipe", "delayed", "NeMo 1.0's fp8 is TE's delayed scaling")
        if m.has(p + "fp8_params"):
            m.put("software.fp8_param_gather", as_bool(p + "fp8_params", m.get(p + "fp8_params")), p + "fp8_params",
                  m.config[p + "fp8_params"], "the layers' weights kept in fp8 only and all-gathered in fp8")
        m.get("trainer.precision")
        return
    m.get(p + "fp8")
    if not m.has("trainer.precision"):
        raise SpecError("trainer.precision", None, "missing: teton prices bf16 and fp8 (NeMo's default is fp32)")
    _bf16(m, "trainer.precision", m.get("trainer.precision"))
    if m.has(p + "fp8"):
        m.put("job.precision", "bf16", p + "fp8", m.config[p + "fp8"], "fp8 off")


def _v1_optim(m: Mapper, p: str) -> None:
    o = p + "optim."
    name = m.get(o + "name")
    sharded = name in ("distributed_fused_adam", "mcore_distributed_optim")
    m.put("job.zero", 1 if sharded else 0, o + "name", name, "optimizer state sharded over DP" if sharded else "")
    for key, field in (("overlap_grad_sync", "overlap_dp_comm"), ("overlap_param_sync", "overlap_param_gather")):
        if m.has(o + key):
            m.put(f"software.{field}", as_bool(o + key, m.get(o + key)), o + key, m.config[o + key])
    if m.has(o + "grad_sync_dtype"):
        raw = m.get(o + "grad_sync_dtype")
        m.put("software.grad_accum_dtype", choice(o + "grad_sync_dtype", raw, {"bf16": "bf16", "fp32": "fp32"}),
              o + "grad_sync_dtype", raw)
