"""Recovery after an interruption, and the checkpoint costs it depends on.

Downtime of one interruption of cause ``c`` (Daly 2006's "R" split into its parts)::

    downtime_c = detect_c + swap_c + wait_for_spare + pg_init(n) + restore

- ``detect``: a *crash* (the process dies: GPU off the bus, uncorrectable ECC, host down) is seen
  by the elastic agent's monitor and the job torn down (``crash_detect_s``); a *hang* (a link or
  NIC gone, a deadlock, a silent corruption caught by a desync check) blocks every rank in a
  collective until the NCCL watchdog fires (PyTorch ProcessGroupNCCL default timeout 10 min; the
  heartbeat monitor, TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, default 480 s, kills a stuck watchdog);
  *planned* maintenance drains the job right after a checkpoint: no detection, no lost work.
- ``swap``: a hardware cause needs a healthy host in the failed one's place; it comes from the
  spare pool (``host_swap_s``) or, when no spare is left, after the soonest repair (the Monte
  Carlo tracks the pool: :mod:`teton.reliability.montecarlo`).
- ``pg_init(n)``: every rank re-joins the process groups. Stock PyTorch rendezvous goes through
  one TCPStore server and NCCL's bootstrap ring, both serial in the rank count: O(n). Meta's
  work on start-up (LLAMA3 §3.3.4 and the NCCLX paper's "11x faster startup") moved
  it from "hours to minutes" with tree/parallel bootstrap: O(log n). Constants are assumptions
  (not published); only the growth law is modelled, not fitted to "hours to minutes".
- ``restore``: read the last durable checkpoint (storage model, or size / bandwidth).

Lost work, the training since the last *durable* checkpoint, is drawn by the Monte Carlo.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from teton.reliability.rates import CAUSES
from teton.spec.reliability import ReliabilitySpec
from teton.storage.budget import WriteBudget


def pg_init_s(cfg: ReliabilitySpec, ranks: int) -> float:
    """Process-group start-up for ``ranks`` ranks (module docstring): stock ``base + per_rank x n``;
    optimized ``base + per_level x log2 n``, never slower than stock."""
    stock = cfg.pg_init_base_s + cfg.pg_init_per_rank_s * ranks
    if cfg.pg_init == "stock":
        return stock
    return min(stock, cfg.pg_init_base_s + cfg.pg_init_per_level_s * math.log2(max(ranks, 2)))


@dataclass(frozen=True)
class CheckpointCosts:
    save_s: float  # from the start of a save until it is durable
    blocking_s: float  # training paused per checkpoint
    restore_s: float
    source: str  # "storage model" | "reliability section" | "fallback: bytes / bandwidth"
    # shortest interval the storage sustains: checkpoint bytes / the write rate it leaves the job
    # after other jobs' share and the data loader (teton.storage.budget; Tectonic: 2 TB/s
    # sustained against 7 TB/s peak, LLAMA3 §3.3.1); 0 when unknown
    min_interval_s: float = 0.0
    checkpoint_bytes: float = 0.0  # one checkpoint, every writer's bytes
    budget: WriteBudget | None = None  # the storage model's write budget; None without one
    # the checkpoints the storage policy keeps (``storage.checkpoint.keep``) against the storage's
    # usable capacity; None without a storage model
    kept_bytes: float | None = None
    usable_capacity_bytes: float | None = None


def checkpoint_costs(spec: Any, cfg: ReliabilitySpec, data_bytes_s: float = 0.0) -> CheckpointCosts:
    """Checkpoint save / blocking / restore seconds: explicit inputs > storage model > fallback.
    ``data_bytes_s``: the data loader's read rate beside the checkpoint (the storage model's).

    Fallback, when neither the spec nor its cluster names a storage system (the DGX presets):
    ``bytes = params x checkpoint_bytes_per_param``, written and read synchronously at
    ``min(storage_bytes_s, hosts x frontend goodput per host)`` (Tectonic sustained 2 TB/s,
    LLAMA3 §3.3.1; a small job's hosts cannot feed a storage that fast through their frontend
    NICs: ``teton.storage.transfer.frontend_bytes_s_per_host``).
    """
    from teton.storage.checkpoint import simulate_checkpoint

    has_storage = spec is not None and (spec.storage is not None or spec.cluster.storage is not None)
    model = simulate_checkpoint(spec, data_bytes_s=data_bytes_s) if has_storage else None  # SpecErrors reach the user
    source = "storage model" if model else "fallback: bytes / bandwidth"
    min_interval, budget, kept, usable = 0.0, None, None, None
    if model:
        summary = model.summary()
        min_interval = float(summary["min_checkpoint_interval_s"])
        save = float(summary["checkpoint_save_s"])
        block = float(summary["checkpoint_blocking_s"])
        restore = float(summary["checkpoint_restore_s"])
        size, budget = float(summary["total_bytes"]), model.budget
        kept = summary["checkpoints_kept"] * size
        usable = float(summary["storage_usable_capacity_bytes"])
    else:
        params = float(spec.model.total_params()) if spec is not None else 0.0
        size = params * cfg.checkpoint_bytes_per_param
        save = block = restore = size / _fallback_bytes_s(spec, cfg)
    given = [cfg.checkpoint_save_s, cfg.checkpoint_blocking_s, cfg.checkpoint_restore_s]
    if any(v is not None for v in given):
        source = "reliability section" if all(v is not None for v in given) else source + " + reliability section"
        save = cfg.checkpoint_save_s if cfg.checkpoint_save_s is not None else save
        block = cfg.checkpoint_blocking_s if cfg.checkpoint_blocking_s is not None else min(block, save)
        restore = cfg.checkpoint_restore_s if cfg.checkpoint_restore_s is not None else restore
    return CheckpointCosts(save_s=max(save, block), blocking_s=block, restore_s=restore, source=source,
                           min_interval_s=min_interval, checkpoint_bytes=size, budget=budget, kept_bytes=kept,
                           usable_capacity_bytes=usable)


def _fallback_bytes_s(spec: Any, cfg: ReliabilitySpec) -> float:
    """The fallback's checkpoint bandwidth: the storage's, or the job's hosts' frontend NICs where
    those are slower (``checkpoint_costs``)."""
    if spec is None:
        return cfg.storage_bytes_s
    from teton.storage.transfer import frontend_bytes_s_per_host

    hosts = -(-spec.job.gpus // spec.cluster.gpus_per_host)
    return min(cfg.storage_bytes_s, hosts * frontend_bytes_s_per_host(spec.cluster))


def fixed_downtime_s(cfg: ReliabilitySpec, ranks: int, restore_s: float) -> dict[str, float]:
    """Downtime of one interruption by cause, without any wait for a spare host."""
    detect = {"crash": cfg.crash_detect_s, "hang": cfg.hang_detect_s, "planned": 0.0}
    restart = pg_init_s(cfg, ranks) + restore_s
    return {c.key: detect[c.detection] + (cfg.host_swap_s if c.replaces_host else 0.0) + restart
            for c in CAUSES}
