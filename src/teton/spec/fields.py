"""Field checks shared by the spec sections: every number a spec gives is bounded.

The checks themselves (:class:`Section`, the number rules and their default bounds) live in
``teton.hardware.bounds``, which the hardware catalog's models share; this module adds the
spec's own bounds (GPUs, sequence length, widths, vocabulary, layers) and re-exports the rest.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from teton.hardware.bounds import (  # noqa: F401 - re-exported
    MAX_COUNT,
    MAX_REAL,
    MIN_POSITIVE,
    Section,
    check_number,
    field_range,
    number_problem,
    numeric_kinds,
    range_text,
)

MAX_GPUS = 10**7  # GPUs of a job, and any one parallel degree (the largest clusters hold ~10^5)
MAX_SEQ_LEN = 2**24  # tokens of one sequence (16M; the longest-context models train at 1M)
MAX_WIDTH = 2**20  # a model width (hidden, MLP, heads, head dim: 1M; the widest trained are ~50k)
MAX_VOCAB = 2**24  # vocabulary entries (16M; the largest in use are ~256k)
MAX_LAYERS = 2**14  # transformer layers, or experts per layer (16,384; the deepest trained are ~200)


def read_when(**selector: tuple[str, ...]) -> dict[str, Any]:
    """A field's ``json_schema_extra`` saying which values of a selector field of its section read
    it (``read_when(fidelity=("flow",))``): a spec that gives it under another value is told that
    it is ignored (:func:`ignored_field_notes`). One rule for every such field."""
    return {"read_when": {name: tuple(values) for name, values in selector.items()}}


def ignored_field_notes(section: BaseModel, prefix: str) -> tuple[str, ...]:
    """One note per field the spec gave (``model_fields_set``) that the section's selector leaves
    unread (:func:`read_when`): ``network.routing = ecmp is ignored: only network.fidelity = flow
    reads it (this spec's is analytical)``."""
    notes = []
    for name, field in type(section).model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if name not in section.model_fields_set or "read_when" not in extra:
            continue
        for selector, values in extra["read_when"].items():
            now = getattr(section, selector)
            if now not in values:
                notes.append(f"{prefix}.{name} = {getattr(section, name)} is ignored: only {prefix}.{selector} = "
                             f"{' or '.join(values)} reads it (this spec's is {now})")
    return tuple(notes)
