"""Field checks shared by the spec sections."""

from __future__ import annotations

from typing import Any

from teton.errors import SpecError


def no_bool(value: Any, info) -> Any:
    """A pydantic ``before`` validator for integer fields: pydantic's lax mode reads true/false as
    1/0, which hides a misplaced flag (``--set job.tp=true`` ran TP 1)."""
    if isinstance(value, bool):
        raise SpecError(f"{info.config.get('title', '').removesuffix('Spec').lower()}.{info.field_name}", value,
                        "must be an integer, not a boolean")
    return value
