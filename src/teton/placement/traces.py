"""Job traces: our CSV format, Microsoft Philly ``cluster_job_log`` JSON, Alibaba PAI task tables, a generator.

Our CSV format (header required; ``#`` starts a comment line; blank lines ignored)::

    job_id,arrival_s,gpus,duration_s,tokens,model,tp,pp
    j1,0,8,3600,,llama3-8b,,
    j2,120,1024,,2.0e9,llama3-70b,8,4

- ``job_id``: any text, unique; ``arrival_s``: submit time in seconds (>= 0, any order);
- ``gpus``: GPUs the job needs (> 0);
- ``duration_s``: run time on an *ideal* placement, or ``tokens``: tokens to train (run time =
  tokens / tokens per step x ideal step time of the cheap step model); exactly one of the two;
- ``model``: a model preset (default: by size, see ``model_for_size``); ``tp``, ``pp``:
  optional layout (default ``cost.default_layout``).

Microsoft Philly (``cluster_job_log`` from github.com/msr-fiddle/philly-traces; Jeon et al.,
USENIX ATC 2019): a JSON array of jobs ``{"jobid", "user", "vc", "status", "submitted_time",
"attempts": [{"start_time", "end_time", "detail": [{"ip", "gpus": [...]}]}]}`` with times
``"YYYY-MM-DD HH:MM:SS"``. A job's GPU count is the GPUs of its first attempt, its duration the
sum of its attempts' run times, its arrival the submit time relative to the earliest one.
Philly jobs name no model: they get ``model_for_size``.

Alibaba PAI (``pai_task_table.csv`` of github.com/alibaba/clusterdata cluster-trace-gpu-v2020;
Weng et al., NSDI 2022): header-less CSV, columns ``job_name, task_name, inst_num, status,
start_time, end_time, plan_cpu, plan_mem, plan_gpu, gpu_type`` (times in seconds; ``plan_gpu``
in percent of one GPU per instance). The task table is read rather than ``pai_job_table.csv``
because only it carries GPU requests. A job's GPUs are the sum over its tasks of ``inst_num x
plan_gpu / 100``, rounded up (teton hands out whole GPUs; fractional-GPU jobs become 1-GPU jobs),
its arrival the earliest task start relative to the trace's, its duration latest end - earliest
start. Tasks that ask for no GPU are ignored; a job with none is reported and skipped.

Malformed lines (or JSON entries) are reported as ``TraceIssue(line, message)`` and skipped, or
raise ``SpecError`` naming the line when ``strict``. Nothing is dropped silently.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from teton.errors import SpecError, closest, not_a_file
from teton.spec.fields import MAX_GPUS, MAX_REAL
from teton.spec.model import MODEL_PRESETS

FORMATS = ("ours", "philly", "alibaba")
ALIBABA_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                        "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
OUR_COLUMNS = ("job_id", "arrival_s", "gpus", "duration_s", "tokens", "model", "tp", "pp")


@dataclass(frozen=True)
class TraceJob:
    job_id: str
    arrival_s: float
    gpus: int
    duration_s: float | None = None  # on an ideal placement
    tokens: float | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None


@dataclass(frozen=True)
class TraceIssue:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    issues: tuple[TraceIssue, ...] = ()
    source: str = ""
    format: str = "ours"


def model_for_size(gpus: int) -> str:
    """Model a job of this size trains when the trace names none (an illustrative mix, not a
    measured one): up to 64 GPUs Llama 3 8B, up to 2,048 Llama 3 70B, above that Llama 3 405B."""
    return "llama3-8b" if gpus <= 64 else "llama3-70b" if gpus <= 2048 else "llama3-405b"


class _Collector:
    def __init__(self, source: str, strict: bool):
        self.source, self.strict, self.issues = source, strict, []

    def bad(self, line: int, message: str) -> None:
        if self.strict:
            raise SpecError("trace line", line, f"{message} (rejected: --strict)", where=self.source)
        self.issues.append(TraceIssue(line, message))


# The largest number a trace cell may hold, by column: GPUs (and tp, pp, tasks) as a job's, a
# time up to 10^11 s (arrivals, durations, Unix timestamps: 3,000 years), tokens as a run's.
CELL_MAX = {"gpus": MAX_GPUS, "tp": MAX_GPUS, "pp": MAX_GPUS, "inst_num": MAX_GPUS, "plan_gpu": 100.0 * MAX_GPUS,
            "tokens": MAX_REAL}
MAX_TRACE_S = 1e11


def _num(text: str, name: str, kind=float, positive: bool = False):
    """The cell ``text`` of column ``name`` as a number of ``kind``, >= 0 (> 0 if ``positive``)
    and at most the column's :data:`CELL_MAX`; ValueError (a bad line) otherwise."""
    hi = CELL_MAX.get(name, MAX_TRACE_S)
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {text!r}: not a number") from None
    if kind is int and math.isfinite(v) and not v.is_integer():
        raise ValueError(f"{name} = {text!r}: not an integer")
    if not (math.isfinite(v) and (v > 0 if positive else v >= 0) and v <= hi):
        raise ValueError(f"{name} = {text!r}: must be a number in {'(' if positive else '['}0, {hi:g}]")
    return int(v) if kind is int else v


def _csv_cells(line: str) -> list[str]:
    """The cells of one CSV line; ValueError (a malformed line) where csv cannot read it."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as err:
        raise ValueError(f"not a CSV line ({err})") from None


def parse_ours(text: str, source: str = "<trace>", strict: bool = False) -> Trace:
    """Read our CSV format (module docstring)."""
    col = _Collector(source, strict)
    lines = text.splitlines()
    header_at = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), None)
    if header_at is None:
        raise SpecError("trace", source, "is empty; expected a header " + ",".join(OUR_COLUMNS))
    try:
        header = [h.strip() for h in _csv_cells(lines[header_at])]
    except ValueError as err:
        raise SpecError("trace header", lines[header_at], str(err), where=f"{source}:{header_at + 1}") from None
    for need in ("job_id", "arrival_s", "gpus"):
        if need not in header:
            raise SpecError("trace header", ",".join(header), f"needs column {need!r}; columns: "
                            + ",".join(OUR_COLUMNS), where=source)
    unknown = [h for h in header if h not in OUR_COLUMNS]
    if unknown:
        raise SpecError("trace header", unknown[0], closest(unknown[0], OUR_COLUMNS), where=source)
    jobs, seen = [], set()
    for i in range(header_at + 1, len(lines)):
        raw = lines[i]
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        lineno = i + 1
        try:
            cells = _csv_cells(raw)
        except ValueError as err:
            col.bad(lineno, str(err))
            continue
        if len(cells) != len(header):
            col.bad(lineno, f"{len(cells)} fields, expected {len(header)} ({','.join(header)})")
            continue
        row = {k: v.strip() for k, v in zip(header, cells, strict=True)}
        try:
            job_id = row["job_id"]
            if not job_id:
                raise ValueError("job_id = '': empty")
            if job_id in seen:
                raise ValueError(f"job_id = {job_id!r}: duplicate")
            arrival = _num(row["arrival_s"], "arrival_s")
            gpus = _num(row["gpus"], "gpus", int, positive=True)
            dur = _num(row["duration_s"], "duration_s", positive=True) if row.get("duration_s") else None
            tokens = _num(row["tokens"], "tokens", positive=True) if row.get("tokens") else None
            if (dur is None) == (tokens is None):
                raise ValueError("duration_s/tokens: give exactly one of them")
            model = row.get("model") or None
            if model is not None and model not in MODEL_PRESETS:
                raise ValueError(f"model = {model!r}: {closest(model, MODEL_PRESETS)}")
            tp = _num(row["tp"], "tp", int, positive=True) if row.get("tp") else None
            pp = _num(row["pp"], "pp", int, positive=True) if row.get("pp") else None
            if gpus % ((tp or 1) * (pp or 1)):
                raise ValueError(f"gpus = {gpus}: must be a multiple of tp*pp = {(tp or 1) * (pp or 1)}")
        except ValueError as err:
            col.bad(lineno, str(err))
            continue
        seen.add(job_id)
        jobs.append(TraceJob(job_id, arrival, gpus, dur, tokens, model, tp, pp))
    return Trace(tuple(jobs), tuple(col.issues), source, "ours")


_PHILLY_TIME = "%Y-%m-%d %H:%M:%S"


def _philly_time(value, name: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{name} = {value!r}: missing (job never ran or still running)")
    try:
        return datetime.strptime(value, _PHILLY_TIME)
    except ValueError:
        raise ValueError(f"{name} = {value!r}: expected 'YYYY-MM-DD HH:MM:SS'") from None


def parse_philly(text: str, source: str = "<trace>", strict: bool = False) -> Trace:
    """Read a Philly ``cluster_job_log`` JSON array, entry by entry, keeping line numbers."""
    col = _Collector(source, strict=False)  # strict: reject at the first bad line, in file order
    dec = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if not text[pos:pos + 1] == "[":
        raise SpecError("trace", source, "a Philly cluster_job_log must be a JSON array of jobs")
    pos += 1
    rows: list[tuple[int, dict]] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            raise SpecError("trace", source, "unterminated JSON array (missing ']')")
        if text[pos] == "]":
            break
        lineno = text.count("\n", 0, pos) + 1
        try:
            obj, end = dec.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as err:
            col.bad(lineno, f"invalid JSON ({getattr(err, 'msg', 'nested too deeply')})")
            nxt = text.find("\n", pos)  # resynchronise at the next line that starts an object
            while nxt != -1 and not text[nxt + 1:].lstrip(" \t").startswith(("{", "]")):
                nxt = text.find("\n", nxt + 1)
            if nxt == -1:
                break
            pos = nxt + 1
            continue
        rows.append((lineno, obj))
        pos = end
    jobs, t0 = [], None
    parsed: list[tuple[int, str, datetime, int, float]] = []
    for lineno, obj in rows:
        try:
            if not isinstance(obj, dict):
                raise ValueError(f"entry = {type(obj).__name__}: expected a JSON object")
            job_id = str(obj.get("jobid") or "")
            if not job_id:
                raise ValueError("jobid: missing")
            submitted = _philly_time(obj.get("submitted_time"), "submitted_time")
            attempts = obj.get("attempts")
            if not isinstance(attempts, list) or not attempts:
                raise ValueError(f"attempts = {attempts!r}: the job never ran")
            first = attempts[0]
            detail = first.get("detail") if isinstance(first, dict) else None
            if not isinstance(detail, list) or not detail:
                raise ValueError("attempts[0].detail: missing (no machines listed)")
            gpus = sum(len(g) for d in detail if isinstance(d, dict) and isinstance(g := d.get("gpus"), list))
            if gpus <= 0:
                raise ValueError("attempts[0].detail: no GPUs listed")
            run_s = 0.0
            for k, a in enumerate(attempts):
                start = _philly_time(a.get("start_time"), f"attempts[{k}].start_time")
                end = _philly_time(a.get("end_time"), f"attempts[{k}].end_time")
                if end < start:
                    raise ValueError(f"attempts[{k}].end_time: before its start_time")
                run_s += (end - start).total_seconds()
            if run_s <= 0:
                raise ValueError("attempts: zero run time")
        except (ValueError, AttributeError) as err:
            col.bad(lineno, str(err))
            continue
        parsed.append((lineno, job_id, submitted, gpus, run_s))
        t0 = submitted if t0 is None or submitted < t0 else t0
    issues = sorted(col.issues, key=lambda i: i.line)
    if strict and issues:
        _Collector(source, strict=True).bad(issues[0].line, issues[0].message)
    for _lineno, job_id, submitted, gpus, run_s in parsed:
        jobs.append(TraceJob(job_id, (submitted - t0).total_seconds(), gpus, run_s))
    return Trace(tuple(jobs), tuple(issues), source, "philly")


def parse_alibaba(text: str, source: str = "<trace>", strict: bool = False) -> Trace:
    """Read an Alibaba PAI ``pai_task_table.csv`` (module docstring), grouping tasks into jobs."""
    col = _Collector(source, strict)
    per_job: dict[str, dict] = {}
    reader = csv.reader(io.StringIO(text))
    for i in itertools.count(1):
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as err:  # the reader goes on with the next line
            col.bad(i, f"not a CSV line ({err})")
            continue
        if not cells or (len(cells) == 1 and not cells[0].strip()) or cells[0].startswith("#"):
            continue
        if len(cells) != len(ALIBABA_TASK_COLUMNS):
            col.bad(i, f"{len(cells)} fields, expected {len(ALIBABA_TASK_COLUMNS)} ({','.join(ALIBABA_TASK_COLUMNS)})")
            continue
        row = dict(zip(ALIBABA_TASK_COLUMNS, (c.strip() for c in cells), strict=True))
        try:
            if not row["job_name"]:
                raise ValueError("job_name = '': empty")
            inst = _num(row["inst_num"], "inst_num", positive=True)
            gpu_pct = _num(row["plan_gpu"], "plan_gpu") if row["plan_gpu"] else 0.0
            start = _num(row["start_time"], "start_time")
            end = _num(row["end_time"], "end_time")
            if end < start:
                raise ValueError(f"end_time = {row['end_time']!r}: before start_time")
        except ValueError as err:
            col.bad(i, str(err))
            continue
        job = per_job.setdefault(row["job_name"], {"line": i, "gpus": 0.0, "start": start, "end": end})
        job["gpus"] += inst * gpu_pct / 100.0
        job["start"], job["end"] = min(job["start"], start), max(job["end"], end)
    jobs = []
    ok = []
    for name, j in per_job.items():
        if j["gpus"] <= 0:
            col.bad(j["line"], f"job {name}: no task asks for a GPU (plan_gpu)")
            continue
        if j["end"] <= j["start"]:
            col.bad(j["line"], f"job {name}: zero run time")
            continue
        ok.append((name, j))
    t0 = min((j["start"] for _, j in ok), default=0.0)
    for name, j in sorted(ok, key=lambda kv: (kv[1]["start"], kv[0])):
        jobs.append(TraceJob(name, j["start"] - t0, max(1, math.ceil(j["gpus"] - 1e-9)), j["end"] - j["start"]))
    return Trace(tuple(jobs), tuple(sorted(col.issues, key=lambda x: x.line)), source, "alibaba")


def read_trace(path: str | Path, fmt: str = "auto", strict: bool = False) -> Trace:
    """Read a trace file; ``fmt``: ours | philly | alibaba | auto (.json: philly; a file named
    pai_task_table*: alibaba; otherwise ours)."""
    p = Path(path)
    if (why := not_a_file(p)) is not None:
        raise SpecError("trace", str(path), why)
    if fmt == "auto":
        fmt = "philly" if p.suffix.lower() == ".json" else "alibaba" if "pai_task_table" in p.name else "ours"
    if fmt not in FORMATS:
        raise SpecError("format", fmt, f"must be one of {', '.join(FORMATS)}")
    text = p.read_text(encoding="utf-8", errors="replace")
    parse = {"philly": parse_philly, "alibaba": parse_alibaba, "ours": parse_ours}[fmt]
    return parse(text, str(path), strict)


# Job sizes of the synthetic generator (GPUs) and their weights: many small jobs, few large ones,
# the shape reported for shared GPU clusters (Jeon et al. ATC'19 Philly: most jobs use 1 GPU;
# Kokolis et al. 2024 "Revisiting reliability in large-scale ML research clusters": most jobs are
# small while most GPU time goes to large jobs). Illustrative weights, not fitted to either trace.
SYNTH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
SYNTH_WEIGHTS = (30, 8, 8, 20, 8, 7, 6, 4, 3, 2, 1.5, 1, 0.5, 0.2)


MAX_SYNTHETIC_JOBS = 1_000_000  # synthetic:N beyond this would take hours to simulate (or exhaust memory)


def synthetic_trace(n_jobs: int, cluster_gpus: int, seed: int = 0, load: float = 0.9,
                    median_duration_s: float = 3600.0, sigma: float = 1.2) -> Trace:
    """A seeded synthetic trace: sizes from ``SYNTH_SIZES`` / ``SYNTH_WEIGHTS`` (capped at the
    cluster), log-normal ideal run times (median ``median_duration_s``), Poisson arrivals at the
    rate that offers ``load`` x the cluster's GPU-seconds: rate = load x GPUs / E[gpus x duration]."""
    if not 0 < n_jobs <= MAX_SYNTHETIC_JOBS:
        raise SpecError("jobs", n_jobs, f"must be between 1 and {MAX_SYNTHETIC_JOBS:,}")
    if not 0 < load <= 10:
        raise SpecError("load", load, "must be in (0, 10]")
    rng = np.random.default_rng(seed)
    sizes = np.array([s for s in SYNTH_SIZES if s <= cluster_gpus])
    w = np.array(SYNTH_WEIGHTS[: sizes.size], dtype=float)
    w /= w.sum()
    gpus = rng.choice(sizes, size=n_jobs, p=w)
    dur = np.exp(rng.normal(math.log(median_duration_s), sigma, n_jobs)).clip(60.0, 30 * 86400.0)
    mean_gpu_s = float((sizes * w).sum()) * median_duration_s * math.exp(sigma**2 / 2)
    rate = load * cluster_gpus / mean_gpu_s
    arrival = np.cumsum(rng.exponential(1.0 / rate, n_jobs))
    arrival -= arrival[0]
    jobs = tuple(TraceJob(f"s{i}", float(round(arrival[i], 3)), int(gpus[i]), float(round(dur[i], 1)))
                 for i in range(n_jobs))
    return Trace(jobs, (), f"synthetic(n={n_jobs}, seed={seed}, load={load})", "synthetic")


def write_ours(trace: Trace) -> str:
    """Serialise a trace in our CSV format."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(OUR_COLUMNS)
    for j in trace.jobs:
        w.writerow([j.job_id, j.arrival_s, j.gpus, "" if j.duration_s is None else j.duration_s,
                    "" if j.tokens is None else j.tokens, j.model or "", j.tp or "", j.pp or ""])
    return out.getvalue()
