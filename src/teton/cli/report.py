"""``teton report SPEC``: a self-contained HTML report with plots (and PNGs for slides)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import SetOverrides, SpecPath
from teton.report.sections import GOODPUT_RUNS
from teton.spec.reliability import MAX_RUNS


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        spec: SpecPath,
        set_: SetOverrides = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="the HTML page to write")] = Path("report.html"),
        sections: Annotated[str | None, typer.Option(
            "--sections", help="comma-separated, from: step, memory, ops, timeline, placement, checkpoint, "
                               "goodput, validation, search; or all (default: all but search, which takes "
                               "seconds)")] = None,
        png: Annotated[Path | None, typer.Option("--png-dir", help="also write every chart as a PNG in this "
                                                 "directory")] = None,
        runs: Annotated[int, typer.Option("--runs", min=1, max=MAX_RUNS, help="Monte Carlo runs per checkpoint interval "
                                                                "(goodput section)")] = GOODPUT_RUNS,
        occupancy: Annotated[float, typer.Option("--occupancy", help="fraction of the cluster other jobs hold "
                                                 "(placement section)")] = 0.0,
    ) -> None:
        """Write one self-contained, offline HTML report of SPEC: step, memory, the ops of one layer,
        pipeline timeline, placement, checkpoint, goodput, validation (and optionally layout search)."""
        from teton.errors import SpecError
        from teton.report.html import write_report
        from teton.report.sections import parse_sections

        chosen = parse_sections(sections)
        if not 0.0 <= occupancy < 1.0:
            raise SpecError("--occupancy", occupancy, "must be in [0, 1)")
        from teton.progress import progress_task

        with progress_task("report") as tick:
            d = write_report(spec, set_, out, chosen, png, goodput_runs=runs, occupancy=occupancy, progress=tick)
        print(f"wrote {d['html']} ({d['bytes'] / 1e6:.1f} MB; sections: {', '.join(d['sections'])}); "
              f"step {d['step_time_s']:.3f} s, MFU {d['mfu_bf16'] * 100:.1f} %", file=sys.stdout)
        if d["pngs"]:
            print(f"wrote {len(d['pngs'])} PNGs to {png}")
