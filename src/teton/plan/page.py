"""The offline HTML page of a plan (``teton plan SPEC --out plan.html``), in the house style of
``teton report``: the answer, the Pareto plot (days against cost, coloured by GPU count), the front
as a table, and the chosen plan's breakdown (where the step time and the lost GPU-hours go)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from teton.plan.answer import layout_text, storage_text, usd
from teton.report.sections import Section, Table


def pareto_figure(d: dict[str, Any]):
    """Days (p50, with the p10 - p90 range as error bars) against cost, one colour per GPU count."""
    import plotly.graph_objects as go

    from teton.report.plots import PALETTE, _layout

    fig = go.Figure()
    counts = sorted({p["gpus"] for p in d["plans"]})
    for i, n in enumerate(counts):
        sel = [p for p in d["plans"] if p["gpus"] == n]
        fig.add_trace(go.Scatter(
            x=[p["cost_usd"] / 1e6 for p in sel], y=[p["days_p50"] for p in sel], mode="markers",
            name=f"{n:,} GPUs", marker=dict(color=PALETTE[i % len(PALETTE)], size=[14 if p["on_front"] else 8 for p in sel],
                                            symbol=["star" if p["chosen"] else "circle" for p in sel]),
            error_y=dict(type="data", symmetric=False, array=[p["days_p90"] - p["days_p50"] for p in sel],
                         arrayminus=[p["days_p50"] - p["days_p10"] for p in sel]),
            text=[f"{p['cluster']}, {layout_text(p)}, {storage_text(p)}" for p in sel]))
    front = sorted((p for p in d["plans"] if p["on_front"]), key=lambda p: p["cost_usd"])
    fig.add_trace(go.Scatter(x=[p["cost_usd"] / 1e6 for p in front], y=[p["days_p50"] for p in front],
                             mode="lines", name="Pareto front", line=dict(color="#888", dash="dot")))
    return _layout(fig, "time to train vs cost (p50, bars p10 - p90; star: the chosen plan)", "cost (million USD)",
                   "time to train (days)")


def breakdown_figure(p: dict[str, Any]):
    """The chosen plan's step (where the time goes) and its lost GPU-hours by kind."""
    import plotly.graph_objects as go

    from teton.report.plots import PALETTE, _layout

    bd = {k: v for k, v in p["breakdown"].items() if v > 0}
    lost = p["goodput"].get("lost_gpu_hours_by_kind", {})
    fig = go.Figure()
    fig.add_trace(go.Bar(x=list(bd), y=list(bd.values()), name="step time (s)", marker_color=PALETTE[0]))
    fig.add_trace(go.Bar(x=list(lost), y=[v / 1e6 for v in lost.values()], name="lost GPU-hours (millions)",
                         marker_color=PALETTE[3], yaxis="y2"))
    fig.update_layout(yaxis2=dict(overlaying="y", side="right", title="lost GPU-hours (millions)"))
    return _layout(fig, "chosen plan: where the step time and the lost GPU-hours go", "", "seconds per step")


def plan_sections(d: dict[str, Any]) -> list[Section]:
    """The page's sections: the answer, the front (plot and tables), the chosen plan's breakdown."""
    plans = {p["id"]: p for p in d["plans"]}
    chosen = plans[d["chosen"]]
    front = Table(("GPUs", "cluster", "layout", "batch", "storage servers", "days p50", "days p90", "cost",
                   "GPUs $", "storage $", "energy $", "network $", "MWh", "GPU-hours", "ETTR"), tuple(
        (f"{p['gpus']:,}", p["cluster"], layout_text(p), f"{p['batch_tokens'] / 1e6:,.1f}M tokens",
         storage_text(p, cell=True), f"{p['days_p50']:.1f}", f"{p['days_p90']:.1f}", f"${p['cost_usd']:,.0f}",
         *(usd(p["cost_split_usd"][k]) for k in ("gpus", "storage", "energy", "network")),
         f"{p['energy_mwh']:,.0f}", f"{p['gpu_hours']:,.0f}", f"{p['ettr'] * 100:.1f} %")
        for p in (plans[i] for i in d["front"])),
        "the Pareto front (cost split into GPUs, storage, energy and network; - : none charged apart, a rental "
        "GPU-hour price holds energy and the network)")
    every = Table(("GPUs", "cluster", "layouts ranked / valid", "best step s", "reason"), tuple(
        (f"{c['gpus']:,}", c["cluster"], f"{c['layouts_fitting']:,} / {c['layouts_evaluated']:,}",
         f"{c['layouts'][0]['step_time_s']:.3f}" if c["layouts"] else "-", c.get("reason", ""))
        for c in d["counts"]), "every candidate GPU count")
    return [
        Section("answer", "The plan", d["why"], notes=(f"time-to-train spread: {chosen['days_spread']}",
                                                          *(f"note: {n}" for n in d["notes"]))),
        Section("front", "Time to train against cost", f"{len(d['plans'])} plans; {len(d['front'])} on the front.",
                tables=(front, every), figures=(("pareto", pareto_figure(d)),)),
        Section("breakdown", "The chosen plan", f"{chosen['step_time_s']:.3f} s a step, "
                f"MFU {chosen['mfu'] * 100:.1f} % (bf16 peak), ETTR {chosen['ettr'] * 100:.1f} %, checkpoint every "
                f"{chosen['checkpoint_interval_s']:,.0f} s ({chosen['checkpoint_interval_source']}).",
                figures=(("breakdown", breakdown_figure(chosen)),)),
    ]


def write_plan_page(d: dict[str, Any], spec_path: str, out: str | Path) -> None:
    """Write the page of plan ``d`` (:func:`teton.plan.make_plan`'s dict) to ``out``, atomically."""
    from teton.report.html import check_writable_file, render_page

    path = check_writable_file(Path(out), "out")
    html = render_page(plan_sections(d), f"plan: {d['model']} on {d['tokens'] / 1e12:,.2f}T tokens",
                       f"{len(d['plans'])} plans over {len(d['counts'])} (cluster, GPU count) candidates", spec_path)
    from teton.atomic import write_text
    from teton.errors import SpecError

    try:
        write_text(path, html)
    except OSError as err:  # a name too long, a full disk: the checks above cannot see those
        raise SpecError("out", str(path), f"cannot be written ({err.strerror})") from None
