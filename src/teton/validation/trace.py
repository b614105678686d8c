"""Calibration from a PyTorch profiler (Kineto) Chrome trace of a real job.

The trace is read by :func:`teton.validation.kineto.read_kineto`. Calibration
(:func:`calibrate_from_trace`), against the *burst* catalog
(``cluster_efficiency(gpu, {"profile": "burst"})``), three in-situ estimates:

* ``tensor_core_in_situ`` = sum t_burst / sum t_measured over the GEMM ops with shapes, where
  t_burst = max(2bmnk / (P_prec e_gemm(bm, n, k) r), elem (mk + kn + mn) b / (BW e_mem)) is
  :meth:`teton.engine.compute.ComputeModel.gemm_roofline_s`, the engine's GEMM time, at the op's
  precision, and t_measured the sum of the op's GEMM kernels (split-K reduction included): a
  FLOP-weighted ratio of achieved to burst throughput.
* ``collective_in_situ``, from NCCL kernels whose message size is recorded: bus bandwidth
  busbw = factor S / t, factor 2(n-1)/n for all-reduce, (n-1)/n for all-gather / reduce-scatter /
  all-to-all, 1 for broadcast / reduce / send-recv (nccl-tests, doc/PERFORMANCE.md), against
  teton's model t = factor S / (B_link e_nccl c) + steps alpha (``teton.network.analytical``) with
  the group assumed inside one host (NVLink, NVLS for an all-reduce of > 2 where the GPU has it):
  c = sum factor S / (B_link e_nccl) / (sum t - sum steps alpha).
* ``kernel_gap_s``: the idle GPU time per kernel beyond what teton already charges, from the idle
  gaps under 1 ms between consecutive GPU activities on each stream that runs GEMMs (longer gaps
  are host waits, data loading, synchronisation): their lower quartile, the GPU's own pace when
  the CPU is ahead (``hardware.kernels.EAGER_KERNEL_GAP_S`` is defined the same way; the median
  includes the CPU's launch time between ops, which teton prices apart as ``EAGER_LAUNCH_S``),
  each gap less the eager gap teton charges an eagerly launched kernel (a CUDA graph replay's
  gap is all in-situ), floored at 0.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass

import numpy as np

from teton.engine.compute import ComputeModel
from teton.errors import SpecError, closest
from teton.hardware.efficiency import cluster_efficiency
from teton.hardware.gpus import GPU, GPUS
from teton.hardware.in_situ import PARAMETERS
from teton.hardware.kernels import EAGER_KERNEL_GAP_S
from teton.validation import trace_classes as tc
from teton.validation.kineto import KinetoTrace, class_summary

HOST_WAIT_US = 1000.0  # idle gaps at least this long are host waits, not per-kernel overhead


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
        raise SpecError("gpu", None, f"the trace names no GPU (no deviceProperties): give its GPU, one of "
                        f"{', '.join(GPUS)}")
    mem = props[0].get("totalGlobalMem")  # a hint (A100 40 / 80 GB): left out unless a number
    key = tc.catalog_gpu_name(props[0]["name"], mem if type(mem) in (int, float) else None)
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
    model = ComputeModel(gpu, eff)  # the engine's GEMM time, at each op's own precision
    for op, dur_us, n_kernels, n_simt in groups.values():
        prec = tc.gemm_precision(op.args.get("Input type"))
        if prec is None or dur_us <= 0:
            skipped += n_kernels
            continue
        b, m, n, k = tc.gemm_shape(op.name, op.args["Input Dims"])
        f = 2.0 * b * m * n * k
        t = model.gemm_roofline_s(prec, b * m, n, k, f, tc.ELEMENT_BYTES[prec] * b * (m * k + k * n + m * n))
        flops, measured_s, burst_s = flops + f, measured_s + dur_us * 1e-6, burst_s + t
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


def _quartile(values: list[float]) -> float | None:
    """The lower quartile (linear interpolation, as ``numpy.percentile``) of ``values``."""
    return float(np.percentile(values, 25)) if values else None


def _gaps(trace: KinetoTrace) -> dict:
    """The idle gaps under ``HOST_WAIT_US`` on the GEMM streams: their lower quartile and median,
    and ``in_situ_s``, the lower quartile of each gap less the eager gap teton charges its kernel
    (none for a CUDA graph replay), floored at 0 (module docstring)."""
    streams = sorted({k.stream for k in trace.kernels if k.cls == "gemm"}, key=str)
    gaps, excess = [], []
    for s in streams:
        end = None
        for k in (k for k in trace.kernels if k.stream == s):
            if end is not None and 0.0 <= k.ts_us - end < HOST_WAIT_US:
                gaps.append((k.ts_us - end) * 1e-6)
                excess.append(gaps[-1] - (0.0 if k.launch == "cudaGraphLaunch" else EAGER_KERNEL_GAP_S))
            end = k.end_us if end is None else max(end, k.end_us)
    quartile = _quartile(excess)
    return {"streams": streams, "gaps": len(gaps), "lower_quartile_s": _quartile(gaps),
            "median_s": statistics.median(gaps) if gaps else None, "mean_s": statistics.fmean(gaps) if gaps else None,
            "eager_gap_s": EAGER_KERNEL_GAP_S, "in_situ_s": None if quartile is None else max(0.0, quartile),
            "threshold_s": HOST_WAIT_US * 1e-6}


def calibrate_from_trace(trace: KinetoTrace, gpu_name: str | None = None) -> TraceCalibration:
    """Estimate teton's in-situ parameters from one rank's trace (see the module docstring)."""
    gpu = trace_gpu(trace, gpu_name)
    eff = cluster_efficiency(gpu, {"profile": "burst"})
    notes: list[str] = []
    gemm = _gemm(trace, gpu, eff, notes)
    nccl, collective = _nccl(trace, gpu, eff, notes)
    gap = _gaps(trace)
    in_situ = {"tensor_core_in_situ": gemm["ratio"], "collective_in_situ": collective,
               "kernel_gap_s": gap["in_situ_s"]}
    in_situ = {key: v for key, v in in_situ.items() if v is not None}
    if "tensor_core_in_situ" not in in_situ:
        notes.append("tensor_core_in_situ not estimated: " + (
            "no GEMM kernel ran under an aten GEMM op with Input Dims" if gemm["kernels"] else "no GEMM kernels"))
    if "kernel_gap_s" not in in_situ:
        notes.append("kernel_gap_s not estimated: no idle gap under 1 ms on a stream that runs GEMMs")
    else:
        notes.append(f"kernel_gap_s from {gap['gaps']:,} idle gaps under 1 ms on the GEMM streams: lower quartile "
                     f"{gap['lower_quartile_s'] * 1e6:.3g} us (median {gap['median_s'] * 1e6:.3g} us), less the "
                     f"{EAGER_KERNEL_GAP_S * 1e6:g} us eager gap teton already charges each eagerly launched kernel: "
                     f"{in_situ['kernel_gap_s'] * 1e6:.3g} us more per kernel")
    if "kernel_gap_s" in in_situ and all(float(k.ts_us).is_integer() and float(k.dur_us).is_integer() for k in trace.kernels):
        notes.append("timestamps are whole microseconds: the gaps' lower quartile is quantised to 1 us")
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
