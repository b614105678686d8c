"""Bounded input models: every number a spec or a hardware file gives is checked.

Every input model (the hardware catalog's GPU, host and NIC, and every spec section) derives from
:class:`Section`, whose one validator runs on every field before pydantic's own: a boolean where a
number goes is refused (pydantic's lax mode reads true/false as 1/0, which hides a misplaced flag:
``--set job.tp=true`` ran TP 1), and so is NaN, an infinity, and a number outside the field's
range. The range is the field's own bounds (``Field(gt=0, le=MAX_SEQ_LEN)``), closed by the
defaults below where the field gives none: generous, so that no real cluster or model is refused,
but finite, so that nothing downstream overflows (a 10^26-token sequence printed 10^44 ms; a
50-digit degree broke the integer conversion). The error names the field, the value and the
range, on one line. It lives with the hardware catalog, the lowest layer whose models take user
input; ``teton.spec.fields`` re-exports it with the spec's own bounds.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

import annotated_types as at
from pydantic import BaseModel, field_validator
from pydantic_core import PydanticCustomError

from teton.errors import SpecError

MAX_COUNT = 2**40  # any other integer field (~10^12: bytes of one chunk, micro-batches, ...)
MAX_REAL = 1e18  # any other number's magnitude (token budgets of 10^15 pass; bytes/s of 10^15)
MIN_POSITIVE = 1e-12  # the smallest value of a field that must be positive (gt=0)


def numeric_kinds(annotation: Any) -> tuple[bool, bool]:
    """(admits an int, admits a float) of a field's annotation (``int | None``, ``float | str``);
    a Literal of numbers (``zero: Literal[0, 1, 2, 3]``) is neither: pydantic checks it."""
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) or \
        typing.get_origin(annotation) is typing.Union else (annotation,)
    return int in args, float in args


def field_range(field) -> tuple[float, float, bool, bool]:
    """(low, high, low open, high open) of a numeric field: its own bounds, else the defaults."""
    lo, hi, lo_open, hi_open = None, None, False, False
    for m in field.metadata:
        if isinstance(m, at.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Lt):
            hi, hi_open = m.lt, True
        elif isinstance(m, at.Le):
            hi = m.le
    ints, floats = numeric_kinds(field.annotation)
    integer = ints and not floats
    if hi is None:
        hi = MAX_COUNT if integer else MAX_REAL
    if lo is None:
        lo = -hi
    elif lo_open and lo == 0 and not integer:
        lo, lo_open = MIN_POSITIVE, False
    elif lo_open and integer:
        lo, lo_open = math.floor(lo) + 1, False
    return lo, hi, lo_open, hi_open


def range_text(lo: float, hi: float, lo_open: bool, hi_open: bool, integer: bool) -> str:
    """``an integer in 1..16,777,216`` / ``a finite number in [1e-12, 1e+18]``."""
    if integer:
        return f"an integer in {lo:,}..{hi:,}"
    return f"a finite number in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def number_problem(value: Any, lo: float, hi: float, lo_open: bool = False, hi_open: bool = False,
                   integer: bool = False) -> str | None:
    """What is wrong with ``value`` as a number of the range (None: nothing)."""
    if isinstance(value, bool):
        return f"must be {range_text(lo, hi, lo_open, hi_open, integer)}, not a boolean"
    if not isinstance(value, (int, float)):
        return None  # text, a list: pydantic's own check says what it should be
    bad = isinstance(value, float) and not math.isfinite(value)
    bad = bad or (value <= lo if lo_open else value < lo) or (value >= hi if hi_open else value > hi)
    bad = bad or (integer and isinstance(value, float) and not value.is_integer())
    return f"must be {range_text(lo, hi, lo_open, hi_open, integer)}" if bad else None


def check_number(field: str, value: Any, lo: float, hi: float, integer: bool = False) -> float:
    """``value`` as a number in [lo, hi]; else a SpecError naming ``field`` (for numbers read
    outside a spec model: an auxiliary file's cell, a verb's argument)."""
    problem = number_problem(value, lo, hi, integer=integer)
    if problem is None and not isinstance(value, (int, float)):
        problem = f"must be {range_text(lo, hi, False, False, integer)}"
    if problem:
        raise SpecError(field, value, problem)
    return value


def _number_values(annotation: Any) -> bool:
    """A mapping whose values are numbers (``dict[str, float]``, ``dict[str, float | str]``)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(_number_values(a) for a in typing.get_args(annotation))
    args = typing.get_args(annotation)
    return typing.get_origin(annotation) is dict and len(args) == 2 and any(numeric_kinds(args[1]))


_RULES: dict[int, tuple] = {}  # id(FieldInfo) -> (field, its rule): the annotation read once per field


def _rule(field) -> tuple:
    """(kind, args) of a field's check: ("number", range + integer), ("literal", its values),
    ("mapping", ()) for a mapping of numbers, ("", ()) for none; memoised per field."""
    hit = _RULES.get(id(field))
    if hit is not None and hit[0] is field:
        return hit[1]
    ints, floats = numeric_kinds(field.annotation)
    if ints or floats:
        rule = ("number", (*field_range(field), ints and not floats))
    elif typing.get_origin(field.annotation) is typing.Literal \
            and not any(isinstance(a, bool) for a in typing.get_args(field.annotation)):
        rule = ("literal", typing.get_args(field.annotation))
    else:
        rule = ("mapping" if _number_values(field.annotation) else "", ())
    _RULES[id(field)] = (field, rule)
    return rule


def _check_field(field, value: Any) -> None:
    kind, args = _rule(field)
    if kind == "number":
        problem = number_problem(value, *args)
        if problem:
            raise PydanticCustomError("number", problem)
    elif kind == "literal" and isinstance(value, bool):
        raise PydanticCustomError("number", "must be one of " + ", ".join(map(str, args)) + ", not a boolean")
    elif kind == "mapping" and isinstance(value, dict):
        for key, item in value.items():  # each value; the error names the key (errors.from_validation)
            problem = number_problem(item, -MAX_REAL, MAX_REAL)
            if problem:
                raise PydanticCustomError("number", problem, {"key": str(key), "item": item})


def _hashable(value: Any) -> Any:
    """``value`` with its mappings and lists as (sorted) tuples, all the way down."""
    if isinstance(value, dict):
        return tuple(sorted(((str(k), _hashable(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, (list, tuple, set, frozenset)):
        items = tuple(_hashable(v) for v in value)
        return tuple(sorted(items, key=repr)) if isinstance(value, (set, frozenset)) else items
    return value


class Section(BaseModel):
    """A spec model whose numbers are checked and bounded (see the module docstring): before
    pydantic parses a field, and after (text it read as a number)."""

    def __hash__(self) -> int:
        """A frozen section hashes by value, its mapping fields too (pydantic's own hash fails on a
        dict field such as ``cluster.efficiency``), so a spec can key a dict or a cache; an
        unfrozen one is unhashable, as pydantic makes it."""
        if not self.model_config.get("frozen"):
            raise TypeError(f"unhashable type: {type(self).__name__!r} (not frozen)")
        values = tuple(self.__dict__.values())
        try:
            return hash((type(self), values))
        except TypeError:  # a mapping or list among them: equal sections take this path alike
            return hash((type(self), _hashable(values)))

    @field_validator("*", mode="wrap")
    @classmethod
    def _bounded(cls, value: Any, handler, info) -> Any:
        field = cls.model_fields[info.field_name]
        _check_field(field, value)
        out = handler(value)
        if out is not value:
            _check_field(field, out)
        return out


def build(cls: type[BaseModel], fields: Any, field: str, kind: str):
    """``cls(**fields)`` for a mapping a file or a spec gave at ``field`` (``cluster.host.gpu``),
    else a one-line SpecError naming ``field.<key>``: an unknown key, a bad value, a rule across
    keys. ``kind`` names what the mapping should be (``a GPU``) when it is not a mapping."""
    from pydantic import ValidationError

    from teton.errors import from_validation, unknown_field

    if isinstance(fields, cls):
        return fields
    if not isinstance(fields, dict):
        raise SpecError(field, fields, f"must be {kind}: a preset name, a file or a mapping")
    try:
        return cls(**fields)
    except ValidationError as err:
        cause = err.errors()[0].get("ctx", {}).get("error")
        if isinstance(cause, SpecError) and not cause.field.startswith(f"{field}."):
            raise SpecError(f"{field}.{cause.field}", cause.value, cause.allowed) from None
        raise from_validation(err, field, unknown_field=lambda loc: unknown_field(loc[-1], sorted(cls.model_fields))) \
            from None
    except SpecError as err:  # a rule of the model's own (__init__-time)
        raise SpecError(f"{field}.{err.field}", err.value, err.allowed) from None


def catalog_clash(obj: BaseModel, catalog: dict[str, BaseModel], kind: str) -> str | None:
    """Why ``obj`` may not take its name: a catalog entry of that name holds other figures (a
    table would show two different parts under one name); None when it may."""
    same = catalog.get(getattr(obj, "name", None))
    if same is None or same == obj:
        return None
    changed = [k for k in type(obj).model_fields if getattr(obj, k) != getattr(same, k)]
    return f"the catalog's {kind} of this name differs ({', '.join(changed)}); give yours a name of its own (name: ...)"


def catalog_slot(value: Any, catalog: dict[str, BaseModel], cls: type[BaseModel], field: str, kind: str) -> Any:
    """A hardware slot's value (``cluster.host``, a host's ``gpu``): a catalog name (kept as the
    name), or a model or a mapping of one (built and checked: :func:`build`, :func:`catalog_clash`).
    A file path was read into its mapping when the spec loaded (``teton.spec.hardware``)."""
    from teton.errors import closest

    if isinstance(value, str):
        if value not in catalog:
            raise SpecError(field, value, closest(value, catalog) + f"; or {kind} as a mapping or a file")
        return value
    obj = build(cls, value, field, kind)
    clash = catalog_clash(obj, catalog, kind.removeprefix("a ").removeprefix("an "))
    if clash:
        raise SpecError(f"{field}.name", obj.name, clash)
    return obj
