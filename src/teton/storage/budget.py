"""What a shared storage system leaves one job for its checkpoints, averaged over an interval.

A storage system serves more than one job's checkpoints: the data loader reads the training data
from it, and other jobs read and write it too. Their share ``s`` (``storage.other_jobs_share``;
by default the share of the cluster's GPUs outside this job, an ASSUMPTION documented at the
field) is taken off both of the system's long-run limits (:mod:`teton.spec.storage`):

    endurance   E = servers x SSDs x capacity x DWPD / 86,400 s / write amplification
                    (the flash's rated write budget; reads do not wear it)
    bandwidth   W = peak user write rate (server NICs and flash, over the write amplification)

The data loader's read rate ``r`` holds the servers for ``r / R`` of the time (``R`` the peak
read rate): a conservative first-order occupancy model (server NICs are full duplex, flash is
not; reads and writes are taken to share the servers' time). What is left for checkpoints is

    available = min(E x (1 - s), W x (1 - s - r / R))

and a checkpoint of ``B`` bytes every ``interval`` seconds writes ``B / interval`` on average: the
storage sustains it when that is at most ``available``, i.e. ``interval >= B / available``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from teton.errors import SpecError
from teton.spec.storage import StorageSystem

LOCAL_TIER_SOURCE = "local tier (the job's own hosts)"


def other_jobs_share(system: StorageSystem, job_gpus: int, cluster_gpus: int) -> tuple[float, str]:
    """(share of the storage other jobs use, where it comes from): the system's
    ``other_jobs_share`` when set, else 0 on the local tier, else ``1 - job_gpus / cluster_gpus``."""
    if system.other_jobs_share is not None:
        return float(system.other_jobs_share), "storage.other_jobs_share"
    if system.kind == "local":
        return 0.0, LOCAL_TIER_SOURCE
    share = max(0.0, 1.0 - job_gpus / cluster_gpus) if cluster_gpus > 0 else 0.0
    return share, f"the cluster's GPUs outside the job ({cluster_gpus - job_gpus:,} of {cluster_gpus:,})"


@dataclass(frozen=True)
class WriteBudget:
    """The average checkpoint write rate a storage system leaves one job (module docstring)."""

    endurance_write_bytes_s: float  # the whole system's flash write budget
    peak_write_bytes_s: float  # the whole system's peak user write rate
    peak_read_bytes_s: float
    other_jobs_share: float
    other_jobs_share_source: str
    data_loading_bytes_s: float  # the job's data loader's read rate
    available_write_bytes_s: float  # left for this job's checkpoints, on average
    bound: str  # "flash endurance" or "storage bandwidth": which limit sets ``available``

    def min_interval_s(self, checkpoint_bytes: float) -> float:
        """The shortest interval the storage sustains for a checkpoint of ``checkpoint_bytes``."""
        return checkpoint_bytes / self.available_write_bytes_s

    def use(self, checkpoint_bytes: float, interval_s: float) -> float:
        """The share of ``available`` a checkpoint every ``interval_s`` writes (sustained: <= 1)."""
        return checkpoint_bytes / interval_s / self.available_write_bytes_s

    def to_dict(self) -> dict:
        return asdict(self)


def write_budget(system: StorageSystem, hosts: int, job_gpus: int, cluster_gpus: int,
                 data_loading_bytes_s: float = 0.0) -> WriteBudget:
    """The write budget of ``system`` for a job of ``job_gpus`` on ``hosts`` client hosts (the local
    tier's servers) of a ``cluster_gpus`` cluster whose data loader reads ``data_loading_bytes_s``."""
    share, source = other_jobs_share(system, job_gpus, cluster_gpus)
    endurance = system.endurance_write_bytes_s(hosts)
    peak_w, peak_r = system.peak_write_bytes_s(hosts), system.peak_read_bytes_s(hosts)
    read_busy = data_loading_bytes_s / peak_r if math.isfinite(peak_r) and peak_r > 0 else 0.0
    by_endurance = endurance * (1.0 - share)
    by_bandwidth = peak_w * (1.0 - share - read_busy)
    if by_bandwidth <= 0:
        raise SpecError("storage.other_jobs_share", share,
                        f"leaves no write bandwidth for checkpoints: other jobs take {share:.0%} of the storage and "
                        f"the data loader {read_busy:.0%} (lower the share, or give the storage more servers)")
    bound = "flash endurance" if by_endurance <= by_bandwidth else "storage bandwidth"
    return WriteBudget(endurance, peak_w, peak_r, share, source, float(data_loading_bytes_s),
                       min(by_endurance, by_bandwidth), bound)
