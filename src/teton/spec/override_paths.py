"""Which overrides name files, and what their paths resolve against.

Paths given on the command line (``--set model=config.json``) resolve against the working
directory; paths inside a file against that file's folder (a spec's own, in
``teton.spec.load._resolve_named``; a runs file's ``set:``, ``teton.spec.load.overrides_in_file``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from teton.spec.cluster import CLUSTER_PRESETS
from teton.spec.hardware import FILE_SUFFIXES, is_slot
from teton.spec.model import MODEL_PRESETS
from teton.spec.software import SOFTWARE_PRESETS

PRESETS = {"cluster": CLUSTER_PRESETS, "model": MODEL_PRESETS, "software": SOFTWARE_PRESETS}  # named sections


def path_field(parts: tuple[str, ...]) -> bool:
    """Whether an override of ``parts`` may name a file: ``cluster`` / ``model`` / ``software``, a
    hardware slot (``cluster.gpu``, ``cluster.host.nic``, ...), ``storage``, or their ``base``."""
    own = parts[:-1] if len(parts) > 1 and parts[-1] == "base" else parts
    return (len(own) == 1 and own[0] in (*PRESETS, "storage")) or is_slot(own)


def from_cwd(parts: tuple[str, ...], value: Any, base_dir: str | Path | None = None) -> Any:
    """An override's file path made absolute against ``base_dir``, the working directory by
    default: paths given on the command line resolve against it, paths inside a file against that
    file's folder (a spec's own: ``_resolve_named``; a runs file's ``set:``, passed as
    ``base_dir``). A path is the value of a field that may name a file (:func:`path_field`; also
    the ``base:`` of a mapping given to one) that is no preset name and looks like a file."""
    if isinstance(value, dict) and "base" in value and path_field(parts):
        return {**value, "base": from_cwd((*parts, "base"), value["base"], base_dir)}
    if not isinstance(value, str) or not path_field(parts):
        return value
    if value in PRESETS.get(parts[0], {}) or not (value.endswith(FILE_SUFFIXES) or "/" in value) or os.path.isabs(value):
        return value
    return os.path.join(os.getcwd() if base_dir is None else base_dir, value)
