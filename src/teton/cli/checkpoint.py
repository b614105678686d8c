"""``teton checkpoint SPEC``: checkpoint save / restore / async timings on the job's storage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath
from teton.errors import SpecError


def _gb(x: float) -> str:
    return f"{x / 1e9:,.3f} GB"


def _bw(x: float) -> str:
    return f"{x / 1e12:,.3f} TB/s" if x >= 1e11 else f"{x / 1e9:,.3f} GB/s"


def _policy(spec, mode, writer_policy, writers, restore):
    from teton.spec.storage import checkpoint_policy

    policy = checkpoint_policy(spec)
    upd = {k: v for k, v in (("mode", mode), ("writers", writer_policy), ("writer_ranks", writers),
                             ("restore", restore)) if v is not None}
    if upd:
        policy = type(policy)(**{**policy.model_dump(), **upd})
    return policy


def _choice(name: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise SpecError(name, value, f"must be one of {', '.join(allowed)}")
    return value


MEASURE_SCALE, MEASURE_FILES = 1e-4, 256  # --measure's defaults for --scale and --files


def run_checkpoint(spec_path: str, overrides: list[str], as_json: bool, mode: str | None, writer_policy: str | None,
                   writers: int | None, restore: str | None, tokens_per_s: float | None, scaling: bool,
                   out: Path | str | None, measure_dir: Path | str | None, scale: float, files: int, devx_files: int,
                   devx_file_bytes: str, devx_read_bytes: str) -> dict:
    """The result dict of ``teton checkpoint``: the options checked, then either ``--measure``'s
    real files (:func:`teton.storage.measure.measure`) or the model's checkpoint with data loading,
    the job-start storm and the writer-scaling study (:mod:`teton.storage.checkpoint_report`)."""
    from teton.cli._common import parse_size
    from teton.engine.step import simulate_step
    from teton.spec import load_spec
    from teton.storage import devx_job_start
    from teton.storage.checkpoint_report import (
        checkpoint_with_data_loading,
        devx_storage,
        writer_scaling_study,
    )

    _choice("--mode", mode, ("sync", "async"))
    _choice("--writer-policy", writer_policy, ("spread", "one_replica", "every_rank"))
    _choice("--restore", restore, ("all_read", "broadcast", "shard_allgather"))
    if writers is not None and writers <= 0:
        raise SpecError("--writers", writers, "must be > 0")
    if measure_dir is None and (scale != MEASURE_SCALE or files != MEASURE_FILES):  # silently unused before
        flag, value = ("--scale", scale) if scale != MEASURE_SCALE else ("--files", files)
        raise SpecError(flag, value, "applies to --measure only")
    if tokens_per_s is not None and not (math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise SpecError("--tokens-per-s", tokens_per_s, "must be a positive number (the job's tokens/s)")
    if out is not None:
        from teton.cli._common import check_figure_path

        check_figure_path(out, "--png")
    spec = load_spec(spec_path, overrides)
    if measure_dir is not None:
        from teton.storage.measure import measure

        result = {"measure": measure(spec, measure_dir, scale=scale, writers=writers or 4, max_files=files,
                                     progress=not as_json)}
        return result
    if writers is not None and writers > spec.job.gpus:
        raise SpecError("--writers", writers, f"at most the job's GPUs ({spec.job.gpus})")
    policy = _policy(spec, mode, writer_policy, writers, restore)
    res, out_d = checkpoint_with_data_loading(spec, policy, tokens_per_s, simulate=simulate_step)
    nfs, nfs_system, hosts = devx_storage(spec)
    out_d["devx_job_start"] = {"storage": nfs, **devx_job_start(
        nfs_system, hosts, devx_files, parse_size(devx_file_bytes, "--devx-file-bytes"),
        parse_size(devx_read_bytes, "--devx-read-bytes")).to_dict()}
    if scaling or out:
        out_d.update(writer_scaling_study(spec, res, out_d["total_bytes"], out))
    return out_d


def _print(d: dict) -> None:
    """``--measure``'s comparison, else the checkpoint's table and the writer-scaling study."""
    from teton.cli._common import console as output_console

    con = output_console()
    if "measure" in d:
        _print_measure(con, d["measure"])
        return
    _print_checkpoint(con, d)
    if d.get("scaling"):
        _print_scaling(con, d["scaling"])
    if d.get("scaling_plot"):
        con.print(f"plot: {d['scaling_plot']}")


def _print_measure(con, m: dict) -> None:
    """Measured against modelled rates on local files, and the overrides that calibrate the tier."""
    from rich.table import Table

    t = Table(title=f"measured vs modelled ({m['storage']}): {m['files']} files, {m['writers']} writers, "
                    f"{m['total_bytes'] / 1e6:,.1f} MB, scale {m['scale']:g}")
    for c in ("phase", "measured", "modelled", "measured/modelled", "model bottleneck"):
        t.add_column(c)
    for r in m["rows"]:
        t.add_row(r["phase"], _bw(r["measured_bw_bytes_s"]), _bw(r["modelled_bw_bytes_s"]),
                  f"{r['measured_over_modelled']:.2f}", r["modelled_bottleneck"])
    con.print(t)
    con.print(f"files removed: {m['files_removed']}")
    cal = m["calibration"]
    if not cal["bandwidth_bound"]:
        con.print(f"no calibration: at {m['total_bytes'] / m['files'] / 1e3:,.1f} kB per file the model is "
                  "metadata-bound, so these rates time file creation, not the drive; "
                  "rerun with a larger --scale (e.g. 1e-2) to calibrate the local tier")
        return
    con.print("calibrate the local tier: --set storage.preset=local-nvme --set storage.ssds_per_server=1 "
              f"--set storage.ssd_write_gbytes_s={cal['ssd_write_gbytes_s']:.3g} "
              f"--set storage.ssd_read_gbytes_s={cal['ssd_read_gbytes_s']:.3g}")


def _print_checkpoint(con, d: dict) -> None:
    """The checkpoint's save, restore, storage limits, data loading and job start, one row each."""
    from rich.table import Table

    t = Table(title=f"checkpoint on {d['storage']} ({d['mode']}, writers: {d['writer_policy']})")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows = [
        ("per-GPU checkpoint bytes (min / max)", f"{_gb(d['bytes_per_gpu_min'])} / {_gb(d['bytes_per_gpu_max'])}"),
        ("writers / files", f"{d['writers']:,} / {d['files']:,}"),
        ("total bytes", _gb(d["total_bytes"])),
        ("sync save (D2H + upload)", f"{d['sync_save_s']:.3f} s"),
        ("async blocking (D2H only)", f"{d['async_blocking_s']:.4f} s"),
        ("async durable", f"{d['async_durable_s']:.3f} s"),
        ("delivered write bandwidth", _bw(d["delivered_bw_bytes_s"])),
        ("bottleneck", d["bottleneck"]),
        ("slowest / median writer done", f"{d['slowest_writer_s']:.3f} / {d['median_writer_s']:.3f} s"),
        ("straggler tail (storage no longer busy)", f"{d['tail_s']:.3f} s"),
        ("aggregate rate, all writers active", _bw(d["peak_rate_bytes_s"])),
        ("metadata time", f"{d['metadata_s']:.3f} s"),
        ("restore: all ranks read", f"{d['checkpoint_restore_all_read_s']:.3f} s ({d['restore_bottleneck']})"),
        ("restore: one replica reads + broadcast", f"{d['checkpoint_restore_broadcast_s']:.3f} s"),
        ("restore: shard read + all-gather", f"{d['checkpoint_restore_allgather_s']:.3f} s"),
        ("storage peak write / read", f"{_bw(d['storage_peak_write_bytes_s'])} / {_bw(d['storage_peak_read_bytes_s'])}"),
        ("storage sustained write", _bw(d["storage_sustained_write_bytes_s"])),
        ("other jobs' share of the storage", f"{d['storage_other_jobs_share']:.1%} ({d['storage_other_jobs_share_source']})"),
        ("write rate left for checkpoints", f"{_bw(d['storage_available_write_bytes_s'])} ({d['storage_write_bound']})"),
        ("min checkpoint interval (sustained)", f"{d['min_checkpoint_interval_s']:.2f} s"),
        (f"{d['checkpoints_kept']} checkpoints kept / usable capacity",
         f"{_gb(d['checkpoints_kept'] * d['total_bytes'])} / {_gb(d['storage_usable_capacity_bytes'])}"
         + ("" if d["checkpoint_fits_storage"] else " [bold red]DOES NOT FIT[/]")),
    ]
    if "checkpoint_interval_s" in d:
        ok = "sustainable" if d["checkpoint_sustainable"] else "[bold red]NOT sustainable[/] (storage.checkpoint.interval_s)"
        rows.append((f"interval {d['checkpoint_interval_s']:g} s", f"{ok}, GPUs paused {d['checkpoint_pause_fraction']:.2%}"))
    for c, bw in d["caps_bytes_s"].items():
        rows.append((f"  cap: {c}", _bw(bw)))
    dl = d.get("data_loading")
    if dl:
        rows.append(("data loading need / deliverable", f"{_bw(dl['needed_bytes_s'])} / {_bw(dl['read_bw_bytes_s'])}"
                     f" ({dl['bottleneck']})"))
        rows.append(("data loader stalls step", f"{dl['stalls']} ({dl['stall_s_per_step']:.3f} s/step)"))
    else:
        rows.append(("data loading", "skipped (no step model; pass --tokens-per-s)"))
    dv = d["devx_job_start"]
    rows.append((f"job start on {dv['storage']} ({dv['clients']} hosts)", f"{dv['time_s']:.3f} s ({dv['bottleneck']})"))
    for r in rows:
        t.add_row(*r)
    con.print(t)
    if not d["checkpoint_fits_storage"]:
        con.print(f"[bold red]warning:[/] {d['checkpoints_kept']} checkpoints of {_gb(d['total_bytes'])} do not fit "
                  f"the storage's usable {_gb(d['storage_usable_capacity_bytes'])}: add storage.servers or lower "
                  "storage.checkpoint.keep")


def _print_scaling(con, scaling: list[dict]) -> None:
    """The writer-scaling study: one row per writer count."""
    from rich.table import Table

    s = Table(title="writer scaling")
    for c in ("writers", "hosts", "GB/writer", "time s", "peak rate", "delivered", "bottleneck", "tail s",
              "slowest/median"):
        s.add_column(c, justify="right")
    for p in scaling:
        ratio = p["slowest_writer_s"] / p["median_writer_s"] if p["median_writer_s"] else 1.0
        s.add_row(f"{p['writers']:,}", f"{p['hosts']:,}", f"{p['bytes_per_writer'] / 1e9:,.2f}",
                  f"{p['time_s']:.2f}", _bw(p["peak_rate_bytes_s"]), _bw(p["delivered_bw_bytes_s"]),
                  p["bottleneck"], f"{p['tail_s']:.2f}", f"{ratio:.2f}")
    con.print(s)


def register(app: typer.Typer) -> None:
    @app.command("checkpoint")
    def checkpoint(
        spec: SpecPath,
        set_: SetOverrides = None,
        as_json: JsonFlag = False,
        mode: Optional[str] = typer.Option(None, "--mode", help="sync | async"),  # noqa: UP045
        writer_policy: Optional[str] = typer.Option(  # noqa: UP045
            None, "--writer-policy", help="spread | one_replica | every_rank"),
        writers: Optional[int] = typer.Option(  # noqa: UP045
            None, "--writers", help="model: spread the checkpoint over N writers; --measure: N writer threads (4)"),
        restore: Optional[str] = typer.Option(  # noqa: UP045
            None, "--restore", help="all_read | broadcast | shard_allgather"),
        tokens_per_s: Optional[float] = typer.Option(  # noqa: UP045
            None, "--tokens-per-s", help="job throughput for data loading (default: teton.simulate)"),
        scaling: bool = typer.Option(False, "--scaling", help="writer-scaling study 8 ... 16,384"),
        png: Optional[Path] = typer.Option(None, "--png", help="write the writer-scaling figure as a PNG here"),  # noqa: UP045
        measure_dir: Optional[Path] = typer.Option(  # noqa: UP045
            None, "--measure", help="write and read real scaled checkpoint files under DIR"),
        scale: float = typer.Option(MEASURE_SCALE, "--scale", help="--measure: size scale factor"),
        files: int = typer.Option(MEASURE_FILES, "--files", help="--measure: at most this many shard files"),
        devx_files: int = typer.Option(1, "--devx-files", help="job-start files every host reads"),
        devx_file_bytes: str = typer.Option("1M", "--devx-file-bytes", help="size of each job-start file"),
        devx_read_bytes: str = typer.Option("4K", "--devx-read-bytes", help="read request size"),
    ) -> None:
        """Checkpoint save / restore / async timings, per-GPU sizes and the bottleneck."""
        from teton.cli._common import print_json

        d = run_checkpoint(spec, list(set_ or []), as_json, mode, writer_policy, writers, restore, tokens_per_s,
                           scaling, png, measure_dir, scale, files, devx_files, devx_file_bytes, devx_read_bytes)
        if as_json:
            print_json(d)
        else:
            _print(d)
