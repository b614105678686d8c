"""Megatron-LM: a ``pretrain_gpt.py`` argument list (megatron/training/arguments.py), optionally
under ``torchrun --nnodes N --nproc-per-node G``, in a launch script or an argument file.

Flags take Megatron-LM's defaults when absent, as ``arguments.py`` sets them: no sequence parallelism,
no distributed optimizer, no DP overlap, GELU, LayerNorm, learned absolute positions, tied embeddings,
biases, dropout 0.1, fp32 unless ``--bf16`` / ``--fp16`` / ``--fp8-format`` (fp32 is an error: teton
prices bf16 and fp8). The stack is Megatron-Core with Transformer Engine (``megatron-core-0.8``), with
what the flags say over it; under ``--deepspeed`` it is Megatron-DeepSpeed (``megatron-deepspeed``,
:mod:`teton.spec.frameworks.megatron_deepspeed`). MoE routing and expert GEMMs, MLA, windows, MTP
and QKV biases: :mod:`teton.spec.frameworks.megatron_arch` (shared with NeMo 2.0); the
precision-aware optimizer's dtypes: :mod:`teton.spec.frameworks.mcore_optim`.
"""

from __future__ import annotations

import teton.spec.frameworks.mcore as mcore
import teton.spec.frameworks.mcore_optim as optim
import teton.spec.frameworks.megatron_arch as arch
import teton.spec.frameworks.megatron_deepspeed as deepspeed
from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, Why, as_int, choice, padded_vocab, tokenizer_vocab
from teton.spec.frameworks.shell import parse_flags, read_command
from teton.spec.model import MODEL_PRESETS

BASE = "megatron-core-0.8"
_FUSION = "teton's elementwise fusion is all or none (software.elementwise: fused)"
NO_MEANING = {
    **dict.fromkeys(("--lr", "--min-lr", "--lr-decay-style", "--lr-decay-iters", "--lr-decay-samples",
                     "--lr-warmup-iters", "--lr-warmup-samples", "--lr-warmup-fraction", "--lr-wsd-decay-style",
                     "--lr-wsd-decay-iters", "--weight-decay", "--start-weight-decay", "--end-weight-decay",
                     "--clip-grad", "--adam-beta1", "--adam-beta2", "--adam-eps", "--sgd-momentum", "--optimizer",
                     "--init-method-std", "--train-iters", "--train-samples", "--seed", "--rampup-batch-size",
                     "--loss-scale", "--initial-loss-scale", "--min-loss-scale", "--loss-scale-window",
                     "--hysteresis", "--norm-epsilon", "--rotary-base", "--rotary-percent", "--rope-scaling-factor",
                     "--use-rope-scaling", "--rotary-seq-len-interpolation-factor", "--exit-interval",
                     "--exit-duration-in-mins", "--apply-query-key-layer-scaling", "--attention-softmax-in-fp32",
                     "--moe-aux-loss-coeff", "--moe-z-loss-coeff", "--mtp-loss-scaling-factor",
                     "--moe-router-pre-softmax", "--moe-router-dtype",
                     "--calculate-per-token-loss", "--no-load-optim", "--no-load-rng",
                     "--finetune", "--use-checkpoint-args", "--override-opt-param-scheduler",
                     "--use-checkpoint-opt_param-scheduler"), Why.TRAINING),
    **dict.fromkeys(("--data-path", "--train-data-path", "--valid-data-path", "--test-data-path", "--split",
                     "--tokenizer-type", "--tokenizer-model", "--vocab-file", "--merge-file", "--data-cache-path",
                     "--mock-data", "--num-workers", "--dataloader-type", "--no-create-attention-mask-in-dataloader",
                     "--reset-position-ids", "--reset-attention-mask", "--eod-mask-loss", "--data-args-path",
                     "--blend", "--per-split-data-args-path"), Why.DATA),
    **dict.fromkeys(("--save", "--load", "--save-interval", "--eval-interval", "--eval-iters", "--log-interval",
                     "--tensorboard-dir", "--wandb-project", "--wandb-exp-name", "--wandb-save-dir",
                     "--log-throughput", "--log-timers-to-tensorboard", "--log-validation-ppl-to-tensorboard",
                     "--log-memory-to-tensorboard", "--log-num-zeros-in-grad", "--log-params-norm",
                     "--timing-log-level", "--timing-log-option", "--ckpt-format", "--async-save",
                     "--dist-ckpt-strictness", "--ckpt-fully-parallel-save", "--ckpt-fully-parallel-load",
                     "--profile", "--profile-step-start", "--profile-step-end", "--use-pytorch-profiler",
                     "--tensorboard-log-interval", "--log-loss-scale-to-tensorboard", "--non-persistent-save-interval",
                     "--log-straggler", "--logging-level"), Why.LOGGING),
    **dict.fromkeys(("--distributed-backend", "--distributed-timeout-minutes", "--use-mcore-models",
                     "--use-legacy-models", "--manual-gc", "--manual-gc-interval", "--no-gradient-accumulation-fusion-check",
                     "--ddp-bucket-size", "--ddp-average-in-collective", "--bf16-reduce-dtype", "--use-cpu-initialization",
                     "--empty-unused-memory-level", "--check-for-nan-in-loss-and-grad", "--cross-entropy-fusion-impl",
                     "--num-distributed-optimizer-instances", "--tp-comm-overlap-cfg", "--deterministic-mode",
                     "--local-rank"), Why.RUNTIME),
    **dict.fromkeys(("--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-swiglu-fusion",
                     "--no-bias-dropout-fusion", "--no-rope-fusion", "--no-persist-layer-norm"), _FUSION),
    **dict.fromkeys(("--fp8-margin", "--fp8-interval", "--fp8-amax-history-len", "--fp8-amax-compute-algo",
                     "--no-fp8-wgrad"), Why.FP8_KNOB),
    "--moe-permute-fusion": _FUSION,
    "--make-vocab-size-divisible-by": "read with the vocabulary: it pads model.vocab",
    "torchrun ": Why.RUNTIME,
    "deepspeed ": Why.RUNTIME,
}


def import_megatron(text: str, gpus: int | None = None) -> Mapper:
    launcher, args = read_command(text)
    m = Mapper("megatron", {**_launcher_flags(launcher), **parse_flags(args)}, NO_MEANING)
    m.gpus_option = gpus
    _gpus(m)
    _layout(m)
    _model(m)
    _batch(m)
    _precision(m)
    _stack(m)
    checkpointing = deepspeed.checkpoint_activations(m)
    deepspeed.checkpoint_and_offload_options(m, checkpointing)
    if not checkpointing:
        mcore.recompute(m, ("--recompute-granularity", "--recompute-method", "--recompute-num-layers"),
                        mcore.layers_per_chunk(m), "no --recompute-granularity: Megatron-LM keeps every activation",
                        "--recompute-modules")
        if m.get("--recompute-activations"):  # the old spelling of selective
            m.put("job.recompute", "selective", "--recompute-activations", True)
    m.leftovers()
    return m


def _launcher_flags(tokens: list[str]) -> dict[str, object]:
    """The launcher's tokens as ``torchrun --flag`` (or ``deepspeed --flag``) keys (another
    launcher: one row of its words)."""
    at = next((i for i, t in enumerate(tokens) if t.endswith("torchrun") or t.startswith("torch.distributed.")), None)
    if at is None:
        flags = deepspeed.launcher_flags(tokens)
        return flags if flags is not None else {"(launcher)": " ".join(tokens)} if tokens else {}
    flags = parse_flags(tokens[at + 1:])
    return {f"torchrun {k}": v for k, v in flags.items()}


def _gpus(m: Mapper) -> None:
    nodes_key, nodes = m.first("torchrun --nnodes")
    per_key, per = m.first("torchrun --nproc-per-node")
    if nodes_key is None and per_key is None:
        deepspeed.gpus(m)
        return
    n = as_int(nodes_key, nodes) if nodes_key else 1
    g = as_int(per_key, per) if per_key else 1
    if nodes_key is None:
        m.default("job.gpus", n * g, "torchrun without --nnodes: one node", write=False)
    key = " x ".join(k for k in (nodes_key and "--nnodes", per_key and "--nproc-per-node") if k)
    m.put("job.gpus", n * g, f"torchrun {key}", f"{n} x {g}")


def _layout(m: Mapper) -> None:
    for flag, field in (("--tensor-model-parallel-size", "tp"), ("--pipeline-model-parallel-size", "pp"),
                        ("--context-parallel-size", "cp"), ("--expert-model-parallel-size", "ep"),
                        ("--expert-tensor-parallel-size", "etp")):
        if m.has(flag):
            m.put(f"job.{field}", as_int(flag, m.get(flag)), flag, m.get(flag))
    if m.get("--use-tp-pp-dp-mapping"):  # Megatron-Core's other order, "tp-cp-ep-pp-dp"
        m.put("job.parallel_order", ["tp", "cp", "ep", "pp", "dp"], "--use-tp-pp-dp-mapping", True)
    if m.get("--sequence-parallel"):
        m.put("job.sequence_parallel", True, "--sequence-parallel", True)
    else:
        m.default("job.sequence_parallel", False, "no --sequence-parallel: Megatron-LM's default is off")
    _virtual(m)
    mcore.cp_comm_type(m, "--cp-comm-type", "--hierarchical-context-parallel-sizes")
    mcore.pipeline_split(m, "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                         "--pipeline-model-parallel-layout", ("--account-for-embedding-in-pipeline-split",
                                                               "--account-for-loss-in-pipeline-split"))
    if deepspeed.zero(m):  # Megatron-DeepSpeed: --zero-stage
        return
    if m.get("--use-torch-fsdp2"):
        m.put("job.zero", 3, "--use-torch-fsdp2", True, "FSDP2 shards parameters, gradients and optimizer state")
        if m.has("--use-distributed-optimizer"):
            m.ignore("--use-distributed-optimizer", True, "superseded by --use-torch-fsdp2 (job.zero 3)")
    elif m.get("--use-distributed-optimizer"):
        m.put("job.zero", 1, "--use-distributed-optimizer", True, "optimizer state sharded over DP")
    else:
        m.default("job.zero", 0, "no --use-distributed-optimizer: Megatron-LM replicates the optimizer state")


def _virtual(m: Mapper) -> None:
    key, raw = m.first("--virtual-pipeline-model-parallel-size", "--num-virtual-stages-per-pipeline-rank")
    per_key, per = m.first("--num-layers-per-virtual-pipeline-stage")
    job = m.spec["job"]
    if key is not None:
        v = as_int(key, raw)
    elif per_key is not None:
        layers = as_int("--num-layers", m.get("--num-layers"))
        chunk = as_int(per_key, per)
        pp = job.get("pp", 1)
        if layers % (chunk * pp):
            raise SpecError(per_key, per, f"--num-layers ({layers}) must be a multiple of it times "
                            f"--pipeline-model-parallel-size ({pp})")
        v, key, raw = layers // (chunk * pp), per_key, per
    else:
        return
    if v > 1:
        m.put("job.virtual_stages", v, key, raw, "chunks per pipeline rank")
        m.put("job.pp_schedule", "interleaved", key, raw, "Megatron-LM's interleaved 1F1B")


def _model(m: Mapper) -> None:
    def key_of(name: str) -> str:
        return "--" + name.replace("_", "-")

    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads"):
        if not m.has(flag):
            raise SpecError(flag, None, "missing: Megatron-LM requires it, and teton needs it for the model")
    m.spec["model"] = {"name": "megatron-import"}
    mcore.arch_numbers(m, key_of)
    mcore.kv_heads(m, key_of, "--group-query-attention")
    hidden = m.spec["model"]["hidden"]
    swiglu = bool(m.get("--swiglu"))
    if swiglu:
        m.put("model.mlp", "swiglu", "--swiglu", True)
    elif m.get("--squared-relu"):
        m.put("model.mlp", "relu2", "--squared-relu", True)
    else:
        m.default("model.mlp", "gelu", "no --swiglu: Megatron-LM's GELU MLP")
    if "ffn_hidden" not in m.spec["model"]:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden
        m.default("model.ffn_hidden", ffn, "Megatron-LM's default: " + ("int(8h/3 / 64) * 64 with --swiglu"
                                                                         if swiglu else "4h"))
    _model_flags(m)
    arch.attention(m)
    arch.mtp(m)
    arch.moe_routing(m)
    _vocab(m)


def _model_flags(m: Mapper) -> None:
    if m.has("--normalization"):
        raw = m.get("--normalization")
        m.put("model.norm", choice("--normalization", raw, {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}),
              "--normalization", raw)
    else:
        m.default("model.norm", "layernorm", "no --normalization: Megatron-LM's LayerNorm")
    if m.get("--use-rotary-position-embeddings"):
        m.put("model.position_embedding", "rope", "--use-rotary-position-embeddings", True)
    elif m.has("--position-embedding-type"):
        raw = m.get("--position-embedding-type")
        m.put("model.position_embedding", choice("--position-embedding-type", raw,
                                                 {"learned_absolute": "learned", "rope": "rope", "yarn": "yarn"}),
              "--position-embedding-type", raw)
    else:
        m.default("model.position_embedding", "learned", "Megatron-LM's default: learned_absolute")
    if m.get("--untie-embeddings-and-output-weights"):
        m.put("model.tied_embeddings", False, "--untie-embeddings-and-output-weights", True)
    else:
        m.default("model.tied_embeddings", True, "Megatron-LM ties the output layer to the embedding by default")
    if m.get("--disable-bias-linear"):
        m.put("model.bias", False, "--disable-bias-linear", True)
    else:
        m.default("model.bias", True, "no --disable-bias-linear: Megatron-LM's linear layers have biases")
    arch.qkv_bias(m, "--add-qkv-bias", "--disable-bias-linear")
    mcore.dropout(m, lambda n: "--" + n.replace("_", "-"), 0.1, ("hidden_dropout", "attention_dropout"))
    if m.spec["model"].get("experts", 1) > 1 and "top_k" not in m.spec["model"]:
        m.default("model.top_k", 2, "Megatron-LM's --moe-router-topk default")
    arch.moe_layers(m)
    arch.moe_capacity(m)
    seq_key, seq = m.first("--seq-length")
    if seq_key is None:
        raise SpecError("--seq-length", None, "missing: Megatron-LM requires it (job.seq_len)")
    m.put("job.seq_len", as_int(seq_key, seq), seq_key, seq)
    if "max_seq_len" not in m.spec["model"]:
        m.default("model.max_seq_len", as_int(seq_key, seq), "Megatron-LM's --max-position-embeddings default: "
                  "--seq-length")


def _vocab(m: Mapper) -> None:
    key, raw = m.first("--vocab-size", "--padded-vocab-size")
    tokenizer = m.config.get("--tokenizer-type")
    if key is None:
        hits = [(k, m.config[k]) for k in ("--tokenizer-type", "--tokenizer-model")
                if tokenizer_vocab(m.config.get(k)) is not None]
        if not hits:
            m.missing["model.vocab"] = SpecError("--vocab-size", None, "missing: teton needs the vocabulary and cannot "
                                                 f"read tokenizer files ({tokenizer or 'no --tokenizer-type'}); add "
                                                 "--vocab-size N (or import with --set model.vocab=N)")
            return
        key, raw = hits[0]
        vocab = tokenizer_vocab(raw)
    else:
        vocab = as_int(key, raw)
    if key == "--padded-vocab-size":
        m.put("model.vocab", vocab, key, raw)
        return
    div = as_int("--make-vocab-size-divisible-by", m.get("--make-vocab-size-divisible-by", 128))
    tp = m.spec["job"].get("tp", 1)
    padded = padded_vocab(vocab, div, tp)
    m.put("model.vocab", padded, key, raw, f"padded to a multiple of {div} x tp {tp}, as Megatron-LM allocates it"
          if padded != vocab else "")


def _batch(m: Mapper) -> None:
    if not m.has("--micro-batch-size"):
        raise SpecError("--micro-batch-size", None, "missing: Megatron-LM requires it (job.micro_batch)")
    m.put("job.micro_batch", as_int("--micro-batch-size", m.get("--micro-batch-size")), "--micro-batch-size",
          m.get("--micro-batch-size"))
    if m.has("--global-batch-size"):
        raw = m.get("--global-batch-size")
        m.put("job.global_batch", as_int("--global-batch-size", raw), "--global-batch-size", raw)
    else:
        m.default("job.global_batch", "dp x micro_batch", "Megatron-LM's default: one micro-batch per DP rank",
                  write=False)


def _precision(m: Mapper) -> None:
    fp8_key, fp8 = m.first("--fp8-format", "--fp8")
    bf16, fp16 = m.get("--bf16"), m.get("--fp16")
    if fp8_key is not None:
        choice(fp8_key, fp8, {"hybrid": "fp8", "e4m3": "fp8"})
        m.put("job.precision", "fp8", fp8_key, fp8, "TE fp8 GEMMs (bf16 elsewhere)")
        if bf16 or fp16:
            m.put("job.precision", "fp8", "--bf16" if bf16 else "--fp16", True, "the dtype of what fp8 does not cover")
        if m.has("--fp8-recipe"):
            mcore.fp8_recipe(m, "--fp8-recipe", m.get("--fp8-recipe"))
        else:
            m.default("software.fp8_recipe", "delayed", "Megatron-LM's --fp8-recipe default")
    elif bf16:
        m.put("job.precision", "bf16", "--bf16", True)
    elif fp16:
        m.put("job.precision", "bf16", "--fp16", True, "priced as bf16 (the same tensor-core rate); the loss "
              "scaler is not modelled")
    else:
        raise SpecError("--bf16", None, "missing: without --bf16, --fp16 or --fp8-format Megatron-LM trains in "
                        "fp32, which teton does not price (bf16 and fp8 only)")
    if m.has("--fp8-recipe") and fp8_key is None:
        m.ignore("--fp8-recipe", m.get("--fp8-recipe"), "ignored by Megatron-LM without --fp8-format")
    if m.get("--first-last-layers-bf16"):
        start = as_int("--num-layers-at-start-in-bf16", m.get("--num-layers-at-start-in-bf16", 1), 0)
        end = as_int("--num-layers-at-end-in-bf16", m.get("--num-layers-at-end-in-bf16", 1), 0)
        if start != end:
            raise SpecError("--num-layers-at-end-in-bf16", end, f"teton keeps as many bf16 layers at each end "
                            f"(software.fp8_bf16_layers); --num-layers-at-start-in-bf16 is {start}")
        m.put("software.fp8_bf16_layers", start, "--first-last-layers-bf16", True, "layers at each end in bf16")
    if m.get("--fp8-param-gather"):
        m.put("software.fp8_param_gather", True, "--fp8-param-gather", True,
              "the layers' weights kept in fp8 only and all-gathered in fp8")
    optim.optimizer_dtypes(m)


def _stack(m: Mapper) -> None:
    on_deepspeed = deepspeed.stack(m)
    if not on_deepspeed:
        m.default("software.base", BASE, "Megatron-LM names no release: Megatron-Core r0.8 with Transformer Engine")
        m.default("software.framework", "megatron-lm", "the framework the config is for")
    local = m.get("--transformer-impl") == "local"
    if local:
        m.put("software.fused_norm_linear", False, "--transformer-impl", "local", "Megatron's own layers, no TE")
        m.put("software.fp8_saves_quantized", False, "--transformer-impl", "local", "no TE Linear keeps fp8 copies")
        m.put("software.fp8_gather_quantized", False, "--transformer-impl", "local", "SP gathers in bf16, then casts")
    elif m.has("--transformer-impl"):
        raw = m.get("--transformer-impl")
        choice("--transformer-impl", raw, {"transformer_engine": True, "local": False})
        m.put("software.fused_norm_linear", True, "--transformer-impl", raw, "TE's LayerNormLinear / LayerNormMLP")
    _attention(m, local)
    if m.get("--tp-comm-overlap"):
        if local:
            raise SpecError("--tp-comm-overlap", True, "needs Transformer Engine (--transformer-impl transformer_engine)")
        m.put("software.tp_comm_overlap", "full", "--tp-comm-overlap", True, "TE userbuffers")
    elif not on_deepspeed:  # Megatron-DeepSpeed: the preset's (no async TP)
        m.default("software.tp_comm_overlap", "bwd", "no --tp-comm-overlap: only the backward all-gather / "
                  "reduce-scatter overlap the GEMMs (TE / Megatron's async TP)")
    for flag, field in (("--overlap-grad-reduce", "overlap_dp_comm"), ("--overlap-param-gather", "overlap_param_gather")):
        if m.get(flag):
            m.put(f"software.{field}", True, flag, True)
        else:
            m.default(f"software.{field}", False, f"no {flag}: Megatron-LM's default is off")
    if m.get("--cross-entropy-loss-fusion"):
        m.put("software.cross_entropy", "fused", "--cross-entropy-loss-fusion", True)
    else:
        m.default("software.cross_entropy", "vocab_parallel", "no --cross-entropy-loss-fusion: Megatron's "
                  "vocab-parallel cross-entropy")
    if m.get("--overlap-moe-expert-parallel-comm"):
        m.put("software.ep_comm_overlap", True, "--overlap-moe-expert-parallel-comm", True,
              "merged forward-backward ops hide the MoE all-to-all")
    if m.get("--no-gradient-accumulation-fusion"):
        m.put("software.grad_accum_fusion", False, "--no-gradient-accumulation-fusion", True)
    if m.get("--grad-reduce-in-bf16"):
        m.put("software.grad_accum_dtype", "bf16", "--grad-reduce-in-bf16", True)
    elif m.get("--accumulate-allreduce-grads-in-fp32"):
        m.put("software.grad_accum_dtype", "fp32", "--accumulate-allreduce-grads-in-fp32", True)
    _cuda_graphs(m)
    mcore.cpu_offload(m, "--cpu-offloading", "--cpu-offloading-num-layers")


def _attention(m: Mapper, local: bool) -> None:
    if m.has("--attention-backend"):
        raw = m.get("--attention-backend")
        kind = choice("--attention-backend", raw, {"auto": "cudnn", "fused": "cudnn", "flash": "fa2",
                                                   "unfused": "unfused", "local": "unfused"})
        m.put("software.attention", kind, "--attention-backend", raw,
              "TE picks cuDNN fused attention on Hopper" if raw == "auto" else "")
    elif m.get("--use-flash-attn"):
        m.put("software.attention", "fa2", "--use-flash-attn", True, "FlashAttention-2")
    elif local:
        m.default("software.attention", "unfused", "--transformer-impl local without --use-flash-attn: "
                  "Megatron's own softmax attention")
    if m.has("--attention-backend") and m.has("--use-flash-attn"):
        m.ignore("--use-flash-attn", m.get("--use-flash-attn"), "superseded by --attention-backend")


def _cuda_graphs(m: Mapper) -> None:
    """Megatron-Core's CUDA graphs (``TransformerConfig.cuda_graph_impl`` / ``cuda_graph_modules``,
    core 0.19): ``--cuda-graph-impl full_iteration`` (or the deprecated scope ``full_iteration``)
    captures the whole step (``full``); ``local`` / ``transformer_engine`` (or the older
    ``--enable-cuda-graph`` / ``--external-cuda-graph``) capture each layer, whole when the modules
    (``--cuda-graph-modules``, formerly ``--cuda-graph-scope``) are empty or cover both a layer's
    mixer (``attn`` / ``mamba``) and its feed-forward part (``mlp``, or ``moe`` for an MoE model)
    (``layers``). Modules that leave part of a layer out (``attn moe_router moe_preprocess``: the
    experts and the dispatch stay eager) are not modelled: every kernel is taken as CPU-launched."""
    scope_key, scope = m.first("--cuda-graph-modules", "--cuda-graph-scope")
    # one value, a comma-separated list, or several values
    values = [] if scope_key is None else scope if isinstance(scope, list) else [str(scope)]
    modules = {v for value in values for v in value.replace(",", " ").split()}
    on_key, on = m.first("--enable-cuda-graph", "--external-cuda-graph", "--cuda-graph-impl")
    if on_key == "--cuda-graph-impl" and str(on) == "none":
        on_key = None
    if "full_iteration" in modules or (on_key == "--cuda-graph-impl" and str(on) == "full_iteration"):
        key, raw = (scope_key, scope) if "full_iteration" in modules else (on_key, on)
        m.put("software.cuda_graphs", "full", key, raw, "the whole iteration captured")
        return
    if on_key is None:
        m.default("software.cuda_graphs", "none", "no CUDA graph flag: every kernel launched by the CPU")
        return
    model = m.spec.get("model")
    model = MODEL_PRESETS.get(model, {}) if isinstance(model, str) else model or {}
    ffn = "moe" if model.get("experts", 1) > 1 else "mlp"
    if not modules or modules == {"full"} or (modules & {"attn", "mamba"} and ffn in modules):
        m.put("software.cuda_graphs", "layers", on_key, on, "each layer's forward and backward captured")
    else:
        m.put("software.cuda_graphs", "none", scope_key, scope,
              f"only {', '.join(sorted(modules))} captured, so each layer's {ffn} part stays eager; partial "
              "graphs are not modelled: every kernel is taken as CPU-launched")
