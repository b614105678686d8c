"""The last steps every importer shares: the GPU count and the cluster, ``--set`` overrides, the
spec put in schema order, validated with ``load_spec`` (a broken rule blamed on the config key
it came from), and the defaulted rows for every teton field the config left to teton."""

from __future__ import annotations

import os
from typing import Any

from teton.errors import SpecError
from teton.spec.frameworks.common import Defaulted, Mapped, Mapper
from teton.spec.job import JobSpec
from teton.spec.load import DEFAULT_CLUSTER, apply_overrides, load_spec
from teton.spec.model import ModelSpec
from teton.spec.software import SOFTWARE_PRESETS, STACK_JOB_FIELDS, SoftwareSpec


def finish(m: Mapper, source: str, cluster: str | None, gpus: int | None, overrides: list[str] | None
           ) -> dict[str, Any]:
    """The validated spec mapping of what ``m`` read (rows added to ``m``'s report)."""
    given = {item.partition("=")[0].strip() for item in overrides or []}
    for field, err in m.missing.items():
        if field not in given:
            raise err
    _gpus(m, gpus)
    _cluster(m, cluster)
    spec = _ordered(m.spec)
    spec["notes"] = [f"imported by teton import from {os.path.basename(source)} ({m.framework}); "
                     "docs/import.md lists what each key maps to"]
    loaded = _validate(m, spec, overrides)
    spec = apply_overrides(spec, overrides)
    for item in overrides or []:
        key, _, raw = item.partition("=")
        m.mapped.append(Mapped("override", item, key.strip(), raw))
    _teton_defaults(m, spec, loaded)
    return spec


def _gpus(m: Mapper, gpus: int | None) -> None:
    given = m.spec["job"].get("gpus")
    if given is not None and gpus is not None and gpus != given:
        raise SpecError("gpus", gpus, f"the config gives {given} GPUs ({m.sources.get('job.gpus')}); "
                        "leave --gpus out or make them agree")
    if given is None:
        if gpus is None:
            raise SpecError("gpus", None, f"the {m.framework} config does not give the GPU count "
                            "(the launcher does): give --gpus N")
        m.put("job.gpus", gpus, "option gpus", gpus)


def _cluster(m: Mapper, cluster: str | None) -> None:
    if cluster is None:
        m.default("cluster", DEFAULT_CLUSTER, "teton's default cluster (H100s; --cluster NAME to choose)")
        return
    value = os.path.abspath(cluster) if os.path.isfile(cluster) else cluster
    m.put("cluster", value, "option cluster", cluster)


def _ordered(spec: dict[str, Any]) -> dict[str, Any]:
    """cluster, model, software, job, in that order, each section's fields in schema order."""
    def by(fields, section: Any, first: tuple[str, ...] = ()) -> Any:
        if not isinstance(section, dict):
            return section
        order = [*first, *fields]
        return dict(sorted(section.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))

    out = {"cluster": spec.get("cluster"), "model": by(ModelSpec.model_fields, spec.get("model"), ("base", "name")),
           "software": by(SoftwareSpec.model_fields, spec.get("software"), ("base",)),
           "job": by(JobSpec.model_fields, spec.get("job"))}
    out.update({k: v for k, v in spec.items() if k not in out})
    return {k: v for k, v in out.items() if v not in (None, {})}


def _validate(m: Mapper, spec: dict[str, Any], overrides: list[str] | None):
    try:
        return load_spec(spec, overrides)
    except SpecError as err:
        if (err.where or "").startswith("override") or err.field == "overrides":
            raise
        field = err.field
        key = m.sources.get(field) or next((k for f, k in m.sources.items() if field.startswith(f + ".")), None)
        if key is None:
            raise SpecError(field, err.value, f"{err.allowed} (in the spec imported from {m.framework})") from None
        raw = next((r.value for r in m.mapped if r.key == key), err.value)
        if key.startswith("option "):  # the import's own parameter (gpus, cluster)
            raise SpecError(key.removeprefix("option "), raw, err.allowed) from None
        raise SpecError(key, raw, f"{err.allowed} (as teton's {field} = {err.value!r})") from None


def _teton_defaults(m: Mapper, spec: dict[str, Any], loaded) -> None:
    """A defaulted row for each job, software and (inline) model field the spec left to teton."""
    have = {r.field for r in m.mapped} | {r.field for r in m.defaulted}
    software = spec.get("software") or {}
    base = software.get("base", "unknown") if isinstance(software, dict) else software
    rows = []
    for name in JobSpec.model_fields:
        if name == "software" or f"job.{name}" in have:
            continue
        value = getattr(loaded.job, name)
        why = ("gpus / (tp x cp x pp)" if name == "dp" else
               f"the software stack's default (software.{_stack_field(name)})" if name in STACK_JOB_FIELDS else
               "teton's default")
        rows.append(Defaulted(f"job.{name}", _plain(value), why))
    for name in SoftwareSpec.model_fields:
        if f"software.{name}" not in have and name != "description":
            rows.append(Defaulted(f"software.{name}", _plain(getattr(loaded.job.software, name)),
                                  f"preset {base}'s" if base in SOFTWARE_PRESETS else "teton's default"))
    model = spec.get("model")
    if isinstance(model, dict) and "base" not in model:
        for name in ModelSpec.model_fields:
            if f"model.{name}" not in have and name not in model:
                rows.append(Defaulted(f"model.{name}", _plain(getattr(loaded.model, name)), "teton's default"))
    rows.append(Defaulted("network.fidelity", loaded.network.fidelity, "teton's default (alpha-beta network model)"))
    m.defaulted.extend(rows)


_JOB_TO_STACK = {"kernel_fusion": "elementwise", "flash_attention": "attention", "attention_kernel": "attention",
                 "tp_overlap": "tp_comm_overlap", "cp_algo": "cp_comm"}


def _stack_field(job_field: str) -> str:
    return _JOB_TO_STACK.get(job_field, job_field)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
