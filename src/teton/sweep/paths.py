"""The file paths a sweep's spec mappings name, found where ``teton run``'s loader reads them.

The loader (``teton.spec.load`` and ``teton.spec.hardware``) reads a file for a ``cluster``,
``model`` or ``software`` value (or their ``base:``) that is no preset name and ends in
``.yaml`` / ``.yml`` / ``.toml`` / ``.json`` or holds a ``/``; for a hardware slot
(``cluster.host``, ``cluster.gpu``, ``cluster.backend_nic``, ``cluster.host.gpu`` /
``backend_nic`` / ``frontend_nic``, or their ``base:``) that is no catalog name and looks like a
path the same way; and for a ``storage`` value ending in one of those suffixes. A relative path is
relative to the folder of the file that names it (the working directory for a mapping given as
such). A sweep hands each point to the loader as a mapping, so :func:`absolute` makes the sweep's
own paths absolute up front (the base spec's against the base spec's folder, grid and zip values
against the sweep file's), and :func:`map_files` also walks the named files' contents for the
files those name in turn (``teton.sweep.named_files`` hashes them all into the point key).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teton.spec.hardware import CATALOGS, CLUSTER_SLOTS, HOST_SLOTS, is_slot
from teton.spec.load import SPEC_SUFFIXES
from teton.spec.override_paths import PRESETS

Where = tuple[str, ...]  # what a value is: a section (cluster, model, software, storage) or a slot
_SECTIONS = (*PRESETS, "storage")


def slot_kind(where: Where) -> str | None:
    """The catalog kind (gpu, host, nic) of a hardware slot, None where ``where`` is no slot."""
    if not is_slot(where):
        return None
    return CLUSTER_SLOTS[where[1]] if len(where) == 2 else HOST_SLOTS[where[2]]


def names_file(where: Where, value: Any) -> bool:
    """Whether the loader reads ``value``, given as ``where`` (a section or a slot, or its
    ``base:``), as a file path rather than a preset or catalog name."""
    if not isinstance(value, str):
        return False
    if where == ("storage",):
        return value.endswith(SPEC_SUFFIXES)
    kind = slot_kind(where)
    if kind is not None:
        return value not in CATALOGS[kind] and (value.endswith(SPEC_SUFFIXES) or "/" in value)
    if len(where) == 1 and where[0] in PRESETS:
        return value not in PRESETS[where[0]] and (value.endswith(SPEC_SUFFIXES) or "/" in value)
    return False


def key_place(parts: tuple[str, ...]) -> Where | None:
    """What a swept dotted key's value is (``cluster.gpu.base`` -> the ``cluster.gpu`` slot), None
    where its value can name no file."""
    own = parts[:-1] if len(parts) > 1 and parts[-1] == "base" else parts
    if (len(own) == 1 and own[0] in _SECTIONS) or is_slot(own):
        return own
    return None


def _children(where: Where, mapping: dict) -> dict[str, Where]:
    """The keys of a mapping given as ``where`` that can name files, with what each one is."""
    if where == ():
        return {k: (k,) for k in _SECTIONS if k in mapping}
    out: dict[str, Where] = {} if where == ("storage",) else {"base": where}
    if where == ("cluster",):
        out.update({k: ("cluster", k) for k in CLUSTER_SLOTS})
    elif where == ("cluster", "host"):
        out.update({k: ("cluster", "host", k) for k in HOST_SLOTS})
    return {k: w for k, w in out.items() if k in mapping}


def map_files(value: Any, where: Where, base_dir: Path | None, on_file: Callable[[Where, Path], Any]) -> Any:
    """``value`` (given as ``where``; ``()``: a whole spec) with each file path in it replaced by
    ``on_file(where, path)``, the path joined to ``base_dir`` (None: as written, so relative to the
    working directory, as the loader reads a mapping)."""
    if isinstance(value, str):
        if not names_file(where, value):
            return value
        return on_file(where, Path(value) if base_dir is None else base_dir / value)
    if isinstance(value, dict):
        children = _children(where, value)
        if not children:
            return value
        return {k: map_files(v, children[k], base_dir, on_file) if k in children else v for k, v in value.items()}
    return value


def _absolute(where: Where, path: Path) -> str:
    """:func:`map_files`'s callback: the path made absolute (``where`` unused)."""
    return os.path.abspath(path)


def absolute(value: Any, where: Where, base_dir: Path) -> Any:
    """``value`` (given as ``where``; ``()``: a whole spec) with its relative file paths made
    absolute against ``base_dir``, the folder of the file that names them; files named inside those
    files keep their paths (the loader reads them relative to their own file)."""
    return map_files(value, where, base_dir, _absolute)
