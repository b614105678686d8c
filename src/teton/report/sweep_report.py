"""One offline HTML page for a sweep's stored points (``teton sweep ... --html FILE``).

Sections: the best points (as the sweep's summary ranks them), the effect of each swept key
(the ranking metric of the points that fit, one box per value of the key), and step time against
memory per GPU for every point. The numbers are the stored rows; nothing is re-simulated. Memory
is in GiB (2**30 bytes), as ``teton run`` prints it; MFU is against the bf16 peak for every point
(``mfu_bf16``), as the sweep's table shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teton.report.sections import Section, Table
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it


def ranking_metric(rows: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(column, label): time-to-train when the points modelled whole runs, else the step time."""
    if any(r.get("time_to_train_days") is not None for r in rows):
        return "time_to_train_days", "time to train (days)"
    return "step_time_s", "step time (s)"


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _value_order(v) -> tuple:
    """Numbers in ascending order, then everything else by its text (a key's boxes in value order)."""
    number = isinstance(v, int | float) and not isinstance(v, bool)
    return (0, v, "") if number else (1, 0, str(v))


def sweep_sections(rows: Sequence[dict[str, Any]], keys: Sequence[str], top: int = 20) -> list[Section]:
    """Sections of the page for a sweep's stored rows (``keys``: the swept spec paths); the charts and
    the table use the ``ok`` rows, the lead counts every status."""
    import plotly.graph_objects as go

    from teton.report.plots import PALETTE, _layout

    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    invalid = sum(r.get("status") == "invalid" for r in rows)
    failed = sum(r.get("status") == "failed" for r in rows)
    col, label = ranking_metric(ok)
    fitting = [r for r in ok if r.get("fits_in_memory")]
    best = sorted(fitting, key=lambda r: (r[col] is None, r[col] if r[col] is not None else 0.0))[:top]
    table = Table((*keys, "step s", "MFU", "mem GiB", *(["days"] if col != "step_time_s" else [])), tuple(
        (*(_value(r[k]) for k in keys), f"{r['step_time_s']:.3f}", f"{r['mfu_bf16'] * 100:.1f} %",
         f"{r['memory_per_gpu_bytes'] / GIB:.1f}", *([f"{r[col]:.1f}"] if col != "step_time_s" else []))
        for r in best), f"the {len(best)} best of {len(fitting)} points that fit (by {label})")
    lead = (f"{len(rows):,} stored point{'s' if len(rows) != 1 else ''}: {len(ok):,} simulated, {invalid:,} invalid"
            + (f", {failed:,} failed (retried on the next run)" if failed else "")
            + f"; {len(fitting):,} fit in memory.")
    out = [Section("best", "Best points", lead,
                   (table,), data={"ok": len(ok), "fitting": len(fitting)})]

    figures = []
    for key in keys:
        values = sorted(dict.fromkeys(r[key] for r in fitting), key=_value_order)
        if len(values) < 2:
            continue
        fig = go.Figure()
        for i, v in enumerate(values):
            ys = [r[col] for r in fitting if r[key] == v and r[col] is not None]
            fig.add_trace(go.Box(y=ys, name=_value(v), marker_color=PALETTE[i % len(PALETTE)], boxpoints="all",
                                 jitter=0.3, pointpos=0))
        figures.append((key.replace(".", "-"), _layout(fig, f"{label} by {key} (points that fit)", key, label)))
    out.append(Section("effects", "Effect of each swept key",
                       "Every point that fits, grouped by one key's value at a time: the spread within a box "
                       "is what the other keys do.", figures=tuple(figures)))

    fig = go.Figure()
    for fits, name, color in ((True, "fits", PALETTE[0]), (False, "does not fit", PALETTE[3])):
        sel = [r for r in ok if bool(r.get("fits_in_memory")) is fits]
        fig.add_trace(go.Scatter(x=[r["memory_per_gpu_bytes"] / GIB for r in sel], y=[r["step_time_s"] for r in sel],
                                 mode="markers", name=name, marker=dict(color=color, size=6),
                                 text=[", ".join(f"{k}={_value(r[k])}" for k in keys) for r in sel]))
    out.append(Section("memory-vs-time", "Step time against memory",
                       "Each point of the sweep; hover for its keys.",
                       figures=(("scatter", _layout(fig, "step time vs memory per GPU", "memory per GPU (GiB)",
                                                    "step time (s)")),)))
    return out


def write_sweep_page(rows: Sequence[dict[str, Any]], keys: Sequence[str], sweep_file: str, out) -> None:
    """Write the page for ``rows`` (a sweep's stored points) to ``out``."""
    from pathlib import Path

    from teton.atomic import write_text
    from teton.report.html import check_writable_file, render_page

    path = check_writable_file(Path(out), "out")
    sections = sweep_sections(rows, keys)
    write_text(path, render_page(sections, f"sweep {Path(sweep_file).name}", f"{len(rows):,} stored point{'s' if len(rows) != 1 else ''}",
                                str(sweep_file)))
