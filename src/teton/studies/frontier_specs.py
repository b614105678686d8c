"""The specs of the frontier study (:mod:`teton.studies.frontier`): one frontier run per (system,
scale), its cluster built from the presets.

Systems. ``h100``: Meta's H100 campus (``meta-h100-campus-131k``: Grand Teton hosts of 8 GPUs,
racks of 16, pods of 4,096 leaving at 1:7, buildings of 32,768 leaving at 1:4, a campus spine
over 2 km of fibre, 10 us one way) with Llama 3 405B as ``examples/llama3-405b-16k.yaml`` trains
it (bf16, tp 8, pp 16, 16 sequences of 8K per DP rank). ``gb200``: Catalina trays (GB200, 4 GPUs
a tray, 72-GPU NVLink domains, 800G NICs) in ``meta-gb200-roce``'s pods of 72 and zones of 4,608
at 1:7; a building is that preset's 36,864 GPUs, and buildings join as the H100 campus's do
(ASSUMPTION: the same 1:4 building uplinks and the same fibre; Meta has published no GB200
campus) with Llama 3 405B as ``examples/llama3-405b-gb200-nvl72.yaml`` trains it (fp8, tp 8
inside the domain, pp 14, 28 sequences per DP rank).

Scaling. tp and pp stay, dp grows: a scale of N GPUs becomes the nearest whole number of
replica units, a unit being the fewest GPUs that are whole replicas (tp x pp GPUs) and whole
hosts (H100: 128 GPUs = 16 hosts) or whole NVLink domains (GB200: lcm(112, 72) = 1,008 GPUs =
14 domains). The global batch grows with dp (the example's sequences per DP rank kept), so the
work of every GPU is the same at every scale: ``teton plan``'s ``per_gpu`` batch rule. The
cluster is the job rounded up to whole buildings (no campus tier in one building).

Shared by both: Meta's Tectonic (``tectonic-llama3``: 7,500 servers) serving the run alone
(``other_jobs_share: 0``), so the storage figures do not depend on how far the building rounding
leaves spare GPUs; the analytical network model; the example's software stack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from teton.errors import SpecError, closest
from teton.hardware import HOSTS
from teton.spec.cluster import CLUSTER_PRESETS

STORAGE = MappingProxyType({"preset": "tectonic-llama3", "other_jobs_share": 0.0})
CAMPUS = CLUSTER_PRESETS["meta-h100-campus-131k"]
GB200_ZONES = CLUSTER_PRESETS["meta-gb200-roce"]
# ASSUMPTION (as meta-h100-campus-131k): a building's uplinks to the campus spine carry 1:4 of
# its injection bandwidth; the GB200 building takes the H100 campus's value.
BUILDING_OVERSUBSCRIPTION = 4.0

# The job sections of the bundled examples, as they are (tests/studies check they still match):
# examples/llama3-405b-16k.yaml (Llama 3 paper Table 4, row 2) ...
H100_JOB = MappingProxyType(dict(
    gpus=16384, tp=8, cp=1, pp=16, dp=128, seq_len=8192, micro_batch=1, global_batch=2048, precision="bf16",
    recompute="none", sequence_parallel=True, pp_schedule="interleaved", virtual_stages=8,
    pp_embedding_slots=True, zero=2, grad_accum_dtype="fp32", grad_accum_fusion=False,
    placement="topology-aware"))
# ... and examples/llama3-405b-gb200-nvl72.yaml (tp inside the 72-GPU NVLink domain).
GB200_JOB = MappingProxyType(dict(
    gpus=8064, tp=8, cp=1, pp=14, dp=72, seq_len=8192, micro_batch=1, global_batch=2016, precision="fp8",
    recompute="none", sequence_parallel=True, pp_schedule="interleaved", virtual_stages=9, zero=1,
    placement="topology-aware"))


@dataclass(frozen=True)
class System:
    """One side of the comparison: its hosts, fabric below the building, job and stack."""

    key: str
    label: str
    host: str  # a catalog host: its GPUs and NVLink domain
    below_building: tuple[dict[str, Any], ...]  # fabric layers inside a building
    building_gpus: int
    software: str
    model: str
    job: MappingProxyType
    example: str  # the bundled example the job is

    @property
    def gpus_per_host(self) -> int:
        return HOSTS[self.host].gpus

    @property
    def domain_gpus(self) -> int:
        """GPUs of one NVLink domain (a job takes whole domains)."""
        return HOSTS[self.host].domain_gpus

    @property
    def replica_gpus(self) -> int:
        return self.job["tp"] * self.job.get("cp", 1) * self.job["pp"]

    @property
    def unit_gpus(self) -> int:
        """The fewest GPUs that are whole replicas and whole NVLink domains (hosts)."""
        return math.lcm(self.replica_gpus, self.domain_gpus)

    @property
    def sequences_per_dp_rank(self) -> int:
        return self.job["global_batch"] // self.job["dp"]


def _building_layer(span: int) -> dict[str, Any]:
    top = dict(CAMPUS["layers"][2])  # the H100 campus's building tier: ATSWs, 4 us
    return {**top, "span_gpus": span, "oversubscription": BUILDING_OVERSUBSCRIPTION}


SYSTEMS: MappingProxyType[str, System] = MappingProxyType({
    "h100": System("h100", "H100 (Grand Teton, 400G RoCE)", CAMPUS["host"],
                   tuple(dict(x) for x in CAMPUS["layers"][:2]), CAMPUS["layers"][2]["span_gpus"],
                   "meta-llama3-2024", "llama3-405b", H100_JOB, "examples/llama3-405b-16k.yaml"),
    "gb200": System("gb200", "GB200 NVL72 (Catalina, 800G RoCE)", GB200_ZONES["host"],
                    tuple(dict(x) for x in GB200_ZONES["layers"][:2]), GB200_ZONES["layers"][-1]["span_gpus"],
                    "megatron-bridge-25.11", "llama3-405b", GB200_JOB, "examples/llama3-405b-gb200-nvl72.yaml"),
})


def parse_systems(names: Any) -> tuple[str, ...]:
    """System keys from ``h100,gb200`` or a list; SpecError naming ``systems`` on an unknown one."""
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]
    if not items:
        raise SpecError("systems", names, f"one or more of {', '.join(SYSTEMS)}")
    for n in items:
        if n not in SYSTEMS:
            raise SpecError("systems", n, closest(str(n), tuple(SYSTEMS)))
    return tuple(dict.fromkeys(items))


def job_gpus(system: System, scale: int) -> int:
    """``scale`` rounded to the nearest whole number of the system's units (at least one)."""
    unit = system.unit_gpus
    return max(1, math.floor(scale / unit + 0.5)) * unit


def cluster_fields(system: System, gpus: int, one_building: bool = False) -> dict[str, Any]:
    """The cluster mapping of a ``gpus``-GPU job: whole buildings, joined by the H100 campus's
    spine and fibre. ``one_building``: the same GPUs as if a single building held them all (its top
    tier non-blocking, no fibre): the counterfactual that prices the building boundary."""
    b = system.building_gpus
    buildings = math.ceil(gpus / b)
    cluster_gpus = buildings * b
    base = "meta-h100-campus-131k" if system.key == "h100" else "meta-gb200-roce"
    layers = [dict(x) for x in system.below_building]
    if one_building:
        layers.append({**_building_layer(cluster_gpus), "oversubscription": 1.0})
    else:
        layers.append(_building_layer(b))
        if buildings > 1:
            layers.append({**CAMPUS["layers"][3], "span_gpus": cluster_gpus})
    return {"base": base, "name": f"{system.key}-campus-{buildings}b", "host": system.host,
            "hosts": cluster_gpus // system.gpus_per_host, "storage": STORAGE["preset"], "layers": layers,
            "description": f"{buildings} building{'s' if buildings > 1 else ''} of {b:,} {system.key} GPUs"}


def frontier_spec_fields(system: System, gpus: int, one_building: bool = False) -> dict[str, Any]:
    """The whole spec mapping of the system's job on ``gpus`` GPUs (a multiple of its unit)."""
    if gpus % system.unit_gpus:
        raise SpecError("gpus", gpus, f"a multiple of {system.unit_gpus:,} for {system.key}")
    dp = gpus // system.replica_gpus
    job = {**system.job, "gpus": gpus, "dp": dp, "global_batch": system.sequences_per_dp_rank * dp}
    return {"cluster": cluster_fields(system, gpus, one_building), "model": system.model,
            "software": system.software, "job": job, "network": {"fidelity": "analytical"},
            "storage": dict(STORAGE), "seed": 0}
