"""The report's charts: plotly figures for the HTML page, and the same figures as static PNGs.

Every chart is a plotly figure built from a section's numbers. ``figure_to_png`` redraws such a
figure with matplotlib (no kaleido, no browser) for slides; it understands the small vocabulary
the builders here use: ``go.Bar`` (vertical or horizontal, ``base`` offsets, stacked / overlaid /
grouped), ``go.Scatter`` lines and markers, line shapes spanning the plot, log axes, a reversed
y axis and titles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from teton.atomic import save_figure
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it

FWD_COLOR = "#4C78A8"
BWD_COLOR = "#F58518"
# DualPipe's zero-bubble halves of a backward: input gradient, deferred weight gradient
PASS_COLORS = (("fwd", FWD_COLOR), ("bwd", BWD_COLOR), ("bwd_input", "#FFBF79"), ("bwd_weight", "#54A24B"))
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B", "#B279A2", "#FF9DA6", "#9D755D")
TEMPLATE = "plotly_white"


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 360) -> go.Figure:
    fig.update_layout(title=title, template=TEMPLATE, height=height, margin=dict(l=10, r=10, t=50, b=40),
                      xaxis_title=x_title, yaxis_title=y_title, legend=dict(orientation="h", y=-0.2))
    return fig


def breakdown_bar(breakdown: dict[str, float], step_time_s: float) -> go.Figure:
    """Where the step time goes: one horizontal bar per category (seconds, share in the label)."""
    names = list(breakdown)
    secs = [breakdown[k] for k in names]
    text = [f"{v:.3f} s ({v / step_time_s * 100:.1f} %)" for v in secs]
    fig = go.Figure(go.Bar(x=secs, y=names, orientation="h", text=text, textposition="auto",
                           marker_color=FWD_COLOR, name="seconds"))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, f"step time breakdown (step {step_time_s:.3f} s)", "seconds", "")


def memory_bar(memory_bytes: dict[str, float], hbm_bytes: float, label: str = "fullest GPU",
               usable_bytes: float | None = None, verdict: str | None = None) -> go.Figure:
    """Memory terms of the fullest GPU (GiB) stacked against the HBM capacity (dashed line) and the
    usable HBM the headroom leaves (dotted; ``teton.workload.headroom``); ``verdict``: the step's
    (``fits`` / ``tight`` / ``does not fit``), else fits or not against the usable HBM."""
    fig = go.Figure()
    for i, (term, b) in enumerate(memory_bytes.items()):
        fig.add_trace(go.Bar(x=[b / GIB], y=[label], orientation="h", name=term,
                             marker_color=PALETTE[i % len(PALETTE)], text=[f"{b / GIB:.1f}"], textposition="inside"))
    total = sum(memory_bytes.values())
    usable = hbm_bytes if usable_bytes is None else usable_bytes
    for x, dash in ((hbm_bytes, "dash"), (usable, "dot")):
        fig.add_shape(type="line", x0=x / GIB, x1=x / GIB, y0=0, y1=1, yref="paper", line=dict(color="black", dash=dash))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(range=[0, max(total, hbm_bytes) / GIB * 1.08])
    fits = {"fits": "fits", "tight": "TIGHT"}.get(verdict or ("fits" if total <= usable else ""), "DOES NOT FIT")
    return _layout(fig, f"memory per GPU: {total / GIB:.1f} GiB of {usable / GIB:.1f} GiB usable (dotted), "
                   f"{hbm_bytes / GIB:.1f} GiB HBM (dashed): {fits}", "GiB", "", height=240)


def timeline_gantt(events: Sequence[dict], label_limit: int = 20000) -> go.Figure:
    """Gantt chart of one pipeline: ranks down the y axis, one horizontal bar per op.

    One ``go.Bar`` trace per pass (forward, backward; DualPipe's input- and weight-gradient halves)
    with ``base`` = start, so thousands of ops stay a few traces; each bar is labelled with its model
    chunk (hover: micro-batch and times).
    """
    fig = go.Figure()
    for pass_, color in PASS_COLORS:
        ev = [e for e in events if e["pass"] == pass_]
        if not ev:
            continue
        start = np.array([e["start_s"] for e in ev])
        dur = np.array([e["end_s"] - e["start_s"] for e in ev])
        rank = [f"rank {e['rank']}" for e in ev]
        custom = np.array([[e["chunk"], e["microbatch"], e["start_s"] * 1e3, e["end_s"] * 1e3] for e in ev])
        text = [f"c{e['chunk']}" for e in ev] if len(events) <= label_limit else None
        fig.add_trace(go.Bar(
            x=dur, y=rank, base=start, orientation="h", name=pass_, marker_color=color,
            marker_line_width=0, text=text, textposition="inside", insidetextanchor="middle", customdata=custom,
            hovertemplate=(f"{pass_} chunk %{{customdata[0]:.0f}} micro-batch %{{customdata[1]:.0f}}<br>"
                           "%{customdata[2]:.2f}-%{customdata[3]:.2f} ms<extra>%{y}</extra>")))
    ranks = len({e["rank"] for e in events}) if events else 1
    end_s = max((e["end_s"] for e in events), default=1.0)
    fig.update_layout(barmode="overlay", bargap=0.15, uniformtext=dict(minsize=7, mode="hide"))
    fig.update_xaxes(range=[0.0, end_s * 1.01])  # the step starts at 0 even if the first op waits
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "pipeline schedule of one pipeline (forward / backward, labelled by model chunk)",
                   "seconds into the step", "", height=max(260, 60 + 26 * ranks))


def placement_bars(rows: Sequence[dict]) -> go.Figure:
    """Step time per placement policy, stacked by breakdown category."""
    policies = [r["policy"] for r in rows]
    fig = go.Figure()
    for i, cat in enumerate(rows[0]["breakdown"]):
        vals = [r["breakdown"].get(cat, 0.0) for r in rows]
        if max(vals) <= 0.0:
            continue
        fig.add_trace(go.Bar(x=policies, y=vals, name=cat, marker_color=PALETTE[i % len(PALETTE)]))
    fig.update_layout(barmode="stack")
    return _layout(fig, "step time per placement policy (stacked by where the time goes)", "", "seconds")


def checkpoint_bars(times_s: dict[str, float]) -> go.Figure:
    """Checkpoint save / blocking / restore times (log axis: they span orders of magnitude)."""
    names = list(times_s)
    vals = [max(times_s[k], 1e-6) for k in names]
    fig = go.Figure(go.Bar(x=vals, y=names, orientation="h", marker_color=FWD_COLOR, name="seconds",
                           text=[f"{v:.3g} s" for v in vals], textposition="auto"))
    fig.update_xaxes(type="log")
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "checkpoint: seconds per save and restore", "seconds (log)", "", height=300)


def interval_sweep(rows: Sequence[dict], chosen_s: float, rec: dict) -> go.Figure:
    """Monte Carlo ETTR against the checkpoint interval (minutes, log), with the p5-p95 band, the
    flat region shaded (ETTR within the tolerance of the best; dotted: best - tolerance), the
    intervals the storage cannot sustain greyed, and the practical (recommended), optimal,
    Young-Daly and chosen intervals marked."""
    x = [r["interval_s"] / 60.0 for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[r["ettr_p95"] * 100 for r in rows], mode="lines", name="p95",
                             line=dict(color="#9ecae1", dash="dot")))
    fig.add_trace(go.Scatter(x=x, y=[r["ettr_mean"] * 100 for r in rows], mode="lines+markers", name="mean",
                             line=dict(color=FWD_COLOR)))
    fig.add_trace(go.Scatter(x=x, y=[r["ettr_p5"] * 100 for r in rows], mode="lines", name="p5",
                             line=dict(color="#9ecae1", dash="dot")))
    lo, hi = rec["flat_region_s"]
    fig.add_vrect(x0=lo / 60.0, x1=hi / 60.0, fillcolor="#54A24B", opacity=0.15, line_width=0)
    fig.add_hline(y=(rec["optimal_ettr"] - rec["ettr_tolerance_pp"] / 100.0) * 100, line=dict(color="#54A24B", dash="dot"))
    if rec["min_interval_bound"] != "one step":  # shorter intervals are not offered
        fig.add_vrect(x0=x[0] / 2.0, x1=rec["min_interval_s"] / 60.0, fillcolor="#888888", opacity=0.2, line_width=0)
    marks = [("practical", rec["practical_interval_s"], "#54A24B"), ("optimum", rec["optimal_interval_s"], "black")]
    if rec["daly_interval_s"]:
        marks.append(("Young-Daly", rec["daly_interval_s"], BWD_COLOR))
    if chosen_s != rec["practical_interval_s"]:
        marks.append(("used", chosen_s, "#E45756"))
    for name, xs, color in marks:
        fig.add_shape(type="line", x0=xs / 60.0, x1=xs / 60.0, y0=0, y1=1, yref="paper", line=dict(color=color, dash="dash"))
        fig.add_annotation(x=math.log10(xs / 60.0), y=1.0, yref="paper", text=name, showarrow=False,
                           font=dict(color=color, size=11), yanchor="bottom")
    fig.update_xaxes(type="log")
    title = (f"ETTR vs checkpoint interval: practical {rec['practical_interval_s'] / 60:.1f} min "
             f"(shaded: within {rec['ettr_tolerance_pp']:g} pp of the best)")
    return _layout(fig, title, "checkpoint interval (minutes, log)", "ETTR (%)")


def validation_errors(rows: Sequence[dict]) -> go.Figure:
    """Relative error of each validation row as it is judged (leave-one-out for the training-set
    rows); green within its band, red outside."""
    labels = [f"{i + 1}. {r['metric']}" for i, r in enumerate(rows)]
    err = [r.get("error_loo", r["error"]) * 100 for r in rows]
    colors = ["#54A24B" if r["within_tolerance"] else "#E45756" for r in rows]
    fig = go.Figure(go.Bar(x=err, y=labels, orientation="h", marker_color=colors, name="error",
                           text=[f"{e:+.1f} %" for e in err], textposition="auto"))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "prediction error vs published, leave-one-out where fitted (green: within the row's band)",
                   "error (%)", "",
                   height=max(260, 60 + 22 * len(rows)))


def search_bars(rows: Sequence[dict]) -> go.Figure:
    """Step time of the top layouts."""
    labels = [f"tp{r['tp']} cp{r['cp']} pp{r['pp']}" + (f" ep{r['ep']} etp{r['etp']}" if "etp" in r else "")
              + f" v{r['virtual_stages']} mb{r['micro_batch']} {r['recompute']} z{r['zero']}" for r in rows]
    fig = go.Figure(go.Bar(x=[r["step_time_s"] for r in rows], y=labels, orientation="h", marker_color=FWD_COLOR,
                           text=[f"{r['step_time_s']:.3f} s, MFU {r['mfu_bf16'] * 100:.1f} %" for r in rows],
                           textposition="auto", name="step time"))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "fastest layouts that fit", "step time (s)", "", height=max(260, 60 + 26 * len(rows)))


def ops_bars(rows: Sequence[dict]) -> go.Figure:
    """Exposed milliseconds of each op of one layer and micro-batch, in execution order, coloured
    by kind (GEMM, attention, memory-bound, collective)."""
    kinds = {"gemm": PALETTE[0], "attention": PALETTE[1], "memory": PALETTE[2]}
    colors = [kinds.get(r["kind"], PALETTE[3]) for r in rows]
    fig = go.Figure(go.Bar(x=[r["exposed_s"] * 1e3 for r in rows], y=[f"{r['pass']} {r['name']}" for r in rows],
                           orientation="h", marker_color=colors, name="exposed ms"))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, "one layer, one micro-batch: exposed time per op (blue GEMM, orange attention, "
                        "green memory-bound, red collective)", "ms", "", height=max(300, 60 + 16 * len(rows)))


# ---- static PNGs -------------------------------------------------------------------------------

def _positions(values) -> tuple[np.ndarray, list[str] | None]:
    """Numbers as they are; categories as 0..n-1 in order of first appearance (plotly's order)."""
    vals = list(values)
    if vals and isinstance(vals[0], str):
        cats = list(dict.fromkeys(vals))
        index = {c: i for i, c in enumerate(cats)}
        return np.array([index[v] for v in vals], dtype=float), cats
    return np.asarray(vals, dtype=float), None


def _text(value) -> str:
    return "" if value is None else str(value)


def figure_to_png(fig: go.Figure, path: str, dpi: int = 150, label_limit: int = 64) -> None:
    """Redraw ``fig`` with matplotlib (Agg) and save it as a PNG at ``path`` (see module docstring)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    lay = fig.layout
    height_px = lay.height or 360
    mpl_fig, ax = plt.subplots(figsize=(10, max(2.4, height_px / 90)))
    stack = lay.barmode == "stack"
    offsets: dict[tuple[str, float], float] = {}
    categories: dict[str, list[str] | None] = {"x": None, "y": None}
    for trace in fig.data:
        if trace.type == "bar":
            _draw_bar(ax, trace, stack, offsets, categories, label_limit)
        elif trace.type == "scatter":
            _draw_scatter(ax, trace)
    _draw_lines(ax, lay)
    _style_axes(ax, fig, categories)
    mpl_fig.tight_layout()
    save_figure(mpl_fig, path, dpi=dpi)
    plt.close(mpl_fig)


def _draw_bar(ax, trace, stack: bool, offsets: dict[tuple[str, float], float],
              categories: dict[str, list[str] | None], label_limit: int) -> None:
    """One bar trace: vertical or horizontal, on its base, stacked on the bars before it (``stack``:
    ``offsets`` holds each position's top), labelled when it has at most ``label_limit`` bars; a
    Gantt chart (horizontal, based, many bars) as one PolyCollection per row."""
    horizontal = trace.orientation == "h"
    cat_vals, val_vals = (trace.y, trace.x) if horizontal else (trace.x, trace.y)
    pos, cats = _positions(cat_vals)
    categories["y" if horizontal else "x"] = cats or categories["y" if horizontal else "x"]
    val = np.asarray(val_vals, dtype=float)
    if trace.base is not None:
        base = np.broadcast_to(np.asarray(trace.base, dtype=float), val.shape)
    elif stack:
        key = "h" if horizontal else "v"
        base = np.array([offsets.get((key, p), 0.0) for p in pos])
        for p, b, v in zip(pos, base, val, strict=True):
            offsets[(key, p)] = b + v
    else:
        base = np.zeros_like(val)
    color = trace.marker.color if trace.marker is not None else None
    if horizontal and trace.base is not None and len(val) > label_limit:
        # a Gantt chart: one PolyCollection per row instead of thousands of Rectangles
        for i, p in enumerate(np.unique(pos)):
            sel = pos == p
            ax.broken_barh(list(zip(base[sel], val[sel], strict=True)), (p - 0.4, 0.8), color=color,
                           label=trace.name if i == 0 else None, linewidth=0)
        return
    draw = ax.barh if horizontal else ax.bar
    bars = draw(pos, val, 0.8, base, color=color, label=trace.name, linewidth=0)
    texts = trace.text
    if texts is not None and not isinstance(texts, str) and len(texts) <= label_limit:
        ax.bar_label(bars, labels=[_text(t) for t in texts], label_type="center", fontsize=7)


def _draw_scatter(ax, trace) -> None:
    """One scatter trace: lines and / or markers, the dash style plotly names."""
    x, _ = _positions(trace.x)
    y, _ = _positions(trace.y)
    mode = trace.mode or "lines"
    line = trace.line
    style = {"dot": ":", "dash": "--", "dashdot": "-."}.get(line.dash if line else None, "-")
    ax.plot(x, y, linestyle=style if "lines" in mode else "none", marker="o" if "markers" in mode else None,
            color=line.color if line else None, label=trace.name, markersize=3)


def _draw_lines(ax, lay) -> None:
    """The layout's line shapes that span the plot: vertical and horizontal reference lines."""
    for shape in lay.shapes or ():
        if shape.type != "line":
            continue
        style = dict(color=shape.line.color or "black", linestyle="--" if shape.line.dash else "-", linewidth=1)
        if shape.yref == "paper" and shape.x0 == shape.x1:
            ax.axvline(shape.x0, **style)
        elif shape.xref == "paper" and shape.y0 == shape.y1:
            ax.axhline(shape.y0, **style)


def _style_axes(ax, fig: go.Figure, categories: dict[str, list[str] | None]) -> None:
    """Ticks of category axes, log scales, range and direction, titles, grid and legend as ``fig``'s
    layout sets them."""
    lay = fig.layout
    for axis, cats in categories.items():
        if cats is not None:
            getattr(ax, f"set_{axis}ticks")(range(len(cats)), cats, fontsize=8)
    if lay.xaxis.type == "log":
        ax.set_xscale("log")
    if lay.yaxis.type == "log":
        ax.set_yscale("log")
    if lay.xaxis.range is not None:
        ax.set_xlim(*lay.xaxis.range)
    if lay.yaxis.autorange == "reversed":
        ax.invert_yaxis()
    ax.set_title(lay.title.text or "", fontsize=10)
    ax.set_xlabel(lay.xaxis.title.text or "")
    ax.set_ylabel(lay.yaxis.title.text or "")
    ax.grid(axis="x" if any(t.type == "bar" and t.orientation == "h" for t in fig.data) else "y", alpha=0.3)
    _handles, labels = ax.get_legend_handles_labels()
    if len(set(labels)) > 1:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
