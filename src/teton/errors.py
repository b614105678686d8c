"""The one error type users see: a bad input, reported as a single line."""

from __future__ import annotations

import os
import re
import reprlib


class SpecError(ValueError):
    """A bad spec or argument: names the field, the value and what is allowed.

    The CLI prints ``str(err)`` on one line and exits with code 2.
    """

    def __init__(self, field: str, value: object, allowed: str, where: str | None = None):
        self.field, self.value, self.allowed, self.where = field, value, allowed, where
        prefix = f"{where}: " if where else ""
        super().__init__(one_line(f"{prefix}{field} = {_short_repr(value)}: {allowed}"))

    def __reduce__(self):
        """Pickled as its message and fields (a process pool's worker sends it back whole: the
        default pickles ``args``, the message alone, which ``__init__`` cannot take); a value that
        does not pickle travels as its repr."""
        import pickle

        try:
            value = pickle.loads(pickle.dumps(self.value))
        except Exception:  # noqa: BLE001 - anything a user value's pickling raises
            value = _short_repr(self.value)
        return _restore, (type(self), str(self), self.field, value, self.allowed, self.where)


def _restore(cls: type, message: str, field: str, value: object, allowed: str, where: str | None) -> SpecError:
    """A :class:`SpecError` (or subclass) from its pickled message and fields, the message as sent."""
    err = cls.__new__(cls)
    ValueError.__init__(err, message)
    err.field, err.value, err.allowed, err.where = field, value, allowed, where
    return err


MAX_VALUE_CHARS = 300  # of a value's repr in a message: a whole file's contents would bury the rest


def one_line(text: str) -> str:
    """``text`` with line breaks and other non-printable characters escaped (``\\n``, ``\\x1e``):
    user input echoed in a message (a ``--set``, a file name, a library's multi-line message)
    cannot break it over several lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


# a container's repr, bounded as it is built: YAML aliases can nest a few hundred bytes of file into
# billions of elements (the "billion laughs"), whose full repr would exhaust memory before the cut
_BOUNDED = reprlib.Repr()
_BOUNDED.maxlevel = 4
_BOUNDED.maxtuple = _BOUNDED.maxlist = _BOUNDED.maxarray = _BOUNDED.maxdict = 8
_BOUNDED.maxset = _BOUNDED.maxfrozenset = _BOUNDED.maxdeque = 8
_BOUNDED.maxstring = _BOUNDED.maxlong = _BOUNDED.maxother = MAX_VALUE_CHARS


def _short_repr(value: object) -> str:
    try:
        scalar = value is None or isinstance(value, (str, bytes, int, float, complex))
        text = repr(value) if scalar else _BOUNDED.repr(value)
    except ValueError:  # an integer past Python's 4,300-digit limit of int -> str
        return f"an integer of {int(value.bit_length() * 0.30103) + 1:,} digits"  # type: ignore[attr-defined]
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS]}... ({len(text):,} characters)"


_UNION_TAG = re.compile(r"(str|int|float|bool|none|bytes|(dict|list|tuple|set|frozenset|literal|nullable|is-instance"
                        r"|lax-or-strict|json-or-python|union|tagged-union)\[.*\]|function-[a-z]+\[.*\])")


def from_validation(err, section: str, unknown_field=None, where=None) -> SpecError:
    """The one-line :class:`SpecError` for a pydantic ``ValidationError`` of spec ``section``.

    The first error wins. A SpecError raised by a validator passes through; an unknown field is
    described by ``unknown_field(loc) -> str`` when given; ``where(loc) -> str | None`` locates
    the field (a file and line).
    """
    e = err.errors()[0]
    ctx = e.get("ctx", {})
    # a union's member is in pydantic's location as its type tag (plan.clusters.1.str): not a field
    loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and _UNION_TAG.fullmatch(x)))
    loc += (ctx["key"],) if "key" in ctx else ()  # a mapping's entry (spec.fields)
    if "item" in ctx:
        e = {**e, "input": ctx["item"]}
    name = ".".join([section, *(str(x) for x in loc)])
    cause = ctx.get("error")
    if isinstance(cause, SpecError):
        parts = tuple(cause.field.split("."))
        cause_loc = parts[1:] if parts[0] == section else ()
        return SpecError(cause.field, cause.value, cause.allowed, where=where(cause_loc) if where else cause.where)
    at = where(loc) if where else None
    if e["type"] == "extra_forbidden" and unknown_field is not None:
        return SpecError(name, e.get("input"), unknown_field(loc), where=at)
    if e["type"] == "missing":  # pydantic's input is the whole enclosing mapping: not this field's value
        return SpecError(name, None, "missing; this field is required", where=at)
    msg = e["msg"]
    return SpecError(name, e.get("input"), msg[0].lower() + msg[1:], where=at)


def unknown_field(name: object, allowed) -> str:
    """'unknown field; allowed: ...' text for a mapping's unknown key, led by the allowed names
    closest to it (a typo: ``tpp`` -> tp)."""
    import difflib

    allowed = list(allowed)
    hits = difflib.get_close_matches(str(name), allowed, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(hits)}?)" if hits else ""
    return f"unknown field{hint}; allowed: {', '.join(allowed)}"


def closest(name: str, choices: list[str] | tuple[str, ...] | set[str], n: int = 3) -> str:
    """'did you mean ...' text for an unknown name."""
    import difflib

    hits = difflib.get_close_matches(str(name), sorted(choices), n=n, cutoff=0.4)
    known = ", ".join(sorted(choices))
    if hits:
        return f"unknown; did you mean {' or '.join(hits)}? (known: {known})"
    return f"unknown; known: {known}"


def not_a_file(path) -> str | None:
    """Why ``path`` cannot be read as a file (``no such file``, ``a directory, not a file``); None
    when it is one."""
    if os.path.isfile(path):
        return None
    return "a directory, not a file" if os.path.isdir(path) else "no such file"
