"""Failure taxonomy and per-component failure rates, derived from Llama 3 Table 5.

Model
-----
Every interruption cause ``c`` has a *scope* (the kind of component it lives in: ``gpu``,
``host``, ``nic`` or ``switch``) and a rate ``lambda_c`` per component-hour. A job that uses
``n_scope`` components of each kind is interrupted by cause ``c`` as a Poisson process with rate
``lambda_c * n_scope(c)`` per hour (any single component failure stops a synchronous SPMD job),
so the job's interruption rate scales with the GPUs, hosts, NICs and switches it spans.

Derivation of the defaults (LLAMA3 = "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4)
-------------------------------------------------------------------------------------------
Table 5 lists 419 unexpected interruptions of Llama 3 405B pre-training over a 54-day window;
the text adds 47 planned ones (466 in all). We take the job to have run on 16,384 H100 GPUs in
2,048 Grand Teton hosts (8 GPUs, 8 backend NICs each) on Meta's RoCE cluster for the whole
window, i.e. an exposure of::

    T        = 54 d * 24 h                       = 1,296 h
    GPU-h    = 16,384 * 1,296                    = 21,233,664
    host-h   = 2,048 * 1,296                     = 2,654,208
    NIC-h    = 16,384 * 1,296 (one NIC per GPU)  = 21,233,664
    switch-h = S * 1,296, S = switch-equivalents of the fabric the job spans (see below)

and ``lambda_c = count_c / (n_scope * T)``. Example: Faulty GPU, 148 / 21,233,664 GPU-h =
6.97e-6 per GPU-hour (one per ~16 GPU-years). The counts are used, not the printed percent
column, which sums to 94.9 %. Because not all 16K GPUs ran all 54 days, these are upper bounds
on per-component rates.

Scopes (assumptions, each overridable):
- GPU rows (faulty GPU, HBM3, SRAM, GPU system processor, thermal, silent data corruption): per GPU.
- Software bug, dependency and NCCL-watchdog "unknown": per GPU, i.e. per *rank*-hour — every
  rank is an independent chance to hit a bug or a hang. A pure assumption; the paper does not
  say how software interruptions scale.
- NIC: per backend NIC.
- Host rows (SSD, PSU, chassis, IO board, CPU, DRAM) and unplanned host maintenance: per host.
- Planned maintenance (47 in 54 days, "at least one training interruption daily" from automated
  firmware/kernel upgrades): per host — a rolling upgrade touches every host it drains.
- Network switch/cable: per *switch-equivalent* (a 64-port 400G switch with its cables and
  optics), counted from the cluster's fabric layers (:func:`job_components`).

Switch-equivalents a job spans
------------------------------
No switch counts are published for the CTSW/ATSW tiers, so we
count ports: a switch-equivalent is 64 x 400G ports (Broadcom Tomahawk 4, 25.6 Tb/s, the ASIC of
the Minipack2 RTSW; Meta/OCP Minipack2 spec). For a job of G GPUs placed topology-contiguously:

- tier 0 (the lowest layer's switch, e.g. RTSW): one switch per lowest-layer domain the job
  touches, ``ceil(G / span_0)`` (Llama 3: one Minipack2 per 16-GPU rack), or its ports / 64 when
  a domain has more (a 256-GPU SuperPOD leaf group at 1:1: 512 ports, 8 switch-equivalents);
- tier l > 0 (e.g. CTSW, ATSW): the switch ports that terminate the uplinks of the tier below,
  ``down_l = up_{l-1}``, plus this tier's own uplinks ``up_l = down_l / oversubscription_l``
  when the job spans more than one domain of this layer; switch-equivalents = ports / 64.
  ``up_0 = G * NICs-per-GPU / oversubscription_0`` when G spans more than one tier-0 domain.
- a job inside one NVLink domain (a host, or a GB200 NVL72 rack) never leaves NVLink for its
  collectives and spans no switch.
- on a multi-plane fabric (``cluster.fabric_planes`` >= 2) a switch or cable failure takes one plane
  down and NCCL carries on over the others (NVIDIA's DGX B300 SuperPOD RA, network fabrics: "a
  plane failure halves bandwidth instead of aborting the job"): the switches are still counted,
  but their failures interrupt nothing; the slower steps until the repair stretch the run
  (:mod:`teton.reliability.planes`).

For 16,384 GPUs on meta-roce-24k (spans 16 / 3,072 / 24,576, oversubscription 1 / 7 / 1):
RTSW 1,024; CTSW ports 16,384 + 2,340.6 -> 292.6; ATSW ports 2,340.6 -> 36.6;
S = 1,353.2 switch-equivalents, and lambda_switch = 35 / (1,353.2 * 1,296 h) = 2.0e-5 per
switch-hour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

from teton.spec.cluster import ClusterSpec
from teton.spec.reliability import CAUSE_KEYS

# LLAMA3 §3.3.4: 54-day window, 16,384 GPUs (2,048 hosts of 8) for Llama 3 405B pre-training.
TABLE5_WINDOW_H = 54 * 24.0
TABLE5_GPUS = 16_384
TABLE5_GPUS_PER_HOST = 8
TABLE5_HOSTS = TABLE5_GPUS // TABLE5_GPUS_PER_HOST
TABLE5_UNEXPECTED = 419
TABLE5_PLANNED = 47
# Tomahawk 4: 25.6 Tb/s = 64 x 400G ports (Broadcom BCM56990 brief; Minipack2 is a TH4 system).
SWITCH_EQUIVALENT_PORTS = 64

SCOPES = ("gpu", "host", "nic", "switch")
# How a failure shows itself: "crash" (process dies; the elastic agent sees it), "hang" (ranks
# block in a collective until the NCCL watchdog fires), "planned" (drained at a checkpoint).
DETECTIONS = ("crash", "hang", "planned")


@dataclass(frozen=True)
class Cause:
    """One interruption cause: Table 5 row (or the planned-maintenance line) and its model."""

    key: str
    component: str  # Table 5 "Component"
    category: str  # Table 5 "Category"
    count_54d: int  # Table 5 count on 16,384 GPUs over 54 days
    scope: str  # gpu | host | nic | switch
    detection: str  # crash | hang | planned
    replaces_host: bool  # needs a host swap (spare) before restart
    hardware: bool  # subject to infant mortality
    planned: bool = False


# Table 5 of LLAMA3 (counts exactly as printed; they sum to 419) + the 47 planned interruptions.
CAUSES: tuple[Cause, ...] = (
    Cause("faulty_gpu", "Faulty GPU", "GPU", 148, "gpu", "crash", True, True),
    Cause("gpu_hbm3", "GPU HBM3 Memory", "GPU", 72, "gpu", "crash", True, True),
    Cause("software_bug", "Software Bug", "Dependency", 54, "gpu", "crash", False, False),
    Cause("network_switch_cable", "Network Switch/Cable", "Network", 35, "switch", "hang", False, True),
    Cause("host_maintenance_unplanned", "Host Maintenance", "Unplanned Maintenance", 32, "host", "crash", True,
          True),
    Cause("gpu_sram", "GPU SRAM Memory", "GPU", 19, "gpu", "crash", True, True),
    Cause("gpu_system_processor", "GPU System Processor", "GPU", 17, "gpu", "crash", True, True),
    Cause("nic", "NIC", "Host", 7, "nic", "hang", True, True),
    Cause("nccl_watchdog_unknown", "NCCL Watchdog Timeouts", "Unknown", 7, "gpu", "hang", False, False),
    Cause("silent_data_corruption", "Silent Data Corruption", "GPU", 6, "gpu", "hang", True, True),
    Cause("gpu_thermal", "GPU Thermal Interface + Sensor", "GPU", 6, "gpu", "crash", True, True),
    Cause("ssd", "SSD", "Host", 3, "host", "crash", True, True),
    Cause("power_supply", "Power Supply", "Host", 3, "host", "crash", True, True),
    Cause("server_chassis", "Server Chassis", "Host", 2, "host", "crash", True, True),
    Cause("io_expansion_board", "IO Expansion Board", "Host", 2, "host", "crash", True, True),
    Cause("dependency", "Dependency", "Dependency", 2, "gpu", "crash", False, False),
    Cause("cpu", "CPU", "Host", 2, "host", "crash", True, True),
    Cause("system_memory", "System Memory", "Host", 2, "host", "crash", True, True),
    Cause("planned_maintenance", "Planned maintenance", "Planned", TABLE5_PLANNED, "host", "planned", False,
          False, planned=True),
)
if tuple(c.key for c in CAUSES) != CAUSE_KEYS:  # the spec section validates keys against CAUSE_KEYS
    raise RuntimeError("teton.spec.reliability.CAUSE_KEYS must list the keys of CAUSES, in order")
CAUSE_BY_KEY = MappingProxyType({c.key: c for c in CAUSES})


@dataclass(frozen=True)
class ComponentCounts:
    """Components a job depends on: any one failing interrupts it."""

    gpus: int
    hosts: int
    nics: int
    switches: float  # switch-equivalents (64 x 400G ports), fractional shares of upper tiers
    switch_ports: float
    switches_by_tier: tuple[tuple[str, float], ...] = ()
    switch_failures_interrupt: bool = True  # False on a multi-plane fabric (module docstring)

    def of(self, scope: str) -> float:
        """Components of ``scope`` whose failure interrupts the job."""
        switches = self.switches if self.switch_failures_interrupt else 0.0
        return float({"gpu": self.gpus, "host": self.hosts, "nic": self.nics, "switch": switches}[scope])


def job_components(cluster: ClusterSpec, gpus: int) -> ComponentCounts:
    """GPUs, hosts, backend NICs and switch-equivalents a ``gpus``-GPU job spans (module docstring)."""
    gph = cluster.gpus_per_host
    host = cluster.host_spec
    hosts = math.ceil(gpus / gph)
    nics = hosts * host.backend_nics if gpus >= gph else math.ceil(gpus * host.backend_nics / gph)
    nics_per_gpu = host.backend_nics / gph
    tiers: list[tuple[str, float]] = []
    ports_total = 0.0
    if gpus > cluster.domain_gpus:
        up = 0.0
        for i, layer in enumerate(cluster.layers):
            spans_many = gpus > layer.span_gpus
            if i == 0:
                down = gpus * nics_per_gpu
                up = down / layer.oversubscription if spans_many else 0.0
                ports = down + up
                n_sw = max(float(math.ceil(gpus / layer.span_gpus)), ports / SWITCH_EQUIVALENT_PORTS)
            else:
                down = up
                if down == 0.0:
                    break
                up = down / layer.oversubscription if spans_many else 0.0
                ports = down + up
                n_sw = ports / SWITCH_EQUIVALENT_PORTS
            tiers.append((layer.switch, n_sw))
            ports_total += ports
    switches = sum(n for _, n in tiers)
    return ComponentCounts(gpus=gpus, hosts=hosts, nics=nics, switches=switches, switch_ports=ports_total,
                           switches_by_tier=tuple(tiers), switch_failures_interrupt=cluster.fabric_planes == 1)


def table5_components() -> ComponentCounts:
    """The Llama 3 405B job of Table 5: 16,384 GPUs on Meta's 24K RoCE cluster."""
    from teton.spec.cluster import CLUSTER_PRESETS

    return job_components(ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"]), TABLE5_GPUS)


def default_rates_per_hour() -> dict[str, float]:
    """Per-component-hour rate of every cause: Table 5 count / (components x 1,296 h)."""
    ref = table5_components()
    return {c.key: c.count_54d / (ref.of(c.scope) * TABLE5_WINDOW_H) for c in CAUSES}


def job_rates_per_hour(rates: dict[str, float], counts: ComponentCounts) -> dict[str, float]:
    """Interruptions per hour of the job, by cause: rate x components of the cause's scope."""
    return {c.key: rates[c.key] * counts.of(c.scope) for c in CAUSES}
