"""``teton report``: one self-contained HTML file (and optionally PNGs) for a spec.

The page inlines plotly.js once (``plotly.offline.get_plotlyjs()``) and embeds each chart as a
``<div>`` (``to_html(include_plotlyjs=False, full_html=False)``), so it opens offline and never
reaches a CDN. The Jinja2 template is package data: ``teton/data/templates/report.html.j2``.
Sections are computed by ``teton.report.sections``; the step is simulated once (with its
pipeline timeline) and shared by all of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from teton.atomic import write_text
from teton.errors import SpecError
from teton.report.sections import GOODPUT_RUNS, Context, Section, spec_section
from teton.report.sections import SECTIONS as SECTION_BUILDERS

TEMPLATE = "report.html.j2"
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def check_writable_file(path: Path, field: str = "out") -> Path:
    """The file can be created (or overwritten) at ``path``; SpecError naming the field if not."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if os.path.isdir(path):  # os.path, not pathlib: False (not OSError) for a name too long
        raise SpecError(field, str(path), "is a directory; give a file path like report.html")
    if not os.path.isdir(parent):
        raise SpecError(field, str(path), f"directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise SpecError(field, str(path), "not writable")
    return path


def check_png_dir(path: Path, field: str = "png_dir") -> Path:
    """Create the PNG directory if needed, in a directory that exists (as ``--out`` asks of the
    page's: a mistyped parent is an error, not a tree of new folders); SpecError if it cannot be a
    writable directory."""
    path = Path(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise SpecError(field, str(path), "exists and is not a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not os.path.isdir(parent):
        raise SpecError(field, str(path), f"directory {parent} does not exist")
    try:
        path.mkdir(exist_ok=True)
    except OSError as err:
        raise SpecError(field, str(path), f"cannot create the directory ({err.strerror})") from None
    if not os.access(path, os.W_OK):
        raise SpecError(field, str(path), "directory is not writable")
    return path


def build_sections(spec, sections: Sequence[str], goodput_runs: int = GOODPUT_RUNS, occupancy: float = 0.0,
                   tick: Callable[[str], None] | None = None) -> tuple[list[Section], Any]:
    """Simulate the step (with its timeline) once, then build each requested section in order.

    Returns the sections (the spec summary first) and the step result. ``tick(label)`` is called
    before each piece of work (for a progress bar).
    """
    from teton.engine.step import simulate_step

    tick = tick or (lambda _label: None)
    tick("simulating the step")
    result = simulate_step(spec, timeline=True)
    ctx = Context(spec, result, goodput_runs=goodput_runs, occupancy=occupancy)
    out = [spec_section(ctx)]
    for key in sections:
        label, build = SECTION_BUILDERS[key]
        tick(label)
        out.append(build(ctx))
    return out, result


def _figure_html(key: str, name: str, fig) -> str:
    return fig.to_html(include_plotlyjs=False, full_html=False, div_id=f"fig-{key}-{name}", config=PLOTLY_CONFIG)


def render_html(sections: Sequence[Section], spec, spec_path: str = "", overrides: Sequence[str] = ()) -> str:
    """The whole page of a spec's report as a string (see :func:`render_page`)."""
    j = spec.job
    lay = j.layout
    subtitle = (f"{spec.model.name} on {spec.cluster.name}: {j.gpus:,} GPUs, tp={lay.tp} cp={lay.cp} pp={lay.pp} "
                f"dp={lay.dp}")
    return render_page(sections, f"{spec.model.name} on {spec.cluster.name}", subtitle, spec_path, overrides)


def render_page(sections: Sequence[Section], title: str, subtitle: str, spec_path: str = "",
                overrides: Sequence[str] = ()) -> str:
    """A page of sections as a string: plotly.js inlined once, every figure as an embedded div."""
    import jinja2
    import plotly
    from plotly.offline import get_plotlyjs

    from teton.version import __version__

    text = resources.files("teton.data").joinpath("templates", TEMPLATE).read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    plotlyjs = get_plotlyjs()
    figures = {s.key: [_figure_html(s.key, name, fig) for name, fig in s.figures] for s in sections}
    return env.from_string(text).render(
        title=title, subtitle=subtitle, spec_path=spec_path,
        overrides=list(overrides), sections=sections, figures=figures, plotlyjs=plotlyjs,
        version=__version__, plotly_version=_plotlyjs_version(plotlyjs, plotly.__version__))


def _plotlyjs_version(bundle: str, fallback: str) -> str:
    """The version in the bundle's banner (``plotly.js vX.Y.Z``), else the Python package's."""
    m = re.search(r"plotly\.js v(\S+)", bundle[:200])
    return m.group(1) if m else f"from plotly.py {fallback}"


def write_pngs(sections: Sequence[Section], directory: Path) -> list[Path]:
    """Every chart of the report as ``<section>-<chart>.png`` in ``directory`` (matplotlib)."""
    from teton.report.plots import figure_to_png

    paths = []
    for s in sections:
        for name, fig in s.figures:
            path = Path(directory) / f"{s.key}-{name}.png"
            figure_to_png(fig, str(path))
            paths.append(path)
    return paths


def write_report(spec_path: str | Path, overrides: Sequence[str] | None, out: str | Path,
                 sections: Sequence[str], png_dir: str | Path | None = None,
                 goodput_runs: int = GOODPUT_RUNS, occupancy: float = 0.0,
                 progress: Callable[[int, int], None] | None = None) -> dict:
    """Load the spec, build the sections, write the HTML (and PNGs); returns what was written.

    Output paths are checked before any simulation, so a bad ``--out`` fails in milliseconds.
    ``progress(done, total)`` as each piece of work (the step, a section, the HTML, the PNGs) ends.
    Every file is written whole or not at all (:mod:`teton.atomic`).
    """
    from teton.spec import load_spec

    out = check_writable_file(Path(out))
    png = check_png_dir(Path(png_dir)) if png_dir is not None else None
    spec = load_spec(spec_path, list(overrides or []))
    total = 2 + len(sections) + (png is not None)
    done = [0]

    def tick(_label: str) -> None:  # before each piece of work: the one before it is done
        if progress:
            progress(done[0], total)
        done[0] += 1

    built, result = build_sections(spec, sections, goodput_runs, occupancy, tick)
    tick("writing HTML")
    html = render_html(built, spec, str(spec_path), list(overrides or []))
    try:
        write_text(out, html)
    except OSError as err:
        raise SpecError("out", str(out), f"cannot write ({err.strerror})") from None
    pngs = []
    if png is not None:
        tick("writing PNGs")
        pngs = write_pngs(built, png)
    if progress:
        progress(total, total)
    return {"html": str(out), "bytes": len(html.encode()), "sections": [s.key for s in built],
            "pngs": [str(p) for p in pngs], "step_time_s": result.step_time_s, "mfu": result.mfu,
            "mfu_bf16": result.mfu_bf16, "fits_in_memory": result.fits_in_memory,
            "short_bytes": max(0.0, -result.headroom_bytes), "memory_verdict": result.memory_verdict}
