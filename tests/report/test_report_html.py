"""``teton report``: the HTML is self-contained, has every section and the step's numbers."""

import re

import pytest
from plotly.offline import get_plotlyjs

import teton
from teton.report.sections import DEFAULT_SECTIONS, SECTIONS, parse_sections

HEADINGS = {"step": "Step", "memory": "Memory per GPU", "ops": "Ops of one layer", "timeline": "Pipeline timeline", "placement": "Placement",
            "checkpoint": "Checkpoint", "goodput": "Goodput", "validation": "Validation", "search": "Layout search"}


def test_every_section_has_a_heading_name():
    assert set(HEADINGS) == set(SECTIONS)


def test_one_inlined_plotly_bundle_and_nothing_fetched(small_report):
    path, _ = small_report
    html = path.read_text(encoding="utf-8")
    bundle = get_plotlyjs()
    assert html.count(bundle) == 1
    assert html.count("plotly.js v") == 1  # the bundle's banner: inlined exactly once
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    # outside the bundle (whose option defaults mention cdn.plot.ly for geo maps) no URL at all
    rest = html.replace(bundle, "")
    assert "https://" not in rest and "http://" not in rest and "cdn.plot.ly" not in rest
    # every chart is an embedded div drawn by the inlined library
    assert rest.count("Plotly.newPlot(") == len(re.findall(r'id="fig-[a-z-]+"', rest)) >= len(DEFAULT_SECTIONS)


def test_sections_and_step_numbers(small_report, small_spec_path):
    path, info = small_report
    html = path.read_text(encoding="utf-8")
    assert info["sections"] == ["spec", *DEFAULT_SECTIONS, "validation"]
    assert "validation" not in DEFAULT_SECTIONS and "search" not in DEFAULT_SECTIONS  # asked for by name
    for key in DEFAULT_SECTIONS:
        assert f'<section id="{key}">' in html
        assert f"<h2>{HEADINGS[key]}</h2>" in html
    assert "<h2>Layout search</h2>" not in html  # off by default
    r = teton.simulate(small_spec_path)
    assert info["step_time_s"] == pytest.approx(r.step_time_s)
    for text in (f"{r.step_time_s:.3f} s", f"{r.mfu * 100:.1f} %", f"{r.tflops_per_gpu:.0f}", f"{r.tokens_per_s:,.0f}",
                 f"{r.memory_per_gpu_bytes / 2**30:.2f}", f"{r.hbm_bytes / 2**30:.2f}"):
        assert text in html, text
    for k, v in r.breakdown.items():
        assert f"<td>{k}</td>" in html and f"{v:.3f}" in html
    from teton.engine.op_table import op_rows
    from teton.spec import load_spec

    gemm = next(row for row in op_rows(load_spec(small_spec_path)) if row["kind"] == "gemm")
    assert f">{gemm['shape']}</td>" in html and f"{gemm['time_s'] * 1e3:.3f}" in html


def test_checkpoint_goodput_and_validation_numbers(small_report, small_spec_path):
    from teton.spec import load_spec
    from teton.storage.checkpoint import simulate_checkpoint
    from teton.validation.cases import run_validation

    html = small_report[0].read_text(encoding="utf-8")
    s = simulate_checkpoint(load_spec(small_spec_path)).summary()
    assert f"{s['checkpoint_save_s']:.3f} s" in html and f"{s['checkpoint_restore_s']:.3f} s" in html
    assert str(s["bottleneck"]) in html
    assert "ETTR" in html and 'id="fig-goodput-interval-sweep"' in html
    v = run_validation()
    for row in v["rows"]:
        assert f"{row['error'] * 100:+.1f} %" in html
    assert f"{v['within_tolerance']}/{v['total']} rows within their band" in html


def test_timeline_chart_has_every_op_as_a_bar(small_spec_path):
    from teton.engine.step import simulate_step
    from teton.report.plots import timeline_gantt
    from teton.spec import load_spec

    events = simulate_step(load_spec(small_spec_path), timeline=True).extra["timeline"]
    fig = timeline_gantt(events)
    assert [t.name for t in fig.data] == ["fwd", "bwd"]  # one trace per pass, not one per op
    assert sum(len(t.x) for t in fig.data) == len(events)
    fwd = [e for e in events if e["pass"] == "fwd"]
    assert list(fig.data[0].base) == pytest.approx([e["start_s"] for e in fwd])
    assert list(fig.data[0].x) == pytest.approx([e["end_s"] - e["start_s"] for e in fwd])
    assert list(fig.data[0].text) == [f"c{e['chunk']}" for e in fwd]


def test_parse_sections():
    assert parse_sections(None) == DEFAULT_SECTIONS
    assert "search" not in DEFAULT_SECTIONS
    assert parse_sections("all") == tuple(SECTIONS)
    assert parse_sections("memory, step") == ("step", "memory")  # report order


def test_section_without_storage_says_so(small_spec_dict):
    from teton.report.html import build_sections
    from teton.spec import load_spec

    spec = load_spec({k: v for k, v in small_spec_dict.items() if k != "storage"})
    built, _ = build_sections(spec, ("checkpoint",))
    ck = built[-1]
    assert ck.key == "checkpoint" and not ck.figures
    assert any("not modelled" in n and "storage" in n for n in ck.notes)


def test_the_reports_interval_is_the_one_teton_goodput_recommends(small_spec_path):
    """The report's goodput rows came from the 32-run Monte Carlo sweep's pick (150 s for the 405B
    example) while `teton goodput` gave the renewal model's (144 s); the rows now follow the
    verb, and the sweep stays as the table and figure beside them."""
    from teton.engine.step import simulate_step
    from teton.reliability import goodput
    from teton.report.html import build_sections
    from teton.spec import load_spec

    spec = load_spec(small_spec_path)
    built, r = build_sections(spec, ["goodput"], goodput_runs=16)
    data = next(s for s in built if s.key == "goodput").data
    verb = goodput(spec, step_time_s=r.step_time_s, tokens_per_step=r.tokens_per_step, breakdown=r.breakdown,
                   runs=16, simulate=simulate_step).to_dict()
    assert data["checkpoint_interval_s"] == verb["checkpoint_interval_s"]
    assert data["interval_recommendation"]["method"] == verb["interval_recommendation"]["method"] == "renewal model"
    assert data["interval_sweep"] and data["sweep_recommendation"]["method"] == "Monte Carlo sweep"
