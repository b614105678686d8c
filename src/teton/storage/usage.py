"""What one training run asks of its storage, and what share of a storage system that is.

A run holds ``keep`` checkpoints of ``B`` bytes and its training data (the tokens it trains on,
pre-tokenised: ``tokens x bytes_per_token``, one epoch), writes a checkpoint every ``interval``
(an average of ``w = B / interval``) and reads its data at ``r`` (the data loader). Against a
system of usable capacity ``C``, flash write budget ``E`` (endurance), peak user write rate ``W``
and peak read rate ``R`` (:mod:`teton.spec.storage`), it occupies

    capacity    C_used / C                 C_used = keep x B + dataset
    endurance   w / E                      (the flash's rated write budget)
    bandwidth   w / W + r / R              (the servers' time, reads and writes sharing it, as in
                                            :mod:`teton.storage.budget`)

and its **share** of the system is the largest of the three: a system is built for capacity and
for bandwidth, and a tenant that fills either has used that much of it. Every term is linear in
the server count, so ``share x servers`` is the number of the system's servers the run uses
(``servers_used``): what a plan charges on a shared system, and, rounded up, the size of a
system dedicated to it. The local tier (the GPU hosts' own drives) is part of the hosts the run
rents already: its share is of the run's own hosts' drives, and it uses no storage servers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from teton.spec.storage import StorageSystem

BINDINGS = ("capacity", "flash endurance", "bandwidth")


@dataclass(frozen=True)
class StorageUse:
    """A run's storage needs and the share of ``servers`` servers of a system they take."""

    checkpoint_bytes: float
    checkpoints_kept: int
    dataset_bytes: float
    capacity_bytes: float  # kept checkpoints + dataset
    write_bytes_s: float  # average checkpoint write at the run's interval
    read_bytes_s: float  # the data loader
    servers: int  # the system's size
    capacity_share: float
    endurance_share: float
    bandwidth_share: float
    share: float  # the largest of the three
    binding: str  # which of BINDINGS sets the share
    servers_used: float  # share x servers (0 on the local tier)

    @property
    def dedicated_servers(self) -> int:
        """The fewest servers of this system's kind that hold and sustain the run on their own."""
        return max(1, math.ceil(self.servers_used - 1e-9))

    def to_dict(self) -> dict:
        return {**asdict(self), "dedicated_servers": self.dedicated_servers}


def storage_use(system: StorageSystem, hosts: int, checkpoint_bytes: float, checkpoints_kept: int,
                interval_s: float, dataset_bytes: float, read_bytes_s: float) -> StorageUse:
    """The run's :class:`StorageUse` of ``system`` (module docstring); ``hosts`` are the run's
    client hosts (the local tier's servers)."""
    write = checkpoint_bytes / interval_s if interval_s > 0 else 0.0
    capacity = checkpoints_kept * checkpoint_bytes + dataset_bytes
    h = max(1, hosts)  # the local tier's servers are the run's hosts (others ignore it)
    shares = (capacity / system.usable_capacity_bytes(h), write / system.endurance_write_bytes_s(h),
              write / system.peak_write_bytes_s(h) + read_bytes_s / system.peak_read_bytes_s(h))
    share = max(shares)
    binding = BINDINGS[shares.index(share)]
    servers = h if system.kind == "local" else system.servers
    return StorageUse(float(checkpoint_bytes), int(checkpoints_kept), float(dataset_bytes), float(capacity),
                      float(write), float(read_bytes_s), servers, *shares, share, binding,
                      0.0 if system.kind == "local" else share * system.servers)
