"""Read a spec (YAML, TOML or JSON), expand presets, apply overrides, validate.

Every failure becomes a one-line :class:`SpecError` naming the field, the value and what is
allowed, with the file's line number where one is known.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from teton.errors import SpecError, closest, from_validation
from teton.spec.schema import JobSpec, NetworkSpec, Spec, check_job
from teton.topology.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.workload.model import MODEL_PRESETS, ModelSpec, model_from_hf_config

SPEC_SECTIONS = {"cluster", "model", "job", "network", "storage", "reliability", "seed", "notes", "run"}


def read_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML / TOML / JSON file into a mapping, with line numbers on syntax errors."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise SpecError("spec", str(path), f"cannot read file ({err.strerror})") from None
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        line = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SpecError("yaml", (err.problem or "syntax error"), "malformed YAML", where=line) from None
    except json.JSONDecodeError as err:
        raise SpecError("json", err.msg, "malformed JSON", where=f"{path}:{err.lineno}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError("toml", str(err), "malformed TOML", where=str(path)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("spec", type(data).__name__, "the top level must be a mapping", where=str(path))
    return data


def parse_value(text: str) -> Any:
    """A --set value: YAML scalar rules (numbers, true/false, lists), else the string."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def set_path(data: dict[str, Any], parts: tuple[str, ...] | list[str], value: Any,
             field: str | None = None) -> dict[str, Any]:
    """A copy of ``data`` with the nested key ``parts`` set to ``value``; only the dicts on the
    path are copied. A preset name met on the way (``cluster: meta-roce-24k`` when setting
    ``cluster.hosts``) becomes ``{"base": name}``."""
    parts = tuple(parts)
    out = dict(data)
    node = out
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if isinstance(nxt, str) and i == 0 and part in ("cluster", "model"):
            nxt = {"base": nxt}
        elif nxt is None:
            nxt = {}
        elif isinstance(nxt, dict):
            nxt = dict(nxt)
        else:
            raise SpecError(field or ".".join(parts), value, f"{'.'.join(parts[: i + 1])} is not a mapping")
        node[part] = nxt
        node = nxt
    node[parts[-1]] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
    return out


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested mapping (preset names expand first)."""
    for item in overrides or []:
        if "=" not in item:
            raise SpecError("--set", item, "expected key.path=value")
        key, _, raw = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts or parts[0] not in SPEC_SECTIONS:
            raise SpecError("--set", key, f"the first key must be one of {', '.join(sorted(SPEC_SECTIONS))}")
        data = set_path(data, parts, parse_value(raw), field="--set")
    return data


def _resolve_named(section: str, value: Any, presets: dict[str, dict], base_dir: Path | None) -> dict:
    """A preset name, a file path, or a mapping with optional ``base:`` -> field mapping."""
    if isinstance(value, str):
        path = Path(value) if base_dir is None else (base_dir / value)
        if value in presets:
            return copy.deepcopy(presets[value])
        if value.endswith((".json", ".yaml", ".yml", ".toml")) and path.exists():
            if section == "model" and path.name.endswith(".json"):
                raw = json.loads(path.read_text()) if path.exists() else {}
                if "num_hidden_layers" in raw:
                    return model_from_hf_config(path)
            return _resolve_named(section, read_file(path), presets, path.parent)
        raise SpecError(section, value, closest(value, presets.keys()))
    if isinstance(value, dict):
        value = dict(value)
        base = value.pop("base", None)
        out = _resolve_named(section, base, presets, base_dir) if base is not None else {}
        out.update(value)
        return out
    raise SpecError(section, value, "must be a preset name, a file path or a mapping")


def _loc_to_line(path: Path | None, section: str, loc: tuple) -> str | None:
    """File:line of a field, via a round-trip load (only on error)."""
    if path is None or path.suffix.lower() not in (".yaml", ".yml"):
        return str(path) if path else None
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


def _build(cls, section: str, fields: dict, path: Path | None):
    try:
        return cls(**fields)
    except SpecError as err:
        if err.where is None and path is not None:
            raise SpecError(err.field, err.value, err.allowed, where=str(path)) from None
        raise
    except ValidationError as err:
        raise from_validation(
            err, section,
            unknown_field=lambda loc: f"unknown field; allowed: {', '.join(sorted(cls.model_fields))}",
            where=lambda loc: _loc_to_line(path, section, loc)) from None


def load_spec(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> Spec:
    """Resolve a spec file path or mapping into a validated :class:`Spec`."""
    path: Path | None = None
    if isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        data = read_file(path)
    unknown = set(data) - SPEC_SECTIONS
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(key, data[key], closest(key, SPEC_SECTIONS), where=str(path) if path else None)
    data = apply_overrides(data, overrides)
    base_dir = path.parent if path else None
    for required in ("cluster", "model", "job"):
        if required not in data:
            raise SpecError(required, None, "missing; a spec needs cluster, model and job",
                            where=str(path) if path else None)
    cluster = _build(ClusterSpec, "cluster", _resolve_named("cluster", data["cluster"], CLUSTER_PRESETS, base_dir), path)
    model = _build(ModelSpec, "model", _resolve_named("model", data["model"], MODEL_PRESETS, base_dir), path)
    if not isinstance(data["job"], dict):
        raise SpecError("job", data["job"], "must be a mapping", where=str(path) if path else None)
    job = _build(JobSpec, "job", data["job"], path)
    network = _build(NetworkSpec, "network", data.get("network") or {}, path)
    try:
        job = check_job(job, model, cluster)
    except SpecError as err:
        raise SpecError(err.field, err.value, err.allowed,
                        where=_loc_to_line(path, "job", (err.field.split(".")[-1],))) from None
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise SpecError("seed", seed, "must be a non-negative integer", where=str(path) if path else None)
    for section in ("storage", "reliability"):
        if data.get(section) is not None and not isinstance(data[section], (dict, str)):
            raise SpecError(section, data[section], "must be a mapping or a preset name")
    storage = data.get("storage")
    reliability = data.get("reliability")
    return Spec(cluster=cluster, model=model, job=job, network=network,
                storage={"preset": storage} if isinstance(storage, str) else storage,
                reliability={"preset": reliability} if isinstance(reliability, str) else reliability,
                seed=seed, notes=tuple(data.get("notes") or ()))
