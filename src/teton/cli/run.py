"""``teton run SPEC``: simulate one training step (and what the spec asks beyond it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath, print_json

GIB = 2**30
# The keys a spec's storage / reliability sections add, as the table shows them (JSON keeps the keys).
EXTRA_ROWS = {
    "checkpoint_save_s": ("checkpoint save", lambda v: f"{v:,.2f} s"),
    "checkpoint_blocking_s": ("checkpoint blocks training", lambda v: f"{v:,.3f} s"),
    "checkpoint_restore_s": ("checkpoint restore", lambda v: f"{v:,.2f} s"),
    "ettr": ("ETTR", lambda v: f"{v * 100:.1f} %"),
    "time_to_train_days": ("time to train", lambda v: f"{v:,.1f} days"),
    "energy_mwh": ("energy", lambda v: f"{v:,.0f} MWh"),
    "cost_usd": ("cost", lambda v: f"${v:,.0f}"),
}


def run_spec(spec_path: Path, overrides: list[str] | None, trace: Path | None = None) -> dict:
    """The full result dict of ``teton run``: the step, plus storage / run-length extras.

    ``trace``: also write the pipeline schedule as a Chrome / Perfetto trace (JSON)."""
    from teton.engine.step import simulate_step
    from teton.spec import load_spec

    spec = load_spec(spec_path, overrides)
    if trace is not None:
        _check_writable(trace)
    check_reliability(spec)
    result = simulate_step(spec, timeline=trace is not None)
    out = result.to_dict()
    if trace is not None:
        write_chrome_trace(out.pop("timeline"), trace)
    from teton.whole_run import run_extras

    out.update(run_extras(spec, result))
    if spec.reliability is not None and not any(k in spec.reliability for k in ("tokens", "days")):
        out["notes"] = [*(out.get("notes") or []), "reliability: gives no run length (tokens or days), "
                        "so no goodput, time-to-train or cost is computed"]
    return out


def check_reliability(spec) -> None:
    """Validate the spec's ``reliability:`` section up front: without a run length it is never
    read, and a misspelt key (``token:``) would silently give no goodput."""
    if spec.reliability is not None:
        from teton.reliability.config import parse_reliability

        parse_reliability(spec.reliability)


def _check_writable(path: Path) -> None:
    from teton.errors import SpecError

    if path.is_dir() or not path.parent.is_dir():
        raise SpecError("--trace", str(path), "must be a file path in an existing directory")


def write_chrome_trace(events: list[dict], path: Path) -> None:
    """Pipeline events as the Chrome trace-event format (chrome://tracing, ui.perfetto.dev):
    one thread per pipeline rank, complete events ("ph": "X") in microseconds."""
    import json

    trace = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "pipeline (one DP replica)"}}]
    for r in sorted({e["rank"] for e in events}):
        trace.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"pp rank {r}"}})
    for e in events:
        trace.append({"name": f"{e['pass']} c{e['chunk']} mb{e['microbatch']}", "cat": e["pass"], "ph": "X",
                      "pid": 0, "tid": e["rank"], "ts": e["start_s"] * 1e6, "dur": (e["end_s"] - e["start_s"]) * 1e6,
                      "args": {"chunk": e["chunk"], "microbatch": e["microbatch"]}})
    try:
        path.write_text(json.dumps({"traceEvents": trace, "displayTimeUnit": "ms"}))
    except OSError as err:
        from teton.errors import SpecError

        raise SpecError("--trace", str(path), f"cannot write the trace ({err.strerror})") from None


PREDICTION_MODES = {
    "in_situ": "in-situ (kernels as fitted on the training set)",
    "burst": "burst (microbenchmarks only: the best case)",
    "calibrated": "calibrated (the cluster's own in-situ values)",
}


def print_table(d: dict) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    console = output_console()
    lay = d["layout"]
    title = (f"{d['gpus']} GPUs  tp={lay['tp']} cp={lay['cp']} pp={lay['pp']} dp={lay['dp']} "
             f"v={lay['virtual_stages']}  micro-batches/DP rank={d['micro_batches']}  "
             f"[{d['fidelity']}, {d['placement']}]")
    t = Table(title=title, show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    band = ""
    if d.get("step_time_s_low") is not None:
        band = f"  (band {d['step_time_s_low']:.3f} - {d['step_time_s_high']:.3f} s)"
    t.add_row("step time", f"{d['step_time_s']:.3f} s{band}")
    t.add_row("prediction", PREDICTION_MODES.get(d.get("prediction_mode", ""), d.get("prediction_mode", "")))
    if abs(d["mfu_bf16"] - d["mfu"]) > 1e-12:  # fp8: MFU against the fp8 peak, and against bf16's
        t.add_row("MFU", f"{d['mfu'] * 100:.1f} % of the fp8 peak ({d['mfu_bf16'] * 100:.1f} % of bf16's)")
    else:
        t.add_row("MFU", f"{d['mfu'] * 100:.1f} %")
    t.add_row("HFU", f"{d['hfu'] * 100:.1f} %")
    t.add_row("TFLOPs / GPU", f"{d['tflops_per_gpu']:.0f}")
    t.add_row("tokens / s", f"{d['tokens_per_s']:,.0f}")
    fits = "fits" if d["fits_in_memory"] else f"DOES NOT FIT (largest: {d['largest_memory_term']})"
    t.add_row("memory / GPU", f"{d['memory_per_gpu_bytes'] / GIB:.1f} GiB of {d['hbm_bytes'] / GIB:.1f} GiB  {fits}")
    for key, (label, fmt) in EXTRA_ROWS.items():
        if key in d:
            t.add_row(label, fmt(d[key]))
    console.print(t)
    b = Table(title="where the step time goes")
    b.add_column("category")
    b.add_column("seconds", justify="right")
    b.add_column("share", justify="right")
    for k, v in d["breakdown"].items():
        b.add_row(k, f"{v:.3f}", f"{v / d['step_time_s'] * 100:.1f} %")
    console.print(b)
    mtab = Table(title="memory per GPU (fullest pipeline rank)")
    mtab.add_column("term")
    mtab.add_column("GiB", justify="right")
    for k, v in d["memory_breakdown"].items():
        mtab.add_row(k, f"{v / GIB:.2f}")
    mtab.add_row("total", f"{d['memory_per_gpu_bytes'] / GIB:.2f}")
    console.print(mtab)
    for note in d.get("notes") or []:
        console.print(f"note: {note}")


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        spec: SpecPath,
        set_: SetOverrides = None,
        json_: JsonFlag = False,
        trace: Annotated[Path | None, typer.Option("--trace", help="write the pipeline schedule as a "
                                                   "Chrome/Perfetto trace (JSON)")] = None,
    ) -> None:
        """Simulate one training step of SPEC: step time, MFU, memory, where the time goes."""
        d = run_spec(spec, set_, trace)
        if json_:
            print_json(d)
        else:
            print_table(d)
