"""Where a spec field sits in its file, for error messages: ``path:line`` of a key path, read
again only when an error needs it (YAML and JSON through ruamel's line-keeping loader, TOML by
scanning for the key under its table header)."""

from __future__ import annotations

import re
from pathlib import Path


def field_line(path: Path | None, section: str, loc: tuple) -> str | None:
    """File:line of a field, via a round-trip load (only on error). JSON is YAML to ruamel; TOML
    is scanned for the field's table header and key."""
    if path is None:
        return None
    if path.suffix.lower() == ".toml":
        return toml_line(path, [section, *(str(k) for k in loc)])
    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
        return str(path)
    try:
        from ruamel.yaml import YAML

        node = YAML().load(path.read_text())
        keys = [section, *loc]
        line = None
        for key in keys:
            if hasattr(node, "lc") and isinstance(node, dict) and key in node:
                line = node.lc.key(key)[0] + 1
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                line = node.lc.item(key)[0] + 1 if hasattr(node, "lc") else line
                node = node[key]
            else:
                break
        return f"{path}:{line}" if line else str(path)
    except Exception:  # noqa: BLE001 - a line number is a nicety, never a new failure
        return str(path)


def toml_line(path: Path, keys: list[str]) -> str:
    """File:line of ``keys`` in a TOML file: the line of its last key under the deepest table
    header (``[job]``, ``[cluster.efficiency]``) or inline table that holds it; else the file."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return str(path)
    found = None
    for depth in range(len(keys) - 1, 0, -1):  # the longest table prefix with a header
        header = "[" + ".".join(keys[:depth]) + "]"
        start = next((i for i, ln in enumerate(lines) if ln.strip() == header), None)
        if start is None:
            continue
        key = keys[depth]
        for i in range(start + 1, len(lines)):
            stripped = lines[i].strip()
            if stripped.startswith("["):
                break
            if re.match(rf"{re.escape(key)}\s*=", stripped):
                found = i + 1
                break
        if found:
            break
    if found is None:  # an inline table or a top-level key: the first line naming the last key
        last = keys[-1]
        found = next((i + 1 for i, ln in enumerate(lines) if re.search(rf"(^|[{{,\s]){re.escape(last)}\s*=", ln)), None)
    return f"{path}:{found}" if found else str(path)
