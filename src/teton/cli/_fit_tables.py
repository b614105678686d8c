"""The tables ``teton fit`` prints: fitted values per stack, per-run predictions, ratios, residual
trends, candidate sets, and a trace's kernel classes."""

from __future__ import annotations

from teton.cli._common import console as output_console

PREDICTIONS = (("burst", "burst"), ("in_sample", "in-sample"), ("loo", "leave-one-out"), ("loso", "leave-one-stack-out"))


def print_fit(d: dict, trends: list[dict], catalog: list[dict] | None, wrote_catalog: bool = False) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = output_console()
    t = Table(title="in-situ values per (software stack, GPU family): posterior mode under the across-stack prior",
              title_justify="left")
    for col in ("parameter", "runs", "value", "95 % interval", "prior", "pinned down"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    if catalog is not None:
        t.add_column("catalog", justify="right")
    by_name = {c["name"]: c for c in catalog or []}
    for p in d["parameters"]:
        lo, hi = p["ci95"]
        cells = [escape(p["name"]), str(p["runs"]), f"{p['value']:.4g}", f"{lo:.4g} - {hi:.4g}", f"{p['prior']:.4g}",
                 _pinned(p)]
        if catalog is not None:
            c = by_name.get(p["name"])
            cells.append("-" if not c or c["catalog"] is None else f"{c['catalog']:.4g}" + ("" if c["same"] else " (differs)"))
        t.add_row(*cells)
    console.print(t)
    kinds = [(w, label) for w, label in PREDICTIONS if d["rows"] and f"{w}_s" in d["rows"][0]]
    r = Table(title="per run: measured vs predicted step time", title_justify="left")
    r.add_column("run", overflow="fold")
    r.add_column("measured", justify="right")
    for _, label in kinds:
        r.add_column(label, justify="right")
        r.add_column("error", justify="right")
    for row in d["rows"]:
        r.add_row(escape(row["name"]), f"{row['measured_step_time_s']:.4g} s",
                  *(x for w, _ in kinds for x in (f"{row[f'{w}_s']:.4g} s", f"{row[f'error_{w}'] * 100:+.1f} %")))
    console.print(r)
    if d.get("ratios"):
        _print_ratios(d["ratios"], console)
    s = d["summary"]
    console.print("mean / max absolute error: " + "; ".join(
        f"{label} {s[w]['mean_abs_error'] * 100:.1f} % / {s[w]['max_abs_error'] * 100:.1f} %"
        for w, label in kinds))
    seen = ("calibrated band (leave-one-out, each layout family once; teton run adds each job's parameter "
            "uncertainty)" if d.get("identifiability") else "seen-stack band (leave-one-out)")
    for w, label in (("loo", seen), ("loso", "unseen-stack band (leave-one-stack-out)")):
        if "band" in s.get(w, {}):
            lo, hi = s[w]["band"]
            console.print(f"{_band_label(label, s[w])}: {lo * 100:+.1f} .. {hi * 100:+.1f} %, {_coverage(s[w])}")
    if d.get("identifiability"):
        _print_identifiability(d["identifiability"], console)
    if trends:
        _print_trends(trends, console)
    for n in d["notes"]:
        console.print(f"  note: {escape(n)}")
    if catalog is not None and not all(c["same"] for c in catalog) and not wrote_catalog:
        console.print("[yellow]the catalog's in-situ values differ from this fit: "
                      "`teton fit --write-catalog` regenerates them[/yellow]")


def _band_label(label: str, summary: dict) -> str:
    if summary.get("band_source") == "catalog":
        return ("calibrated band (one configuration, no run to hold out: the catalog's band for a seen stack on "
                "this GPU family; teton run adds each job's parameter uncertainty)")
    return label


def _coverage(summary: dict) -> str:
    """Nested coverage in percent, or why there is none (a band of one configuration or stack)."""
    import math

    c = summary.get("coverage")
    if c is None or not math.isfinite(c):
        return "nested coverage not measurable (it needs two configurations or stacks)"
    return f"nested coverage {c * 100:.0f} %"


def _pinned(p: dict) -> str:
    if p["identified"]:
        return "yes"
    if "held" not in p:  # the bundled fit: a per-stack value near the across-stack prior
        return "no (near the prior)"
    return "[yellow]no: held at the prior[/yellow]" if p["held"] else "[yellow]no: fitted anyway[/yellow]"


def _print_identifiability(cells: list[dict], console) -> None:
    """What each cell's runs cannot tell: the parameters not identified and why, the correlation
    of the parameters' effects across the runs, the condition number."""
    from rich.markup import escape

    for c in cells:
        keys = c["keys"]
        pairs = [f"{keys[i]} / {keys[j]} {c['effect_correlation'][i][j]:+.3f}"
                 for i in range(len(keys)) for j in range(i + 1, len(keys))]
        cond = c["condition_number"]
        console.print(f"what the runs of {escape(c['stack'])}/{c['family']} can tell: {c['runs']} run(s), "
                      f"{len(c['layout_families'])} layout famil{'y' if len(c['layout_families']) == 1 else 'ies'}; "
                      f"fitted: {', '.join(c['fitted']) or 'none'}"
                      + (f"; correlation of effects across runs {'; '.join(pairs)}; condition number "
                         f"{'inf' if cond == float('inf') else f'{cond:.3g}'}" if pairs else ""))
        for v in c["parameters"]:
            if not v["identified"]:
                console.print(f"  [yellow]not identified[/yellow]: {v['key']}: {escape(v['reason'])}")


def _print_ratios(ratios: list[dict], console) -> None:
    from rich.markup import escape
    from rich.table import Table

    q = Table(title="step-time ratios between runs", title_justify="left")
    for col in ("ratio", "measured", "in-sample error", "leave-pair-out error", "band"):
        q.add_column(col, justify="left" if col == "ratio" else "right", overflow="fold")
    for x in ratios:
        ok = abs(x["error_leave_pair_out"]) <= x["tolerance"]
        q.add_row(escape(x["label"]), f"{x['measured']:.4f}", f"{x['error_in_sample'] * 100:+.2f} %",
                  f"{x['error_leave_pair_out'] * 100:+.2f} %" + ("" if ok else " [red](out)[/red]"),
                  f"±{x['tolerance'] * 100:.0f} %")
    console.print(q)


def _print_trends(trends: list[dict], console) -> None:
    from rich.table import Table

    tt = Table(title="in-sample residuals vs layout features (centred within each stack and GPU family)",
               title_justify="left")
    for col in ("feature", "effect over its range", "r", "trend"):
        tt.add_column(col, justify="left" if col == "feature" else "right")
    for x in trends:
        tt.add_row(x["feature"], f"{x['effect'] * 100:+.1f} %", f"{x['r']:+.2f}",
                   "[red]yes[/red]" if x["trend"] else (x["note"] or "no"))
    console.print(tt)


def print_candidates(rows: list[dict]) -> None:
    from rich.table import Table

    t = Table(title="candidate in-situ parameter sets on these runs", title_justify="left")
    for col in ("parameters", "pinned down", "in-sample mean", "LOO mean / max", "LOSO mean / max",
                "unseen coverage", "ratios ok (in / LPO)", "residual trends"):
        t.add_column(col, justify="left" if col in ("parameters", "residual trends") else "right", overflow="fold")
    for r in rows:
        t.add_row(", ".join(r["parameters"]), f"{r['identified']} / {r['values']}", f"{r['in_sample_mean_abs'] * 100:.2f} %",
                  f"{r['loo_mean_abs'] * 100:.2f} / {r['loo_max_abs'] * 100:.1f} %",
                  f"{r['loso_mean_abs'] * 100:.2f} / {r['loso_max_abs'] * 100:.1f} %",
                  f"{r['coverage_unseen'] * 100:.0f} %",
                  f"{r['ratios_within_in_sample']} / {r['ratios_within_leave_pair_out']} of {r['ratios']}"
                  if r["ratios"] else "-", ", ".join(r["trends"]) or "none")
    output_console().print(t)


def print_trace(path, cal, d: dict, written: str | None) -> None:
    from rich.table import Table

    console = output_console()
    t = Table(title=f"{path.name}: kernels by class ({cal.gpu})", title_justify="left")
    for col in ("class", "kernels", "kernel time", "burst catalog / measured"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for name, c in d["classes"].items():
        if name == "total":
            continue
        ratio = d["achieved"].get(name, {}).get("ratio")
        t.add_row(name, f"{c['kernels']:,}", f"{c['time_s'] * 1e3:.2f} ms", f"{ratio:.3f}" if ratio else "-")
    total = d["classes"].get("total", {})
    if total:
        t.add_row("GPU busy", "", f"{total['busy_s'] * 1e3:.2f} ms of {total['span_s'] * 1e3:.2f} ms",
                  f"{total['busy_fraction'] * 100:.0f} % busy")
    console.print(t)
    for k, v in cal.in_situ.items():
        console.print(f"{k} = {v:.4g}")
    for n in cal.notes:
        console.print(f"  note: {n}")
    if written:
        console.print(f"wrote {written}")
