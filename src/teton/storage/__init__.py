"""Storage: Tectonic-like flash behind FUSE, parallel NFS, local NVMe; checkpoints and data loading."""

from teton.storage.checkpoint import (
    CheckpointPolicy,
    CheckpointResult,
    RankState,
    checkpoint_policy,
    checkpoint_summary,
    rank_state,
    simulate_checkpoint,
)
from teton.storage.dataload import data_loading, devx_job_start
from teton.storage.system import STORAGE_PRESETS, StorageSystem, spec_storage, storage_system
from teton.storage.transfer import Transfer, transfer

__all__ = [
    "CheckpointPolicy", "CheckpointResult", "RankState", "checkpoint_policy", "checkpoint_summary", "rank_state",
    "simulate_checkpoint", "data_loading", "devx_job_start", "STORAGE_PRESETS", "StorageSystem", "spec_storage",
    "storage_system", "Transfer", "transfer",
]
