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


def _for_out(out: Path, build, *args):
    """``build(*args)``, the cluster file's contents; its refusal (a ``SpecError`` on ``out``) named
    as the flag and file it refuses."""
    try:
        return build(*args)
    except SpecError as err:
        if err.field != "out":
            raise
        raise SpecError("--cluster-out", str(out), err.allowed) from None


def _warn(warnings: list[str]) -> None:
    """One ``warning:`` line on stderr per warning."""
    import sys

    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


def _trace(path: Path, gpu: str | None, out: Path | None, cluster: str | None, json_: bool) -> None:
    from teton.validation.kineto import read_kineto
    from teton.validation.trace import calibrate_from_trace

    cal = calibrate_from_trace(read_kineto(path), gpu)
    d = cal.as_dict()
    written, warnings = None, []
    if out is not None:
        from teton.validation.calibration import trace_calibrated_cluster

        if not cal.in_situ:
            raise SpecError("--cluster-out", str(out), "nothing to write: the trace gave no in-situ estimate")
        mapping, header, warnings = _for_out(out, trace_calibrated_cluster, cal, cluster, path.name)
        _write_yaml(out, mapping, header)
        written = str(out)
    _warn(warnings)
    if json_:
        print_json({**d, "out": written, "warnings": warnings})
        return
    from teton.cli._fit_tables import print_trace

    print_trace(path, cal, d, written)


def register(app: typer.Typer) -> None:
    @app.command()
    def fit(
        runs: Annotated[Path | None, typer.Argument(
            metavar="RUNS", help="measured runs (YAML/JSON list or CSV); default: the bundled training sets")] = None,
        out: Annotated[Path | None, typer.Option("--cluster-out", help="write the calibrated cluster spec "
                                                 "(YAML) here")] = None,
        json_: JsonFlag = False,
        params: Annotated[str | None, typer.Option(
            "--params", help="in-situ parameters to fit, comma-separated (default: the kept ones)")] = None,
        stack: Annotated[str | None, typer.Option(
            "--stack", help="the software stack RUNS are (default: each run's own software:), fitted against the "
                            "catalog's across-stack prior")] = None,
        fit_all: Annotated[bool, typer.Option(
            "--fit-all", help="fit every parameter, also those RUNS do not identify (default: hold them at the "
                              "prior and say why)")] = False,
        candidates: Annotated[bool, typer.Option(
            "--candidates", help="fit every candidate parameter set and compare (slow)")] = False,
        trace: Annotated[Path | None, typer.Option(
            "--trace", help="calibrate from a PyTorch profiler (Kineto) trace of one rank")] = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="the trace's GPU (default: from the trace)")] = None,
        cluster: Annotated[str | None, typer.Option(
            "--cluster", help="preset the --trace cluster file is based on (default: one with the trace's GPU)")] = None,
        write_catalog: Annotated[bool, typer.Option(
            "--write-catalog", help="regenerate the catalog's in-situ defaults from the bundled training sets")] = False,
    ) -> None:
        """Fit in-situ parameters per software stack to measured runs, or read a profiler trace.

        Reports in-sample, leave-one-out and (bundled) leave-one-stack-out errors."""
        if trace is not None:
            if runs is not None:
                raise SpecError("--trace", str(trace), "give measured runs or a trace, not both")
            _trace(trace, gpu, out, cluster, json_)
            return
        from teton.validation.fit import KEPT

        keys = _parse_params(params)
        bundled = runs is None
        if write_catalog and (not bundled or keys != KEPT or stack):
            raise SpecError("--write-catalog", True, "regenerates the catalog from the bundled training sets with "
                            "the kept parameters only: give no RUNS, --params or --stack")
        if fit_all and bundled:
            raise SpecError("--fit-all", True, "applies to your RUNS (the bundled fit keeps every parameter under "
                            "its across-stack prior): give a runs file")
        if stack is not None and (bundled or not stack.strip()):
            raise SpecError("--stack", stack, "names the stack of your RUNS (give a runs file); the bundled sets "
                            "carry their own")
        measured, pairs = _measured_runs(runs)
        if candidates:
            _candidates(measured, pairs, json_)
        else:
            _fit(measured, pairs, keys, bundled, out, write_catalog, json_, stack, fit_all)


def _measured_runs(runs: Path | None) -> tuple[tuple, list]:
    """(runs to fit, step-time ratio pairs): the bundled training sets', or RUNS' own (no pairs)."""
    from teton.validation.cases import all_ratio_pairs, all_training_runs
    from teton.validation.runs import load_runs

    if runs is None:
        return all_training_runs(), all_ratio_pairs()
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
    from teton.cli._fit_tables import print_candidates

    print_candidates(rows)


def _fit(measured, pairs, keys: tuple[str, ...], bundled: bool, out: Path | None, write_catalog: bool,
         json_: bool, stack: str | None = None, fit_all: bool = False) -> None:
    """Fit ``keys`` to the runs (:func:`teton.validation.fit.fit_runs`; a user's against the
    catalog's prior, holding what the runs do not identify unless ``fit_all``), write the catalog (``--write-catalog``) or a calibrated cluster file
    (``--cluster-out``), and print the fit."""
    from teton.progress import progress_bar
    from teton.validation.calibration import fitted_cluster
    from teton.validation.catalog import catalog_prior, compare_with_catalog, write_catalog_file
    from teton.validation.fit import KEPT, fit_runs
    from teton.validation.residuals import ratio_errors, residual_trends

    prior = None if bundled else catalog_prior(keys, {r.family for r in measured})
    with progress_bar() as bar:
        task = bar.add_task("surrogates and held-out refits", total=None)
        result = fit_runs(measured, keys, progress=lambda i, n: bar.update(task, completed=i, total=n),
                          pairs=tuple((a, b) for _, a, b, _ in pairs), prior=prior, stack=stack, fit_all=fit_all)
    d = result.as_dict()
    d["ratios"] = ratio_errors(result, pairs)
    trends = residual_trends(result)
    catalog = compare_with_catalog(result) if bundled and keys == KEPT else None
    written = None
    if write_catalog:
        written = write_catalog_file(result)
    elif out is not None:
        mapping, header = _for_out(out, fitted_cluster, result, measured)
        _write_yaml(out, mapping, header)
        written = str(out)
    if json_:
        print_json({**d, "residual_trends": trends, "catalog": catalog, "out": written})
        return
    from teton.cli._fit_tables import print_fit

    print_fit(d, trends, catalog, write_catalog)
    if written:
        from teton.cli._common import console as output_console

        where = Path(written).resolve()
        hint = "" if write_catalog else f": use it as `cluster: {where}` or `--set cluster={where}`"
        output_console().print(f"wrote {written}{hint}")
