"""MaxText: a run's YAML (the keys of MaxText/configs/base.yml, whose defaults fill what it leaves
out: ``ici_fsdp_parallelism: -1``, ``dcn_data_parallelism: -1``, ``remat_policy: full``,
``dtype: bfloat16``).

``model_name`` names a teton preset (``llama3-70b``); ``default`` or none builds the model from
``base_emb_dim`` and the other ``base_*`` keys, base.yml's values for those it leaves out
(16 layers, width 2048, MLP 7168, 16 query and 16 KV heads of 128, vocabulary 32,000). The mesh: on GPUs a MaxText slice is one VM of
8 GPUs (A3 / A4: ``num_slices`` is the VM count), so the ``ici_*`` axes multiply to 8 and the
``dcn_*`` axes to the VMs; one ``-1`` in each is filled. tensor -> tp, pipeline -> pp, context
-> cp, expert -> ep, data x fsdp -> dp: FSDP (fsdp > 1) is ZeRO-3, data alone ZeRO-0, both at once
(HSDP) an error. Other axes above 1 are errors (not modelled).
"""

from __future__ import annotations

from math import prod
from typing import Any

import teton.spec.frameworks.mcore as mcore
from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, Why, as_bool, as_float, as_int, choice, flatten

SLICE_GPUS = 8  # GPUs a MaxText ICI mesh spans on A3 / A4 VMs
AXES = ("data", "fsdp", "fsdp_transpose", "sequence", "context", "context_autoregressive", "tensor",
        "tensor_transpose", "tensor_sequence", "expert", "autoregressive", "pipeline")
TETON_AXIS = {"tensor": "tp", "pipeline": "pp", "context": "cp", "expert": "ep"}
DEFAULTS = {"ici_fsdp_parallelism": -1, "dcn_data_parallelism": -1}  # base.yml; every other axis 1
MODELS = ("llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3.1-8b",
          "llama3.1-70b", "llama3.1-405b", "mixtral-8x7b", "mixtral-8x22b", "gpt3-175b")
BASE_FIELDS = (("base_num_decoder_layers", "layers"), ("base_emb_dim", "hidden"), ("base_mlp_dim", "ffn_hidden"),
               ("base_num_query_heads", "heads"), ("base_num_kv_heads", "kv_heads"), ("head_dim", "head_dim"),
               ("vocab_size", "vocab"), ("num_experts", "experts"), ("num_experts_per_tok", "top_k"))
# MaxText/configs/base.yml's values of those keys (maxtext 0.2.5): what model_name default builds
# from when the YAML leaves them out (num_experts 1, num_experts_per_tok 1: a dense model)
BASE_DEFAULTS = {"base_num_decoder_layers": 16, "base_emb_dim": 2048, "base_mlp_dim": 7168, "base_num_query_heads": 16,
                 "base_num_kv_heads": 16, "head_dim": 128, "vocab_size": 32000}
NO_MEANING = {
    **dict.fromkeys(("learning_rate", "adam_b1", "adam_b2", "adam_eps", "adam_weight_decay", "opt_type", "steps",
                     "warmup_steps_fraction", "cosine_learning_rate_final_fraction", "learning_rate_schedule_steps",
                     "gradient_clipping_threshold", "init_weights_seed", "normalization_layer_epsilon", "rope_max_timescale",
                     "rope_min_timescale", "decoder_block", "load_balance_loss_weight", "enable_dropout",
                     "dropout_rate"), Why.TRAINING),
    **dict.fromkeys(("dataset_type", "dataset_path", "dataset_name", "tokenizer_path", "train_split", "eval_split",
                     "hf_path", "hf_data_dir", "grain_train_files", "add_bos", "add_eos", "packing"), Why.DATA),
    **dict.fromkeys(("run_name", "base_output_directory", "enable_checkpointing", "async_checkpointing",
                     "checkpoint_period", "log_period", "enable_tensorboard", "profiler", "skip_first_n_steps_for_profiler",
                     "profiler_steps", "eval_interval", "eval_steps", "metrics_file", "gcs_metrics", "save_config_to_gcs",
                     "load_parameters_path", "load_full_state_path"), Why.LOGGING),
    **dict.fromkeys(("hardware", "num_slices", "skip_jax_distributed_system", "jax_cache_dir", "compile_topology",
                     "enable_single_controller", "allow_split_physical_axes", "reuse_example_batch", "scan_layers",
                     "param_scan_axis"), Why.RUNTIME),
    "base_config": "the config MaxText reads first: its defaults are the ones the importer fills in",
    "weight_dtype": "teton keeps fp32 master weights (mixed precision)",
    "logits_dot_in_fp32": Why.NOT_MODELLED,
    "capacity_factor": "not read (MaxText's default -1 is dropless): give token dropping as --set "
                       "model.capacity_factor=F and, for fixed-shape expert buffers, model.pad_to_capacity=true",
    "megablox": Why.NOT_MODELLED + " (one expert GEMM pricing)",
    "sparse_matmul": Why.NOT_MODELLED + " (one expert GEMM pricing)",
}


TRAIN_SCRIPTS = ("MaxText/train.py", "MaxText.train", "maxtext/train.py", "src/MaxText/train.py")


def command_config(text: str) -> dict[str, Any] | None:
    """The ``key=value`` overrides of a ``python3 MaxText/train.py MaxText/configs/base.yml k=v ...``
    (or ``-m MaxText.train``) command line, values read as YAML scalars; None when ``text`` runs
    no MaxText training script. The base config's path is kept as ``base_config``."""
    from teton.spec.frameworks.shell import command_lines
    from teton.spec.load import parse_value

    for tokens in command_lines(text):
        at = next((i for i, t in enumerate(tokens) if t.endswith(TRAIN_SCRIPTS)), None)
        if at is None:
            continue
        out: dict[str, Any] = {}
        for i, token in enumerate(tokens[at + 1:]):
            key, eq, value = token.partition("=")
            if eq and key and not key.startswith("-"):
                out[key] = parse_value(value)
            elif token.endswith((".yml", ".yaml")) and "base_config" not in out:
                out["base_config"] = token
            else:
                out[f"(argument {i + 1})"] = token
        return out
    return None


def import_maxtext(data: dict[str, Any], gpus: int | None = None) -> Mapper:
    m = Mapper("maxtext", flatten(data), NO_MEANING)
    m.gpus_option = gpus
    if str(m.config.get("hardware", "gpu")).lower() == "tpu":
        raise SpecError("hardware", "tpu", "teton models GPU clusters: gpu or gpu_multiprocess")
    _model(m)
    _mesh(m)
    _batch(m)
    _precision(m)
    _stack(m)
    m.leftovers()
    return m


def _model(m: Mapper) -> None:
    name = m.get("model_name", "default")
    scale = m.get("global_parameter_scale", 1)
    if as_int("global_parameter_scale", scale) != 1:
        raise SpecError("global_parameter_scale", scale, "must be 1: give the sizes in the base_* keys")
    if name in MODELS:
        m.put("model", name, "model_name", name)
    elif name != "default":
        raise SpecError("model_name", name, f"one of {', '.join(MODELS)}, or default with the base_* keys")
    else:
        m.spec["model"] = {"name": "maxtext-import"}
        for key, field in BASE_FIELDS:
            if key in BASE_DEFAULTS and not m.has(key):
                m.default(f"model.{field}", BASE_DEFAULTS[key], f"MaxText base.yml's {key}: {BASE_DEFAULTS[key]}")
        for key, field, value, raw in (("mlp_activations", "mlp", "swiglu", "[silu, linear]"),
                                       ("logits_via_embedding", "tied_embeddings", False, "false")):
            if not m.has(key):
                m.default(f"model.{field}", value, f"MaxText base.yml's {key}: {raw}")
    for key, field in BASE_FIELDS:
        if m.has(key):
            value = as_int(key, m.get(key))
            if not (field == "experts" and value == 1):
                mcore.put_model(m, field, value, key, m.config[key])
    if m.has("mlp_activations"):
        acts = m.get("mlp_activations")
        mlp = choice("mlp_activations", ",".join(map(str, acts)) if isinstance(acts, list) else acts,
                     {"silu,linear": "swiglu", "gelu": "gelu", "relu,linear": "swiglu"})
        mcore.put_model(m, "mlp", mlp, "mlp_activations", acts)
    if m.has("logits_via_embedding"):
        raw = m.get("logits_via_embedding")
        mcore.put_model(m, "tied_embeddings", as_bool("logits_via_embedding", raw), "logits_via_embedding", raw)
    if isinstance(m.spec.get("model"), dict) and "name" in m.spec["model"]:
        m.default("model.dropout", False, "MaxText's dropout_rate default: 0")
    seq = m.get("max_target_length")
    if seq is None:
        raise SpecError("max_target_length", None, "missing: teton needs the sequence length")
    else:
        m.put("job.seq_len", as_int("max_target_length", seq), "max_target_length", seq)


def _degrees(m: Mapper, kind: str) -> dict[str, int]:
    out = {}
    for axis in AXES:
        key = f"{kind}_{axis}_parallelism"
        out[axis] = as_int(key, m.get(key, DEFAULTS.get(key, 1)), allow=(-1,))
    if list(out.values()).count(-1) > 1:
        raise SpecError(f"{kind}_*_parallelism", -1, "at most one axis may be -1")
    return out


def _fill(kind: str, degrees: dict[str, int], total: int) -> dict[str, int]:
    known = prod(v for v in degrees.values() if v != -1)
    if -1 in degrees.values():
        if total % known:
            raise SpecError(f"{kind}_*_parallelism", known, f"the given {kind} axes must divide {total}")
        return {a: (total // known if v == -1 else v) for a, v in degrees.items()}
    if known != total:
        raise SpecError(f"{kind}_*_parallelism", known, f"the {kind} axes multiply to {known}, not {total}")
    return degrees


def _mesh(m: Mapper) -> None:
    ici, dcn = _degrees(m, "ici"), _degrees(m, "dcn")
    gpus = m.gpus_option
    if gpus is None:
        if -1 in ici.values() or -1 in dcn.values():
            raise SpecError("gpus", None, "a -1 parallelism axis is filled from the GPU count: give --gpus N")
        gpus = prod(ici.values()) * prod(dcn.values())
        m.put("job.gpus", gpus, "the product of the ici_* and dcn_* axes", gpus)
    else:
        m.put("job.gpus", gpus, "option gpus", gpus)
    ici = _fill("ici", ici, min(SLICE_GPUS, gpus))
    if gpus % prod(ici.values()):
        raise SpecError("gpus", gpus, f"must be a multiple of the ici axes' product ({prod(ici.values())})")
    dcn = _fill("dcn", dcn, gpus // prod(ici.values()))
    deg = {a: ici[a] * dcn[a] for a in AXES}
    for axis in AXES:
        keys = f"ici_{axis}_parallelism x dcn_{axis}_parallelism"
        if axis in TETON_AXIS:
            if deg[axis] > 1 or m.has(f"ici_{axis}_parallelism") or m.has(f"dcn_{axis}_parallelism"):
                m.put(f"job.{TETON_AXIS[axis]}", deg[axis], keys, f"{ici[axis]} x {dcn[axis]}")
        elif axis not in ("data", "fsdp", "fsdp_transpose") and deg[axis] > 1:
            raise SpecError(f"ici_{axis}_parallelism", ici[axis], f"{axis} parallelism is not modelled: keep it 1")
    data, fsdp = deg["data"], deg["fsdp"] * deg["fsdp_transpose"]
    if data > 1 and fsdp > 1:
        raise SpecError("dcn_data_parallelism", dcn["data"], f"data {data} x fsdp {fsdp} is HSDP, which teton does not "
                        "model (ZeRO-3 shards over the whole DP group): put the DP ranks on one axis, e.g. "
                        "dcn_fsdp_parallelism: -1 with dcn_data_parallelism: 1")
    dp_keys = [f"{k}_{a}_parallelism" for a in ("data", "fsdp", "fsdp_transpose") for k in ("ici", "dcn")]
    given = " x ".join(k for k in dp_keys if m.has(k)) or "ici_fsdp_parallelism (default -1)"
    m.put("job.dp", data * fsdp, given, f"data {data} x fsdp {fsdp}")
    m.put("job.zero", 3 if fsdp > 1 else 0, given, f"fsdp {fsdp}",
          "FSDP: parameters, gradients and optimizer state sharded" if fsdp > 1 else "data parallelism only")
    m.default("job.sequence_parallel", False, "MaxText's tensor axis keeps activations whole between layers")


def _batch(m: Mapper) -> None:
    job = m.spec["job"]
    raw = m.get("per_device_batch_size", 12.0)
    if not m.has("per_device_batch_size"):
        m.default("job.global_batch", "12 x GPUs", "MaxText's per_device_batch_size default: 12", write=False)
    per = as_float("per_device_batch_size", raw)
    total = per * job["gpus"]
    if not total.is_integer() or total < 1:
        raise SpecError("per_device_batch_size", raw, f"x {job['gpus']} GPUs must be a whole number of sequences")
    ga = as_int("gradient_accumulation_steps", m.get("gradient_accumulation_steps", 1))
    pp = job.get("pp", 1)
    mb = as_int("num_pipeline_microbatches", m.get("num_pipeline_microbatches", -1), allow=(-1,)) if pp > 1 else 1
    mb = pp if mb == -1 else mb
    per_rank = int(total) // job["dp"]
    if int(total) % job["dp"] or per_rank % mb:
        raise SpecError("per_device_batch_size", raw, f"gives {int(total)} sequences a step, not a multiple of "
                        f"dp ({job['dp']}) x pipeline micro-batches ({mb})")
    m.put("job.micro_batch", per_rank // mb, "per_device_batch_size", raw, f"x {job['gpus']} GPUs / dp {job['dp']}"
          + (f" / {mb} pipeline micro-batches" if mb > 1 else ""))
    m.put("job.global_batch", int(total) * ga, "per_device_batch_size", raw, f"x GPUs x gradient_accumulation_steps {ga}")
    if pp > 1:
        m.put("job.pp_schedule", "1f1b", "ici_pipeline_parallelism", pp, "MaxText's circular pipeline, one stage a rank")


def _precision(m: Mapper) -> None:
    dtype = m.get("dtype", "bfloat16")
    choice("dtype", dtype, {"bfloat16": 1}, "teton prices bf16 and fp8")
    quant = m.get("quantization", "")
    if quant in ("", None):
        if m.has("dtype"):
            m.put("job.precision", "bf16", "dtype", dtype)
        else:
            m.default("job.precision", "bf16", "MaxText's dtype default: bfloat16")
        if m.has("quantization"):
            m.put("job.precision", "bf16", "quantization", quant, "no quantization")
        return
    recipe = choice("quantization", quant, {"fp8": "delayed", "te_fp8_delayedscaling": "delayed",
                                            "te_fp8_currentscaling": "current", "te_mxfp8": "mxfp8"},
                    "int8 / nanoo_fp8 / other AQT modes are not modelled")
    m.put("job.precision", "fp8", "quantization", quant)
    m.put("software.fp8_recipe", recipe, "quantization", quant,
          "Flax's fp8 dot with amax history (delayed scaling)" if quant == "fp8" else "TE recipe")


def _stack(m: Mapper) -> None:
    m.default("software.base", "unknown", "MaxText has no teton preset: the across-stack prior")
    m.default("software.framework", "maxtext", "the framework the config is for")
    m.default("software.elementwise", "fused", "XLA fuses the elementwise ops")
    attention = m.get("attention", "autoselected")
    kind = choice("attention", attention, {"autoselected": "fa2", "dot_product": "unfused", "cudnn_flash_te": "cudnn",
                                           "cudnn_flash_jax": "cudnn", "flash": "fa2"})
    if m.has("attention"):
        m.put("software.attention", kind, "attention", attention)
    else:
        m.default("software.attention", kind, "MaxText's autoselected kernel: priced as a flash kernel (ASSUMPTION)")
    policy = m.get("remat_policy", "full")
    choice("remat_policy", policy, {"full": 1}, "the dot-saving and offloading policies keep activations teton "
           "does not model (none, selective, full)")
    if m.has("remat_policy"):
        m.put("job.recompute", "full", "remat_policy", policy, "every layer's input kept, the rest recomputed")
    else:
        m.default("job.recompute", "full", "MaxText's remat_policy default: full")
