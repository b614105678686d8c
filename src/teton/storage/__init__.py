"""Storage: checkpoints (save, restore, async), data loading and job start on a storage system
(Tectonic-like flash behind FUSE, parallel NFS, local NVMe), and local measurement. The
``storage:`` spec section it reads is :mod:`teton.spec.storage`."""

from teton.storage.checkpoint import (
           CheckpointResult,
           RankState,
           checkpoint_summary,
           rank_state,
           simulate_checkpoint,
)
from teton.storage.dataload import data_loading, devx_job_start
from teton.storage.transfer import Transfer, transfer

__all__ = ["CheckpointResult", "RankState", "checkpoint_summary", "rank_state", "simulate_checkpoint", "data_loading",
           "devx_job_start", "Transfer", "transfer"]
