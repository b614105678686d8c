"""What ``teton checkpoint`` reports for a spec beyond one checkpoint simulation.

* Data loading (:func:`teton.storage.data_loading`) at the job's tokens/s: the given figure, else
  the spec's ``storage.data_loading.tokens_per_s``, else the step simulator's the caller passes;
  it is skipped when there is none or it cannot simulate the spec. The checkpoint is simulated with
  the loader's read traffic alongside (``data_bytes_s``).
* The developer-experience job start (:func:`teton.storage.devx_job_start`): every host of the job
  (ceil(gpus / GPUs per host)) reads the job-start files from ``storage.devx.nfs`` (default
  ``hammerspace-pnfs``).
* Writer scaling (:func:`teton.storage.scaling.writer_scaling`): the checkpoint's bytes spread over
  8 ... 16,384 writers (those the cluster has), and optionally its figure.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from teton.errors import SpecError
from teton.spec.storage import DEVX_NFS, CheckpointPolicy, StorageSystem
from teton.storage.checkpoint import CheckpointResult


def checkpoint_with_data_loading(spec, policy: CheckpointPolicy, tokens_per_s: float | None = None,
                                 simulate: Callable[[Any], Any] | None = None) -> tuple[CheckpointResult, dict]:
    """(result, summary) of a checkpoint under ``policy`` with the data loader's reads alongside; the
    summary's ``data_loading`` is the loader's figures, or None when the step simulator ``simulate``
    (the caller's: the engine's) cannot give the job's tokens/s, or there is none (neither
    ``tokens_per_s`` nor the spec's ``storage.data_loading.tokens_per_s`` given)."""
    from teton.storage.checkpoint import simulate_checkpoint
    from teton.storage.dataload import data_loading, job_tokens_per_s

    tps, skip_data = tokens_per_s, False
    given = None if spec.storage is None else spec.storage.data_loading.tokens_per_s
    if tps is None and given is None:
        skip_data = simulate is None  # no step simulator: data loading is reported as skipped
        if simulate is not None:
            try:
                tps = job_tokens_per_s(spec, simulate)
            except SpecError:  # the step model cannot simulate it: skipped too
                skip_data = True
    dl = None if skip_data else data_loading(spec, tokens_per_s=tps)  # None: the spec's tokens_per_s
    res = simulate_checkpoint(spec, policy, data_bytes_s=dl.needed_bytes_s if dl else 0.0)
    summary = res.summary()
    summary["data_loading"] = dl.to_dict() if dl else None
    return res, summary


def devx_storage(spec) -> tuple[str, StorageSystem, int]:
    """(preset name, storage system, hosts) of the job-start storm: ``storage.devx.nfs`` (default
    :data:`DEVX_NFS`) and every host of the job."""
    from teton.spec.storage import storage_system

    nfs = DEVX_NFS if spec.storage is None else spec.storage.devx.nfs
    hosts = -(-spec.job.gpus // spec.cluster.gpus_per_host)
    return nfs, storage_system({"preset": nfs}), hosts


def writer_scaling_study(spec, result: CheckpointResult, total_bytes: float,
                         figure_path: Path | str | None = None) -> dict:
    """``scaling``: the checkpoint's ``total_bytes`` over each of the default writer counts the
    cluster has, on the storage ``result`` saved to, at the share of it other jobs leave the job
    (as the save itself: ``teton.storage.budget.other_jobs_share``); ``scaling_plot``: the
    figure's path, when ``figure_path`` is given."""
    from teton.storage.budget import other_jobs_share
    from teton.storage.scaling import DEFAULT_WRITERS, plot_scaling, scaling_rows, writer_scaling

    share = 1.0 - other_jobs_share(result.system, spec.job.gpus, spec.cluster.gpus)[0]
    pts = writer_scaling(result.system, spec.cluster, total_bytes,
                         tuple(w for w in DEFAULT_WRITERS if w <= spec.cluster.gpus), seed=spec.seed,
                         storage_share=share)
    out = {"scaling": scaling_rows(pts)}
    if figure_path:
        out["scaling_plot"] = str(plot_scaling(
            pts, result.system.peak_write_bytes_s() * share, figure_path,
            f"{spec.model.name} checkpoint ({total_bytes / 1e12:.2f} TB) on {result.system.name}"))
    return out
