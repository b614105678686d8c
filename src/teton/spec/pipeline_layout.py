"""Megatron-Core's pipeline layout string (``job.pp_layout``): which layers each virtual stage holds.

Megatron-Core's ``--pipeline-model-parallel-layout`` (``TransformerConfig.pipeline_model_parallel_
layout``; ``megatron/core/transformer/pipeline_parallel_layer_layout.py``, Megatron-Core 0.19):
stages separated by ``|`` in virtual-stage order (stage ``i`` runs on pipeline rank ``i % pp``,
chunk ``i // pp``), each a run of ``E`` (the embedding), ``t`` (a transformer / decoder layer),
``m`` (a multi-token prediction module) and ``L`` (the output head and loss); ``x*n`` repeats a
symbol and ``(...)*n`` a group; commas are cosmetic. DeepSeek-V3's recipes (Megatron-Bridge 0.2 ...
0.6, NeMo 2.4's ``pretrain_deepseek_v3.py``) write 16 stages as ``Et*4|(t*4|)*14tmL``.

teton places the embedding on the first stage and the output head with the multi-token prediction
modules on the last (``teton.workload.mtp``), as these layouts do; so a layout here may move only
the decoder layers, and :func:`stage_layers` is the (pp, virtual_stages) count of them.
"""

from __future__ import annotations

import re

import numpy as np

from teton.errors import SpecError

FIELD = "job.pp_layout"
_SYMBOLS = set("EtmL")
# Megatron-Core's LayerType names (a layout given as a list of stages, each a list of names, as
# NeMo 2.0's MegatronStrategy and Megatron-Bridge's recipes write it) -> the string's symbols
_NAMES = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_REPEAT = re.compile(r"(.)\*(\d+)")
MAX_SYMBOLS = 1 << 20  # a layout unrolls to at most this many symbols (a model's layers are fewer)


def parse(layout: str) -> list[str]:
    """The layout's stages, each its string of symbols, in virtual-stage order (Megatron-Core's
    ``parse_str_to_list``: groups unrolled first, then single symbols)."""
    def unroll(g: re.Match) -> str:
        if len(g.group(1)) * int(g.group(2)) > MAX_SYMBOLS:
            raise SpecError(FIELD, layout, f"unrolls to more than {MAX_SYMBOLS:,} symbols")
        return g.group(1) * int(g.group(2))

    text = layout.replace(",", "").replace(" ", "")
    while _GROUP.search(text):
        text = _GROUP.sub(unroll, text)
        if len(text) > MAX_SYMBOLS:
            raise SpecError(FIELD, layout, f"unrolls to more than {MAX_SYMBOLS:,} symbols")
    text = _REPEAT.sub(unroll, text)
    bad = sorted(set(text) - _SYMBOLS - {"|"})
    if bad:
        raise SpecError(FIELD, layout, f"has {''.join(bad)!r}: a layout is stages of E, t, m, L separated by |, "
                        "with x*n and (...)*n repeats (Megatron-Core's syntax)")
    return text.split("|")


def layout_string(stages, key: str = FIELD) -> str:
    """A layout given as a list of stages, each a list of LayerType names (``[["embedding",
    "decoder"], ["decoder", "loss"]]``), in the string syntax (``Et|tL``); ``key`` names it in an
    error."""
    if not isinstance(stages, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in stages):
        raise SpecError(key, stages, "must be a layout string or a list of stages, each a list of layer names")
    bad = sorted({str(n) for s in stages for n in s if str(n).strip().lower() not in _NAMES})
    if bad:
        raise SpecError(key, stages, f"names {', '.join(bad)}; a stage's layers are {', '.join(_NAMES)}")
    return "|".join("".join(_NAMES[str(n).strip().lower()] for n in s) for s in stages)


def stage_layers(layout: str, pp: int, virtual_stages: int, layers: int, mtp_depth: int) -> np.ndarray:
    """(pp, virtual_stages) decoder layers per chunk, checked against the job and the model: one
    stage per chunk, the embedding alone first on the first stage, the loss last on the last, the
    model's decoder layers and multi-token prediction modules all placed, the latter on the last
    stage."""
    stages = parse(layout)
    if len(stages) != pp * virtual_stages:
        raise SpecError(FIELD, layout, f"has {len(stages)} stages; the job runs pp*virtual_stages = "
                        f"{pp}*{virtual_stages} = {pp * virtual_stages}")
    flat = "".join(stages)
    for symbol, count, what in (("t", layers, f"the model's {layers} layers"),
                                ("m", mtp_depth, f"model.mtp_depth ({mtp_depth})"),
                                ("E", 1, "one embedding"), ("L", 1, "one loss")):
        if flat.count(symbol) != count:
            raise SpecError(FIELD, layout, f"places {flat.count(symbol)} {symbol!r}; it must place {what}")
    if not stages[0].startswith("E"):
        raise SpecError(FIELD, layout, "must open with the embedding (E) on the first stage")
    last = stages[-1]
    if not last.endswith("L") or ("m" in flat and ("m" not in last or "t" in last[last.index("m"):])):
        raise SpecError(FIELD, layout, "must close with the loss (L) on the last stage, after any multi-token "
                        "prediction modules (m), which follow every decoder layer (t): teton runs them with the output head")
    counts = np.array([s.count("t") for s in stages], dtype=np.int64)
    return counts.reshape(virtual_stages, pp).T.copy()
