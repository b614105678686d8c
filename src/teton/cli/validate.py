"""``teton validate``: every bundled validation case, published vs predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.progress import progress_bar


def register(app: typer.Typer) -> None:
    @app.command()
    def validate(
        json_: JsonFlag = False,
        case: Annotated[list[str] | None, typer.Option("--case", help="only these cases (repeatable)")] = None,
        calibration: Annotated[Path | None, typer.Option(
            "--calibration", help="measured efficiencies (JSON from calibrate_hopper.py or teton calibrate)")] = None,
    ) -> None:
        """Compare predictions with published measurements; relative error per row and overall."""
        from teton.report.validation import all_cases, run_validation

        efficiency = None
        if calibration is not None:
            from teton.cli.calibrate import calibrated_cluster, read_overrides

            efficiency = calibrated_cluster("meta-roce-24k", read_overrides(calibration)[0])["efficiency"]

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
                               efficiency)
        if json_:
            print_json(d)
            return
        from rich.table import Table

        console = output_console()
        by_case: dict[str, list[dict]] = {}
        for r in d["rows"]:
            by_case.setdefault(r["case"], []).append(r)
        for case_name, rows in by_case.items():
            t = Table(title=case_name, title_justify="left", title_style="bold")
            t.add_column("metric", overflow="fold")
            for col in ("published", "predicted", "error"):
                t.add_column(col, justify="right")
            t.add_column("band")
            t.add_column("ok")
            for r in rows:
                ok = "[green]yes[/green]" if r["within_tolerance"] else "[red]no[/red]"
                band = {"lower_bound": "≥ published", "upper_bound": "≤ published",
                        "check": f"±{r['tolerance'] * 100:.0f} % (check)"}.get(
                    r.get("kind", "value"), f"±{r['tolerance'] * 100:.0f} %")
                t.add_row(r["metric"], f"{r['published']:.4g}", f"{r['predicted']:.4g}",
                          f"{r['error'] * 100:+.1f} %", band, ok)
            console.print(t)
            for n in dict.fromkeys(r["note"] for r in rows if r["note"]):
                console.print(f"  note: {n}")
        console.print(f"mean absolute error of the point values {d['mean_abs_error'] * 100:.1f} %; "
                      f"{d['within_tolerance']}/{d['total']} rows within their band")
        ratios = d["diagnostics"].get("llama3-405b-table4.implied_sustained_ratio")
        if ratios:
            console.print("diagnostic (not applied): Table 4 rows would match with every tensor-core kernel at "
                          + " / ".join(f"{r:.2f}" for r in ratios) + " of its burst-microbenchmark throughput "
                          "(cluster.efficiency.sustained_ratio); measure it with benchmarks/device/calibrate_hopper.py")
