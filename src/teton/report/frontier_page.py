"""The offline page of the frontier study (``teton report --frontier``), in the house style of
``teton report``: the verdict and its rule, then one section and one chart per question (step time
and MFU, exposed DP and its cross-building part, checkpoint writes and storage, failures and ETTR,
start-up), and the limits' loads against scale. The numbers are the study's rows
(:mod:`teton.studies.frontier`); nothing is re-simulated. Seconds, GPUs, TB of 10^12 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from teton.report.sections import Section, Table
from teton.studies.frontier import LIMITS, FrontierResult, FrontierRow

SYSTEM_COLORS = {"h100": "#4C78A8", "gb200": "#54A24B"}
DASHES = ("solid", "dash", "dot", "dashdot")


def _by_system(result: FrontierResult) -> dict[str, list[FrontierRow]]:
    return {k: sorted((r for r in result.rows if r.system == k), key=lambda r: r.gpus) for k in result.systems}


def _lines(result: FrontierResult, series: Sequence[tuple[str, Callable[[FrontierRow], float]]], title: str,
           y_title: str, log_y: bool = False, hline: float | None = None):
    """One line per (system, series) against GPUs (log x); ``hline``: a threshold drawn across."""
    import plotly.graph_objects as go

    from teton.report.plots import _layout

    fig = go.Figure()
    for sys_key, rows in _by_system(result).items():
        for i, (name, value) in enumerate(series):
            label = f"{sys_key} {name}" if name else sys_key
            fig.add_trace(go.Scatter(x=[r.gpus for r in rows], y=[value(r) for r in rows], mode="lines+markers",
                                     name=label, line=dict(color=SYSTEM_COLORS.get(sys_key), dash=DASHES[i % 4])))
    if hline is not None:
        fig.add_shape(type="line", xref="paper", x0=0, x1=1, y0=hline, y1=hline, line=dict(color="#E45756", dash="dash"))
    fig.update_xaxes(type="log")
    if log_y:
        fig.update_yaxes(type="log")
    return _layout(fig, title, "GPUs (log)", y_title)


def _dp_bars(result: FrontierResult):
    """Exposed DP per (system, scale): the part inside a building and the part the building
    boundary adds, stacked."""
    import plotly.graph_objects as go

    from teton.report.plots import _layout

    rows = sorted(result.rows, key=lambda r: (r.system, r.gpus))
    names = [f"{r.system} {r.gpus:,}" for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[r.dp_exposed_s - r.dp_cross_building_s for r in rows], name="within a building",
                         marker_color="#4C78A8"))
    fig.add_trace(go.Bar(x=names, y=[r.dp_cross_building_s for r in rows], name="added by crossing buildings",
                         marker_color="#E45756", text=[f"{r.dp_exposed_share:.1%} of step" for r in rows]))
    fig.update_layout(barmode="stack")
    return _layout(fig, "exposed DP per step: within a building and across buildings", "", "seconds per step")


def _verdict_section(result: FrontierResult) -> Section:
    rules = Table(("limit", "crossed when"), tuple((x.label, x.rule) for x in LIMITS), "the limits and their thresholds")
    first = Table(("system", *(x.label for x in LIMITS)), tuple(
        (v.system, *(crossed_text(v.by_limit[x.key]) for x in LIMITS)) for v in result.verdicts),
        "first scale studied that crosses each limit (~ where the load passes 1)")
    fig = _lines(result, [(x.label, (lambda r, k=x.key: r.loads[k])) for x in LIMITS],
                 "each limit's load (share of its budget; above 1: crossed)", "load", log_y=True, hline=1.0)
    lead = " ".join(v.text + "." for v in result.verdicts)
    notes = ("rule: a system's verdict is the limit crossed at the smallest scale studied; limits first crossed "
             "at the same scale are ordered by where their load passes 1 (log-linear between that scale and the "
             "one below), then by load", *(f"why {x.rule}: {x.why}" for x in LIMITS), *result.notes)
    return Section("verdict", "What breaks first", lead, (rules, first), (("loads", fig),), notes)


def crossed_text(b: dict) -> str:
    """A limit's first crossing as a cell: the scale (~ where the load passes 1), or not crossed."""
    if b["first_scale"] is None:
        return f"not crossed (load {b['load']:.2f} at the largest scale)"
    at = f" (~{b['crossing_gpus']:,.0f})" if b["crossing_gpus"] is not None else " (or below)"
    return f"{b['first_scale']:,}{at}"


def _step_section(result: FrontierResult) -> Section:
    t = Table(("system", "GPUs", "hosts", "NVLink domains", "buildings", "layout", "batch (sequences)", "step s",
               "MFU (bf16 peak)", "MFU (own peak)", "tokens/s", "fits"), tuple(
        (r.system, f"{r.gpus:,}", f"{r.hosts:,}", f"{r.nvlink_domains:,}", f"{r.buildings}",
         f"tp{r.layout['tp']} pp{r.layout['pp']} dp{r.layout['dp']:,}", f"{r.global_batch:,}", f"{r.step_time_s:.3f}",
         f"{r.mfu_bf16:.1%}", f"{r.mfu:.1%} {r.precision}", f"{r.tokens_per_s / 1e6:,.1f}M", "yes" if r.fits_in_memory
         else "NO") for r in result.rows), "the step at each scale")
    fig = _lines(result, [("", lambda r: r.mfu_bf16 * 100)], "MFU against the dense bf16 peak", "MFU (%)")
    return Section("step", "Step time and MFU",
                   "Same work per GPU at every scale (tp and pp kept, the batch grows with dp), so what MFU loses "
                   "with scale is communication the step cannot hide.", (t,), (("mfu", fig),))


def _dp_section(result: FrontierResult) -> Section:
    t = Table(("system", "GPUs", "buildings", "exposed DP s", "% of step", "one building s", "cross-building s",
               "cross-building share"), tuple(
        (r.system, f"{r.gpus:,}", f"{r.buildings}", f"{r.dp_exposed_s:.3f}", f"{r.dp_exposed_share:.1%}",
         f"{r.dp_exposed_one_building_s:.3f}", f"{r.dp_cross_building_s:.3f}",
         f"{r.dp_cross_building_s / r.dp_exposed_s:.0%}" if r.dp_exposed_s > 0 else "-") for r in result.rows),
        "exposed DP gradient collectives (reduce-scatter + all-gather)")
    return Section("dp", "Exposed DP traffic across buildings",
                   "The DP collectives' time that overlap did not hide, and the part the building boundary adds: the "
                   "same job priced as if one non-blocking building held every GPU.", (t,), (("exposed", _dp_bars(result)),))


def _checkpoint_section(result: FrontierResult) -> Section:
    t = Table(("system", "GPUs", "size TB", "save (durable) s", "GPU pause s", "restore s", "sustained write s",
               "Young/Daly s", "interval used s", "practical s", "kept TB", "Tectonic servers needed"), tuple(
        (r.system, f"{r.gpus:,}", f"{r.checkpoint_bytes / 1e12:.2f}", f"{r.checkpoint_save_s:.2f}",
         f"{r.checkpoint_blocking_s:.4f}", f"{r.checkpoint_restore_s:.0f}", f"{r.checkpoint_sustained_write_s:.2f}",
         f"{r.daly_interval_s:.1f}", f"{r.checkpoint_interval_s:.1f} ({r.interval_bound})",
         f"{r.practical_interval_s:,.0f}", f"{r.storage_capacity_bytes / 1e12:.1f}", f"{r.storage_servers_needed:,}")
        for r in result.rows), "checkpoint writes and storage (Tectonic, 7,500 servers, serving the run alone)")
    fig = _lines(result, [("save (durable)", lambda r: r.checkpoint_save_s),
                          ("sustained write", lambda r: r.checkpoint_sustained_write_s),
                          ("Young/Daly interval", lambda r: r.daly_interval_s),
                          ("restore", lambda r: r.checkpoint_restore_s)],
                 "checkpoint: write times against the Young/Daly interval", "seconds (log)", log_y=True)
    return Section("checkpoint", "Checkpoint writes and storage",
                   "Async checkpoints pause the GPUs only for the device-to-host copy, so Young/Daly asks for a "
                   "checkpoint every few seconds; the storage's sustained write rate (flash endurance) is what holds "
                   "the interval back. Servers needed: Tectonic servers that hold the kept checkpoints and sustain "
                   "their writes at the interval used.", (t,), (("times", fig),))


def _failure_section(result: FrontierResult) -> Section:
    t = Table(("system", "GPUs", "interruptions/day", "planned/day", "MTBI min", "spare hosts", "ETTR", "ETTR p5",
               "lost to recovery GPU-h", "lost work GPU-h"), tuple(
        (r.system, f"{r.gpus:,}", f"{r.unexpected_per_day:.1f}", f"{r.planned_per_day:.1f}", f"{r.mtbi_h * 60:.0f}",
         f"{r.spare_hosts:,}", f"{r.ettr:.1%}", f"{r.ettr_p5:.1%}", f"{r.lost_gpu_hours_by_kind['recovery']:,.0f}",
         f"{r.lost_gpu_hours_by_kind['lost_work']:,.0f}") for r in result.rows),
        f"failures over a {result.days:g}-day window ({result.runs} Monte Carlo runs)")
    fig = _lines(result, [("", lambda r: r.ettr * 100)], "ETTR at the Young/Daly interval (dashed: 90 %)", "ETTR (%)",
                 hline=90.0)
    return Section("failures", "Interruptions and ETTR",
                   "Llama 3 Table 5 rates per GPU, host, NIC and switch, scaled to each job; recovery is detection, a "
                   "host swap, process-group start-up and the restore.", (t,), (("ettr", fig),))


def _startup_section(result: FrontierResult) -> Section:
    t = Table(("system", "GPUs", f"used ({result.pg_init}) s", "stock s", "optimized s"), tuple(
        (r.system, f"{r.gpus:,}", f"{r.startup_s:.0f}", f"{r.startup_stock_s:.0f}", f"{r.startup_optimized_s:.0f}")
        for r in result.rows), "process-group start-up")
    fig = _lines(result, [("stock", lambda r: r.startup_stock_s / 60), ("optimized", lambda r: r.startup_optimized_s / 60)],
                 "process-group start-up (dashed: 10 min)", "minutes", hline=10.0)
    return Section("startup", "Process-group start-up",
                   "Stock rendezvous is serial in the ranks (O(n)); Meta's tree bootstrap O(log n). Constants are "
                   "assumptions (teton.reliability.recovery); only the growth laws are modelled.", (t,),
                   (("startup", fig),))


def frontier_sections(result: FrontierResult) -> list[Section]:
    """The page's sections, verdict first."""
    return [_verdict_section(result), _step_section(result), _dp_section(result), _checkpoint_section(result),
            _failure_section(result), _startup_section(result)]


def write_frontier_page(result: FrontierResult, out: str | Path, png_dir: str | Path | None = None) -> dict:
    """Write the page (and every chart as a PNG in ``png_dir``); returns what was written."""
    from teton.atomic import write_text
    from teton.errors import SpecError
    from teton.report.html import check_png_dir, check_writable_file, render_page, write_pngs

    path = check_writable_file(Path(out), "out")
    png = check_png_dir(Path(png_dir)) if png_dir is not None else None
    sections = frontier_sections(result)
    scales = ", ".join(f"{s:,}" for s in result.scales)
    html = render_page(sections, "what breaks first", f"Llama 3 405B on {' vs '.join(result.systems)} at {scales} "
                       "GPUs", "teton report --frontier")
    try:
        write_text(path, html)
    except OSError as err:
        raise SpecError("out", str(path), f"cannot write ({err.strerror})") from None
    pngs = write_pngs(sections, png) if png is not None else []
    return {"html": str(path), "bytes": len(html.encode()), "pngs": [str(p) for p in pngs]}
