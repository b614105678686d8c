"""A launch script as the argument list it runs: enough of the shell for the scripts Megatron-LM's
examples ship (examples/gpt3/train_gpt3_175b_distributed.sh, examples/llama/*.sh).

Read: backslash continuations, ``#`` comments, ``NAME=value`` / ``export NAME=value`` and
``NAME=( ... )`` array assignments (over several lines), and ``$NAME``, ``${NAME}``,
``${NAME[@]}``, ``${NAME:-default}`` expansions. The command is the line that runs a ``*.py``
script (``pretrain_gpt.py``; the first one with ``pretrain`` in its name, else the first); the
tokens before the script are the launcher's (``torchrun --nnodes 8 --nproc-per-node 8``). A file
with no such line is an argument list, one argument (or several) a line.
"""

from __future__ import annotations

import re
import shlex

from teton.errors import SpecError

_ASSIGN = re.compile(r"^(?:export\s+|declare\s+(?:-\w+\s+)*|local\s+)?([A-Za-z_]\w*)=(.*)$", re.S)
_EXPAND = re.compile(r"\$\{([A-Za-z_]\w*)(\[@\]|\[\*\])?(?::-([^}]*))?\}|\$([A-Za-z_]\w*)")


_ARRAY_OPEN = re.compile(r"^(?:export\s+|declare\s+(?:-\w+\s+)*)?[A-Za-z_]\w*=\(")


def _closes(text: str) -> bool:
    """The text ends an array assignment: its code (before a comment) ends with ``)``."""
    return re.split(r"(?:^|\s)#", text, maxsplit=1)[0].rstrip().endswith(")")


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, comments and blank lines left out, and array
    assignments ``NAME=( ... )`` kept whole over the lines they span."""
    lines: list[str] = []
    current: str | None = None
    for raw in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if current is not None:
            current += "\n" + line
            if _closes(line):
                lines.append(current)
                current = None
            continue
        opened = _ARRAY_OPEN.match(line)
        if opened and not _closes(line[opened.end():]):
            current = line
            continue
        lines.append(line)
    if current is not None:
        lines.append(current)
    return lines


def _split(text: str, where: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError as err:
        raise SpecError("script", where[:120], f"not shell-readable ({err})") from None


def _expand(text: str, scalars: dict[str, str], arrays: dict[str, list[str]]) -> str:
    def sub(match: re.Match) -> str:
        name = match.group(1) or match.group(4)
        if name in arrays:
            return shlex.join(arrays[name])
        if name in scalars:
            return shlex.quote(scalars[name])
        if match.group(3) is not None:
            return shlex.quote(match.group(3))
        return match.group(0)  # left as it is: a value holding "$NAME" is reported as such

    return _EXPAND.sub(sub, text)


def read_command(text: str) -> tuple[list[str], list[str]]:
    """(launcher tokens, script argument tokens) of a launch script or argument list."""
    commands = command_lines(text)
    scripts = [c for c in commands if any(t.endswith(".py") for t in c)]
    if not scripts:
        return [], [t for c in commands for t in c]

    def script_at(tokens: list[str]) -> int | None:
        return next((i for i, t in enumerate(tokens) if t.endswith(".py") and "pretrain" in t), None)

    chosen = next((c for c in scripts if script_at(c) is not None), scripts[0])
    at = script_at(chosen)
    if at is None:
        at = next(i for i, t in enumerate(chosen) if t.endswith(".py"))
    return chosen[:at], chosen[at + 1:]


def command_lines(text: str) -> list[list[str]]:
    """The tokens of each command of a script, variables expanded (assignments left out)."""
    scalars: dict[str, str] = {}
    arrays: dict[str, list[str]] = {}
    commands: list[list[str]] = []
    for line in _logical_lines(text):
        assign = _ASSIGN.match(line)
        if assign and not line.startswith("--"):
            name, value = assign.group(1), _expand(assign.group(2).strip(), scalars, arrays)
            if value.startswith("("):
                arrays[name] = _split(value.strip()[1:].rsplit(")", 1)[0], line)
                continue
            words = _split(value, line)
            if len(words) <= 1 or value[:1] in "\"'":
                scalars[name] = " ".join(words)
                continue
            scalars[name], tokens = words[0], words[1:]  # NAME=value command ...: NAME set for it
        else:
            tokens = _split(_expand(line, scalars, arrays), line)
        if tokens:
            commands.append(tokens)
    return commands


def parse_flags(tokens: list[str]) -> dict[str, object]:
    """``--flag value`` / ``--flag=value`` / ``--flag`` (True) / ``--flag v1 v2`` (a list), in
    order; a flag given twice keeps the last value, as argparse does. Underscores in a flag's name
    read as dashes. A token before any flag is kept under ``(argument N)``."""
    flags: dict[str, object] = {}
    current: str | None = None
    for i, token in enumerate(tokens):
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token.partition("=")
            current = "--" + name[2:].replace("_", "-")
            flags.pop(current, None)
            flags[current] = value if eq else True
            continue
        if current is None:
            flags[f"(argument {i + 1})"] = token
            continue
        old = flags[current]
        flags[current] = token if old is True else [*(old if isinstance(old, list) else [old]), token]
    return flags
