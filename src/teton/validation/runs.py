"""Measured training runs: a resolved spec and what was measured on it.

A run is what ``teton fit`` fits to and ``teton validate`` checks: a spec (cluster, model, job)
and its measured step time, or its TFLOPs per GPU (turned into a step time with teton's own
model-FLOP count, 6 N + 12 L s d per token, so the two agree by construction).

A user's runs come from a YAML / JSON file::

    runs:
      - name: llama-8b-256
        spec: specs/llama8b.yaml          # a path (relative to this file) or an inline mapping
        set: [job.gpus=256, job.dp=32]     # optional --set style overrides
        step_time_s: 1.92                  # or tflops_per_gpu: 412

or from a CSV with a ``spec`` column (a path), ``step_time_s`` or ``tflops_per_gpu``, an optional
``name``, and any number of ``section.field`` columns applied as overrides (``job.gpus``,
``job.tp``, ...).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teton.errors import SpecError
from teton.spec import Spec, load_spec

MEASURES = ("step_time_s", "tflops_per_gpu")  # what a user's runs file may give
PUBLISHED_METRICS = (*MEASURES, "tokens_per_s_per_gpu")


@dataclass(frozen=True)
class MeasuredRun:
    """One measured run. ``published`` is the figure as reported (``metric``: step_time_s or
    tflops_per_gpu); ``step_time_s`` is the step time it implies."""

    name: str
    spec: Spec
    metric: str
    published: float
    step_time_s: float
    source: str = ""
    note: str = ""
    tolerance: float = 0.05  # acceptance band of the leave-one-out prediction (relative error)
    # repeat measurements of one configuration share a group: held out together (default: the name)
    group: str = ""

    @property
    def stack(self) -> str:
        """The software stack whose in-situ parameters this run informs."""
        return self.spec.job.software.name

    @property
    def config(self) -> str:
        return self.group or self.name

    @property
    def family(self) -> str:
        """The GPU family whose in-situ parameters this run informs."""
        from teton.hardware.efficiency import family_of

        return family_of(self.spec.cluster.gpu_spec)


def model_flops_per_step(spec: Spec) -> float:
    """Model FLOPs of one step (the MFU / TFLOPs-per-GPU numerator)."""
    from teton.engine.step import model_flops_per_token

    return model_flops_per_token(spec) * spec.job.tokens_per_step


def measured_run(name: str, spec: Spec, metric: str, value: float, **meta: Any) -> MeasuredRun:
    """A run from its published figure: a step time, or TFLOPs/GPU turned into one."""
    if metric not in MEASURES:
        raise SpecError(f"{name}.metric", metric, f"one of {', '.join(MEASURES)}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise SpecError(f"{name}.{metric}", value, "a positive number")
    step = float(value) if metric == "step_time_s" else model_flops_per_step(spec) / (
        spec.job.gpus * float(value) * 1e12)
    return MeasuredRun(name, spec, metric, float(value), step, **meta)


def _entry_run(entry: Any, i: int, base_dir: Path, where: str) -> MeasuredRun:
    field = f"runs[{i}]"
    if not isinstance(entry, dict):
        raise SpecError(field, entry, "a mapping with spec and step_time_s or tflops_per_gpu", where=where)
    unknown = set(entry) - {"name", "spec", "set", *MEASURES, "source", "note"}
    if unknown:
        raise SpecError(f"{field}.{sorted(unknown)[0]}", entry[sorted(unknown)[0]],
                        "unknown; known: name, spec, set, step_time_s, tflops_per_gpu, source, note", where=where)
    given = [m for m in MEASURES if m in entry]
    if len(given) != 1:
        raise SpecError(field, entry.get("name", i), "give exactly one of step_time_s or tflops_per_gpu", where=where)
    spec_src = entry.get("spec")
    if isinstance(spec_src, str):
        spec_src = (base_dir / spec_src) if not Path(spec_src).is_absolute() else Path(spec_src)
    elif not isinstance(spec_src, dict):
        raise SpecError(f"{field}.spec", spec_src, "a spec file path or a spec mapping", where=where)
    overrides = entry.get("set") or []
    if isinstance(overrides, str):
        overrides = [overrides]
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise SpecError(f"{field}.set", overrides, "a list of key.path=value strings", where=where)
    name = str(entry.get("name") or f"run {i + 1}")
    spec = load_spec(spec_src, overrides)
    return measured_run(name, spec, given[0], entry[given[0]], source=str(entry.get("source", "")),
                        note=str(entry.get("note", "")))


def _csv_runs(path: Path) -> list[MeasuredRun]:
    try:
        rows = list(csv.DictReader(path.read_text().splitlines()))
    except UnicodeDecodeError:
        raise SpecError("runs", str(path), "not a UTF-8 CSV file") from None
    except csv.Error as err:
        raise SpecError("runs", str(path), f"not a readable CSV file ({err})") from None
    if not rows:
        raise SpecError("runs", str(path), "a CSV with a header and at least one run")
    header = set(rows[0])
    if "spec" not in header or not header & set(MEASURES):
        raise SpecError("runs", str(path), "a CSV needs a spec column and a step_time_s or tflops_per_gpu column")
    out = []
    for i, row in enumerate(rows):
        where = f"{path}:{i + 2}"
        sets = [f"{k}={v}" for k, v in row.items() if k and "." in k and v not in (None, "")]
        given = {m: row[m] for m in MEASURES if row.get(m) not in (None, "")}
        entry: dict[str, Any] = {"name": row.get("name") or f"row {i + 2}", "spec": row["spec"], "set": sets}
        for m, v in given.items():
            try:
                entry[m] = float(v)
            except ValueError:
                raise SpecError(m, v, "a number", where=where) from None
        try:
            out.append(_entry_run(entry, i, path.parent, where))
        except SpecError as err:
            raise SpecError(err.field, err.value, err.allowed, where=err.where or where) from None
    return out


def load_runs(path: str | Path) -> list[MeasuredRun]:
    """Measured runs from a YAML / JSON / TOML file (``runs:`` list, or a top-level list) or a CSV."""
    from teton.spec.load import read_file

    path = Path(path)
    if not os.path.exists(path):
        raise SpecError("runs", str(path), "no such file (a YAML/JSON list of runs or a CSV)")
    if path.suffix.lower() == ".csv":
        runs = _csv_runs(path)
        _unique_names(runs, str(path))
        return runs
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:  # a top-level list is allowed here (read_file wants a mapping)
            data = yaml.safe_load(path.read_text())
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as err:
            raise SpecError("runs", str(path), f"not a readable YAML file ({type(err).__name__})") from None
        from teton.spec.load import check_tree

        check_tree(data, "runs", str(path), where=str(path))
    else:
        data = read_file(path)
    entries = data.get("runs") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise SpecError("runs", str(path), "a non-empty list of runs (top level, or under runs:)")
    runs = [_entry_run(e, i, path.parent, str(path)) for i, e in enumerate(entries)]
    _unique_names(runs, str(path))
    return runs


def _unique_names(runs: list[MeasuredRun], where: str) -> None:
    """A run name given twice is an error: the fit's tables and ratios name runs by it."""
    seen: set[str] = set()
    for i, r in enumerate(runs):
        if r.name in seen:
            raise SpecError(f"runs[{i}].name", r.name, "each run's name once (it names the run in the fit's tables)",
                            where=where)
        seen.add(r.name)
