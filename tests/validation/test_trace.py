"""The Kineto trace reader and the calibration from a trace, on two real PyTorch profiler traces
(tests/data/traces, see NOTICE.md there) and small synthetic ones."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from teton.errors import SpecError
from teton.hardware.efficiency import cluster_efficiency
from teton.hardware.gpus import GPUS
from teton.validation.kineto import class_summary, read_kineto
from teton.validation.trace import calibrate_from_trace
from teton.validation.trace_classes import classify, gemm_flops, kernel_collective

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
T16 = TRACES / "a100-16rank-rank0.kineto.json.gz"
T2 = TRACES / "a100-2rank-nccl.kineto.json.gz"


@pytest.fixture(scope="module")
def raw16():
    return json.loads(gzip.decompress(T16.read_bytes()))


@pytest.fixture(scope="module")
def raw2():
    return json.loads(gzip.decompress(T2.read_bytes()))


@pytest.fixture(scope="module")
def trace16():
    return read_kineto(T16)


@pytest.fixture(scope="module")
def trace2():
    return read_kineto(T2)


# Counted by hand with a separate 40-line script that uses only json + gzip (not teton): every
# traceEvents entry with cat kernel / gpu_memcpy / gpu_memset and ph "X", classified by substring
# tests written apart from CLASS_RULES (memory by cat; "nccl" + "Kernel"; multi_tensor_apply /
# Adam; "gemm" outside "fbgemm", cutlass, xmma, gemv, splitKreduce, scudnn, wgrad / dgrad / fprop;
# elementwise / reduce / norm / copy / fill / index / permute / cub:: / triton ...), dur summed.
# (kernels, total dur in seconds) per class.
HAND_16 = {"gemm": (103, 0.119711), "nccl": (80, 0.190345), "optimizer": (108, 0.038447),
           "elementwise": (5725, 0.048567), "memory": (1667, 0.048318), "other": (64, 0.004375)}
HAND_2 = {"gemm": (612, 0.041211571), "nccl": (21, 0.046876493), "optimizer": (27, 0.002078278),
          "elementwise": (2037, 0.072358574), "memory": (1074, 0.002653498), "other": (3, 0.000007424)}


@pytest.mark.parametrize("which, hand", [("trace16", HAND_16), ("trace2", HAND_2)])
def test_class_counts_match_hand_count(which, hand, request):
    summary = class_summary(request.getfixturevalue(which))
    for cls, (count, time_s) in hand.items():
        assert summary[cls]["kernels"] == count, cls
        assert summary[cls]["time_s"] == pytest.approx(time_s, abs=1e-9), cls
    assert summary["attention"]["kernels"] == 0
    total = summary["total"]
    assert total["kernels"] == sum(c for c, _ in hand.values())
    assert 0 < total["busy_s"] <= min(total["span_s"], total["time_s"] + 1e-9)
    assert total["busy_fraction"] == pytest.approx(total["busy_s"] / total["span_s"])


def test_linking_and_collectives(trace16, trace2):
    # every kernel of the 2-rank trace reaches its cpu_op through its launch's correlation; the
    # newer Kineto there also writes the op's External id on the kernel: the two agree
    ext = {o.args["External id"]: o for o in trace2.cpu_ops}
    assert all(k.ops and k.ops[-1] is ext[k.args["External id"]] for k in trace2.kernels)
    assert {k.collective for k in trace2.kernels if k.cls == "nccl"} == {"AllReduce", "Broadcast"}
    assert {k.collective for k in trace16.kernels if k.cls == "nccl"} == {"SendRecv"}
    graph = [k for k in trace16.kernels if k.launch == "cudaGraphLaunch" and k.cls == "gemm"]
    assert graph and all(k.ops[-1].name.startswith("CompiledFunction") for k in graph)
    assert trace16.distributed_info["world_size"] == 16 and trace16.record_shapes is True


def test_gemm_flops_of_a_shaped_kernel(trace16):
    addmm = [k for k in trace16.kernels if k.gemm_op is not None and k.gemm_op.name == "aten::addmm"
             and k.gemm_op.args["Input Dims"] == [[64], [4096, 2798], [2798, 64], [], []]]
    assert len(addmm) == 5 and "cutlass_80_tensorop_s1688gemm_64x64_32x6_tn" in addmm[0].name
    assert addmm[0].flops == 2 * 4096 * 2798 * 64  # [[bias], [m, k], [k, n]]
    # a split-K GEMM: both of its kernels carry the op's FLOPs
    mm = [k for k in trace16.kernels if k.gemm_op is not None and k.gemm_op.args["Input Dims"] == [[64, 4096], [4096, 100]]]
    assert {k.name.split("<")[0] for k in mm} == {"void cutlass::Kernel", "void splitKreduce_kernel"}
    assert {k.flops for k in mm} == {2 * 64 * 100 * 4096}
    assert gemm_flops("aten::bmm", [[8, 128, 64], [8, 64, 256]]) == 2 * 8 * 128 * 256 * 64
    assert gemm_flops("aten::linear", [[2, 512, 1024], [4096, 1024], [4096]]) == 2 * 1024 * 4096 * 1024
    assert gemm_flops("aten::mm", [[64, 100], [99, 8]]) is None  # inner dimensions disagree
    assert gemm_flops("aten::add", [[64, 100], [64, 100]]) is None


def test_calibrate_16rank(trace16):
    cal = calibrate_from_trace(trace16)
    assert cal.gpu == "a100-80gb"
    assert set(cal.in_situ) == {"tensor_core_in_situ", "kernel_gap_s"}
    assert 0.5 <= cal.in_situ["tensor_core_in_situ"] <= 1.0
    # the idle gaps' lower quartile, 3 us (whole-microsecond timestamps), less the 2.5 us eager gap teton
    # already charges each eagerly launched kernel
    assert cal.achieved["kernel_gap"]["lower_quartile_s"] == pytest.approx(3e-6)
    assert cal.in_situ["kernel_gap_s"] == pytest.approx(0.5e-6)
    g = cal.achieved["gemm"]
    assert (g["kernels"], g["kernels_with_shapes"], g["ops_with_shapes"], g["simt_kernels"]) == (103, 30, 25, 5)
    assert any("collective_in_situ not estimated" in n for n in cal.notes)
    assert json.loads(json.dumps(cal.as_dict())) == cal.as_dict()


def test_tensor_core_in_situ_recomputed_from_the_raw_trace(raw16, trace16):
    """Burst seconds / measured seconds over the aten::mm / addmm ops, linked here by hand: the
    cuda_runtime calls inside each op's interval on its thread, their GEMM kernels by correlation
    (each aten::mm here also launches an elementwise copy of a transposed operand: not counted)."""
    ev = raw16["traceEvents"]
    dur = {}
    for e in ev:
        if e.get("cat") == "kernel" and "elementwise" not in e["name"]:  # not the operand copies
            dur[e["args"]["correlation"]] = dur.get(e["args"]["correlation"], 0) + e["dur"]
    runtime = [e for e in ev if e.get("cat") == "cuda_runtime"]
    gpu = GPUS["a100-80gb"]
    eff = cluster_efficiency(gpu, {"profile": "burst"})
    burst_s = measured_s = 0.0
    shapes = set()
    for op in (e for e in ev if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm")):
        a, b = op["args"]["Input Dims"][-2:] if op["name"] == "aten::mm" else op["args"]["Input Dims"][1:3]
        (m, k), (_, n) = a, b
        shapes.add((m, n, k))
        assert op["args"]["Input type"][0] == "float"  # fp32 -> the TF32 tensor-core figure
        measured_s += 1e-6 * sum(dur.get(r["args"]["correlation"], 0) for r in runtime
                                 if r["tid"] == op["tid"] and op["ts"] <= r["ts"] <= op["ts"] + op["dur"])
        t_tc = 2 * m * n * k / (gpu.peak_flops("tf32") * eff.gemm("tf32", gpu, m, n, k))
        t_mem = 4 * (m * k + k * n + m * n) / (gpu.hbm_bw_bytes_s * eff.mem)
        burst_s += max(t_tc, t_mem)
    assert len(shapes) == 5
    assert measured_s == pytest.approx(1824e-6)  # 68 + 460 + 501 + 685 + 110 us over five shapes
    cal = calibrate_from_trace(trace16)
    assert cal.achieved["gemm"]["measured_s"] == pytest.approx(measured_s, abs=1e-12)
    assert cal.in_situ["tensor_core_in_situ"] == pytest.approx(burst_s / measured_s, rel=1e-12)


def test_calibrate_2rank_collective(raw2, trace2):
    cal = calibrate_from_trace(trace2)
    assert cal.gpu == "a100-40gb"  # NVIDIA A100-PG509-200, 42.3 GB
    assert set(cal.in_situ) == {"collective_in_situ", "kernel_gap_s"}
    assert any("tensor_core_in_situ not estimated" in n for n in cal.notes)
    assert any("record_shapes was off" in n for n in cal.notes)
    # recomputed from the kernels' comms args: n = 2, busbw = algbw for all-reduce and broadcast,
    # teton's t = S / (B_nvlink e_nccl c) + steps * 2 us (2 ring steps all-reduce, 1 broadcast)
    ncc = [e for e in raw2["traceEvents"] if e.get("cat") == "kernel" and "Collective name" in e["args"]]
    assert len(ncc) == 21 and {e["args"]["Group size"] for e in ncc} == {2}
    eff = cluster_efficiency(GPUS["a100-40gb"], {"profile": "burst"})
    busbw = GPUS["a100-40gb"].nvlink_bw_bytes_s * eff.busbw_fraction("nvlink")
    size = sum({"Float": 4, "Long": 8}[e["args"]["dtype"]] * e["args"]["In msg nelems"] for e in ncc)
    t = sum(e["dur"] for e in ncc) * 1e-6
    steps = sum(2 if e["args"]["Collective name"] == "allreduce" else 1 for e in ncc)
    assert cal.in_situ["collective_in_situ"] == pytest.approx(size / busbw / (t - steps * 2e-6), rel=1e-9)
    assert cal.achieved["nccl"]["busbw_bytes_s"] == pytest.approx(size / t, rel=1e-9)
    assert any("outside its fit bounds" in n and "collective_in_situ" in n for n in cal.notes)


# --- synthetic traces -------------------------------------------------------------------------

def _trace(events, **top):
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
            "traceEvents": events, **top}


def _launch(corr, ts, op=None, dims=None, types=None, name="sm90_xmma_gemm_bf16bf16_bf16f32", dur=100.0,
            start=None, stream=7, **kargs):
    """A cpu_op (optional) around a cudaLaunchKernel at ts, and its kernel starting at ``start``."""
    out = []
    if op:
        args = {"External id": corr} | ({"Input Dims": dims, "Input type": types} if dims else {})
        out.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts - 1, "dur": 10, "args": args})
    out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                "dur": 5, "args": {"correlation": corr}})
    out.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": start, "dur": dur,
                "args": {"correlation": corr, "stream": stream, "device": 0, **kargs}})
    return out


def _write(tmp_path, data, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def test_synthetic_gemms_gaps_and_collective(tmp_path):
    bf16 = ["c10::BFloat16", "c10::BFloat16"]
    ag = {"Collective name": "_allgather_base", "In msg nelems": 2**24, "Out msg nelems": 2**27,
          "Group size": 8, "dtype": "BFloat16"}
    events = (_launch(1, 100, "aten::mm", [[8192, 8192], [8192, 8192]], bf16, dur=1500.0, start=1000.0)
              + _launch(2, 120, "aten::bmm", [[4, 1024, 512], [4, 512, 2048]], bf16, dur=40.0, start=2505.0)
              + _launch(3, 140, "aten::linear", [[2, 1024, 4096], [11008, 4096], [11008]], bf16 + ["c10::BFloat16"],
                        dur=600.0, start=2552.0)
              + _launch(4, 160, "record_param_comms", dur=1000.0, start=2600.0, stream=20,
                        name="ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", **ag))
    cal = calibrate_from_trace(read_kineto(_write(tmp_path, _trace(events))))
    gpu = GPUS["h100-sxm"]
    eff = cluster_efficiency(gpu, {"profile": "burst"})
    burst = [max(2 * b * m * n * k / (gpu.peak_flops("bf16") * eff.gemm("bf16", gpu, b * m, n, k)),
                 2 * b * (m * k + k * n + m * n) / (gpu.hbm_bw_bytes_s * eff.mem))
             for b, m, n, k in ((1, 8192, 8192, 8192), (4, 1024, 2048, 512), (1, 2048, 11008, 4096))]
    assert cal.gpu == "h100-sxm"
    assert cal.in_situ["tensor_core_in_situ"] == pytest.approx(sum(burst) / 2140e-6, rel=1e-12)
    # gaps of 5 and 7 us on stream 7: their lower quartile, 5.5 us, less the 2.5 us eager gap
    assert cal.in_situ["kernel_gap_s"] == pytest.approx(3e-6)
    s = 2**27 * 2  # all-gather S: the gathered array, bf16
    c = 7 / 8 * s / (gpu.nvlink_bw_bytes_s * eff.busbw_fraction("nvlink")) / (1e-3 - 7 * 2e-6)
    assert cal.in_situ["collective_in_situ"] == pytest.approx(c, rel=1e-12)
    assert cal.achieved["nccl"]["busbw_bytes_s"] == pytest.approx(7 / 8 * s / 1e-3)
    assert cal.achieved["nccl"]["collectives"] == {"AllGather": {"kernels": 1, "time_s": 1e-3}}


def test_kernel_classes():
    assert classify("void cutlass::Kernel2<cutlass3x_sm90_tensorop_gemm_bf16>(Params)") == "gemm"
    assert classify("nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT") == "gemm"
    assert classify("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int)") == "elementwise"
    assert classify("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>(Params)") == "attention"
    assert classify("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(Params)") == "attention"
    assert classify("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>(int)") == "optimizer"
    assert classify("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)") == "nccl"
    assert classify("Memcpy DtoD (Device -> Device)", "gpu_memcpy") == "memory"
    assert classify("void at::native::(anonymous namespace)::layer_norm_kernel<float>(int)") == "elementwise"
    assert kernel_collective("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)") == "ReduceScatter"
    assert kernel_collective("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "SendRecv"


# --- bad inputs: one-line SpecErrors naming the field -----------------------------------------

def _err(path, **kw) -> SpecError:
    with pytest.raises(SpecError) as info:
        calibrate_from_trace(read_kineto(path), **kw)
    assert "\n" not in str(info.value)
    return info.value


def test_bad_files(tmp_path):
    assert _err(tmp_path / "missing.json").field == "trace"
    (tmp_path / "b.json").write_text("this is not json")
    assert "not JSON" in str(_err(tmp_path / "b.json"))
    (tmp_path / "c.json.gz").write_text('{"traceEvents": []}')
    assert "not gzip" in str(_err(tmp_path / "c.json.gz"))
    (tmp_path / "d.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert _err(tmp_path / "d.json.gz").field == "trace"
    corrupt = bytearray(gzip.compress(b'{"traceEvents": [' + b'{"a": 1}, ' * 1000 + b"{}]}"))
    corrupt[30:60] = b"\xff" * 30  # a broken deflate stream
    (tmp_path / "e.json.gz").write_bytes(bytes(corrupt))
    assert "not a valid gzip file" in str(_err(tmp_path / "e.json.gz"))


def test_not_a_kineto_trace(tmp_path, raw2):
    assert _err(_write(tmp_path, {"displayTimeUnit": "ms"})).field == "trace.traceEvents"
    cpu_only = {"traceEvents": [{"ph": "X", "name": "main", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
                                {"ph": "X", "name": "step", "cat": "function", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}
    err = _err(_write(tmp_path, cpu_only))
    assert err.field == "trace.traceEvents" and "not a PyTorch profiler (Kineto) trace" in str(err)
    no_kernels = dict(raw2, traceEvents=[e for e in raw2["traceEvents"] if e.get("cat") != "kernel"])
    err = _err(_write(tmp_path, no_kernels, "nok.json"))
    assert err.field == "trace.traceEvents" and "GPU kernels" in str(err)


def test_shapes_stripped(tmp_path, raw16):
    """A GEMM-only trace without Input Dims: an error when nothing else can be estimated, notes
    (and the kernel gaps) when the GEMMs run back to back."""
    gemms = [e for e in raw16["traceEvents"] if e.get("cat") == "kernel" and "s1688gemm" in e["name"]]
    corr = {e["args"]["correlation"] for e in gemms}
    gemm_ops = ("aten::mm", "aten::addmm", "aten::linear", "CompiledFunction", "CompiledFunctionBackward")
    cpu = [dict(e, args={k: v for k, v in e["args"].items() if k not in ("Input Dims", "Input type")})
           for e in raw16["traceEvents"] if (e.get("cat") == "cpu_op" and e["name"] in gemm_ops)
           or (e.get("cat") == "cuda_runtime" and e["args"]["correlation"] in corr)]
    top = {k: v for k, v in raw16.items() if k not in ("traceEvents", "record_shapes")}
    one = _write(tmp_path, dict(top, traceEvents=cpu + gemms[:1]), "one.json")
    err = _err(one)
    assert err.field == "trace.record_shapes" and "record_shapes=True" in str(err)
    cal = calibrate_from_trace(read_kineto(_write(tmp_path, dict(top, traceEvents=cpu + gemms), "all.json")))
    assert set(cal.in_situ) == {"kernel_gap_s"}
    assert any("record_shapes was off" in n for n in cal.notes)


@pytest.mark.parametrize("event,key,value,field", [
    (1, "ts", "abc", "trace.traceEvents[1].ts"),  # a launch's time (the cpu_op stack lookup)
    (1, "ts", [1], "trace.traceEvents[1].ts"),
    (1, "correlation", [1], "trace.traceEvents[1].args.correlation"),
    (2, "correlation", {"a": 1}, "trace.traceEvents[2].args.correlation"),
    (2, "device", [0], "trace.traceEvents[2].args.device"),
    (2, "stream", [7], "trace.traceEvents[2].args.stream"),
    (0, "External id", [3], "trace.traceEvents[0].args.External id"),
    (2, "cat", ["kernel"], "trace.traceEvents[2].cat"),
    # past float range: OverflowError in float() before times were bounded; inf and NaN read silently
    (2, "ts", 10**400, "trace.traceEvents[2].ts"),
    (2, "ts", float("inf"), "trace.traceEvents[2].ts"),
    (2, "dur", float("nan"), "trace.traceEvents[2].dur"),
    (0, "ts", 1e300, "trace.traceEvents[0].ts"),
    (2, "dur", 1e-306, "trace.traceEvents[2].dur"),  # its GEMM's TFLOP/s overflowed to Infinity in --json
    (2, "dur", -5.0, "trace.traceEvents[2].dur"),
])
def test_malformed_ids_and_times(tmp_path, event, key, value, field):
    """Ids and times the linking keys dicts by, of the wrong type: a SpecError, not a TypeError."""
    events = _launch(1, 100, "aten::mm", [[64, 64], [64, 64]], ["float", "float"], start=200.0)
    target = events[event] if key in ("ts", "dur", "cat") else events[event]["args"]
    target[key] = value
    assert _err(_write(tmp_path, _trace(events))).field == field


def test_unknown_gpu(tmp_path):
    events = _launch(1, 100, "aten::mm", [[64, 64], [64, 64]], ["float", "float"], start=200.0)
    data = _trace(events)
    data["deviceProperties"][0]["name"] = "Tesla V100-SXM2-32GB"
    path = _write(tmp_path, data)
    assert _err(path).field == "trace.deviceProperties.name"
    assert calibrate_from_trace(read_kineto(path), gpu_name="a100-80gb").gpu == "a100-80gb"
    assert _err(path, gpu_name="v100").field == "gpu"


def test_the_burst_gemm_time_is_the_engines(trace16, monkeypatch):
    """The calibration times each GEMM with the engine's own formula (no second copy of it): a
    change to :meth:`ComputeModel.gemm_roofline_s` moves the burst seconds, op for op."""
    from teton.engine.compute import ComputeModel

    base = calibrate_from_trace(trace16).achieved["gemm"]
    seen = []
    real = ComputeModel.gemm_roofline_s

    def doubled(self, prec, m, n, k, flops, nbytes):
        seen.append((prec, m, n, k))
        return 2.0 * real(self, prec, m, n, k, flops, nbytes)

    monkeypatch.setattr(ComputeModel, "gemm_roofline_s", doubled)
    moved = calibrate_from_trace(trace16).achieved["gemm"]
    assert len(seen) == base["ops_with_shapes"] and {p for p, *_ in seen} == {"tf32"}
    assert moved["burst_s"] == pytest.approx(2.0 * base["burst_s"], rel=1e-12)


def test_gemm_dims_past_any_real_gemm_give_no_flops(tmp_path):
    """Dims of 10^50 made 2 b m n k overflow a float; such an op is no GEMM that ran."""
    big = 10**50
    events = _launch(1, 100, "aten::mm", [[big, big], [big, big]], ["float", "float"], start=200.0)
    trace = read_kineto(_write(tmp_path, _trace(events)))
    assert [k.flops for k in trace.kernels] == [None]
    assert gemm_flops("aten::mm", [[64, 32], [32, 16]]) == 2.0 * 64 * 32 * 16


def test_a_trace_with_a_number_past_the_digit_limit(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ts": ' + "9" * 5000 + "}]}")
    assert "too large" in _err(path).allowed
