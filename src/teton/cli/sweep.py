"""``teton sweep SWEEP.yaml --db results.duckdb``: evaluate a grid of what-ifs, store, resume, rank."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import MAX_TOP, JsonFlag, print_json
from teton.progress import progress_bar
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it

# whole-run columns (teton.whole_run) shown when the points have them: column -> heading
RUN_COLUMNS = {"checkpoint_save_s": "save s", "checkpoint_blocking_s": "pause s", "ettr": "ETTR",
               "time_to_train_days": "days"}
# the step metrics of the best points, as ``--json``'s "top" lists them (then the whole-run columns)
METRIC_COLUMNS = ("step_time_s", "mfu_bf16", "mfu", "precision", "tflops_per_gpu", "tokens_per_s",
                  "memory_per_gpu_bytes", "fits_in_memory")


def _fmt_run(col: str, value) -> str:
    if value is None:
        return "-"
    if col == "ettr":
        return f"{value * 100:.1f} %"
    return f"{value:.3f}" if col.endswith("_s") else f"{value:.1f}"


def own_peak_label(rows) -> str | None:
    """"MFU (fp8 peak)" when some rows are not bf16 jobs: the "MFU" column is against the bf16 peak
    for every point, so points of both precisions rank and compare on one scale; this column adds
    the MFU against the point's own peak (``mfu``), "-" for bf16 points. None: all bf16."""
    own = sorted({r.get("precision") for r in rows} - {None, "bf16"})
    return f"MFU ({'/'.join(own)} peak)" if own else None


def _own_peak_mfu(row) -> str:
    return "-" if row.get("precision") in (None, "bf16") else f"{row['mfu'] * 100:.1f} %"


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def register(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        ctx: typer.Context,
        sweep_file: Annotated[Path, typer.Argument(metavar="SWEEP", help="sweep file: base spec, grid, zip, filter")],
        out: Annotated[Path, typer.Option("--db", help="DuckDB results store (created; re-run to resume)")],
        executor: Annotated[str, typer.Option("--executor", help="local (process pool) | ray | serial")] = "local",
        workers: Annotated[int | None, typer.Option("--workers", help="parallel workers (default: CPU count)")] = None,
        batch: Annotated[int, typer.Option("--batch", help="points per task (default: about 4 tasks per "
                                           "worker, at most 64 points each)")] = 64,
        top: Annotated[int, typer.Option("--top", min=1, max=MAX_TOP, help="rows to print")] = 10,
        parquet: Annotated[Path | None, typer.Option("--parquet", help="also export this sweep's rows")] = None,
        html: Annotated[Path | None, typer.Option("--out", "-o", help="also write an offline HTML page of the "
                                                  "sweep: best points, effect of each key, time vs memory")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Simulate every point of a sweep (skipping points already in --db) and show the best."""
        from teton.sweep.grid import parse_sweep
        from teton.sweep.run import sweep_points
        from teton.sweep.store import ResultStore

        _check_options(executor, workers, batch, top, html, parquet)
        # --batch left out: run_sweep's default, which depends on the points and workers (typer's
        # own click: its ParameterSource is compared by name)
        given_batch = None if getattr(ctx.get_parameter_source("batch"), "name", None) == "DEFAULT" else batch
        spec = parse_sweep(sweep_file)
        points, _ = sweep_points(spec)  # a filter that drops every point: an error before the results file exists
        with ResultStore(out) as store:
            summary = _run(spec, store, out, executor, workers, given_batch)
            point_cols = list(spec.keys)
            # points that modelled a whole run: columns this sweep's rows fill (the store may hold another sweep's)
            stored = [c for c in RUN_COLUMNS if c in store.columns]
            filled = store.rows(columns=stored) if stored else []
            run_cols = [c for c in stored if any(r[c] is not None for r in filled)]
            metric_cols = [*METRIC_COLUMNS, *run_cols]
            best = store.rows(order="best", limit=top, only_ok=True, columns=["key", *point_cols, *metric_cols])
            errors = [r for r in store.rows(columns=["key", "status", "error", *point_cols]) if r["status"] != "ok"]
            if parquet is not None:
                store.export_parquet(parquet)
            if html is not None:
                from teton.report.sweep_report import write_sweep_page

                write_sweep_page(store.rows(), point_cols, str(sweep_file), html)
        if summary.ok == 0:
            _nothing_simulated(sweep_file, summary, points[0], errors)
        if json_:
            print_json({"sweep": str(sweep_file), "out": str(out), **summary.to_dict(),
                        "errors": errors[:top], "top": best})
            return
        _print_summary(summary, errors, out)
        _print_top(best, point_cols, run_cols, summary.ok)


def _check_options(executor: str, workers: int | None, batch: int, top: int, html: Path | None,
                   parquet: Path | None) -> None:
    """Bad options and unwritable outputs: one-line errors before the sweep, not after it."""
    from teton.errors import SpecError
    from teton.report.html import check_writable_file
    from teton.sweep.run import check_executor

    check_executor(executor, workers)
    for name, path in (("--out", html), ("--parquet", parquet)):  # fail before the sweep, not after it
        if path is not None:
            check_writable_file(path, name)
    for name, value in (("--batch", batch), ("--top", top)):
        if value is not None and value < 1:
            raise SpecError(name, value, "must be a positive integer")


def _nothing_simulated(sweep_file: Path, summary, first, errors: list[dict]) -> None:
    """A sweep none of whose points simulated (every one invalid, or failed): a one-line error
    naming the first point's reason (exit 2); the rows stay stored, with their errors."""
    from teton.errors import SpecError

    reason = next((r["error"] for r in errors if r["key"] == first.key), None) or "no stored error"
    values = ", ".join(f"{k}={_fmt(v)}" for k, v in first.values.items())
    outcome = (f"every one of its {summary.points} points is invalid" if summary.invalid == summary.points
               else f"none of its {summary.points} points simulated ({summary.invalid} invalid, "
                    f"{summary.failed} failed)")
    raise SpecError("sweep", str(sweep_file), f"{outcome}; the first ({values}): {reason}")


def _run(spec, store, out: Path, executor: str, workers: int | None, batch: int | None):
    """:func:`teton.sweep.run.run_sweep` under a progress bar (``batch`` None: its default); on
    Ctrl-C, say how many points are stored (the sweep resumes from them) and exit 130."""
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    from teton.sweep.run import run_sweep

    stored = [0, 0]

    def progress(i: int, n: int) -> None:
        stored[:] = [i, n]
        bar.update(task, completed=i, total=n)

    try:
        with progress_bar(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()) as bar:
            task = bar.add_task("sweep", total=None)
            return run_sweep(spec, store, executor=executor, workers=workers, batch=batch, progress=progress)
    except KeyboardInterrupt:
        try:  # the store itself: a batch can be committed after the last progress call
            c = store.counts()
            stored[0] = c["ok"] + c["invalid"] + c["failed"]
        except (Exception, KeyboardInterrupt):
            pass
        if stored[1] and stored[0] >= stored[1]:  # the interrupt landed after the last batch was stored
            print(f"interrupted: all {stored[1]} points are stored in {out}; run the same command again "
                  "to show the results", file=sys.stderr)
        else:
            print(f"interrupted: {stored[0]} of {stored[1]} points are stored in {out}; "
                  "run the same command again to resume", file=sys.stderr)
        sys.exit(130)  # SystemExit passes the CLI wrapper unchanged


def _print_summary(s, errors: list[dict], out: Path) -> None:
    """What the sweep did (points, stored, evaluated, rate, outcomes) and its first errors, on stderr."""
    import sys

    print(f"{s.points} points ({s.filtered} filtered out): {s.already_stored} already in {out}, "
          f"{s.evaluated} evaluated in {s.elapsed_s:.1f} s ({s.points_per_s:,.0f}/s); "
          f"{s.ok} ok, {s.invalid} invalid, {s.failed} failed, {s.fitting} fit in memory", file=sys.stderr)
    for r in errors[:3]:
        print(f"  {r['status']}: {r['error']}", file=sys.stderr)
    if len(errors) > 3:
        print(f"  ... and {len(errors) - 3} more (every one is in the store, with its error)", file=sys.stderr)


def _print_top(best: list[dict], point_cols: list[str], run_cols: list[str], ok: int) -> None:
    """The best points as a table: their keys, step metrics and the whole-run columns they have."""
    from rich.table import Table

    from teton.cli._common import console as output_console

    order = "time-to-train" if "time_to_train_days" in run_cols else "fastest"
    t = Table(title=f"top {len(best)} of {ok} (fitting first, then {order})")
    own = own_peak_label(best)
    for col in (*point_cols, "step s", "MFU", *([own] if own else []), "TFLOP/s/GPU", "mem GiB", "fits",
                *(RUN_COLUMNS[c] for c in run_cols)):
        t.add_column(col, justify="right")
    for r in best:
        t.add_row(*(_fmt(r[k]) for k in point_cols), f"{r['step_time_s']:.3f}", f"{r['mfu_bf16'] * 100:.1f} %",
                  *([_own_peak_mfu(r)] if own else []), f"{r['tflops_per_gpu']:.0f}", f"{r['memory_per_gpu_bytes'] / GIB:.1f}",
                  "yes" if r["fits_in_memory"] else "no", *(_fmt_run(c, r[c]) for c in run_cols))
    output_console(t).print(t)
