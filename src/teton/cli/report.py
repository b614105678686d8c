"""``teton report SPEC``: a self-contained HTML report with plots (and PNGs for slides); ``teton
report --frontier``: the frontier study (what breaks first at 16K ... 350K GPUs, H100 vs GB200)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides
from teton.report.sections import GOODPUT_RUNS
from teton.spec.reliability import MAX_RUNS


def register(app: typer.Typer) -> None:
    @app.command()
    def report(
        spec: Annotated[Path | None, typer.Argument(metavar="SPEC", help="spec file (YAML, TOML or JSON); none "
                                                                         "with --frontier")] = None,
        set_: SetOverrides = None,
        out: Annotated[Path, typer.Option("--out", "-o", help="the HTML page to write")] = Path("report.html"),
        sections: Annotated[str | None, typer.Option(
            "--sections", help="comma-separated, from: step, memory, ops, timeline, placement, checkpoint, "
                               "goodput, validation, search; or all (default: all but search and validation, "
                               "which take seconds: validation is teton validate's bundled cases)")] = None,
        png: Annotated[Path | None, typer.Option("--png-dir", help="also write every chart as a PNG in this "
                                                 "directory")] = None,
        runs: Annotated[int, typer.Option("--runs", min=1, max=MAX_RUNS, help="Monte Carlo runs per checkpoint interval "
                                                                "(goodput section; per row with --frontier)")] = GOODPUT_RUNS,
        occupancy: Annotated[float, typer.Option("--occupancy", help="fraction of the cluster other jobs hold "
                                                 "(placement section)")] = 0.0,
        frontier: Annotated[bool, typer.Option("--frontier", help="the frontier study instead of a spec: Llama 3 405B "
                                               "at 16K ... 350K GPUs, H100 vs GB200, and what breaks first")] = False,
        gpus: Annotated[str | None, typer.Option("--gpus", help="--frontier: the scales, GPU counts (default "
                                                 "16384,65536,131072,350000)")] = None,
        systems: Annotated[str | None, typer.Option("--systems", help="--frontier: the systems compared, from "
                                                    "h100, gb200 (default both)")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Write one self-contained, offline HTML report of SPEC, or the frontier study.

        Sections: step, memory, the ops of one layer, pipeline timeline, placement, checkpoint,
        goodput, validation (and optionally layout search); with --frontier, the frontier study
        (docs/frontier.md)."""
        from teton.errors import SpecError

        if frontier:
            from teton.cli._frontier import check_frontier_options, run_frontier

            check_frontier_options(spec, set_, sections, occupancy)
            run_frontier(gpus, systems, runs, out, png, json_)
            return
        for flag, value in (("--gpus", gpus), ("--systems", systems), ("--json", json_)):
            if value:
                raise SpecError(flag, value, "only with --frontier")
        if spec is None:
            raise SpecError("SPEC", None, "give a spec file, or --frontier for the frontier study")
        _spec_report(spec, set_, out, sections, png, runs, occupancy)


def _spec_report(spec: Path, set_: list[str] | None, out: Path, sections: str | None, png: Path | None, runs: int,
                 occupancy: float) -> None:
    from teton.errors import SpecError
    from teton.progress import progress_task
    from teton.report.html import write_report
    from teton.report.sections import parse_sections

    chosen = parse_sections(sections)
    if not 0.0 <= occupancy < 1.0:
        raise SpecError("--occupancy", occupancy, "must be in [0, 1)")
    with progress_task("report") as tick:
        d = write_report(spec, set_, out, chosen, png, goodput_runs=runs, occupancy=occupancy, progress=tick)
    print(f"wrote {d['html']} ({d['bytes'] / 1e6:.1f} MB; sections: {', '.join(d['sections'])}); "
          f"step {d['step_time_s']:.3f} s, MFU {d['mfu_bf16'] * 100:.1f} %"
          + ("" if d["fits_in_memory"] else
             f"; TIGHT in memory ({d['short_bytes'] / 2**30:.1f} GiB over the usable HBM, within the fragmentation "
             "allowance)" if d["memory_verdict"] == "tight" else
             f"; DOES NOT FIT in memory ({d['short_bytes'] / 2**30:.1f} GiB short)"),
          file=sys.stdout)
    if d["pngs"]:
        print(f"wrote {len(d['pngs'])} PNGs to {png}")
