"""Every preset as an editable document, and the document loaded back.

``teton presets --show NAME`` writes a preset (a GPU, host, NIC, cluster, model, software stack
or storage system) as the mapping a spec or a file of its own takes: the hardware models' fields
(``teton.hardware``), a cluster's, model's or stack's catalog fields, a storage system's fields
over its ``preset``. :func:`load_document` loads such a mapping through the same code a spec's
section goes through, so the round trip gives the identical object (a test checks every preset).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from teton.errors import SpecError, closest
from teton.hardware import GPU, GPUS, HOSTS, NIC, NICS, Host
from teton.hardware.bounds import catalog_slot

# kind -> where a document of that kind goes in a spec (what the help and the header say)
KINDS: dict[str, str] = {
    "gpu": "cluster.gpu (or a host's gpu)", "host": "cluster.host", "nic": "cluster.backend_nic (or a host's NICs)",
    "cluster": "cluster", "model": "model", "software": "software", "storage": "storage",
}
_HARDWARE = {"gpu": (GPUS, GPU, "a GPU"), "host": (HOSTS, Host, "a host"), "nic": (NICS, NIC, "a NIC")}


def catalogs() -> dict[str, dict]:
    """kind -> its presets (name -> the catalog entry: a model or the preset's field mapping)."""
    from teton.spec.cluster import CLUSTER_PRESETS
    from teton.spec.model import MODEL_PRESETS
    from teton.spec.software import SOFTWARE_PRESETS
    from teton.spec.storage import STORAGE_PRESETS

    return {"gpu": GPUS, "host": HOSTS, "nic": NICS, "cluster": CLUSTER_PRESETS, "model": MODEL_PRESETS,
            "software": SOFTWARE_PRESETS, "storage": STORAGE_PRESETS}


def find(name: str, field: str = "name") -> tuple[str, str]:
    """(kind, name) of a preset: ``NAME`` or ``KIND:NAME`` (when two kinds share the name)."""
    cats = catalogs()
    kind, _, bare = name.rpartition(":")
    if kind:
        if kind not in cats:
            raise SpecError(field, name, f"unknown kind {kind!r}; kinds: {', '.join(cats)}")
        if bare not in cats[kind]:
            raise SpecError(field, name, closest(bare, cats[kind]))
        return kind, bare
    kinds = [k for k, presets in cats.items() if name in presets]
    if not kinds:
        raise SpecError(field, name, closest(name, [n for presets in cats.values() for n in presets]))
    if len(kinds) > 1:
        raise SpecError(field, name, "a preset of several kinds; say which: " + " or ".join(f"{k}:{name}" for k in kinds))
    return kinds[0], name


def document(kind: str, name: str) -> dict[str, Any]:
    """The editable mapping of preset ``name`` of ``kind``: every field, loadable back."""
    entry = catalogs()[kind][name]
    if kind in _HARDWARE:
        return entry.model_dump(mode="json")
    if kind == "storage":
        return {"preset": name, **copy.deepcopy(entry)}
    return copy.deepcopy(entry)


def load_document(kind: str, data: dict[str, Any] | str | Path, field: str | None = None) -> Any:
    """The object a document (a mapping, or a file holding one) of ``kind`` loads to, as a spec's
    section would load it: a GPU / Host / NIC, a ClusterSpec, ModelSpec, SoftwareSpec or
    StorageSystem."""
    from teton.spec.hardware import resolve_slot
    from teton.spec.load import _build, _resolve_named, load_cluster
    from teton.spec.read import read_file

    field = field or kind
    if isinstance(data, (str, Path)):
        if kind == "cluster":
            return load_cluster(str(data))
        path = Path(data)
        data, base_dir = read_file(path), path.parent
    else:
        base_dir = None
    if kind in _HARDWARE:
        catalog, cls, what = _HARDWARE[kind]
        got = catalog_slot(resolve_slot(kind, data, base_dir, field), catalog, cls, field, what)
        return catalog[got] if isinstance(got, str) else got
    if kind == "storage":
        from teton.spec.storage import storage_system

        return storage_system(data)
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
    from teton.spec.model import MODEL_PRESETS, ModelSpec
    from teton.spec.software import SOFTWARE_PRESETS, SoftwareSpec

    cls, presets = {"cluster": (ClusterSpec, CLUSTER_PRESETS), "model": (ModelSpec, MODEL_PRESETS),
                    "software": (SoftwareSpec, SOFTWARE_PRESETS)}[kind]
    return _build(cls, field, _resolve_named(kind, data, presets, base_dir), None)


def catalog_object(kind: str, name: str) -> Any:
    """The object preset ``name`` of ``kind`` stands for (what its document must load back to)."""
    entry = catalogs()[kind][name]
    if kind in _HARDWARE:
        return entry
    if kind == "storage":
        from teton.spec.storage import storage_system

        return storage_system(name)
    return load_document(kind, copy.deepcopy(entry))
