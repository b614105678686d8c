"""Power, energy and cost of a run from the time it spends training, checkpointing and recovering.

Power per GPU in each state (GPU catalog ``tdp_w``, ``idle_w``)::

    training:      idle + (tdp - idle) * (f_busy + (1 - f_busy) * comm_power_fraction)
    checkpoint / recovery: idle

``f_busy`` is the share of the step spent in compute and optimizer kernels (from the step
model's breakdown; 1.0 when none is given, an upper bound: dense GEMMs run H100s at their power
cap). Exposed communication and pipeline bubbles draw ``comm_power_fraction`` of the dynamic
range (an assumption: LLAMA3 §3.3.4 reports only that synchronized waits swing data-center power
by "tens of megawatts"). Hosts (CPUs, DRAM, NICs, fans: catalog ``host_power_w``) and the job's
switch ports (``switch_w_per_port``) draw constant power while the job holds them. Facility
energy = IT energy x PUE. The swing when every GPU stops together is
``gpus * (P_train - idle) * PUE``.

Cost: ``usd_per_gpu_hour`` x GPU-hours held (rental), or, when ``capex_per_gpu_usd`` is given,
straight-line depreciation over ``depreciation_years`` plus facility energy x ``usd_per_kwh``; the
fabric's own cost on top where the spec prices it apart (``network_usd_per_gpu_hour`` with a rental
price, ``network_capex_per_gpu_usd`` depreciated with the servers). :func:`cost_split_usd` gives the
parts: a rental price holds the energy (and the network, unless priced apart) in the GPUs' part.
"""

from __future__ import annotations

from dataclasses import dataclass

from teton.reliability.rates import ComponentCounts
from teton.spec.cluster import ClusterSpec
from teton.spec.reliability import ReliabilitySpec

HOURS_PER_YEAR = 8766.0  # 365.25 d


@dataclass(frozen=True)
class PowerModel:
    gpu_train_w: float
    gpu_idle_w: float
    gpu_tdp_w: float
    hosts_w: float
    network_w: float
    gpus: int
    pue: float
    busy_fraction: float

    @property
    def it_train_w(self) -> float:
        return self.gpus * self.gpu_train_w + self.hosts_w + self.network_w

    @property
    def it_idle_w(self) -> float:
        return self.gpus * self.gpu_idle_w + self.hosts_w + self.network_w

    @property
    def swing_mw(self) -> float:
        """Facility power drop when every GPU of the job stops at once (training -> idle)."""
        return self.gpus * (self.gpu_train_w - self.gpu_idle_w) * self.pue / 1e6

    @property
    def swing_peak_mw(self) -> float:
        """Worst case: every GPU from TDP to idle."""
        return self.gpus * (self.gpu_tdp_w - self.gpu_idle_w) * self.pue / 1e6


def busy_fraction(breakdown: dict | None, step_time_s: float) -> float:
    """Share of the step in compute/optimizer kernels, from a step breakdown (seconds by category)."""
    if not breakdown or step_time_s <= 0:
        return 1.0
    busy = sum(float(v) for k, v in breakdown.items() if k in ("compute", "optimizer"))
    return min(max(busy / step_time_s, 0.0), 1.0)


def power_model(cluster: ClusterSpec, comps: ComponentCounts, cfg: ReliabilitySpec,
                busy: float = 1.0) -> PowerModel:
    """The job's power draw (module docstring): per GPU training ``idle + (tdp - idle) * (busy +
    (1 - busy) * comm_power_fraction)``, idle otherwise; its hosts (``host_power_w``) and switch
    ports (``switch_w_per_port``) at constant power; ``busy`` is :func:`busy_fraction`."""
    gpu = cluster.gpu_spec
    dyn = gpu.tdp_w - gpu.idle_w
    train_w = gpu.idle_w + dyn * (busy + (1.0 - busy) * cfg.comm_power_fraction)
    return PowerModel(gpu_train_w=train_w, gpu_idle_w=gpu.idle_w, gpu_tdp_w=gpu.tdp_w,
                      hosts_w=comps.hosts * cluster.host_spec.host_power_w,
                      network_w=comps.switch_ports * cfg.switch_w_per_port, gpus=comps.gpus, pue=cfg.pue,
                      busy_fraction=busy)


def energy_mwh(pm: PowerModel, train_s, idle_s):
    """Facility energy (MWh) for seconds training and seconds idle (checkpoint pauses, recovery)."""
    return (pm.it_train_w * train_s + pm.it_idle_w * idle_s) * pm.pue / 3.6e9


def cost_usd(cfg: ReliabilitySpec, gpus: int, wall_s, energy):
    """Cost of holding ``gpus`` GPUs for ``wall_s`` seconds (rental, or capex + energy, and the
    network where priced apart): the sum of :func:`cost_split_usd`'s parts."""
    gpu_h = gpus * wall_s / 3600.0
    return sum(cost_split_usd(cfg, gpu_h, energy).values())


def cost_split_usd(cfg: ReliabilitySpec, gpu_hours, energy_mwh) -> dict:
    """The run's cost by part, for ``gpu_hours`` GPU-hours and ``energy_mwh`` of facility energy
    (numbers or per-run arrays alike):
    ``gpus`` (the rental, or the servers' depreciation), ``energy`` (capex mode: energy x
    ``usd_per_kwh``; 0 with a rental price, which includes it) and ``network`` (the fabric where
    the spec prices it apart, else 0: inside the GPUs' part)."""
    if cfg.capex_per_gpu_usd is None:
        return {"gpus": gpu_hours * cfg.usd_per_gpu_hour, "energy": 0.0 * gpu_hours,  # zeros shaped as the input
                "network": gpu_hours * cfg.network_usd_per_gpu_hour}
    hours = cfg.depreciation_years * HOURS_PER_YEAR
    return {"gpus": gpu_hours * cfg.capex_per_gpu_usd / hours, "energy": energy_mwh * 1000.0 * cfg.usd_per_kwh,
            "network": gpu_hours * (cfg.network_capex_per_gpu_usd or 0.0) / hours}
