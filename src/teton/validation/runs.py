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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from teton.errors import SpecError, from_validation, not_a_file
from teton.spec import Spec, load_spec
from teton.spec.fields import Section
from teton.spec.load import overrides_in_file

MEASURES = ("step_time_s", "tflops_per_gpu")  # what a user's runs file may give
PUBLISHED_METRICS = (*MEASURES, "tokens_per_s_per_gpu")
# A measured step: from a microsecond to a hundred days (outside, a typo or a unit slip); a
# measured rate up to 100,000 TFLOP/s per GPU (the fastest GPU's fp4 peak is ~10,000).
STEP_RANGE_S = (1e-6, 1e7)
MAX_TFLOPS_PER_GPU = 1e5


class RunEntry(Section):
    """One entry of a user's runs file (a YAML / JSON mapping, or a CSV row), checked at read."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    name: str | None = None
    spec: str | dict[str, Any]  # a spec file (relative to the runs file) or an inline spec
    set: list[str] = []  # --set style overrides
    step_time_s: float | None = Field(default=None, ge=STEP_RANGE_S[0], le=STEP_RANGE_S[1])
    tflops_per_gpu: float | None = Field(default=None, gt=0, le=MAX_TFLOPS_PER_GPU)
    source: str = ""
    note: str = ""


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

    return model_flops_per_token(spec) * spec.job.layout.tokens_per_step


def measured_run(name: str, spec: Spec, metric: str, value: float, **meta: Any) -> MeasuredRun:
    """A run from its published figure: a step time, or TFLOPs/GPU turned into one."""
    if metric not in MEASURES:
        raise SpecError(f"{name}.metric", metric, f"one of {', '.join(MEASURES)}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise SpecError(f"{name}.{metric}", value, "a positive number")
    step = float(value) if metric == "step_time_s" else model_flops_per_step(spec) / (
        spec.job.gpus * float(value) * 1e12)
    lo, hi = STEP_RANGE_S
    if not lo <= step <= hi:
        raise SpecError(f"{name}.{metric}", value, f"implies a step of {step:.3g} s; a measured step is "
                        f"{lo:g} to {hi:g} s")
    return MeasuredRun(name, spec, metric, float(value), step, **meta)


def _entry_run(entry: Any, i: int, base_dir: Path, where: str) -> MeasuredRun:
    field = f"runs[{i}]"
    if not isinstance(entry, dict):
        raise SpecError(field, entry, "a mapping with spec and step_time_s or tflops_per_gpu", where=where)
    if isinstance(entry.get("set"), str):
        entry = {**entry, "set": [entry["set"]]}
    entry = {**entry, **{k: str(v) for k, v in entry.items()  # a number as a name (2024) is its text
                         if k in ("name", "source", "note") and isinstance(v, (int, float)) and not isinstance(v, bool)}}
    try:
        run = RunEntry(**entry)
    except ValidationError as err:
        known = ", ".join(RunEntry.model_fields)
        raise from_validation(err, field, unknown_field=lambda loc: f"unknown; known: {known}",
                              where=lambda loc: where) from None
    given = [m for m in MEASURES if getattr(run, m) is not None]
    if len(given) != 1:
        raise SpecError(field, run.name or i, "give exactly one of step_time_s or tflops_per_gpu", where=where)
    spec_src: Any = run.spec
    if isinstance(spec_src, str):
        spec_src = (base_dir / spec_src) if not Path(spec_src).is_absolute() else Path(spec_src)
    name = run.name or f"run {i + 1}"
    try:
        spec = load_spec(spec_src, overrides_in_file(run.set, base_dir))  # its paths: against the runs file
    except SpecError as err:  # which run of which file: the spec's own message says neither
        here = f"{where} {field}" + (f" ({run.name})" if run.name else "")
        raise SpecError(err.field, err.value, err.allowed, where=f"{here}: {err.where}" if err.where else here) from None
    return measured_run(name, spec, given[0], getattr(run, given[0]), source=run.source, note=run.note)


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
        entry: dict[str, Any] = {"name": row.get("name") or f"row {i + 2}", "spec": row["spec"], "set": sets,
                                 **given}  # the cells as text: RunEntry reads the numbers
        if None in row:  # csv.DictReader puts a row's cells past the header under None
            raise SpecError("runs", row[None], f"row {i + 2} has more cells than the header", where=where)
        try:
            out.append(_entry_run(entry, i, path.parent, where))
        except SpecError as err:
            raise SpecError(err.field, err.value, err.allowed, where=err.where or where) from None
    return out


def load_runs(path: str | Path) -> list[MeasuredRun]:
    """Measured runs from a YAML / JSON / TOML file (``runs:`` list, or a top-level list) or a CSV."""
    from teton.spec.read import read_data

    path = Path(path)
    if (why := not_a_file(path)) is not None:
        raise SpecError("runs", str(path), f"{why} (a YAML/JSON list of runs or a CSV)")
    if path.suffix.lower() == ".csv":
        runs = _csv_runs(path)
        _unique_names(runs, str(path))
        return runs
    data = read_data(path)  # a top-level list is allowed here; duplicate keys are refused
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
