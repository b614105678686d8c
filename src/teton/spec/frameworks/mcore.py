"""What Megatron-LM, NeMo 1.0 and NeMo 2.0 share: Megatron-Core's TransformerConfig names
(``num_layers``, ``hidden_size``, ``recompute_granularity`` ...), read through a ``key_of`` that
spells a name as the framework does (``--num-layers``, ``model.num_layers``,
``model.config.num_layers``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapped, Mapper, as_bool, as_int, choice
from teton.spec.model import MODEL_PRESETS
from teton.spec.pipeline_layout import layout_string

KeyOf = Callable[[str], str]

# teton model field <- TransformerConfig name(s), first given wins
ARCH_NUMBERS = (
    ("layers", ("num_layers",)),
    ("hidden", ("hidden_size",)),
    ("heads", ("num_attention_heads",)),
    ("head_dim", ("kv_channels",)),
    ("max_seq_len", ("max_position_embeddings",)),
    ("experts", ("num_moe_experts", "num_experts")),
    ("top_k", ("moe_router_topk",)),
)


def flag(name: str) -> str:
    """Megatron-LM's spelling of a TransformerConfig / OptimizerConfig name (``--qk-layernorm``)."""
    return "--" + name.replace("_", "-")


def given_value(m: Mapper, key: str) -> Any:
    """The value of ``key`` (marked read); None when absent or null."""
    raw = m.get(key)
    return None if raw is None or str(raw) in ("None", "null") else raw


def is_on(m: Mapper, key: str) -> bool:
    """A switch: a bare Megatron-LM flag, or a NeMo key that is true."""
    raw = given_value(m, key)
    return raw is not None and as_bool(key, raw)


def put_model(m: Mapper, field: str, value: Any, key: str, raw: Any, note: str = "") -> None:
    """Set ``model.<field>``; when the model is a preset and agrees, the row is mapped but the
    spec keeps the preset's name (``model: {base: preset, field: value}`` when it differs)."""
    preset = m.spec.get("model") if isinstance(m.spec.get("model"), str) else None
    base = m.spec["model"].get("base") if isinstance(m.spec.get("model"), dict) else None
    name = preset or base
    if name is not None and MODEL_PRESETS.get(name, {}).get(field) == value:
        m.used.add(key)
        m.sources.setdefault(f"model.{field}", key)
        m.mapped.append(Mapped(key, raw, f"model.{field}", value, f"as preset {name}"))
        return
    m.put(f"model.{field}", value, key, raw, note)


def arch_numbers(m: Mapper, key_of: KeyOf) -> None:
    """The integer sizes of the architecture, those the config gives."""
    for field, names in ARCH_NUMBERS:
        key, raw = m.first(*(key_of(n) for n in names))
        if key is None or raw is None:
            continue
        value = as_int(key, raw)
        if field == "experts" and value == 1:
            continue
        put_model(m, field, value, key, raw)
    dense_key, dense = m.first(key_of("ffn_hidden_size"))
    key, raw = m.first(key_of("moe_ffn_hidden_size"))
    if key is not None and raw is not None and (dense_key is None or dense is None):
        put_model(m, "ffn_hidden", as_int(key, raw), key, raw, "the experts' width (no dense width given)")
        return
    if dense_key is not None and dense is not None:
        put_model(m, "ffn_hidden", as_int(dense_key, dense), dense_key, dense)
    if key is not None and raw is not None:
        put_model(m, "moe_ffn_hidden", as_int(key, raw), key, raw, "the routed experts' width")


def kv_heads(m: Mapper, key_of: KeyOf, gqa_flag: str | None) -> None:
    """``num_query_groups`` (under Megatron-LM's ``--group-query-attention`` when ``gqa_flag``)."""
    key, raw = m.first(key_of("num_query_groups"))
    gqa = True if gqa_flag is None else bool(m.get(gqa_flag, False))
    if key is not None and raw is not None and gqa:
        put_model(m, "kv_heads", as_int(key, raw), key, raw)
        if gqa_flag is not None:
            put_model(m, "kv_heads", as_int(key, raw), gqa_flag, True, f"with {key}")
    elif key is not None and raw is not None:
        m.ignore(key, raw, f"ignored by Megatron-LM without {gqa_flag}: every head has its own K/V")


def dropout(m: Mapper, key_of: KeyOf, default: float | None,
            names: tuple[str, ...] = ("hidden_dropout", "attention_dropout", "ffn_dropout")) -> None:
    """``model.dropout``: any dropout rate above zero; a rate not given is the framework's
    ``default`` (None: the preset's, when the config gives none)."""
    given = []
    for name in names:
        key = key_of(name)
        if m.has(key):
            raw = m.get(key)
            try:
                given.append((key, raw, float(raw if raw is not None else 0.0)))
            except (TypeError, ValueError):
                raise SpecError(key, raw, "must be a number in [0, 1)") from None
    if not given and default is None:
        return
    absent = [key_of(n) for n in names if not m.has(key_of(n))]
    on = any(r > 0 for _, _, r in given) or bool(absent and default)
    for key, raw, rate in given:
        put_model(m, "dropout", on, key, raw, "" if rate == 0 else "dropout layers present")
    if absent and default is not None:
        m.default("model.dropout", on, f"{', '.join(absent)} not given: the framework's default rate {default:g}")


def recompute(m: Mapper, keys: tuple[str, str, str], layers_per_chunk: int | None, default_why: str,
              modules_key: str | None = None) -> None:
    """Activation recomputation from (granularity, method, num_layers) keys: selective is
    Megatron's selective recompute (teton's selective) of the modules ``modules_key`` lists
    (:func:`recompute_modules`); full with the uniform method and one layer a group, or the block
    method over every layer of a chunk, is teton's full. Other groupings keep different
    activations: an error, not an approximation."""
    gran_key, method_key, num_key = keys
    gran = m.get(gran_key)
    method, num = m.get(method_key), m.get(num_key)
    if modules_key is not None and m.has(modules_key) and gran != "selective":
        m.ignore(modules_key, m.get(modules_key), f"read only under {gran_key} selective")
    if gran in (None, "null", "None", False):
        if m.has(gran_key):
            m.put("job.recompute", "none", gran_key, gran)
        else:
            m.default("job.recompute", "none", default_why)
        return
    mode = choice(gran_key, gran, {"full": "full", "selective": "selective"})
    if mode == "selective":
        m.put("job.recompute", "selective", gran_key, gran)
        if modules_key is not None and m.has(modules_key):
            recompute_modules(m, modules_key)
        return
    n = 1 if num is None else as_int(num_key, num)
    method = method or "uniform"
    if method == "uniform" and n == 1:
        m.put("job.recompute", "full", gran_key, gran, f"{method_key} uniform, {num_key} 1: every layer")
        return
    if method == "block" and layers_per_chunk is not None and n >= layers_per_chunk:
        m.put("job.recompute", "full", gran_key, gran, f"{method_key} block over all {layers_per_chunk} layers")
        return
    raise SpecError(num_key, num, f"with {method_key} = {method!r}: teton recomputes every layer one by one "
                    f"(uniform with 1, or block with every layer of a chunk{f', {layers_per_chunk}' if layers_per_chunk else ''}); "
                    "groups of layers and partial blocks keep other activations (not modelled)")


def pipeline_split(m: Mapper, first: str, last: str, layout: str, slots: tuple[str, str]) -> None:
    """The stages' layers Megatron-Core is told, under the framework's names: the first / last
    stage's (``num_layers_in_first_pipeline_stage`` / ``_last_``; the middle stages share the rest),
    every stage's (``pipeline_model_parallel_layout``: ``job.pp_layout``), or the embedding and the
    loss each taking a layer's slot (``account_for_embedding_in_pipeline_split`` and
    ``account_for_loss_in_pipeline_split``, both: ``job.pp_embedding_slots``)."""
    for key, field in ((first, "job.pp_first_stage_layers"), (last, "job.pp_last_stage_layers"), (layout, "job.pp_layout")):
        raw = m.get(key)
        if raw is None:
            continue
        if field != "job.pp_layout":
            value = as_int(key, raw, minimum=0)
        else:  # NeMo 2.0 / Megatron-Bridge write it as lists of layer names
            value = raw if isinstance(raw, str) else layout_string(raw, key)
        m.put(field, value, key, raw, "the stages' layers, as Megatron-Core splits them")
    if all(m.get(k) for k in slots):
        m.put("job.pp_embedding_slots", True, slots[0], True, f"with {slots[1]}: each takes one layer's slot")


def fp8_recipe(m: Mapper, key: str, raw: Any) -> None:
    """Megatron-Core / NeMo ``fp8_recipe`` names -> teton's software.fp8_recipe."""
    recipe = choice(key, raw, {"delayed": "delayed", "tensorwise": "current", "mxfp8": "mxfp8",
                               "blockwise": "blockwise"})
    m.put("software.fp8_recipe", recipe, key, raw, "per-tensor current scaling" if recipe == "current" else "")


def cpu_offload(m: Mapper, on_key: str, layers_key: str) -> None:
    on = m.get(on_key)
    layers = m.get(layers_key)
    if on in (None, False, "false", "False"):
        if layers not in (None, 0, "0"):
            m.ignore(layers_key, layers, f"ignored without {on_key}")
        if m.has(on_key):
            m.put("software.cpu_offload_layers", 0, on_key, on)
        else:
            m.default("software.cpu_offload_layers", 0, f"{on_key} not given: no activation offload")
        return
    if layers is None:
        raise SpecError(layers_key, None, f"missing: {on_key} needs the number of layers to offload")
    m.put("software.cpu_offload_layers", as_int(layers_key, layers), layers_key, layers)
    m.used.add(on_key)


def model_value(m: Mapper, field: str, default: Any = None) -> Any:
    """``model.<field>`` of the mapping so far: the config's value, else its preset's (a model
    named by preset, or ``{base: preset, ...}``), else ``default``."""
    model = m.spec.get("model")
    if isinstance(model, str):
        return MODEL_PRESETS.get(model, {}).get(field, default)
    if not isinstance(model, dict):
        return default
    if field in model:
        return model[field]
    return MODEL_PRESETS.get(model.get("base"), {}).get(field, default)


def layers_per_chunk(m: Mapper) -> int | None:
    """Transformer layers per pipeline chunk of the mapping so far (None when not known yet)."""
    layers = model_value(m, "layers")
    job = m.spec["job"]
    chunks = job.get("pp", 1) * job.get("virtual_stages", 1)
    return layers // chunks if layers and chunks and layers % chunks == 0 else None


# Megatron-Core 0.16 TransformerConfig.recompute_modules choices (the order teton lists them in)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")


def recompute_modules(m: Mapper, key: str) -> None:
    """``job.recompute_modules`` from Megatron's ``--recompute-modules`` / ``recompute_modules``
    (one name or a list; Megatron-Core's default without it: ``core_attn``)."""
    raw = m.get(key)
    names = [raw] if isinstance(raw, str) else list(raw or [])
    for name in names:
        if name not in RECOMPUTE_MODULES:
            raise SpecError(key, name, f"not a Megatron-Core recompute module ({', '.join(RECOMPUTE_MODULES)})")
    if not names:  # an empty list recomputes nothing under selective
        m.put("job.recompute", "none", key, raw, "an empty list: nothing recomputed")
        return
    m.put("job.recompute_modules", list(dict.fromkeys(names)), key, raw)


def cp_comm_type(m: Mapper, key: str, sizes_key: str) -> None:
    """``software.cp_comm`` from Megatron-Core's ``cp_comm_type``: p2p is the ring, all_gather, a2a
    and a2a+p2p themselves; a per-layer list is refused. a2a+p2p takes its all-to-all groups' size
    (``job.cp_a2a``) from ``sizes_key``, the hierarchical CP sizes [a2a, p2p]; a level of one rank
    leaves the other alone, as Transformer Engine 2.9 does (``attn_forward_func_with_cp``: p2p for
    an a2a group of one, a2a for a p2p group of one)."""
    if not m.has(key):
        return
    raw = m.get(key)
    algo = choice(key, raw, {"p2p": "ring", "all_gather": "all_gather", "a2a": "a2a", "a2a+p2p": "a2a+p2p"},
                  "per-layer lists are not modelled")
    sizes = m.get(sizes_key)
    if algo == "a2a+p2p" and (not isinstance(sizes, list | tuple) or len(sizes) != 2):
        raise SpecError(sizes_key, sizes, "a2a+p2p needs the two hierarchical CP sizes [a2a, p2p]")
    if algo == "a2a+p2p":
        a2a, p2p = as_int(sizes_key, sizes[0]), as_int(sizes_key, sizes[1])
        algo = "ring" if a2a == 1 else "a2a" if p2p == 1 else algo
        if algo == "a2a+p2p":
            m.put("job.cp_a2a", a2a, sizes_key, sizes, "the all-to-all groups' size")
    m.put("software.cp_comm", algo, key, raw)
