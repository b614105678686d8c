"""Helpers shared by the CLI verbs: JSON output, one-line errors, size parsing."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from teton.errors import SpecError, one_line

# The arguments most verbs share, declared once.
SpecPath = Annotated[Path, typer.Argument(metavar="SPEC", help="spec file (YAML, TOML or JSON)")]
SetOverrides = Annotated[list[str] | None, typer.Option("--set", help="override: key.path=value (repeatable)")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print one JSON document on stdout (an object, or a list of rows), nothing else")]

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(i?B?)?\s*$", re.IGNORECASE)
_MULT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
MAX_TOP = 1_000_000  # rows a --top prints (a results store's LIMIT is a 64-bit integer)
MAX_SIZE = 1024**5  # 1 PiB: no message, file or request of a training cluster is larger


def parse_size(text: str, field: str) -> int:
    """nccl-tests style sizes: 1024, 1K, 64M, 1G (binary multiples): 1 byte ... 1 PiB."""
    m = _SIZE.match(str(text))
    if not m:
        raise SpecError(field, text, "expected a positive size like 1024, 1K, 64M or 1G")
    value = float(m.group(1)) * _MULT[m.group(2).upper()]
    if not math.isfinite(value) or not 1 <= value <= MAX_SIZE:
        raise SpecError(field, text, "must be a size from 1 byte to 1P (1024T)")
    return int(value)


def parse_names(values: list[str] | None, allowed: tuple[str, ...], field: str) -> tuple[str, ...]:
    """A repeatable, comma-separable NAME option (``--policy fifo,backfill`` or ``--policy fifo
    --policy backfill``); nothing given, or ``all``, means every allowed name."""
    from teton.errors import closest

    names = [n.strip() for v in values or [] for n in v.split(",") if n.strip()]
    if not names or names == ["all"]:
        return allowed
    for n in names:
        if n not in allowed:
            raise SpecError(field, n, closest(n, allowed))
    return tuple(dict.fromkeys(names))


FIGURE_SUFFIXES = ("png", "svg", "pdf", "jpg", "jpeg", "webp")


def check_figure_path(path: Path, field: str) -> None:
    """A figure path must be writable with an image suffix matplotlib knows, checked before the
    work that draws it runs."""
    path = Path(path)
    if path.suffix.lower().lstrip(".") not in FIGURE_SUFFIXES:
        raise SpecError(field, str(path), f"an image path ending in .{', .'.join(FIGURE_SUFFIXES)}")
    if os.path.isdir(path) or not os.path.isdir(path.parent):
        raise SpecError(field, str(path), "must be a file path in an existing directory")


def print_json(obj: Any) -> None:
    """One JSON document on stdout (numpy scalars converted; NaN and infinities, which JSON has
    no numbers for, as null)."""

    def default(o: Any) -> Any:
        if hasattr(o, "item"):
            return o.item()
        if hasattr(o, "tolist"):
            return o.tolist()
        if hasattr(o, "model_dump"):
            return o.model_dump()
        raise TypeError(f"not JSON-serialisable: {type(o).__name__}")

    plain = json.loads(json.dumps(obj, default=default), parse_constant=lambda _: None)
    sys.stdout.write(json.dumps(plain, indent=2, allow_nan=False) + "\n")


def click_error_exit(err: Exception, verbs: set[str]) -> NoReturn:
    """Turn a click/typer usage error into one line and exit 2; re-raise anything else. ``verbs``:
    the registered verb names, for an error raised before click has a context."""
    show = getattr(err, "format_message", None)
    if show is not None and hasattr(err, "exit_code"):
        ctx = getattr(err, "ctx", None)
        cmd = f"{ctx.command_path}: " if ctx is not None else _verb_prefix(verbs)
        text = _bad_value_message(err) or show()
        if text.strip():  # `teton` alone printed its help: there is no error to add
            print(f"error: {cmd}{one_line(text)}", file=sys.stderr)
        sys.exit(2 if getattr(err, "exit_code", 2) else 0)
    raise err


def _bad_value_message(err: Exception) -> str | None:
    """``--runs = '0': input should be ...`` for a flag's value click refused (its message names
    the flag, not the value given), the value read back from the command line; None otherwise."""
    param, message = getattr(err, "param", None), getattr(err, "message", "")
    flags = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
    if not flags or not message:
        return None
    allowed, args = message[0].lower() + message[1:], sys.argv[1:]
    for i, arg in enumerate(args):
        for flag in flags:
            if arg.startswith(flag + "="):
                return f"{flag} = {arg[len(flag) + 1:]!r}: {allowed}"
            if arg == flag and i + 1 < len(args):
                return f"{flag} = {args[i + 1]!r}: {allowed}"
    return None


def _verb_prefix(verbs: set[str]) -> str:
    """``teton VERB: `` for an error click raises before it has a context (a flag missing its
    value: ``--set`` last on the line)."""
    verb = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    return f"teton {verb}: " if verb in verbs else "teton: "


PIPE_WIDTH = 200  # columns for tables written to a pipe or a file


def console(*renderables):
    """A rich Console for a verb's output. On a terminal it takes the terminal's width. Written to
    a pipe or a file, where rich would assume 80 columns (or $COLUMNS) and cut cells to '5.4…', it
    is at least ``PIPE_WIDTH`` wide (unless $COLUMNS says otherwise) and as wide as the widest of
    ``renderables``, so every cell prints whole."""
    from rich.console import Console

    c = Console()
    if c.is_terminal:
        return c
    width = c.width if "COLUMNS" in os.environ else max(c.width, PIPE_WIDTH)
    wide = c.options.update_width(10_000)
    width = max([width, *(c.measure(r, options=wide).maximum for r in renderables)])
    return Console(width=width)


# Library errors name parameters (``executor``, ``budget_usd``, ``overrides``); the CLI names its
# flags. A parameter's flag is ``--`` + its name with dashes (``budget_usd`` -> ``--budget-usd``)
# unless listed here; it is translated only when the verb that failed has that flag.
PARAMETER_FLAGS = {
    "overrides": "--set",  # teton.spec.load_spec(source, overrides)
    "override": "--set",
    "step_time_s": "--step-time",  # teton.reliability.goodput(step_time_s=)
    "directory": "--measure",  # teton.storage.measure.measure(spec, directory, max_files=)
    "max_files": "--files",
    "figure_path": "--png",  # a figure the verb writes
    "virtual_stages": "--virtual-stages",
}
OVERRIDE_WHERE = "override "  # teton.spec.load: the ``where`` of an error an override caused
# fields of a file's own errors (teton.spec.read: malformed JSON / YAML / TOML): what the file
# holds, never a parameter, even where the error is blamed on the --set that named the file
FILE_FIELDS = ("json", "yaml", "toml")


def verb_flags(cmd) -> set[str]:
    """The long flags of a click command (a verb)."""
    return {o for p in getattr(cmd, "params", ()) for o in p.opts if o.startswith("--")}


def flag_for(parameter: str, flags: set[str]) -> str | None:
    """The flag of library ``parameter`` among a verb's ``flags``, or None (a spec field, or a
    parameter the verb does not expose)."""
    flag = PARAMETER_FLAGS.get(parameter, "--" + parameter.replace("_", "-"))
    return flag if flag in flags else None


def as_flags(err: SpecError, flags: set[str]) -> SpecError:
    """``err`` as the CLI says it: the parameter it names, and an override it blames, as the verb's
    flags (``workers = 0`` -> ``--workers = 0``; ``override job.tp=3`` -> ``--set job.tp=3``)."""
    where = err.where
    in_file = bool(where) and not (where.startswith(OVERRIDE_WHERE) or f" {OVERRIDE_WHERE}" in where)
    # an error located in a file names what the file holds, never a flag ("malformed.json:1: json = ...")
    flag = (flag_for(err.field, flags) if err.field and "." not in err.field and not in_file
            and err.field not in FILE_FIELDS else None)
    if where and "--set" in flags and (where.startswith(OVERRIDE_WHERE) or f" {OVERRIDE_WHERE}" in where):
        where = re.sub(rf"(^|(?<= )){OVERRIDE_WHERE}", "--set ", where)
    if flag is None and where == err.where:
        return err
    return SpecError(flag or err.field, err.value, err.allowed, where=where)
