"""Hostile inputs for the fuzz cases (``fuzz_cases``), issue 22: numbers at and past every limit
(50-digit and 5,000-digit integers, 1e-300, the smallest subnormal, -0, NaN, inf, 1e400 that
overflows to inf when read), duplicate keys and run names, a list where a mapping goes and the
reverse, and every auxiliary format teton reads: runs YAML / CSV, calibration JSON, Kineto
traces, schedule traces and sweep files, each built small and then broken in one of these ways.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

HUGE = 10**50
HOSTILE_NUMBERS = (HUGE, -HUGE, 2**63, 2**64 + 1, 2**53 + 1, 1e300, -1e300, 1e308, 1e-300, 5e-324, -0.0,
                   float("nan"), float("inf"), float("-inf"), 16777217, 10**7 + 1, 2**31)
# as text: what --set, a CSV cell or a YAML scalar holds (YAML reads .nan / .inf; 1e400 reads as inf)
HOSTILE_TEXT = ("9" * 50, "-" + "9" * 50, "9" * 5000, "1e400", "-1e400", "1e-300", "5e-324", "-0", "-0.0", ".nan",
                ".NaN", ".inf", "-.inf", "nan", "inf", "1e308", "18446744073709551617", "16777217", "0.0",
                "1e-320", "4.9e-324", "1_000_000_000_000_000_000_000")
NUMBERS = st.sampled_from(HOSTILE_NUMBERS)


def out_of_every_range(value) -> bool:
    """A number no spec field accepts: NaN, an infinity, or a magnitude past 1e18 (teton.spec.fields)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not abs(value) <= 1e18
TEXT = st.sampled_from(HOSTILE_TEXT)


def json_text(data) -> bytes:
    """JSON as Python writes it: NaN and Infinity stay (a JSON reader may refuse or accept them)."""
    return json.dumps(data, default=str).encode()


def duplicate_a_key(text: str, i: int) -> str:
    """YAML ``text`` with its ``i``-th line that holds a key given twice (the same key, once more)."""
    lines = text.splitlines()
    keyed = [n for n, ln in enumerate(lines) if ":" in ln and not ln.lstrip().startswith("-")]
    if not keyed:
        return text + "\na: 1\na: 2\n"
    n = keyed[i % len(keyed)]
    return "\n".join([*lines[: n + 1], lines[n], *lines[n + 1:]]) + "\n"


# a list where a mapping goes and the reverse, as whole sections of a spec
WRONG_CONTAINERS = ({"job": [8, 8]}, {"cluster": ["meta-roce-24k"]}, {"model": [1]}, {"storage": ["tectonic-llama3"]},
                    {"reliability": [1, 2]}, {"network": ["flow"]}, {"plan": [1]}, {"software": [1]},
                    {"cluster": {"base": "meta-roce-24k", "layers": {"name": "rack"}}},
                    {"cluster": {"base": "meta-roce-24k", "efficiency": [0.5]}},
                    {"reliability": {"rates_per_hour": [1]}}, {"reliability": {"shares": [0.5, 0.5]}},
                    {"storage": {"preset": "tectonic-llama3", "checkpoint": [1]}},
                    {"storage": {"preset": "tectonic-llama3", "data_loading": ["x"]}},
                    {"notes": {"a": 1}}, {"seed": [1]}, {"plan": {"clusters": {"a": 1}}},
                    {"job": {"gpus": 8, "parallel_order": {"tp": 1}}})


@st.composite
def hostile_spec(draw, base: dict) -> tuple[dict, bool]:
    """(spec, invalid): ``base`` (a spec mapping) with one field of a hostile number, or a section
    of the wrong container; ``invalid``: no spec loads it (a wrong container, a number out of every range)."""
    import copy

    data = copy.deepcopy(base)
    if draw(st.booleans()):
        data.update(draw(st.sampled_from(WRONG_CONTAINERS)))
        return data, True
    section = draw(st.sampled_from(("job", "model", "cluster", "reliability", "storage", "network", "plan")))
    fields = {"job": ("gpus", "tp", "pp", "cp", "seq_len", "micro_batch", "global_batch", "global_batch_tokens"),
              "model": ("layers", "hidden", "ffn_hidden", "heads", "vocab", "experts"),
              "cluster": ("hosts", "gpu_speed_cv", "frontend_oversubscription"),
              "reliability": ("days", "tokens", "rate_scale", "runs", "pue", "step_time_s", "repair_h"),
              "storage": ("servers", "ssd_read_gbytes_s", "server_nic_gbps", "chunk_bytes", "writer_jitter_sigma"),
              "network": ("qps_per_connection",), "plan": ("storage_servers", "deadline_days", "top_layouts")}
    node = data.get(section)
    if not isinstance(node, dict):
        node = {"base": node} if section in ("cluster", "model") and isinstance(node, str) else \
            ({"preset": "tectonic-llama3"} if section == "storage" else {})
        data[section] = node
    value = draw(NUMBERS)
    node[draw(st.sampled_from(fields[section]))] = value
    return data, out_of_every_range(value)


@st.composite
def runs_file(draw, example: str) -> tuple[str, bytes]:
    """(suffix, content) of a runs file with a hostile measurement, duplicate names or keys, or the
    wrong container (a mapping where the list goes, a list where a run goes)."""
    how = draw(st.sampled_from(("number", "csv-number", "dup-name", "dup-key", "container", "csv-cells")))
    if how == "csv-number":
        return ".csv", f"spec,step_time_s\n{example},{draw(TEXT)}\n".encode()
    if how == "csv-cells":
        return ".csv", f"spec,step_time_s\n{example},1,{draw(TEXT)}\n{example}\n".encode()
    if how == "dup-name":
        return ".yaml", (f"- {{name: a, spec: {example}, step_time_s: 1}}\n"
                         f"- {{name: a, spec: {example}, step_time_s: 2}}\n").encode()
    if how == "dup-key":
        return ".yaml", f"- spec: {example}\n  step_time_s: 1\n  step_time_s: 2\n".encode()
    if how == "container":
        return ".yaml", draw(st.sampled_from((f"runs: {{spec: {example}}}\n", f"- [{example}, 1]\n",
                                               f"- spec: {example}\n  step_time_s: [1]\n",
                                               f"- spec: {example}\n  step_time_s: 1\n  set: {{job.tp: 8}}\n",
                                               "runs: 3\n"))).encode()
    value = draw(st.one_of(NUMBERS, TEXT))
    return ".yaml", json_text([{"spec": example, draw(st.sampled_from(("step_time_s", "tflops_per_gpu"))): value}])


@st.composite
def calibration_doc(draw) -> tuple[bytes, bool]:
    """(content, invalid) of a calibration JSON with a hostile number, a string where a number
    goes, or the wrong container."""
    how = draw(st.sampled_from(("override", "layer", "container", "digits")))
    if how == "digits":
        return b'{"gemm_bf16": ' + draw(st.sampled_from((b"9" * 5000, b"1e400", b"-0", b"NaN", b"Infinity"))) + b"}", True
    if how == "container":
        return json_text(draw(st.sampled_from(({"efficiency_overrides": [0.5]}, {"efficiency_overrides": {}},
                                                {"gemm_bf16": [0.5]}, {"gemm_bf16": {"a": 1}}, [{"gemm_bf16": 0.5}],
                                                {"efficiency_overrides": {"mem": 0.8}, "layer": [1, 2]})))), True
    if how == "layer":
        layer = {"tokens": 8192, "hidden": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8, "tp": 1}
        value = draw(NUMBERS)
        layer[draw(st.sampled_from(sorted(layer) + ["burst_s", "sustained_s"]))] = value
        return json_text({"efficiency_overrides": {"gemm_bf16": 0.7}, "layer": layer}), out_of_every_range(value)
    key = draw(st.sampled_from(("gemm_bf16", "mem", "nccl_net", "sustained_ratio", "kernel_gap_s", "profile")))
    value = draw(st.one_of(NUMBERS, TEXT))
    return json_text({"efficiency_overrides": {key: value}}), isinstance(value, str) or out_of_every_range(value)


def _kineto_events(ts_kernel, dur_kernel, dims) -> list[dict]:
    return [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 99, "dur": 10,
             "args": {"External id": 1, "Input Dims": dims, "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 5,
             "args": {"correlation": 1}},
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "pid": 0, "tid": 7,
             "ts": ts_kernel, "dur": dur_kernel, "args": {"correlation": 1, "stream": 7, "device": 0}}]


@st.composite
def kineto_trace(draw) -> bytes:
    """A small Kineto trace (one GEMM) with a hostile time, duration or GEMM dims, or the wrong container."""
    how = draw(st.sampled_from(("ts", "dur", "dims", "container", "digits")))
    ts, dur, dims = 200.0, 100.0, [[4096, 4096], [4096, 4096]]
    if how == "ts":
        ts = draw(NUMBERS)
    elif how == "dur":
        dur = draw(NUMBERS)
    elif how == "dims":
        n = draw(st.sampled_from((HUGE, 2**63, -1, 0, 10**7)))
        dims = [[n, n], [n, n]]
    elif how == "container":
        return json_text(draw(st.sampled_from(({"traceEvents": {"a": 1}}, {"traceEvents": [[1, 2]]},
                                                {"traceEvents": _kineto_events(200, 100, {"a": 1})}, [1, 2, 3],
                                                {"traceEvents": _kineto_events([200], 100, dims)}))))
    elif how == "digits":
        return b'{"traceEvents": [{"cat": "kernel", "ph": "X", "ts": ' + b"9" * 5000 + b', "dur": 1}]}'
    top = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
    return json_text({**top, "traceEvents": _kineto_events(ts, dur, dims)})


@st.composite
def schedule_trace_text(draw) -> bytes:
    """Our trace CSV with a hostile cell, or duplicate job ids."""
    cols = ["job_id", "arrival_s", "gpus", "duration_s", "tokens", "tp", "pp"]
    row = ["a", "0", "8", "3600", "", "", ""]
    if draw(st.integers(0, 4)) == 4:
        return (b"job_id,arrival_s,gpus,duration_s\na,0,8,3600\na,1,8,3600\n")
    i = draw(st.sampled_from((1, 2, 3, 4, 5, 6)))
    row[i] = draw(TEXT)
    if i == 4:
        row[3] = ""
    return (",".join(cols) + "\n" + ",".join(row) + "\n").encode()


@st.composite
def sweep_text(draw, base: str) -> tuple[bytes, bool]:
    """(content, invalid) of a sweep file with hostile grid values, a duplicate key, a huge grid or
    a costly filter, or the wrong container (a mapping where a list of values goes, a list where
    the grid goes); all but the hostile values are invalid."""
    text, invalid = draw(_sweep_text(base))
    return text.encode(), invalid


@st.composite
def _sweep_text(draw, base: str) -> tuple[str, bool]:
    how = draw(st.sampled_from(("values", "dup-key", "container", "huge", "filter")))
    if how == "dup-key":
        return f"base: {base}\ngrid:\n  job.tp: [1, 2]\n  job.tp: [4]\n", True
    if how == "container":
        return draw(st.sampled_from((f"base: {base}\ngrid: [job.tp, 1]\n", f"base: {base}\ngrid: {{job.tp: {{a: 1}}}}\n",
                                     f"base: [{base}]\ngrid: {{job.tp: [1]}}\n",
                                     f"base: {base}\ngrid: {{job.tp: [1]}}\nzip: {{job.pp: 1}}\n",
                                     f"base: {base}\ngrid: {{job.tp: [1]}}\nfilter: {{a: 1}}\n"))), True
    if how == "huge":
        keys = ("job.tp", "job.pp", "job.cp", "job.ep", "job.micro_batch", "job.zero", "job.seq_len")
        return f"base: {base}\ngrid:\n" + "".join(f"  {k}: {list(range(1, 11))}\n" for k in keys), True
    if how == "filter":
        expr = draw(st.sampled_from(("((10 ** 1000) ** 1000) ** 1000 > job.tp", "'x' * 10 ** 15 == job.tp",
                                     "job.tp ** 1024 ** 1024 > 0", "job.tp * 10 ** 300 > 1e308")))
        return f"base: {base}\ngrid: {{job.tp: [1, 2]}}\nfilter: [\"{expr}\"]\n", True
    key = draw(st.sampled_from(("job.seq_len", "job.tp", "model.hidden", "cluster.hosts", "reliability.days",
                                "storage.servers")))
    values = draw(st.lists(st.one_of(NUMBERS, TEXT), min_size=1, max_size=2))
    return f"base: {base}\ngrid:\n  {key}: " + json.dumps(values) + "\n", False
