"""Read a spec file (YAML, TOML or JSON) into a checked mapping: duplicate keys refused, exponent
notation read as numbers, nesting, self-reference and non-string keys refused, every failure a
one-line :class:`SpecError` with the file's line number where one is known."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from teton.errors import SpecError


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int | None):
        super().__init__(key)
        self.key, self.line = key, line


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader with YAML 1.2's integers: digits are decimal whatever their leading
    zeros (``010`` is 10, not YAML 1.1's octal 8), ``0o17`` octal, ``0x1f`` hex, and colons no
    base-60 number (``1:00:00`` stays a string, not 3600)."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:int"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)$"),
                                   list("-+0123456789"))


def _construct_int12(loader: yaml.SafeLoader, node) -> int:
    """An integer scalar as YAML 1.2's core schema reads it (``_`` separators allowed, as PyYAML's)."""
    text = loader.construct_scalar(node).replace("_", "")
    if text[:2] in ("0o", "0x"):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int12)


class _UniqueKeyLoader(Yaml12Loader):
    """PyYAML's SafeLoader, refusing a key given twice in one mapping (which it would let the
    second silently win), and reading exponent notation without a dot (``16e6``) as a number, as
    YAML 1.2 and ``--set`` do (YAML 1.1 leaves it a string)."""

    def construct_mapping(self, node, deep=False):
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) and key is not None:  # `? [a, b]`: a list as a key
                raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a plain value, not "
                                                        f"a {type(key).__name__}", key_node.start_mark)
            if key in seen:
                raise _DuplicateKey(str(key), key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep)


_UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"),
                                       list("-+0123456789"))


def _unique_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (``json`` lets the last win), as YAML's loader does."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key, None)
        out[key] = value
    return out


def read_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML / TOML / JSON file into a mapping, with line numbers on syntax errors."""
    path = Path(path)
    data = read_data(path)
    if not isinstance(data, dict):
        raise SpecError("spec", type(data).__name__, "the top level must be a mapping", where=str(path))
    return data


def read_data(path: str | Path) -> Any:
    """Parse a YAML / TOML / JSON file as :func:`read_file` does, whatever its top level (an
    auxiliary file's may be a list); None for an empty file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SpecError("spec", str(path), f"cannot read file ({err.strerror})") from None
    except UnicodeDecodeError:
        raise SpecError("spec", str(path), "not a UTF-8 text file (YAML, TOML or JSON)") from None
    return parse_text(text, path.suffix.lower(), str(path))


def parse_text(text: str, suffix: str, where: str) -> Any:
    """``text`` parsed as :func:`read_data` parses a file: TOML or JSON by ``suffix``, else YAML;
    errors name ``where`` (the file, or what the text came from)."""
    path = where
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text, object_pairs_hook=_unique_json_object)
        else:
            data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as err:
        raise SpecError(err.key, "given twice", "each key once per mapping (keys are unique; "
                        "the second would silently win)",
                        where=f"{path}:{err.line}" if err.line is not None else path) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        line = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError("yaml", (err.problem or "syntax error"), "malformed YAML", where=line) from None
    except yaml.YAMLError as err:  # the reader's: a control character, a bad encoding
        raise SpecError("yaml", str(err).splitlines()[0], "malformed YAML", where=str(path)) from None
    except RecursionError:
        raise SpecError("spec", str(path), f"nested too deeply (at most {MAX_DEPTH} levels)") from None
    except json.JSONDecodeError as err:
        raise SpecError("json", err.msg, "malformed JSON", where=f"{path}:{err.lineno}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError("toml", str(err), "malformed TOML", where=str(path)) from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit (YAML, JSON, TOML)
        raise SpecError("spec", str(path), "holds a number too large to read (over 4,300 digits)") from None
    check_tree(data, "spec", str(path), where=str(path))
    return {} if data is None else data


MAX_DEPTH = 32  # levels of nesting in a spec: its deepest real key (cluster.layers.0.span_gpus) has 4


def check_tree(data: Any, field: str, value: Any, where: str | None = None) -> None:
    """A SpecError when ``data`` nests deeper than :data:`MAX_DEPTH`, contains itself (YAML
    aliases can do both, and share nodes), or has a key that is not a string (YAML reads ``0:``,
    ``1.5:``, ``true:``, ``null:`` as a number, a boolean, null): the code that reads a spec
    recurses, and passes mappings on as keyword arguments. Each distinct mapping or list is
    visited once. An error names ``field`` and ``value`` (a key's error: the key, at ``where``)."""
    if not isinstance(data, (dict, list)):
        return
    height: dict[int, int] = {}
    open_: set[int] = set()  # the nodes whose subtree is being measured: the current one's ancestors
    stack: list[tuple[Any, bool, tuple]] = [(data, False, ())]
    while stack:
        node, done, at = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        children = [(k, c) for k, c in items if isinstance(c, (dict, list))]
        if done:
            open_.discard(id(node))
            height[id(node)] = 1 + max((height[id(c)] for _, c in children), default=0)
            if height[id(node)] > MAX_DEPTH:
                raise SpecError(field, value, f"nested too deeply (at most {MAX_DEPTH} levels)")
            continue
        if id(node) in height:
            continue
        if id(node) in open_:
            raise SpecError(field, value, "contains itself (a YAML alias inside its own anchor)")
        if isinstance(node, dict):
            key = next((k for k in node if not isinstance(k, str)), None)
            if key is not None or None in node:
                raise SpecError(".".join(map(str, (*at, key))), key, "a key must be a name: quote it (YAML reads "
                                "0, 1.5, true and null as a number, a boolean and null)", where=where)
        open_.add(id(node))
        stack.append((node, True, at))
        stack.extend((c, False, (*at, k)) for k, c in children)
