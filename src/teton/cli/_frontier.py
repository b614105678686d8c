"""``teton report --frontier``: the frontier study's table in the terminal, its page and JSON."""

from __future__ import annotations

import sys
from pathlib import Path

from teton.errors import SpecError


def check_frontier_options(spec: Path | None, set_: list[str] | None, sections: str | None,
                           occupancy: float) -> None:
    """--frontier builds its own specs: no SPEC, --set, --sections or --occupancy beside it."""
    if spec is not None:
        raise SpecError("--frontier", str(spec), "builds its own specs (teton.studies.frontier_specs); give no SPEC")
    for flag, value in (("--set", set_), ("--sections", sections), ("--occupancy", occupancy or None)):
        if value:
            raise SpecError(flag, value, "not with --frontier (it builds its own specs)")


def run_frontier(gpus: str | None, systems: str | None, runs: int, out: Path, png_dir: Path | None,
                 json_: bool) -> None:
    """The study, its page, then the table (or one JSON document)."""
    from teton.cli._common import print_json
    from teton.progress import progress_task
    from teton.report.frontier_page import write_frontier_page
    from teton.report.html import check_png_dir, check_writable_file
    from teton.studies.frontier import DEFAULT_SCALES, DEFAULT_SYSTEMS, frontier_study

    check_writable_file(out, "out")
    if png_dir is not None:
        check_png_dir(png_dir, "png_dir")
    with progress_task("frontier study", disable=json_) as tick:
        result = frontier_study(DEFAULT_SCALES if gpus is None else gpus,
                                DEFAULT_SYSTEMS if systems is None else systems, runs=runs, progress=tick)
    written = write_frontier_page(result, out, png_dir)
    if json_:
        print_json({**result.to_dict(), "html": written["html"]})
        return
    print_frontier(result)
    print(f"wrote {written['html']} ({written['bytes'] / 1e6:.1f} MB)", file=sys.stdout)
    if written["pngs"]:
        print(f"wrote {len(written['pngs'])} PNGs to {png_dir}")


def print_frontier(result) -> None:
    from rich.table import Table

    from teton.cli._common import console
    from teton.report.frontier_page import crossed_text as _crossed
    from teton.studies.frontier import LIMITS

    t = Table(title=f"what breaks first: Llama 3 405B, {result.runs} Monte Carlo runs over {result.days:g} days, "
                    f"start-up {result.pg_init}")
    cols = ("system", "GPUs", "bldgs", "step s", "MFU bf16", "exposed DP s", "DP % step", "cross-bldg s", "ckpt save s",
            "sust. write s", "Y/D interval s", "servers", "intr/day", "ETTR", "start-up s (stock)")
    for c in cols:
        t.add_column(c, justify="left" if c == "system" else "right")
    for r in result.rows:
        t.add_row(r.system, f"{r.gpus:,}", str(r.buildings), f"{r.step_time_s:.3f}", f"{r.mfu_bf16:.1%}",
                  f"{r.dp_exposed_s:.3f}", f"{r.dp_exposed_share:.1%}", f"{r.dp_cross_building_s:.3f}",
                  f"{r.checkpoint_save_s:.2f}", f"{r.checkpoint_sustained_write_s:.2f}", f"{r.daly_interval_s:.1f}",
                  f"{r.storage_servers_needed:,}", f"{r.unexpected_per_day:.1f}", f"{r.ettr:.1%}",
                  f"{r.startup_s:.0f} ({r.startup_stock_s:.0f})")
    con = console(t)
    con.print(t)
    for v in result.verdicts:
        con.print(f"[bold]{v.text}[/bold]", highlight=False, soft_wrap=True)
        con.print("  first crossed: " + "; ".join(f"{x.label} {_crossed(v.by_limit[x.key])}" for x in LIMITS),
                  highlight=False, soft_wrap=True)
    con.print("thresholds: " + "; ".join(x.rule for x in LIMITS), highlight=False, soft_wrap=True)
    for n in result.notes:
        con.print(f"note: {n}", highlight=False, soft_wrap=True)
