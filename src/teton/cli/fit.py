"""``teton fit``: fit the in-situ parameters to measured runs, or read them off a profiler trace.

``teton fit`` (no argument) fits the bundled training set and compares with the catalog's values;
``teton fit RUNS --cluster-out cluster.yaml`` calibrates a cluster from a user's own measured runs;
``teton fit --trace TRACE.json.gz --cluster-out cluster.yaml`` from a PyTorch profiler trace of one rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.errors import SpecError


def _parse_params(text: str | None) -> tuple[str, ...]:
    from teton.validation.fit import KEPT

    if not text:
        return KEPT
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _write_yaml(path: Path, mapping: dict, header: str) -> None:
    import yaml

    from teton.atomic import write_text

    try:
        write_text(path, header + "\n" + yaml.safe_dump(mapping, sort_keys=False))
    except OSError as err:
        raise SpecError("--cluster-out", str(path), f"cannot be written ({err.strerror})") from None


def _print_fit(d: dict, trends: list[dict], catalog: list[dict] | None, wrote_catalog: bool = False) -> None:
    from rich.markup import escape
    from rich.table import Table

    from teton.cli._common import console as output_console

    console = output_console()
    t = Table(title="in-situ parameters (least squares on log step time, bounded)", title_justify="left")
    for col in ("parameter", "value", "95 % interval", "bounds"):
        t.add_column(col, justify="left" if col == "parameter" else "right")
    if catalog is not None:
        t.add_column("catalog", justify="right")
    for i, p in enumerate(d["parameters"]):
        lo, hi = p["ci95"]
        ci = "not identified" if not p["identified"] else f"{lo:.4g} - {hi:.4g}"
        cells = [escape(p["name"]), f"{p['value']:.4g}", ci, f"{p['bounds'][0]:g} - {p['bounds'][1]:g}"]
        if catalog is not None:
            c = catalog[i]
            cells.append("-" if c["catalog"] is None else f"{c['catalog']:.4g}" + ("" if c["same"] else " (differs)"))
        t.add_row(*cells)
    console.print(t)
    r = Table(title="per run: measured vs predicted step time", title_justify="left")
    for col in ("run", "measured", "burst", "error", "in-sample", "error", "leave-one-out", "error"):
        r.add_column(col, justify="left" if col == "run" else "right", overflow="fold")
    for row in d["rows"]:
        r.add_row(escape(row["name"]), f"{row['measured_step_time_s']:.4g} s",
                  *(x for w in ("burst", "in_sample", "loo")
                    for x in (f"{row[f'{w}_s']:.4g} s", f"{row[f'error_{w}'] * 100:+.1f} %")))
    console.print(r)
    if d.get("ratios"):
        q = Table(title="step-time ratios between runs", title_justify="left")
        for col in ("ratio", "measured", "in-sample error", "leave-pair-out error", "band"):
            q.add_column(col, justify="left" if col == "ratio" else "right", overflow="fold")
        for x in d["ratios"]:
            ok = abs(x["error_leave_pair_out"]) <= x["tolerance"]
            q.add_row(escape(x["label"]), f"{x['measured']:.4f}", f"{x['error_in_sample'] * 100:+.2f} %",
                      f"{x['error_leave_pair_out'] * 100:+.2f} %" + ("" if ok else " [red](out)[/red]"),
                      f"±{x['tolerance'] * 100:.0f} %")
        console.print(q)
    s = d["summary"]
    console.print("mean / max absolute error: " + "; ".join(
        f"{w.replace('_', '-')} {s[w]['mean_abs_error'] * 100:.1f} % / {s[w]['max_abs_error'] * 100:.1f} %"
        for w in ("burst", "in_sample", "loo")))
    if trends:
        tt = Table(title="in-sample residuals vs layout features (centred within each GPU family)",
                   title_justify="left")
        for col in ("feature", "effect over its range", "r", "trend"):
            tt.add_column(col, justify="left" if col == "feature" else "right")
        for x in trends:
            tt.add_row(x["feature"], f"{x['effect'] * 100:+.1f} %", f"{x['r']:+.2f}",
                       "[red]yes[/red]" if x["trend"] else (x["note"] or "no"))
        console.print(tt)
    for n in d["notes"]:
        console.print(f"  note: {escape(n)}")
    if catalog is not None and not all(c["same"] for c in catalog) and not wrote_catalog:
        console.print("[yellow]the catalog's in-situ values differ from this fit: "
                      "`teton fit --write-catalog` regenerates them[/yellow]")


def _trace(path: Path, gpu: str | None, out: Path | None, cluster: str | None, json_: bool) -> None:
    from teton.validation.kineto import read_kineto
    from teton.validation.trace import calibrate_from_trace

    cal = calibrate_from_trace(read_kineto(path), gpu)
    d = cal.as_dict()
    written = None
    if out is not None:
        from teton.validation.calibration import trace_calibrated_cluster

        if not cal.in_situ:
            raise SpecError("--cluster-out", str(out), "nothing to write: the trace gave no in-situ estimate")
        mapping, header = trace_calibrated_cluster(cal, cluster, path.name)
        _write_yaml(out, mapping, header)
        written = str(out)
    if json_:
        print_json({**d, "out": written})
        return
    from rich.table import Table

    from teton.cli._common import console as output_console

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


def register(app: typer.Typer) -> None:
    @app.command()
    def fit(
        runs: Annotated[Path | None, typer.Argument(
            metavar="RUNS", help="measured runs (YAML/JSON list or CSV); default: the bundled training set")] = None,
        out: Annotated[Path | None, typer.Option("--cluster-out", help="write the calibrated cluster spec "
                                                 "(YAML) here")] = None,
        json_: JsonFlag = False,
        params: Annotated[str | None, typer.Option(
            "--params", help="in-situ parameters to fit, comma-separated (default: the kept ones)")] = None,
        candidates: Annotated[bool, typer.Option(
            "--candidates", help="fit every candidate parameter set and compare (slow)")] = False,
        trace: Annotated[Path | None, typer.Option(
            "--trace", help="calibrate from a PyTorch profiler (Kineto) trace of one rank")] = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="the trace's GPU (default: from the trace)")] = None,
        cluster: Annotated[str | None, typer.Option(
            "--cluster", help="preset the --trace cluster file is based on (default: one with the trace's GPU)")] = None,
        write_catalog: Annotated[bool, typer.Option(
            "--write-catalog", help="regenerate the catalog's in-situ defaults from the bundled training set")] = False,
    ) -> None:
        """Fit in-situ parameters to measured runs (or a profiler trace); in-sample and leave-one-out errors."""
        if trace is not None:
            if runs is not None:
                raise SpecError("--trace", str(trace), "give measured runs or a trace, not both")
            _trace(trace, gpu, out, cluster, json_)
            return
        from teton.validation.fit import KEPT

        keys = _parse_params(params)
        bundled = runs is None
        if write_catalog and (not bundled or keys != KEPT):
            raise SpecError("--write-catalog", True, "regenerates the catalog from the bundled training set with "
                            "the kept parameters only: give no RUNS and no --params")
        measured, pairs = _measured_runs(runs)
        if candidates:
            _candidates(measured, pairs, json_)
        else:
            _fit(measured, pairs, keys, bundled, out, write_catalog, json_)


def _measured_runs(runs: Path | None) -> tuple[tuple, list]:
    """(runs to fit, step-time ratio pairs): the bundled training set's, or RUNS' own (no pairs)."""
    from teton.validation.runs import load_runs
    from teton.validation.training import ratio_pairs, training_runs

    if runs is None:
        return training_runs(), ratio_pairs()
    return tuple(load_runs(runs)), []


def _candidates(measured, pairs, json_: bool) -> None:
    """``--candidates``: every candidate parameter set fitted and compared
    (:func:`teton.validation.residuals.compare_candidates`), printed."""
    from teton.progress import progress_bar
    from teton.validation.residuals import compare_candidates

    with progress_bar() as bar:
        task = bar.add_task("fitting candidate sets", total=None)
        rows = compare_candidates(measured, progress=lambda i, n: bar.update(task, completed=i, total=n),
                                  pairs=pairs)
    if json_:
        print_json({"candidates": rows})
        return
    _print_candidates(rows)


def _fit(measured, pairs, keys: tuple[str, ...], bundled: bool, out: Path | None, write_catalog: bool,
         json_: bool) -> None:
    """Fit ``keys`` to the runs (:func:`teton.validation.fit.fit_runs`), write the catalog
    (``--write-catalog``) or a calibrated cluster file (``--cluster-out``), and print the fit."""
    from teton.progress import progress_bar
    from teton.validation.calibration import fitted_cluster
    from teton.validation.fit import KEPT, compare_with_catalog, fit_runs, write_catalog_file
    from teton.validation.residuals import ratio_errors, residual_trends

    with progress_bar() as bar:
        task = bar.add_task("leave-one-out refits", total=None)
        result = fit_runs(measured, keys, progress=lambda i, n: bar.update(task, completed=i, total=n),
                          pairs=tuple((a, b) for _, a, b, _ in pairs))
    d = result.as_dict()
    d["ratios"] = ratio_errors(result, pairs)
    trends = residual_trends(result)
    catalog = compare_with_catalog(result) if bundled and keys == KEPT else None
    written = None
    if write_catalog:
        written = write_catalog_file(result, "bundled (teton.validation.training)")
    elif out is not None:
        mapping, header = fitted_cluster(result, measured)
        _write_yaml(out, mapping, header)
        written = str(out)
    if json_:
        print_json({**d, "residual_trends": trends, "catalog": catalog, "out": written})
        return
    _print_fit(d, trends, catalog, write_catalog)
    if written:
        from teton.cli._common import console as output_console

        where = Path(written).resolve()
        hint = "" if write_catalog else f": use it as `cluster: {where}` or `--set cluster={where}`"
        output_console().print(f"wrote {written}{hint}")


def _print_candidates(rows: list[dict]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from teton.cli._common import console as output_console

    t = Table(title="candidate in-situ parameter sets on these runs", title_justify="left")
    for col in ("parameters", "fitted", "in-sample mean", "LOO mean", "LOO max", "ratios ok (in / LPO)",
                "residual trends"):
        t.add_column(col, justify="left" if col in ("parameters", "fitted", "residual trends") else "right",
                     overflow="fold")
    for r in rows:
        fitted = ", ".join(f"{k} {v:.4g}" + ("" if r["identified"][k] else " (n.i.)") for k, v in r["values"].items())
        t.add_row(", ".join(r["parameters"]), escape(fitted), f"{r['in_sample_mean_abs'] * 100:.2f} %",
                  f"{r['loo_mean_abs'] * 100:.2f} %", f"{r['loo_max_abs'] * 100:.2f} %",
                  f"{r['ratios_within_in_sample']} / {r['ratios_within_leave_pair_out']} of {r['ratios']}"
                  if r["ratios"] else "-", ", ".join(r["trends"]) or "none")
    output_console().print(t)
