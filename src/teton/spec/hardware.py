"""Hardware a spec defines: a GPU, host or NIC given by name, by file or inline.

A cluster's ``host``, ``gpu`` and ``backend_nic``, and a host's ``gpu``, ``backend_nic`` and
``frontend_nic``, each take a catalog name (``teton presets``), a file (YAML / TOML / JSON: the
fields of the schema, ``teton.hardware.gpus.GPU`` / ``hosts.Host`` / ``hosts.NIC``; a path
relative to the file that names it) or a mapping, either of them with ``base:`` (a catalog
name or a file) plus the fields it changes (a variant of a catalog entry that gives no ``name``
is named ``<base>-custom``: a catalog name stands for the catalog's figures only). Here the files are read and the ``base:`` expanded,
relative to each file's folder, before the cluster model checks what they hold (one-line
errors naming ``cluster.host.gpu.<field>``). ``teton presets --show NAME`` writes any entry as
such a file. docs/hardware.md says how.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from teton.errors import SpecError, closest
from teton.hardware import GPUS, HOSTS, NICS
from teton.spec.read import read_file

CATALOGS: dict[str, dict] = {"gpu": GPUS, "host": HOSTS, "nic": NICS}
CLUSTER_SLOTS = {"host": "host", "gpu": "gpu", "backend_nic": "nic"}  # field -> kind
HOST_SLOTS = {"gpu": "gpu", "backend_nic": "nic", "frontend_nic": "nic"}
FILE_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def resolve_cluster_hardware(fields: dict, base_dir: Path | None, field: str = "cluster") -> dict:
    """``fields`` (one cluster mapping, as one file or the spec gives it) with its hardware
    slots' files read and ``base:`` expanded, relative to ``base_dir``."""
    out = dict(fields)
    for key, kind in CLUSTER_SLOTS.items():
        if out.get(key) is not None:
            out[key] = resolve_slot(kind, out[key], base_dir, f"{field}.{key}")
    return out


def _is_path(value: str) -> bool:
    return value.endswith(FILE_SUFFIXES) or "/" in value


def resolve_slot(kind: str, value: Any, base_dir: Path | None, field: str, seen: tuple[Path, ...] = ()) -> Any:
    """One slot's value: a catalog name (kept), a file's mapping (read, resolved against the
    file's folder), a mapping with ``base:`` expanded (a mapping field such as ``peak_tflops``
    merged into the base's key by key: ``peak_tflops: {bf16: 1000}`` keeps its fp8 peak); anything
    else as given (the model's validator names what is wrong)."""
    catalog = CATALOGS[kind]
    if isinstance(value, str):
        if value in catalog or not _is_path(value):
            return value
        path = Path(value) if base_dir is None else base_dir / value
        if not os.path.isfile(path):
            raise SpecError(field, value, f"not a {kind} preset, and no such file ({path}); presets: "
                            f"{', '.join(catalog)}")
        if path.resolve() in seen:
            chain = " -> ".join(p.name for p in (*seen, path.resolve()))
            raise SpecError(field, value, f"circular base reference ({chain})")
        return resolve_slot(kind, read_file(path), path.parent, field, (*seen, path.resolve()))
    if not isinstance(value, dict):
        return value
    value = dict(value)
    base = value.pop("base", None)
    out: dict = {}
    if base is not None:
        if isinstance(base, str) and base in catalog:
            out = catalog[base].model_dump(exclude_defaults=True)
            if "name" not in value and value:  # a variant of a catalog entry: named as one
                out["name"] = f"{base}-custom"
        else:
            got = resolve_slot(kind, base, base_dir, f"{field}.base", seen)
            if not isinstance(got, dict):
                raise SpecError(f"{field}.base", base, closest(str(base), catalog) + f"; or a {kind} file")
            out = got
    for key, given in value.items():  # a mapping field (peak_tflops) merges into the base's, key by key
        nested = isinstance(given, dict) and isinstance(out.get(key), dict) and "base" not in given
        out[key] = {**out[key], **given} if nested else given
    if kind == "host":
        for key, inner in HOST_SLOTS.items():
            if out.get(key) is not None:
                out[key] = resolve_slot(inner, out[key], base_dir, f"{field}.{key}", seen)
    return out


def slot_base(parts: tuple[str, ...], node: dict) -> str | None:
    """The catalog name an override below an unset hardware slot starts from (``--set
    cluster.gpu.hbm_bytes=...`` on a cluster that names only its host: the host's GPU); None
    where ``parts`` is not such a slot or no catalog entry is in sight. ``node``: the mapping
    holding the slot."""
    if len(parts) == 2 and parts[0] == "cluster" and parts[1] in CLUSTER_SLOTS:
        host = node.get("host", "grand-teton")
        host = host.get("base") if isinstance(host, dict) else host
        if parts[1] == "host":
            return host if isinstance(host, str) else None
        spec = HOSTS.get(host) if isinstance(host, str) else None
        own = None if spec is None else getattr(spec, parts[1])
        return own if isinstance(own, str) else None
    if len(parts) == 3 and parts[:2] == ("cluster", "host") and parts[2] in HOST_SLOTS:
        spec = HOSTS.get(node.get("base")) if isinstance(node.get("base"), str) else None
        own = None if spec is None else getattr(spec, parts[2])
        return own if isinstance(own, str) else None
    return None


def is_slot(parts: tuple[str, ...]) -> bool:
    """Whether ``parts`` names a hardware slot (``cluster.host``, ``cluster.host.gpu``, ...)."""
    return (len(parts) == 2 and parts[0] == "cluster" and parts[1] in CLUSTER_SLOTS) or \
        (len(parts) == 3 and parts[:2] == ("cluster", "host") and parts[2] in HOST_SLOTS)
