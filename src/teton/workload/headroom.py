"""Usable HBM: what is left of a GPU's memory for the job's own allocations.

usable = capacity - CUDA context - NCCL buffers - fragmentation - reserve, where

* the CUDA context is ``job.headroom.cuda_context_gib`` (``teton.spec.headroom``: its source);
* NCCL's buffers are, for every communicator the rank joins, channels x connections per channel x
  the bytes of one connection's buffers (Simple ``NCCL_BUFFSIZE`` + LL128 + LL). NCCL allocates
  one buffer per protocol for each connection of each channel (src/transport/p2p.cc, net.cc: the
  connection's ``buffSizes[NCCL_NUM_PROTOCOLS]``). Channels as the cost model runs them
  (``collectives.algorithms.nccl_channels``: 16 inside an NVSwitch host, 2 per NIC across hosts).
  Connections per channel: a ring's two neighbours, and across hosts also the double binary
  tree's parent and two children. The pipeline's send/recv uses ``NCCL_NCHANNELS_PER_NET_PEER``
  channels to each of its two neighbours, Simple protocol only. Communicators: one per parallel
  axis of degree > 1 (tp, cp, pp, dp, ep; dp x cp where ZeRO shards over both) and the world
  (the default process group: barriers). Every connection is counted as set up at start
  (``NCCL_RUNTIME_CONNECT=0``, the behaviour before NCCL 2.22): an upper bound for a job whose
  NCCL connects lazily;
* fragmentation is ``job.headroom.fragmentation`` of the allocator's pool (capacity less context
  and NCCL): the caching allocator's reserved bytes are allocated / (1 - f) at the peak (GMLake's
  definition, Guo et al. ASPLOS 2024);
* the reserve is ``job.headroom.reserve_gib``.

A job fits when its allocated bytes (``workload.memory.memory_per_gpu``) are at most ``usable``;
the headroom is ``usable`` less those bytes. Over ``usable`` but within the fragmentation allowance
the verdict is *tight*: it fits only if the allocator fragments less than assumed (counted as not
fitting by search and plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teton.collectives.algorithms import nccl_channels
from teton.memo import cached
from teton.spec.cluster import ClusterSpec
from teton.spec.headroom import HeadroomSpec
from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.units import GIB

MIB = 2**20
# NCCL's LL128 and LL buffers per connection: NCCL_LL128_ELEMS_PER_THREAD (120) x
# NCCL_LL128_MAX_NTHREADS (640) x NCCL_STEPS (8) x 8 bytes, and NCCL_LL_LINES_PER_THREAD (8) x
# NCCL_LL_MAX_NTHREADS (512) x NCCL_STEPS x 16-byte lines (NCCL src/include/device.h,
# DEFAULT_LL128_BUFFSIZE / DEFAULT_LL_BUFFSIZE, NCCL 2.18-2.21).
NCCL_LL128_BUFF_BYTES = 120 * 640 * 8 * 8
NCCL_LL_BUFF_BYTES = 8 * 512 * 8 * 16
RING_CONNECTIONS = 2  # a ring channel's previous and next rank
TREE_CONNECTIONS = 3  # a double binary tree channel's parent and two children (across hosts)
# NCCL_NCHANNELS_PER_NET_PEER, default 2 (NCCL User Guide, Environment Variables): the channels of
# point-to-point operations to one peer
P2P_CHANNELS = 2


@dataclass(frozen=True)
class MemoryHeadroom:
    """Bytes of one GPU's HBM: its capacity and what the job cannot allocate of it."""

    capacity_bytes: float
    cuda_context_bytes: float
    nccl_buffer_bytes: float
    fragmentation_bytes: float
    reserve_bytes: float

    @property
    def usable_bytes(self) -> float:
        return (self.capacity_bytes - self.cuda_context_bytes - self.nccl_buffer_bytes
                - self.fragmentation_bytes - self.reserve_bytes)

    def reserved(self) -> dict[str, float]:
        """What is kept free, by cause (bytes)."""
        return {"cuda_context": self.cuda_context_bytes, "nccl_buffers": self.nccl_buffer_bytes,
                "fragmentation": self.fragmentation_bytes, "reserve": self.reserve_bytes}

    def fits(self, allocated_bytes: float) -> bool:
        return allocated_bytes <= self.usable_bytes

    def verdict(self, allocated_bytes: float) -> str:
        """``fits`` (within ``usable``), ``tight`` (over ``usable`` but within it plus the
        fragmentation allowance: the job fits only if the caching allocator wastes less than
        teton assumes, e.g. with expandable segments) or ``does not fit``."""
        if self.fits(allocated_bytes):
            return "fits"
        return "tight" if allocated_bytes <= self.usable_bytes + self.fragmentation_bytes else "does not fit"


def _axis_groups(lay: Layout, zero_sharded: bool) -> list[tuple[str, int, int]]:
    """(name, degree, stride between members) of every communicator a rank of ``lay`` joins, world
    included (``zero_sharded``: ZeRO-1 or more, whose shards span dp x cp)."""
    degrees = {"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp}
    out, stride = [], 1
    strides = {}
    for axis in lay.base_order:
        strides[axis] = stride
        if degrees[axis] > 1:
            out.append((axis, degrees[axis], stride))
        stride *= degrees[axis]
    for axis, degree in (("ep", lay.ep), ("etp", lay.etp if lay.etp != lay.tp else 1)):
        if degree > 1:  # the expert decomposition's groups (teton.spec.layout)
            out.append((axis, degree, lay.rank_stride(axis)))
    if lay.cp > 1 and lay.dp > 1 and zero_sharded:  # ZeRO shards and reduces over dp x cp
        out.append(("dp_cp", lay.dp * lay.cp, min(strides["dp"], strides["cp"])))
    if lay.gpus > 1:
        out.append(("world", lay.gpus, 1))
    return out


def nccl_buffer_bytes(job: JobSpec, gpus_per_host: int, nics_per_host: int) -> float:
    """Bytes of NCCL buffers one rank holds for all its communicators (module docstring)."""
    return _nccl_buffer_bytes(job.layout, job.zero >= 1, job.headroom.nccl_buffsize_mib, gpus_per_host, nics_per_host)


def _nccl_buffer_bytes(lay: Layout, zero_sharded: bool, buffsize_mib: float, gpus_per_host: int,
                       nics_per_host: int) -> float:
    """:func:`nccl_buffer_bytes` of a layout (``zero_sharded``: ZeRO-1 or more)."""
    simple = buffsize_mib * MIB
    per_connection = simple + NCCL_LL128_BUFF_BYTES + NCCL_LL_BUFF_BYTES
    total = 0.0
    for axis, degree, stride in _axis_groups(lay, zero_sharded):
        if axis == "pp":
            total += P2P_CHANNELS * RING_CONNECTIONS * simple
            continue
        across = (degree - 1) * stride // gpus_per_host > 0  # rank 0's group; ranks fill hosts in order
        channels = _group_channels(degree, stride, gpus_per_host, nics_per_host)
        connections = RING_CONNECTIONS + (TREE_CONNECTIONS if across else 0)
        total += channels * connections * per_connection
    return total


@cached(4096)
def _group_channels(degree: int, stride: int, gpus_per_host: int, nics_per_host: int) -> int:
    """NCCL's channels for rank 0's group of ``degree`` ranks ``stride`` apart (a few distinct
    groups recur across every layout a search tries: sorting a 16K-rank world group per layout
    halved bench_step)."""
    return nccl_channels(np.arange(degree) * stride, gpus_per_host, nics_per_host)


def memory_headroom(job: JobSpec, cluster: ClusterSpec) -> MemoryHeadroom:
    """The HBM of one of the job's GPUs and what is kept free of it."""
    return _headroom(job.layout, job.zero >= 1, job.headroom, cluster.gpu_spec.hbm_bytes, cluster.domain_gpus,
                     cluster.nics_per_domain)


@cached(4096)
def _headroom(lay: Layout, zero_sharded: bool, h: HeadroomSpec, capacity_bytes: float, gpus_per_host: int,
              nics_per_host: int) -> MemoryHeadroom:
    """:func:`memory_headroom`, keyed by what it reads rather than the job: the layouts a search
    tries at one set of degrees share it across their memory savers."""
    context = h.cuda_context_gib * GIB
    nccl = _nccl_buffer_bytes(lay, zero_sharded, h.nccl_buffsize_mib, gpus_per_host, nics_per_host)
    pool = max(0.0, capacity_bytes - context - nccl)
    return MemoryHeadroom(capacity_bytes, context, nccl, h.fragmentation * pool, h.reserve_gib * GIB)


def headroom_text(allocated_bytes: float, usable_bytes: float, capacity_bytes: float,
                  reserved: dict[str, float]) -> str:
    """One line for tables: the allocations against the usable HBM, what the headroom keeps free
    of the capacity and what is left (``75.0 GiB of 75.7 GiB usable (79.6 GiB HBM less CUDA
    context 0.50, NCCL 1.11, fragmentation 2.34): 0.7 GiB left``)."""
    labels = {"cuda_context": "CUDA context", "nccl_buffers": "NCCL", "fragmentation": "fragmentation",
              "reserve": "reserve"}
    kept = ", ".join(f"{labels.get(k, k)} {v / GIB:.2f}" for k, v in reserved.items() if v)
    left = usable_bytes - allocated_bytes
    verdict = f"{left / GIB:.1f} GiB left" if left >= 0 else f"{-left / GIB:.1f} GiB short"
    return (f"{allocated_bytes / GIB:.1f} GiB of {usable_bytes / GIB:.1f} GiB usable "
            f"({capacity_bytes / GIB:.1f} GiB HBM less {kept or 'nothing'}): {verdict}")


def fit_text(verdict: str, short_bytes: float, fragmentation_bytes: float, largest_term: str) -> str:
    """The memory verdict for tables (:meth:`MemoryHeadroom.verdict`): ``fits``, ``TIGHT: fits only
    if the allocator fragments under 0.3 GiB (teton allows 2.3)`` or ``DOES NOT FIT (largest
    term: activations)``."""
    if verdict == "fits":
        return "fits"
    if verdict == "tight":
        return (f"TIGHT: fits only if the allocator fragments under {(fragmentation_bytes - short_bytes) / GIB:.1f} GiB "
                f"(teton allows {fragmentation_bytes / GIB:.1f})")
    return f"DOES NOT FIT (largest term: {largest_term})"
