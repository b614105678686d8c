"""Calibration from a PyTorch profiler (Kineto) Chrome trace of a real job.

Reading (:func:`read_kineto`). A Kineto trace is Chrome-trace JSON (``traceEvents``, optionally
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
recorded).

Calibration (:func:`calibrate_from_trace`), against the *burst* catalog
(``cluster_efficiency(gpu, {"profile": "burst"})``), three in-situ estimates:

* ``tensor_core_in_situ`` = sum t_burst / sum t_measured over the GEMM ops with shapes, where
  t_burst = max(2bmnk / (P_prec e_gemm(bm, n, k) r), elem (mk + kn + mn) b / (BW e_mem)) is
  :class:`teton.engine.compute.ComputeModel`'s GEMM time at the op's precision and t_measured the
  sum of the op's GEMM kernels (split-K reduction included): a FLOP-weighted ratio of achieved to
  burst throughput.
* ``collective_in_situ``, from NCCL kernels whose message size is recorded: bus bandwidth
  busbw = factor S / t, factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter /
  all-to-all, 1 for broadcast / reduce / send-recv (nccl-tests, doc/PERFORMANCE.md), against
  teton's model t = factor S / (B_link e_nccl c) + steps alpha (``teton.network.analytical``) with
  the group assumed inside one host (NVLink, NVLS for an all-reduce of > 2 where the GPU has it):
  c = sum factor S / (B_link e_nccl) / (sum t - sum steps alpha).
* ``kernel_gap_s``: the median idle gap, under 1 ms, between consecutive GPU activities on each
  stream that runs GEMMs (longer gaps are host waits, data loading, synchronisation).
"""

from __future__ import annotations

import gzip
import json
import statistics
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teton.errors import SpecError, closest
from teton.hardware.efficiency import cluster_efficiency
from teton.hardware.gpus import GPU, GPUS
from teton.hardware.in_situ import PARAMETERS
from teton.validation import trace_classes as tc

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
KINETO_CATS = {*GPU_CATS, *LAUNCH_CATS, "cpu_op", "ac2g"}
HOST_WAIT_US = 1000.0  # idle gaps at least this long are host waits, not per-kernel overhead


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


def _num(e: dict, key: str, i: int) -> float:
    v = e.get(key)
    if type(v) is float or type(v) is int:  # not bool
        return float(v)
    raise SpecError(f"trace.traceEvents[{i}].{key}", v, f"a number of microseconds ({e.get('name', '')!r})")


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


def trace_gpu(trace: KinetoTrace, gpu_name: str | None = None) -> GPU:
    """The catalog GPU: ``gpu_name`` (a catalog key or a CUDA device name) when given, else the
    profiled device's ``deviceProperties`` name."""
    if gpu_name is not None:
        key = gpu_name if gpu_name in GPUS else tc.catalog_gpu_name(gpu_name)
        if key is None:
            raise SpecError("gpu", gpu_name, closest(gpu_name, GPUS))
        return GPUS[key]
    props = [p for p in trace.device_properties if p.get("id") == trace.device] or list(trace.device_properties)
    if not props or not isinstance(props[0].get("name"), str):
        raise SpecError("trace.deviceProperties", None, f"missing: pass the GPU (one of {', '.join(GPUS)})")
    key = tc.catalog_gpu_name(props[0]["name"], props[0].get("totalGlobalMem"))
    if key is None:
        raise SpecError("trace.deviceProperties.name", props[0]["name"],
                        f"no teton catalog GPU for this device; pass one of {', '.join(GPUS)}")
    return GPUS[key]


@dataclass(frozen=True)
class TraceCalibration:
    """What a trace says about teton's in-situ parameters.

    ``classes``: :func:`class_summary`. ``achieved``: per class (``gemm``, ``nccl``) what was
    measured, what the burst catalog predicts for the same work and their ratio, with the count of
    kernels that had shapes / sizes; ``kernel_gap`` holds the stream-gap measurement (the burst
    catalog's gap is 0). ``in_situ``: the estimates that could be made (keys among
    ``tensor_core_in_situ``, ``collective_in_situ``, ``kernel_gap_s``), raw, even outside the
    parameter's bounds (a note says so). ``notes``: what could not be estimated and why."""

    gpu: str
    classes: dict[str, dict]
    achieved: dict[str, dict]
    in_situ: dict[str, float]
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """Plain JSON-serialisable data."""
        return json.loads(json.dumps({"gpu": self.gpu, "classes": self.classes, "achieved": self.achieved,
                                      "in_situ": self.in_situ, "notes": list(self.notes)}))


def _gemm(trace: KinetoTrace, gpu: GPU, eff, notes: list[str]) -> dict:
    gemms = [k for k in trace.kernels if k.cls == "gemm"]
    groups: dict[tuple, list] = {}  # one entry per aten GEMM op: [op, measured us, kernels, simt kernels]
    unshaped: Counter = Counter()
    for k in gemms:
        op = k.gemm_op
        if op is None:
            unshaped[k.ops[-1].name if k.ops else "no launch recorded"] += 1
            continue
        g = groups.setdefault((op.pid, op.tid, op.ts_us, op.name), [op, 0.0, 0, 0])
        g[1] += k.dur_us
        g[2] += 1
        g[3] += bool(tc.SIMT_GEMM.search(k.name))
    flops = measured_s = burst_s = 0.0
    shaped = simt = skipped = 0
    precisions: Counter = Counter()
    for op, dur_us, n_kernels, n_simt in groups.values():
        prec = tc.gemm_precision(op.args.get("Input type"))
        if prec is None or dur_us <= 0:
            skipped += n_kernels
            continue
        b, m, n, k = tc.gemm_shape(op.name, op.args["Input Dims"])
        f = 2.0 * b * m * n * k
        t_tc = f / (gpu.peak_flops(prec) * eff.gemm(prec, gpu, b * m, n, k) * eff.tensor_core)
        t_mem = tc.ELEMENT_BYTES[prec] * b * (m * k + k * n + m * n) / (gpu.hbm_bw_bytes_s * eff.mem)
        flops, measured_s, burst_s = flops + f, measured_s + dur_us * 1e-6, burst_s + max(t_tc, t_mem)
        shaped, simt = shaped + n_kernels, simt + n_simt
        precisions[prec] += n_kernels
    if unshaped:
        top = ", ".join(f"{name} ({n})" for name, n in unshaped.most_common(3))
        graphs = any(k.launch == "cudaGraphLaunch" for k in gemms)
        shapes = any("Input Dims" in o.args for o in trace.cpu_ops)
        notes.append(f"{sum(unshaped.values())} of {len(gemms)} GEMM kernels have no shape (launched under "
                     f"ops without a GEMM formula or Input Dims: {top})"
                     + ("; CUDA-graph replays share their graph launch's op" if graphs else "")
                     + ("" if shapes else "; no cpu_op has Input Dims: record_shapes was off"))
    if skipped:
        notes.append(f"{skipped} GEMM kernels with an fp64 / integer input type left out (no catalog figure)")
    if simt:
        notes.append(f"{simt} of the {shaped} shaped GEMM kernels run without tensor cores (SIMT sgemm / "
                     "gemv, cuBLAS's choice); they are compared with the tensor-core figure like the rest")
    if precisions.get("tf32"):
        notes.append("fp32 GEMMs are compared with the TF32 tensor-core figure (right when TF32 is allowed, "
                     "as CUTLASS s1688 / tf32 kernel names show)")
    return {"kernels": len(gemms), "kernels_with_shapes": shaped, "ops_with_shapes": len(groups),
            "simt_kernels": simt, "precision": dict(precisions), "flops": flops, "measured_s": measured_s,
            "burst_s": burst_s, "achieved_flops_s": flops / measured_s if measured_s else None,
            "burst_flops_s": flops / burst_s if burst_s else None,
            "ratio": burst_s / measured_s if measured_s else None}


def _nccl(trace: KinetoTrace, gpu: GPU, eff, notes: list[str]) -> tuple[dict, float | None]:
    from teton.network.analytical import NVLINK_STEP_LATENCY_S, bus_factor, ring_steps

    ncc = [k for k in trace.kernels if k.cls == "nccl"]
    per_host = max(8, len(trace.device_properties))  # a larger group cannot sit in one NVLink host
    kinds: dict[str, dict] = {}
    sized = cross = 0
    measured_s = bw_s = lat_s = moved = 0.0
    links = set()
    for k in ncc:
        kind = kinds.setdefault(k.collective or "unknown", {"kernels": 0, "time_s": 0.0})
        kind["kernels"] += 1
        kind["time_s"] += k.dur_us * 1e-6
        src = k.args if "In msg nelems" in k.args else next(
            (o.args for o in reversed(k.ops) if "In msg nelems" in o.args), {})
        op, n, size = tc.message(src)
        op = op or tc.collective_op(k.collective)
        n = n or trace.distributed_info.get("world_size")
        if not (op and isinstance(n, int) and n > 1 and size and k.dur_us > 0):
            continue
        if n > per_host:
            cross += 1
            continue
        link = "nvls" if op == "all_reduce" and gpu.nvls and n > 2 else "nvlink"
        links.add(link)
        sized += 1
        moved += bus_factor(op, n) * size
        measured_s += k.dur_us * 1e-6
        bw_s += bus_factor(op, n) * size / (gpu.nvlink_bw_bytes_s * eff.busbw_fraction(link))
        lat_s += ring_steps(op, n) * NVLINK_STEP_LATENCY_S
    catalog = gpu.nvlink_bw_bytes_s * eff.busbw_fraction("nvls" if links == {"nvls"} else "nvlink")
    estimate = bw_s / (measured_s - lat_s) if sized and measured_s > lat_s else None
    if ncc and not sized and not cross:
        notes.append(f"collective_in_situ not estimated: none of the {len(ncc)} NCCL kernels has a recorded "
                     "message size (In msg nelems / dtype / Group size: newer PyTorch profilers write them); "
                     "counts and time only")
    if cross:
        notes.append(f"{cross} NCCL kernels of groups larger than one host ({per_host} GPUs) left out")
    if sized:
        notes.append(f"collective_in_situ from {sized} of {len(ncc)} NCCL kernels, assuming each group is "
                     f"inside one host ({'/'.join(sorted(links))}; one rank's trace cannot tell); a kernel's "
                     "time includes waiting for the slowest rank")
    return ({"kernels": len(ncc), "kernels_with_sizes": sized, "collectives": kinds, "bytes": moved,
             "measured_s": measured_s, "burst_s": bw_s + lat_s, "latency_s": lat_s,
             "busbw_bytes_s": moved / measured_s if measured_s else None, "catalog_busbw_bytes_s": catalog,
             "ratio": (bw_s + lat_s) / measured_s if measured_s else None}, estimate)


def _gaps(trace: KinetoTrace) -> dict:
    streams = sorted({k.stream for k in trace.kernels if k.cls == "gemm"}, key=str)
    gaps = []
    for s in streams:
        end = None
        for k in (k for k in trace.kernels if k.stream == s):
            if end is not None and 0.0 <= k.ts_us - end < HOST_WAIT_US:
                gaps.append(k.ts_us - end)
            end = k.end_us if end is None else max(end, k.end_us)
    return {"streams": streams, "gaps": len(gaps), "median_s": statistics.median(gaps) * 1e-6 if gaps else None,
            "mean_s": statistics.fmean(gaps) * 1e-6 if gaps else None, "threshold_s": HOST_WAIT_US * 1e-6}


def calibrate_from_trace(trace: KinetoTrace, gpu_name: str | None = None) -> TraceCalibration:
    """Estimate teton's in-situ parameters from one rank's trace (see the module docstring)."""
    gpu = trace_gpu(trace, gpu_name)
    eff = cluster_efficiency(gpu, {"profile": "burst"})
    notes: list[str] = []
    gemm = _gemm(trace, gpu, eff, notes)
    nccl, collective = _nccl(trace, gpu, eff, notes)
    gap = _gaps(trace)
    in_situ = {"tensor_core_in_situ": gemm["ratio"], "collective_in_situ": collective,
               "kernel_gap_s": gap["median_s"]}
    in_situ = {key: v for key, v in in_situ.items() if v is not None}
    if "tensor_core_in_situ" not in in_situ:
        notes.append("tensor_core_in_situ not estimated: " + (
            "no GEMM kernel ran under an aten GEMM op with Input Dims" if gemm["kernels"] else "no GEMM kernels"))
    if "kernel_gap_s" not in in_situ:
        notes.append("kernel_gap_s not estimated: no idle gap under 1 ms on a stream that runs GEMMs")
    elif all(float(k.ts_us).is_integer() and float(k.dur_us).is_integer() for k in trace.kernels):
        notes.append("timestamps are whole microseconds: the gap median is quantised to 1 us")
    if n_attention := sum(k.cls == "attention" for k in trace.kernels):
        notes.append(f"{n_attention} attention kernels are counted, not used in tensor_core_in_situ")
    for key, v in in_situ.items():
        lo, hi = PARAMETERS[key].bounds
        if not lo <= v <= hi:
            notes.append(f"{key} = {v:.4g} is outside its fit bounds [{lo:g}, {hi:g}] ({PARAMETERS[key].unit})")
    if not in_situ:
        shapes_off = gemm["kernels"] and not gemm["kernels_with_shapes"]
        raise SpecError("trace.record_shapes" if shapes_off else "trace.traceEvents",
                        trace.record_shapes if shapes_off else trace.path,
                        "nothing to calibrate: GEMMs without Input Dims (profile with record_shapes=True), no "
                        "NCCL message sizes, no kernel gap under 1 ms on a GEMM stream")
    return TraceCalibration(gpu.name, class_summary(trace), {"gemm": gemm, "nccl": nccl, "kernel_gap": gap},
                            in_situ, tuple(notes))
