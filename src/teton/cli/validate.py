"""``teton validate``: every bundled validation case, published vs predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.progress import progress_bar


def _band(r: dict) -> str:
    return {"lower_bound": "≥ published", "upper_bound": "≤ published",
            "check": f"±{r['tolerance'] * 100:.0f} % (check)"}.get(r.get("kind", "value"), f"±{r['tolerance'] * 100:.0f} %")


def _ok(r: dict) -> str:
    return "[green]yes[/green]" if r["within_tolerance"] else "[red]no[/red]"


def _fit_table(case_name: str, rows: list[dict]):
    """A training-set case: burst, in-sample and leave-one-out predictions in their own columns."""
    from rich.table import Table

    t = Table(title=case_name, title_justify="left", title_style="bold")
    t.add_column("metric", overflow="fold")
    t.add_column("published", justify="right")
    for col in ("burst", "in-sample", "leave-one-out"):
        t.add_column(col, justify="right")
        t.add_column("error", justify="right")
    t.add_column("band")
    t.add_column("ok (LOO)")
    for r in rows:
        cells = [r["metric"], f"{r['published']:.4g}"]
        for w in ("burst", "in_sample", "loo"):
            cells += [f"{r[w]:.4g}", f"{r[f'error_{w}'] * 100:+.1f} %"]
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


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        json_: JsonFlag = False,
        case: Annotated[list[str] | None, typer.Option("--case", help="only these cases (repeatable)")] = None,
        calibration: Annotated[Path | None, typer.Option(
            "--calibration", help="measured efficiencies (JSON from calibrate_hopper.py or teton calibrate)")] = None,
    ) -> None:
        """Compare predictions with published measurements: burst, in-sample and leave-one-out errors."""
        from teton.validation.cases import all_cases, run_validation

        overrides = None
        if calibration is not None:
            from teton.validation.calibration import calibrated_cluster, read_overrides

            overrides = calibrated_cluster("meta-roce-24k", read_overrides(calibration)[0])["efficiency"]

        if case:
            from teton.errors import SpecError, closest

            cases = all_cases()
            for c in case:
                if c not in cases:
                    raise SpecError("--case", c, closest(c, cases))
        from teton.cli._common import console as output_console

        with progress_bar() as bar:
            task = bar.add_task("validating", total=None)
            d = run_validation(case, lambda name, i, n: bar.update(task, description=name, completed=i, total=n),
                               overrides)
        if json_:
            print_json(d)
            return
        console = output_console()
        by_case: dict[str, list[dict]] = {}
        for r in d["rows"]:
            by_case.setdefault(r["case"], []).append(r)
        from rich.markup import escape

        for case_name, rows in by_case.items():
            rows = [{**r, "metric": escape(r["metric"])} for r in rows]
            fitted = all(r.get("loo") is not None for r in rows)
            console.print(_fit_table(case_name, rows) if fitted else _plain_table(case_name, rows))
            for n in dict.fromkeys(r["note"] for r in rows if r["note"]):
                console.print(f"  note: {n}")
        ts = d.get("training_set")
        if ts:
            fit = escape(", ".join(f"{k} = {v:.4g}" for k, v in d["fit"].items()))
            console.print(f"training set ({ts['rows']} step-time rows): mean absolute error burst "
                          f"{ts['mean_abs_error_burst'] * 100:.1f} %, in-sample {ts['mean_abs_error_in_sample'] * 100:.1f} %, "
                          f"leave-one-out {ts['mean_abs_error_loo'] * 100:.1f} %; fitted {fit}")
        console.print(f"mean absolute error of the point values {d['mean_abs_error'] * 100:.1f} % (training-set rows "
                      f"judged leave-one-out); {d['within_tolerance']}/{d['total']} rows within their band")
