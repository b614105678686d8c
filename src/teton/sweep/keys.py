"""The dotted spec keys a sweep varies (``job.tp``, ``cluster.hosts``, ``storage.servers``): each
checked when the sweep file is read, so a misspelt key is one error up front rather than a row of
invalid points."""

from __future__ import annotations

from collections.abc import Collection

from teton.errors import SpecError, closest
from teton.spec.load import SPEC_SECTIONS

_FREE_FORM = ("storage", "reliability")  # raw mappings, checked by their own field lists


def _section_fields() -> dict[str, set[str]]:
    from teton.spec.cluster import ClusterSpec
    from teton.spec.job import JobSpec
    from teton.spec.model import ModelSpec
    from teton.spec.network import NetworkSpec
    from teton.spec.plan import PlanSpec
    from teton.spec.software import SoftwareSpec

    return {"job": set(JobSpec.model_fields), "network": set(NetworkSpec.model_fields),
            "cluster": set(ClusterSpec.model_fields) | {"base"}, "model": set(ModelSpec.model_fields) | {"base"},
            "software": set(SoftwareSpec.model_fields) | {"base"}, "plan": set(PlanSpec.model_fields)}


def _free_form_fields() -> dict[tuple[str, ...], Collection[str]]:
    """The keys a ``storage:`` or ``reliability:`` mapping (or one of its parts) takes, as their
    loaders (``parse_storage``, ``parse_reliability``) accept them."""
    from teton.spec.reliability import CAUSE_KEYS, InfantMortality, ReliabilitySpec
    from teton.spec.storage import POLICY_KEYS, CheckpointPolicy, DataLoadingSpec, DevxSpec, StorageSystem

    return {("storage",): {*StorageSystem.model_fields, "preset", "base", *POLICY_KEYS},
            ("storage", "checkpoint"): set(CheckpointPolicy.model_fields),
            ("storage", "data_loading"): set(DataLoadingSpec.model_fields),
            ("storage", "devx"): set(DevxSpec.model_fields),
            ("reliability",): set(ReliabilitySpec.model_fields),
            ("reliability", "infant_mortality"): set(InfantMortality.model_fields),
            ("reliability", "rates_per_hour"): set(CAUSE_KEYS),
            ("reliability", "shares"): set(CAUSE_KEYS) - {"planned_maintenance"}}


def _check_free_form(parts: tuple[str, ...], key: str, where: str) -> None:
    """A ``storage.*`` / ``reliability.*`` key: each part its mapping's field list knows."""
    fields = _free_form_fields()
    for depth in range(1, len(parts)):
        allowed = fields.get(parts[:depth])
        if allowed is None:
            return
        if parts[depth] not in allowed:
            raise SpecError(where, key, f"{'.'.join(parts[:depth])} field {closest(parts[depth], allowed)}")


def check_key(key: str, where: str) -> tuple[str, ...]:
    """Split a dotted spec key and check it names a spec field (one-line SpecError if not)."""
    if not isinstance(key, str) or not key.strip():
        raise SpecError(where, key, "expected a dotted spec key like job.tp")
    parts = tuple(p for p in key.strip().split("."))
    if any(not p for p in parts):
        raise SpecError(where, key, "expected a dotted spec key like job.tp")
    sections = sorted(SPEC_SECTIONS - {"notes"})
    if parts[0] not in sections:
        raise SpecError(where, key, f"first key {closest(parts[0], sections)}")
    if len(parts) == 1:
        if parts[0] == "job":
            raise SpecError(where, key, "vary job fields one by one, e.g. job.tp")
        return parts
    if parts[0] == "seed":
        raise SpecError(where, key, "seed has no sub-keys")
    if parts[0] in _FREE_FORM:
        _check_free_form(parts, key, where)
        return parts
    fields = _section_fields()[parts[0]]
    if parts[1] not in fields:
        raise SpecError(where, key, f"{parts[0]} field {closest(parts[1], fields)}")
    return parts
