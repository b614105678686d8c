"""Reading a PyTorch profiler (Kineto) Chrome trace of a real job: kernels linked to their
launches and aten ops (what :mod:`teton.validation.trace` calibrates from).

A Kineto trace (:func:`read_kineto`) is Chrome-trace JSON (``traceEvents``, optionally
gzipped) with GPU activity (``cat`` kernel / gpu_memcpy / gpu_memset, on ``pid`` = device,
``tid`` = stream), CPU ``cuda_runtime`` / ``cuda_driver`` launch calls, ``cpu_op`` events (aten
ops, with ``Input Dims`` / ``Input type`` when ``record_shapes`` was on) and ``ac2g`` flow
events from a launch ("s") to its kernel ("f"), matched by ``id``. A kernel is linked to its
launch by the ``correlation`` arg both carry (the flow ``id`` is the same number; the flow is
used when a kernel has no ``correlation``), and the launch to the ``cpu_op`` s enclosing it in
time on the same thread: the innermost aten GEMM op gives the kernel its shape. Kernels replayed
from a CUDA graph share the ``cudaGraphLaunch``'s correlation and so its enclosing op (e.g.
``CompiledFunction``), which has no GEMM shape. Older traces' kernel ``External id`` equals the
correlation; newer ones' is the launching cpu_op's ``External id`` (used when no launch was
recorded). :func:`class_summary` counts and times the GPU activity per kernel class
(:mod:`teton.validation.trace_classes`).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teton.errors import SpecError
from teton.validation import trace_classes as tc

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
KINETO_CATS = {*GPU_CATS, *LAUNCH_CATS, "cpu_op", "ac2g"}


@dataclass(frozen=True)
class CpuOp:
    """A ``cpu_op`` event: an aten op (or autograd / compiled function) on one CPU thread."""

    name: str
    pid: int | str
    tid: int | str
    ts_us: float
    dur_us: float
    args: dict = field(default_factory=dict, compare=False)

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us


@dataclass(frozen=True)
class Kernel:
    """One GPU activity (kernel, Memcpy or Memset) with its class, launch and enclosing ops."""

    name: str
    cls: str
    ts_us: float
    dur_us: float
    stream: int | str
    device: int | str
    correlation: int | None
    launch: str | None  # the CPU call that launched it (cudaLaunchKernel, cudaGraphLaunch, ...)
    ops: tuple[CpuOp, ...] = ()  # cpu_ops enclosing the launch, outermost first
    args: dict = field(default_factory=dict, compare=False)

    @property
    def end_us(self) -> float:
        return self.ts_us + self.dur_us

    @property
    def collective(self) -> str | None:
        """The NCCL collective of the kernel's name (AllReduce, SendRecv, ...), else None."""
        return tc.kernel_collective(self.name) if self.cls == "nccl" else None

    @property
    def gemm_op(self) -> CpuOp | None:
        """The innermost enclosing aten GEMM op with a usable shape, for a GEMM kernel."""
        if self.cls != "gemm":
            return None
        return next((o for o in reversed(self.ops) if tc.gemm_shape(o.name, o.args.get("Input Dims"))), None)

    @property
    def flops(self) -> float | None:
        """2 b m n k of the GEMM op that launched this kernel (shared by its split-K kernels)."""
        op = self.gemm_op
        if op is None:
            return None
        b, m, n, k = tc.gemm_shape(op.name, op.args["Input Dims"])
        return 2.0 * b * m * n * k


@dataclass(frozen=True)
class KinetoTrace:
    """The GPU activity of the profiled device, linked to its launches and aten ops."""

    path: str
    kernels: tuple[Kernel, ...]  # kernels, Memcpy and Memset of ``device``, by start time
    cpu_ops: tuple[CpuOp, ...]
    device: int | str
    device_properties: tuple[dict, ...] = ()
    distributed_info: dict = field(default_factory=dict)
    record_shapes: bool | None = None
    other_device_events: int = 0  # GPU events of other devices, left out


def _load(path: str | Path) -> Any:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise SpecError("trace", str(path), f"cannot be read ({e.strerror or type(e).__name__})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise SpecError("trace", str(path), f"not a valid gzip file ({e})") from None
    elif p.suffix == ".gz":
        raise SpecError("trace", str(path), "not gzip: a .gz trace must be gzip-compressed JSON")
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise SpecError("trace", str(path), "not JSON (not UTF-8 text): a Chrome trace .json or .json.gz") from None
    except json.JSONDecodeError as e:
        raise SpecError("trace", str(path), f"not JSON ({e.msg} at line {e.lineno} column {e.colno}): "
                        "a Chrome trace .json or .json.gz") from None
    except RecursionError:
        raise SpecError("trace", str(path), "nested too deeply: a Chrome trace .json or .json.gz") from None
    except ValueError:  # an integer past Python's 4,300-digit limit
        raise SpecError("trace", str(path), "holds a number too large to read: a Chrome trace .json or .json.gz") from None


MAX_TRACE_US = 1e18  # a time in a trace, microseconds (Unix epoch times are ~1.7e15)


MIN_DURATION_US = 1e-6  # a duration shorter (but not 0) is no kernel that ran: a picosecond


def _num(e: dict, key: str, i: int) -> float:
    v = e.get(key)
    if (type(v) is float or type(v) is int) and abs(v) <= MAX_TRACE_US:  # not bool, not NaN or inf
        if key != "dur" or v == 0 or v >= MIN_DURATION_US:  # FLOPs / 1e-306 s overflowed to inf
            return float(v)
        raise SpecError(f"trace.traceEvents[{i}].{key}", v, f"a duration of 0 or {MIN_DURATION_US:g} to "
                        f"{MAX_TRACE_US:g} microseconds ({e.get('name', '')!r})")
    raise SpecError(f"trace.traceEvents[{i}].{key}", v, f"a finite number of microseconds, at most "
                    f"{MAX_TRACE_US:g} ({e.get('name', '')!r})")


_ID_TYPES = (int, float, str, type(None))  # what the linking may key a dict or a set by
_EVENT_IDS = ("cat", "pid", "tid", "id", "ts")
_ARG_IDS = ("correlation", "device", "stream", "External id")


def _check_ids(e: dict, i: int) -> None:
    """The fields the linking keys dicts and sets by are plain values and a launch's time is a
    number: a malformed event is a one-line SpecError here, not a TypeError in the linking."""
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    for prefix, fields, keys in (("", e, _EVENT_IDS), ("args.", args, _ARG_IDS)):
        for key in keys:
            if not isinstance(fields.get(key), _ID_TYPES):
                raise SpecError(f"trace.traceEvents[{i}].{prefix}{key}", fields[key], "a number or a string")
    if e.get("cat") in LAUNCH_CATS and "ts" in e:
        _num(e, "ts", i)


def _stacks(ops: list[CpuOp], times: list[float]) -> list[tuple[CpuOp, ...]]:
    """For each time (one thread), the ops open at that time, outermost first (a sweep)."""
    out: list[tuple[CpuOp, ...]] = [()] * len(times)
    stack: list[CpuOp] = []
    i = 0
    for j in sorted(range(len(times)), key=times.__getitem__):
        t = times[j]
        while i < len(ops) and ops[i].ts_us <= t:
            while stack and stack[-1].end_us < ops[i].ts_us:
                stack.pop()
            stack.append(ops[i])
            i += 1
        while stack and stack[-1].end_us < t:
            stack.pop()
        out[j] = tuple(o for o in stack if o.end_us >= t)
    return out


def read_kineto(path: str | Path) -> KinetoTrace:
    """Read a Kineto trace (``.json`` or ``.json.gz``); every bad input is a one-line SpecError."""
    data = _load(path)
    meta = data if isinstance(data, dict) else {}
    events = data if isinstance(data, list) else meta.get("traceEvents")  # Chrome's array form: events only
    if not isinstance(events, list):
        raise SpecError("trace.traceEvents", None if events is None else type(events).__name__,
                        "missing or not a list: not a Chrome trace (a JSON object with a traceEvents list)")
    events = [e for e in events if isinstance(e, dict)]
    for i, e in enumerate(events):
        _check_ids(e, i)
    cats = Counter(e.get("cat") for e in events)
    if not KINETO_CATS & set(cats):
        found = ", ".join(sorted(str(c) for c in cats)[:6]) or "none"
        raise SpecError("trace.traceEvents", f"categories: {found}", "not a PyTorch profiler (Kineto) trace: "
                        "no kernel, cpu_op, cuda_runtime or ac2g events")
    if not cats.get("kernel"):
        raise SpecError("trace.traceEvents", "no kernel events", "a trace with GPU kernels (profile with "
                        "ProfilerActivity.CUDA)")

    gpu_events, launches, flow_start, flow_end = [], {}, {}, {}
    threads: dict[tuple, list[CpuOp]] = defaultdict(list)
    for i, e in enumerate(events):
        cat, args = e.get("cat"), e.get("args") if isinstance(e.get("args"), dict) else {}
        if cat in GPU_CATS and e.get("ph") == "X":
            gpu_events.append((i, e, args))
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches[args["correlation"]] = e
        elif cat == "cpu_op" and e.get("ph") == "X":
            threads[(e.get("pid"), e.get("tid"))].append(
                CpuOp(str(e.get("name", "")), e.get("pid"), e.get("tid"), _num(e, "ts", i), _num(e, "dur", i), args))
        elif cat == "ac2g" and e.get("ph") == "s":
            flow_start[e.get("id")] = (e.get("pid"), e.get("tid"), e.get("ts"))
        elif cat == "ac2g" and e.get("ph") == "f":
            flow_end[(e.get("pid"), e.get("tid"), e.get("ts"))] = e.get("id")
    if flow_start and any("correlation" not in a for _, _, a in gpu_events):  # link through the flow
        at = {(e.get("pid"), e.get("tid"), e.get("ts")): e for e in events if e.get("cat") in LAUNCH_CATS}
        launches.update({fid: at[pos] for fid, pos in flow_start.items() if fid not in launches and pos in at})
    for ops in threads.values():
        ops.sort(key=lambda o: (o.ts_us, -o.dur_us))
    by_ext = {o.args["External id"]: o for ops in threads.values() for o in ops if "External id" in o.args}

    devices = Counter(a.get("device", e.get("pid")) for _, e, a in gpu_events)
    device = devices.most_common(1)[0][0]
    rows = []  # (event index, event, args, correlation, launch event or None)
    for i, e, a in gpu_events:
        if a.get("device", e.get("pid")) != device:
            continue
        corr = a.get("correlation", flow_end.get((e.get("pid"), e.get("tid"), e.get("ts"))))
        rows.append((i, e, a, corr, launches.get(corr)))
    queries: dict[tuple, list[tuple[int, float]]] = defaultdict(list)  # thread -> (row, time)
    for r, (_, _, a, corr, launch) in enumerate(rows):
        if launch is not None:
            queries[(launch.get("pid"), launch.get("tid"))].append((r, float(launch.get("ts", 0))))
        elif a.get("External id") != corr and a.get("External id") in by_ext:  # newer Kineto: its cpu_op
            op = by_ext[a["External id"]]
            queries[(op.pid, op.tid)].append((r, op.ts_us))
    stacks: list[tuple[CpuOp, ...]] = [()] * len(rows)
    for thread, qs in queries.items():
        for (r, _), st in zip(qs, _stacks(threads.get(thread, []), [t for _, t in qs]), strict=True):
            op = by_ext.get(rows[r][2].get("External id")) if rows[r][4] is None else None
            stacks[r] = st[:st.index(op) + 1] if op in st else st
    kernels = []
    for (i, e, a, corr, launch), st in zip(rows, stacks, strict=True):
        name = str(e.get("name", ""))
        kernels.append(Kernel(name, tc.classify(name, e.get("cat")), _num(e, "ts", i), _num(e, "dur", i),
                              a.get("stream", e.get("tid")), device, corr,
                              None if launch is None else str(launch.get("name")), st, a))
    kernels.sort(key=lambda k: (k.ts_us, k.end_us))
    props, dist, shapes = meta.get("deviceProperties"), meta.get("distributedInfo"), meta.get("record_shapes")
    return KinetoTrace(str(path), tuple(kernels), tuple(o for ops in threads.values() for o in ops), device,
                       tuple(p for p in props if isinstance(p, dict)) if isinstance(props, list) else (),
                       dist if isinstance(dist, dict) else {}, None if shapes is None else bool(shapes),
                       sum(devices.values()) - devices[device])


def class_summary(trace: KinetoTrace) -> dict[str, dict]:
    """Per class: ``kernels`` (count) and ``time_s`` (sum of ``dur``); under ``total`` the same for
    all GPU activity plus ``span_s`` (first start to last end), ``busy_s`` (the union of the
    activity intervals, so overlapping streams count once) and ``busy_fraction`` = busy / span.
    Memcpy / Memset are activities of class ``memory``."""
    out: dict[str, dict] = {c: {"kernels": 0, "time_s": 0.0} for c in tc.CLASSES}
    for k in trace.kernels:
        out[k.cls]["kernels"] += 1
        out[k.cls]["time_s"] += k.dur_us * 1e-6
    busy_us, end_us = 0.0, float("-inf")
    for k in trace.kernels:  # sorted by start: merge the intervals
        if k.end_us > end_us:
            busy_us += k.end_us - max(k.ts_us, end_us)
            end_us = k.end_us
    start_us = trace.kernels[0].ts_us
    span_us = max(k.end_us for k in trace.kernels) - start_us
    out["total"] = {"kernels": len(trace.kernels), "time_s": sum(v["time_s"] for v in out.values()),
                    "span_s": span_us * 1e-6, "busy_s": busy_us * 1e-6,
                    "busy_fraction": busy_us / span_us if span_us > 0 else 1.0}
    return out
