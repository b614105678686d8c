"""``teton validate``: every bundled validation case, published vs predicted; the fit's per-stack
errors, bands and coverage; ``--by stack`` the few-shot protocol."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.progress import progress_bar

MAX_NOTES = 6  # distinct row notes printed under a case's table (every row's in --json)
PREDICTION_COLUMNS = (("burst", "burst"), ("in_sample", "in-sample"), ("loo", "leave-one-out"),
                      ("loso", "leave-one-stack-out"))


def _band(r: dict) -> str:
    return {"lower_bound": "≥ published", "upper_bound": "≤ published",
            "check": f"±{r['tolerance'] * 100:.0f} % (check)"}.get(r.get("kind", "value"), f"±{r['tolerance'] * 100:.0f} %")


def _ok(r: dict) -> str:
    return "[green]yes[/green]" if r["within_tolerance"] else "[red]no[/red]"


def _fit_table(case_name: str, rows: list[dict]):
    """A training-set case: burst, in-sample, leave-one-out and leave-one-stack-out predictions in
    their own columns, judged on leave-one-out."""
    from rich.table import Table

    t = Table(title=case_name, title_justify="left", title_style="bold")
    t.add_column("metric", overflow="fold")
    t.add_column("stack", overflow="fold")
    t.add_column("published", justify="right")
    cols = [(w, label) for w, label in PREDICTION_COLUMNS if any(r.get(w) is not None for r in rows)]
    for _, label in cols:
        t.add_column(label, justify="right")
        t.add_column("error", justify="right")
    t.add_column("band")
    t.add_column("ok (LOO)")
    for r in rows:
        cells = [r["metric"], r.get("stack", ""), f"{r['published']:.4g}"]
        for w, _ in cols:
            v = r.get(w)
            cells += ["-", "-"] if v is None else [f"{v:.4g}", f"{r[f'error_{w}'] * 100:+.1f} %"]
        t.add_row(*cells, _band(r), _ok(r))
    return t


def _plain_table(case_name: str, rows: list[dict]):
    from rich.table import Table

    t = Table(title=case_name, title_justify="left", title_style="bold")
    t.add_column("metric", overflow="fold")
    for col in ("published", "predicted", "error"):
        t.add_column(col, justify="right")
    t.add_column("band")
    t.add_column("ok")
    for r in rows:
        t.add_row(r["metric"], f"{r['published']:.4g}", f"{r['predicted']:.4g}", f"{r['error'] * 100:+.1f} %",
                  _band(r), _ok(r))
    return t


def _stack_table(stacks: list[dict]):
    from rich.table import Table

    t = Table(title="per software stack and GPU family (in-situ values fitted per stack, with an across-stack prior)",
              title_justify="left", title_style="bold")
    for col in ("stack", "GPU", "rows", "tensor core", "collective", "LOO mean / max", "LOSO mean / max",
                "in band (seen / unseen)"):
        t.add_column(col, justify="left" if col in ("stack", "GPU") else "right")
    for s in stacks:
        v = s["values"]
        t.add_row(s["stack"], s["family"], str(s["rows"]), f"{v.get('tensor_core_in_situ', float('nan')):.3f}",
                  f"{v.get('collective_in_situ', float('nan')):.3f}",
                  f"{s['loo_mean_abs'] * 100:.1f} / {s['loo_max_abs'] * 100:.1f} %",
                  f"{s['loso_mean_abs'] * 100:.1f} / {s['loso_max_abs'] * 100:.1f} %",
                  f"{s['inside_seen_band'] * 100:.0f} / {s['inside_unseen_band'] * 100:.0f} %")
    return t


def _not_judged(rows: list[dict], console) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"training set 2: {len(rows)} rows loaded but not judged (teton validate --json lists each)",
              title_justify="left", title_style="bold")
    for col in ("status", "rows", "reason"):
        t.add_column(col, justify="right" if col == "rows" else "left", overflow="fold")
    for (status, reason), n in Counter((r["status"], r["reason"]) for r in rows).most_common():
        t.add_row(status, str(n), escape(reason))
    console.print(t)


def _few_shot_table(rows: list[dict]):
    from rich.table import Table

    t = Table(title="few-shot: a stack fitted on k of its configurations (prior: the fit without the stack); "
                    "mean / max absolute error on its other configurations", title_justify="left", title_style="bold")
    for col in ("stack", "configs", "k = 0 (prior)", "k = 1", "k = 2", "k = 3"):
        t.add_column(col, justify="left" if col == "stack" else "right")
    for r in rows:
        t.add_row(r["stack"], str(r["configs"]), *(f"{r[f'k{k}_mean_abs'] * 100:.1f} / {r[f'k{k}_max_abs'] * 100:.1f} %"
                                                  for k in range(4)))
    if rows:  # each stack counted once, as the target reads it
        t.add_row("mean of the stacks", "", *(f"{sum(r[f'k{k}_mean_abs'] for r in rows) / len(rows) * 100:.1f} %"
                                              for k in range(4)), style="bold")
    return t


def _moe_table(moe: dict):
    from rich.table import Table

    lo, hi = moe["band"]
    t = Table(title=f"MoE rows by model (not in the fit: predicted with the dense rows' values); step-time error, "
                    f"and the share inside the band of the other models ({lo * 100:+.1f} .. {hi * 100:+.1f} % overall)",
              title_justify="left", title_style="bold")
    for col in ("model", "rows", "mean error", "mean / max absolute", "in band (nested)"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for m in moe["models"]:
        t.add_row(m["model"], str(m["rows"]), f"{m['mean_error'] * 100:+.1f} %",
                  f"{m['mean_abs_error'] * 100:.1f} / {m['max_abs_error'] * 100:.1f} %", f"{m['inside_band'] * 100:.0f} %")
    return t


def _weak_scaling(d: dict, console) -> None:
    """The weak-scaling series: published vs teton's step-time ratio, largest / smallest GPU count."""
    if not d["series"]:  # a table of headers only says less than its note
        console.print(f"weak scaling: no series. {d['note']}")
        return
    _scaling_table(d, console, "weak scaling: step time at the largest / the smallest GPU count (the same work "
                   "per GPU)")


def _strong_scaling(d: dict, console) -> None:
    """The strong-scaling series: ideal, published and teton's step-time ratio, largest / smallest
    GPU count at the same global batch."""
    _scaling_table(d, console, "strong scaling: step time at the largest / the smallest GPU count (the same "
                   "global batch)", ideal=True)


def _scaling_table(d: dict, console, title: str, ideal: bool = False) -> None:
    """One scaling table (a row per series: GPU counts, [ideal,] published, teton, difference) and its note."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold")
    cols = ("series", "GPUs", *(("ideal",) if ideal else ()), "published", "teton", "difference")
    for col in cols:
        t.add_column(col, justify="left" if col == "series" else "right")
    for s in d["series"]:
        t.add_row(s["series"], " / ".join(f"{g:,}" for g in s["gpus"]),
                  *((f"{s['ideal_ratio']:.3f}",) if ideal else ()), f"{s['published_ratio']:.3f}",
                  f"{s['teton_ratio']:.3f}", f"{s['difference'] * 100:+.1f} pts")
    console.print(t)
    console.print(f"  note: {d['note']}")


def _summary_lines(d: dict, console) -> None:
    from rich.markup import escape

    ts = d.get("training_set")
    if ts:
        console.print(
            f"training sets ({ts['rows']} step-time rows): mean / max absolute error burst "
            f"{ts['mean_abs_error_burst'] * 100:.1f} / {ts['max_abs_error_burst'] * 100:.1f} %, in-sample "
            f"{ts['mean_abs_error_in_sample'] * 100:.1f} / {ts['max_abs_error_in_sample'] * 100:.1f} %, leave-one-out "
            f"{ts['mean_abs_error_loo'] * 100:.1f} / {ts['max_abs_error_loo'] * 100:.1f} %, leave-one-stack-out "
            f"{ts['mean_abs_error_loso'] * 100:.1f} / {ts['max_abs_error_loso'] * 100:.1f} %")
        seen, unseen = ts["band_seen"], ts["band_unseen"]
        console.print(
            f"bands (p10-p90 of held-out errors): seen stack {seen[0] * 100:+.1f} .. {seen[1] * 100:+.1f} %, "
            f"covering {ts['coverage_seen'] * 100:.0f} % of rows (nested); unseen stack {unseen[0] * 100:+.1f} .. "
            f"{unseen[1] * 100:+.1f} %, covering {ts['coverage_unseen'] * 100:.0f} % (nested leave-one-stack-out)")
        for kind, what in (("seen", "seen-stack band by GPU family, the one a job gets"),
                           ("unseen", "unseen-stack band by GPU family (the pooled one, widened where the family's "
                                      "stacks scatter further)")):
            if ts.get(f"band_{kind}_by_family"):
                console.print(_family_bands_line(what, ts[f"band_{kind}_by_family"], ts[f"coverage_{kind}_by_family"]))
        for n in d.get("notes", [])[:3]:
            console.print(f"  note: {escape(n)}")
        hidden = len(d.get("notes", [])) - 3
        if hidden > 0:
            console.print(f"  ({hidden} more notes in --json)")
    moe = d.get("moe")
    if moe:
        console.print(
            f"MoE rows ({moe['rows']}, not in the fit): mean / max absolute step-time error "
            f"{moe['mean_abs_error'] * 100:.1f} / {moe['max_abs_error'] * 100:.1f} %; an MoE job's band "
            f"{moe['band'][0] * 100:+.1f} .. {moe['band'][1] * 100:+.1f} % (each model once), covering "
            f"{moe['coverage'] * 100:.0f} % (nested leave-one-model-out)")
    console.print(f"mean absolute error of the point values {d['mean_abs_error'] * 100:.1f} % (training-set rows "
                  f"judged leave-one-out); {d['within_tolerance']}/{d['total']} rows within their band")


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        json_: JsonFlag = False,
        case: Annotated[list[str] | None, typer.Option("--case", help="only these cases (repeatable)")] = None,
        calibration: Annotated[Path | None, typer.Option(
            "--calibration", help="measured efficiencies (JSON from calibrate_hopper.py or teton calibrate)")] = None,
        by: Annotated[str | None, typer.Option(
            "--by", help="stack: the few-shot protocol per software stack (fitted on 1, 2, 3 of its runs)")] = None,
    ) -> None:
        """Compare predictions with published measurements, held out and not.

        Burst, in-sample, leave-one-out and leave-one-stack-out errors, the per-stack summary, the
        bands and their coverage."""
        from teton.errors import SpecError
        from teton.validation.cases import all_cases, run_validation

        if by is not None and by != "stack":
            raise SpecError("--by", by, "stack (the few-shot protocol per software stack)")
        overrides = None
        if calibration is not None:
            from teton.validation.calibration import calibrated_cluster, read_overrides

            overrides = calibrated_cluster("meta-roce-24k", read_overrides(calibration)[0])["efficiency"]
        if case:
            from teton.errors import closest

            cases = all_cases()
            for c in case:
                if c not in cases:
                    raise SpecError("--case", c, closest(c, cases))
        from teton.cli._common import console as output_console

        with progress_bar() as bar:
            task = bar.add_task("validating", total=None)

            def progress(what: str, i: int, n: int) -> None:
                bar.update(task, description=what, completed=i, total=n)

            d = run_validation(case, progress, overrides)
            if by == "stack":
                from teton.validation.cases import training_fit
                from teton.validation.few_shot import few_shot

                d["few_shot"] = few_shot(training_fit(tuple(sorted(overrides.items())) if overrides else None),
                                         lambda i, n: progress("few-shot refits", i, n))
        if json_:
            print_json(d)
            return
        _print(d, output_console())


def _print(d: dict, console) -> None:
    from rich.markup import escape

    by_case: dict[str, list[dict]] = {}
    for r in d["rows"]:
        by_case.setdefault(r["case"], []).append(r)
    for case_name, rows in by_case.items():
        rows = [{**r, "metric": escape(r["metric"])} for r in rows]
        fitted = all(r.get("loo") is not None for r in rows)
        console.print(_fit_table(case_name, rows) if fitted else _plain_table(case_name, rows))
        notes = list(dict.fromkeys(r["note"] for r in rows if r["note"]))
        for n in notes[:MAX_NOTES]:
            console.print(f"  note: {n}")
        if len(notes) > MAX_NOTES:
            console.print(f"  ({len(notes) - MAX_NOTES} more row notes, each row's assumptions: --json)")
    if d.get("stacks"):
        console.print(_stack_table(d["stacks"]))
    if d.get("not_judged"):
        _not_judged(d["not_judged"], console)
    if d.get("moe"):
        console.print(_moe_table(d["moe"]))
    if d.get("few_shot"):
        console.print(_few_shot_table(d["few_shot"]))
    if d.get("weak_scaling"):
        _weak_scaling(d["weak_scaling"], console)
    if d.get("strong_scaling", {}).get("series"):
        _strong_scaling(d["strong_scaling"], console)
    _summary_lines(d, console)


def _family_bands_line(what: str, bands_: dict, coverage: dict) -> str:
    """One line of per-family bands with each one's nested coverage."""
    parts = ", ".join(f"{f} {b[0] * 100:+.1f} .. {b[1] * 100:+.1f} % ({coverage.get(f, float('nan')) * 100:.0f} %)"
                      for f, b in bands_.items())
    return f"{what} (covering, nested): {parts}; {coverage['all'] * 100:.0f} % of all rows"
