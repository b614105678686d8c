"""Read a spec (YAML, TOML or JSON), expand presets, apply overrides, validate.

Every failure becomes a one-line :class:`SpecError` naming the field, the value and what is
allowed, with the file's line number where one is known.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from teton.errors import SpecError, closest, from_validation, unknown_field
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.spec.fields import ignored_field_notes
from teton.spec.hardware import is_slot, resolve_cluster_hardware, slot_base
from teton.spec.hf_config import HF_CONFIG_KEYS, hf_notes_of, model_from_hf_config
from teton.spec.job import JobSpec, check_job, job_defaults
from teton.spec.locate import field_line
from teton.spec.model import MODEL_PRESETS, ModelSpec
from teton.spec.network import NetworkSpec
from teton.spec.override_paths import from_cwd
from teton.spec.plan import PlanSpec
from teton.spec.read import MAX_DEPTH, Yaml12Loader, check_tree, read_file  # noqa: F401 - re-exported
from teton.spec.reliability import ReliabilitySpec, check_runs_seed, parse_reliability
from teton.spec.schema import Spec
from teton.spec.software import SOFTWARE_PRESETS, SoftwareSpec
from teton.spec.storage import StorageSection, parse_storage

SPEC_SECTIONS = {"cluster", "model", "job", "software", "network", "storage", "reliability", "plan", "seed", "notes"}
NAMED_SECTIONS = ("cluster", "model", "software")  # a preset name, a file, or a mapping with base:


# Exponent notation YAML 1.1 leaves a string ("1e3", "16e6", "1.5E+3"): read as a number.
_EXPONENT_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def parse_value(text: str) -> Any:
    """A --set value: YAML scalar rules (numbers, true/false, lists; integers as YAML 1.2 reads
    them: ``010`` is 10), else the string.

    Exponent notation is a number (``16e6`` -> 16000000, an int when integral), as a user means it;
    PyYAML's YAML 1.1 resolver would keep it a string."""
    try:
        value = yaml.load(text, Loader=Yaml12Loader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError):
        return text
    except ValueError:  # an integer past Python's 4,300-digit conversion limit
        raise SpecError("overrides", text[:40] + "...", "a number too large; numbers are bounded per field") from None
    check_tree(value, "overrides", text)
    if isinstance(value, str) and _EXPONENT_NUMBER.match(value.strip()):
        number = float(value)
        return int(number) if number.is_integer() and abs(number) < 2**63 else number
    return value


def set_path(data: dict[str, Any], parts: tuple[str, ...] | list[str], value: Any,
             field: str | None = None) -> dict[str, Any]:
    """A copy of ``data`` with the nested key ``parts`` set to ``value``; only the dicts and lists
    on the path are copied. A preset name met on the way (``cluster: meta-roce-24k`` when setting
    ``cluster.hosts``) becomes ``{"base": name}``; a key below it that only the preset holds
    (``cluster.layers.1.oversubscription``) is copied from the preset first. A number indexes a
    list (``layers.1``)."""
    parts = tuple(parts)
    name = field or ".".join(parts)
    out = dict(data)
    node: Any = out
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise SpecError(name, value, f"{'.'.join(parts[:i])} is a list of {len(node)}; "
                                f"index it with 0..{len(node) - 1}")
            key: Any = int(part)
            nxt = node[key]
        else:
            key = part
            nxt = node.get(part)
            if nxt is None and i == 1 and not last:
                nxt = _preset_field(parts[0], node, part)
            if nxt is None and not last and is_slot(parts[: i + 1]):  # an unset hardware slot
                nxt = slot_base(parts[: i + 1], _with_preset_host(parts, node))
        if last:
            node[key] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
            break
        if isinstance(nxt, str) and ((i == 0 and part in NAMED_SECTIONS) or is_slot(parts[: i + 1])):
            nxt = {"base": nxt}
        elif nxt is None:
            nxt = {}
        elif isinstance(nxt, (dict, list)):
            nxt = type(nxt)(nxt)
        else:
            raise SpecError(name, value, f"{'.'.join(parts[: i + 1])} is not a mapping")
        node[key] = nxt
        node = nxt
    return out


def _with_preset_host(parts: tuple[str, ...], node: dict[str, Any]) -> dict[str, Any]:
    """The cluster mapping ``node`` with the host its preset names, when it names none itself."""
    if parts[0] != "cluster" or "host" in node:
        return node
    host = _preset_field("cluster", node, "host")
    return node if host is None else {**node, "host": host}


def _preset_field(section: str, node: dict[str, Any], key: str) -> Any:
    """``key`` of the preset a ``cluster`` / ``model`` mapping names in ``base:`` (a copy), or None."""
    presets = {"cluster": CLUSTER_PRESETS, "model": MODEL_PRESETS, "software": SOFTWARE_PRESETS}.get(section)
    base = node.get("base")
    if presets is None or not isinstance(base, str) or base not in presets:
        return None
    return copy.deepcopy(presets[base].get(key))


def _override_key(item: str) -> tuple[tuple[str, ...], str]:
    """(key parts, raw value) of one ``a.b.c=value`` override; SpecError when malformed."""
    if "=" not in item:
        raise SpecError("overrides", item, "expected key.path=value")
    key, _, raw = item.partition("=")
    parts = tuple(key.strip().split("."))
    if not parts[0] or parts[0] not in SPEC_SECTIONS:
        raise SpecError("overrides", key, f"the first key must be one of {', '.join(sorted(SPEC_SECTIONS))}")
    if not all(parts):
        raise SpecError("overrides", key, "expected key.path=value with no empty key between dots")
    return parts, raw


def overrides_in_file(overrides: list[str] | None, base_dir: str | Path) -> list[str]:
    """Overrides written in a file (a runs file's ``set:``) with their file paths resolved against
    that file's folder ``base_dir`` rather than the working directory."""
    out = []
    for item in overrides or []:
        parts, raw = _override_key(item)
        value = parse_value(raw)
        moved = from_cwd(parts, value, base_dir)
        out.append(f"{'.'.join(parts)}={moved}" if isinstance(moved, str) and moved != value else item)
    return out


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides to a nested mapping (preset names expand first; file paths
    resolve against the working directory: :func:`teton.spec.override_paths.from_cwd`)."""
    for item in overrides or []:
        parts, raw = _override_key(item)
        try:
            data = set_path(data, parts, from_cwd(parts, parse_value(raw)))
        except SpecError as err:
            raise SpecError("overrides", item, err.allowed) from None
    return data


SPEC_SUFFIXES = (".json", ".yaml", ".yml", ".toml")


def _resolve_named(section: str, value: Any, presets: dict[str, dict], base_dir: Path | None,
                   seen: tuple[Path, ...] = (), field: str | None = None) -> dict:
    """A preset name, a file path, or a mapping with optional ``base:`` -> field mapping.

    ``seen``: the files already on this chain of ``base:`` references (a cycle is an error);
    ``field``: the name errors report (``model.base`` when the value came from ``base:``)."""
    field = field or section
    if isinstance(value, str):
        path = Path(value) if base_dir is None else (base_dir / value)
        if value in presets:
            return copy.deepcopy(presets[value])
        if value.endswith(SPEC_SUFFIXES) or "/" in value:
            if not os.path.isfile(path):  # pathlib's raises on a name too long
                raise SpecError(field, value, f"not a preset, and no such file ({path}); presets: "
                                f"{', '.join(sorted(presets))}")
            if path.resolve() in seen:
                chain = " -> ".join(p.name for p in (*seen, path.resolve()))
                raise SpecError(field, value, f"circular base reference ({chain})")
            raw = read_file(path)
            if section == "model" and any(k in raw for k in HF_CONFIG_KEYS):
                return model_from_hf_config(path)
            return _resolve_named(section, raw, presets, path.parent, (*seen, path.resolve()))
        raise SpecError(field, value, closest(value, presets.keys()))
    if isinstance(value, dict):
        value = dict(value)
        base = value.pop("base", None)
        out = (_resolve_named(section, base, presets, base_dir, seen, f"{section}.base")
               if base is not None else {})
        if section == "cluster":  # its hardware files, relative to this mapping's file
            value = resolve_cluster_hardware(value, base_dir)
        out.update(value)
        return out
    raise SpecError(field, value, "must be a preset name, a file path or a mapping")


def _set_text(item: str) -> str:
    """``override ITEM`` as an error names it (a long value cut short; the CLI says ``--set ITEM``)."""
    return f"override {item}" if len(item) <= 200 else f"override {item[:200]}... ({len(item):,} characters)"


def _locator(path: Path | None, overrides: list[str] | None):
    """``where(section, loc)``: ``--set ITEM`` when an override set the field (or a mapping
    around it), else the spec file's line of the field."""
    keys = [(_override_key(item)[0], item) for item in overrides or []]

    def where(section: str, loc: tuple) -> str | None:
        full = (section, *(str(x) for x in loc))
        for parts, item in reversed(keys):
            n = min(len(parts), len(full))
            if len(full) > 1 and parts[:n] == full[:n]:
                return _set_text(item)
        return field_line(path, section, loc)

    return where


def _fields_at(cls, loc: tuple) -> dict:
    """The fields of the (nested) pydantic model that holds ``loc``'s last key (``layers.0.foo``:
    a fabric layer's fields, not the cluster's)."""
    from typing import get_args

    from pydantic import BaseModel

    model = cls
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        field = model.model_fields.get(key)
        inner = [] if field is None else [field.annotation, *get_args(field.annotation)]
        nested = [t for t in inner if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            break
        model = nested[0]
    return model.model_fields


def _build(cls, section: str, fields: dict, path: Path | None, where=None):
    if not isinstance(fields, dict):
        raise SpecError(section, fields, "must be a mapping", where=str(path) if path else None)
    where = where or (lambda sec, loc: field_line(path, sec, loc))

    def build():
        try:
            return cls(**fields)
        except ValidationError as err:
            raise from_validation(
                err, section,
                unknown_field=lambda loc: unknown_field(loc[-1], sorted(_fields_at(cls, loc))),
                where=lambda loc: where(section, loc)) from None

    return _check_section(section, where, build)


def load_spec(source: str | Path | dict[str, Any], overrides: list[str] | None = None) -> Spec:
    """Resolve a spec file path or mapping into a validated :class:`Spec`.

    A failure is blamed on what caused it (:func:`_blame`): the overrides without which it does not
    happen (``job.tp=3`` for a ``tp*cp*pp*dp = gpus`` error reported on ``job.dp``, not the
    ``job.dp=64`` beside it), else the file's line of the field; when the spec is valid without
    its overrides but no single one is needed, the ones that break it alone (all when only
    together)."""
    if not isinstance(source, (str, Path, dict)):
        raise SpecError("source", source, "a spec file's path or a spec mapping")
    if overrides is not None and (isinstance(overrides, str) or not isinstance(overrides, (list, tuple))
                                  or not all(isinstance(o, str) for o in overrides)):
        raise SpecError("overrides", overrides, "a list of key.path=value strings (['job.tp=8'], not 'job.tp=8')")
    try:
        return _load_spec(source, overrides)
    except SpecError as err:
        if not overrides:
            raise
        blame = _blame(source, overrides, err)
        if blame is None:
            raise
        raise SpecError(err.field, err.value, err.allowed, where=" ".join(_set_text(i) for i in blame)) from None


def _fails_on(source: str | Path | dict[str, Any], overrides: list[str], field: str | None) -> bool:
    """Whether loading fails with an error on ``field`` (None: with any error)."""
    try:
        _load_spec(source, overrides)
    except SpecError as err:
        return field is None or err.field == field
    return False


def _blame(source: str | Path | dict[str, Any], overrides: list[str], err: SpecError) -> list[str] | None:
    """The overrides ``err`` is blamed on: those without which the same field's error does not
    happen; else, when the spec is valid without overrides, those that break it alone (all when
    only together); None: the error stands where it was found (the file, or the override the
    field's own check named)."""
    needed = [item for i, item in enumerate(overrides)
              if not _fails_on(source, [*overrides[:i], *overrides[i + 1:]], err.field)]
    if needed:
        return needed
    if (err.where or "").startswith("override ") or _fails_on(source, [], None):
        return None
    return _culprits(source, overrides)


def _culprits(source: str | Path | dict[str, Any], overrides: list[str]) -> list[str]:
    """The overrides that break a valid spec on their own (all of them when only together)."""
    alone = []
    for item in overrides:
        try:
            _load_spec(source, [item])
        except SpecError:
            alone.append(item)
    return alone or list(overrides)


def _load_spec(source: str | Path | dict[str, Any], overrides: list[str] | None) -> Spec:
    path: Path | None = None
    if isinstance(source, dict):
        data = source
        check_tree(data, "spec", "(a mapping)")
    else:
        path = Path(source)
        data = read_file(path)
    unknown = set(data) - SPEC_SECTIONS
    if unknown:
        where = str(path) if path else None
        if "base" in data and {"grid", "zip"} & set(data):
            raise SpecError("spec", sorted(data), "a sweep file (base with grid / zip axes), not a run spec: "
                            f"run it with teton sweep {path or 'FILE'} --db RESULTS.duckdb", where=where)
        key = sorted(unknown)[0]
        raise SpecError(key, data[key], closest(key, SPEC_SECTIONS), where=where)
    data = apply_overrides(data, overrides)
    base_dir = path.parent if path else None
    for required in ("cluster", "model", "job"):
        if required not in data:
            raise SpecError(required, None, "missing; a spec needs cluster, model and job",
                            where=str(path) if path else None)
    where = _locator(path, overrides)
    cluster = _build(ClusterSpec, "cluster", _resolve_named("cluster", data["cluster"], CLUSTER_PRESETS, base_dir),
                     path, where)
    model = _build(ModelSpec, "model", _resolve_named("model", data["model"], MODEL_PRESETS, base_dir), path, where)
    software = _build(SoftwareSpec, "software",
                      _resolve_named("software", data.get("software") or "unknown", SOFTWARE_PRESETS, base_dir),
                      path, where)
    job, defaults = _build_job(data["job"], software, path, where)
    network = _build(NetworkSpec, "network", {} if data.get("network") is None else data["network"], path, where)
    try:
        job = check_job(job, model, cluster)
    except SpecError as err:
        raise SpecError(err.field, err.value, err.allowed,
                        where=where("job", (err.field.split(".")[-1],))) from None
    seed = data.get("seed", 0)
    check_runs_seed(None, seed, where=str(path) if path else None)
    for section in ("storage", "reliability"):
        if data.get(section) is not None and not isinstance(data[section], (dict, str, StorageSection,
                                                                            ReliabilitySpec)):
            raise SpecError(section, data[section], "must be a mapping or a preset name")
    raw_storage = _section_file(data.get("storage"), base_dir, "storage")
    storage = None if raw_storage is None else _check_section(
        "storage", where, lambda: parse_storage(raw_storage, cluster.storage))
    rel = data.get("reliability")
    reliability = None if rel is None else _check_section(
        "reliability", where, lambda: parse_reliability({"preset": rel} if isinstance(rel, str) else rel))
    plan = None if data.get("plan") is None else _build(PlanSpec, "plan", data["plan"], path, where)
    return Spec(cluster=cluster, model=model, job=job, network=network, storage=storage, reliability=reliability,
                plan=plan, seed=seed, notes=(*_notes(data.get("notes"), path), *ignored_field_notes(network, "network"),
                                             *hf_notes_of(data.get("model"), base_dir, MODEL_PRESETS, SPEC_SUFFIXES)),
                job_defaults=defaults)


def _section_file(value: Any, base_dir: Path | None, field: str) -> Any:
    """A section given as a file path (``storage: my-storage.yaml``, relative to the spec): the
    mapping the file holds; any other value as it is."""
    if not (isinstance(value, str) and value.endswith(SPEC_SUFFIXES)):
        return value
    path = Path(value) if base_dir is None else base_dir / value
    if not os.path.isfile(path):
        raise SpecError(field, value, f"not a preset, and no such file ({path})")
    return read_file(path)


def _build_job(fields: Any, software: SoftwareSpec, path: Path | None, where
               ) -> tuple[JobSpec, tuple[str, ...]]:
    """(job, the job fields it did not give): the job as given, with the software stack's
    defaults for the framework fields it leaves out (``SoftwareSpec.job_defaults``)."""
    if isinstance(fields, dict) and "software" in fields:  # a resolved job handed back (a dumped spec)
        given = fields["software"]
        carried = given if isinstance(given, SoftwareSpec) else _build(SoftwareSpec, "job.software", given, path, where)
        if software.name != "unknown" and carried != software:
            raise SpecError("job.software", carried.name, f"differs from the software: section ({software.name}); "
                            "give the stack once, as the top-level software: section", where=where("job", ("software",)))
        job = _build(JobSpec, "job", {**fields, "software": carried}, path, where)
        return job, job_defaults(job)
    job = _build(JobSpec, "job", fields, path, where)
    defaults = job_defaults(job)  # before check_job fills dp in
    stack = software.job_defaults(job.precision)
    fill = {k: v for k, v in stack.items() if f"job.{k}" in defaults}
    return _build(JobSpec, "job", {**fields, **fill, "software": software}, path, where), defaults


def _check_section(section: str, where, check):
    """``check()``'s value; a SpecError without a place is blamed on the file line or ``--set`` of
    its field (``section.<field>``), or on the section."""
    try:
        return check()
    except SpecError as err:
        if err.where is not None:
            raise
        loc = tuple(err.field.split("."))[1:] if err.field.startswith(f"{section}.") else ()
        raise SpecError(err.field, err.value, err.allowed, where=where(section, loc)) from None


DEFAULT_CLUSTER = "meta-roce-24k"  # what --cluster means in a verb without a spec


def load_cluster(name: str | dict[str, Any], field: str = "cluster") -> ClusterSpec:
    """A cluster preset name, a cluster file (YAML / TOML / JSON: a preset's fields, ``base:`` +
    overrides), a spec file (its ``cluster:`` section) or a mapping (``{base: meta-roce-24k, gpu:
    b200}``). Bad fields are one-line errors."""
    if isinstance(name, dict):
        return _build(ClusterSpec, field, _resolve_named("cluster", name, CLUSTER_PRESETS, None), None)
    if name in CLUSTER_PRESETS:
        return ClusterSpec(**CLUSTER_PRESETS[name])
    path = Path(name)
    if not os.path.isfile(path):
        raise SpecError(field, name, closest(name, CLUSTER_PRESETS) + "; or a cluster / spec file")
    raw = read_file(path)
    if "cluster" in raw and ("job" in raw or "model" in raw):  # a whole spec: its cluster section
        fields = _resolve_named("cluster", raw["cluster"], CLUSTER_PRESETS, path.parent)
        return _build(ClusterSpec, "cluster", fields, path)
    fields = _resolve_named("cluster", raw, CLUSTER_PRESETS, path.parent, (path.resolve(),))
    return _build(ClusterSpec, "cluster", fields, None, where=lambda section, loc: str(path))


def _notes(value: Any, path: Path | None) -> tuple[str, ...]:
    """``notes:``: one string or a list of strings (a bare string is one note, not its letters)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v) for v in value)
    raise SpecError("notes", value, "must be a string or a list of strings", where=str(path) if path else None)
