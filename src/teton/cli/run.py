"""``teton run SPEC``: simulate one training step (and what the spec asks beyond it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath, print_json
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it

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
    result = simulate_step(spec, timeline=trace is not None)
    out = result.to_dict()
    if trace is not None:
        write_chrome_trace(out.pop("timeline"), trace)
    from teton.whole_run import run_extras

    out.update(run_extras(spec, result))
    out["spec"], out["defaults"] = resolved_spec(spec), list(spec.job_defaults)
    if spec.reliability is not None and spec.reliability.tokens is None and spec.reliability.days is None:
        out["notes"] = [*(out.get("notes") or []), "reliability: gives no run length (tokens or days), "
                        "so no goodput, time-to-train or cost is computed"]
    return out


def resolved_spec(spec) -> dict:
    """What the step was simulated for, as resolved: model, cluster, GPU, precision, sequence
    length and batch (``global_batch`` in sequences, whether given as sequences, as tokens or
    left to its default of one micro-batch per DP rank)."""
    job = spec.job
    return {"model": spec.model.name, "cluster": spec.cluster.name, "gpu": spec.cluster.gpu_spec.name,
            "gpus": job.gpus, "precision": job.precision, "seq_len": job.layout.seq_len,
            "global_batch": job.layout.sequences_per_step, "micro_batch": job.layout.micro_batch,
            "tokens_per_step": job.layout.tokens_per_step}


# the echoed fields whose defaults the header names: spec key -> job field
ECHOED_DEFAULTS = {"precision": "job.precision", "seq_len": "job.seq_len", "global_batch": "job.global_batch",
                   "micro_batch": "job.micro_batch"}


def spec_echo(d: dict) -> list[str]:
    """One line of the resolved spec, and one naming which of its fields came from defaults
    (none when the file and --set gave them all)."""
    s = d["spec"]
    lines = [f"{s['model']} on {s['cluster']} ({s['gpus']:,} x {s['gpu']})  {s['precision']}  "
             f"seq {s['seq_len']:,}  global batch {s['global_batch']:,} ({s['tokens_per_step']:,} tokens) "
             f"/ micro batch {s['micro_batch']}"]
    defaults = d.get("defaults") or []
    echoed = [f"{field}={s[key]}" + (" (dp x micro_batch: one micro-batch per DP rank)"
                                     if key == "global_batch" else "")
              for key, field in ECHOED_DEFAULTS.items() if field in defaults]
    if echoed:
        others = len(defaults) - len(echoed)
        lines.append("defaults: " + ", ".join(echoed)
                     + (f"  (+{others} other job fields at their defaults; --json lists them)" if others else ""))
    return lines


def _check_writable(path: Path) -> None:
    from teton.errors import SpecError

    if os.path.isdir(path) or not os.path.isdir(path.parent):
        raise SpecError("--timeline", str(path), "must be a file path in an existing directory")


def write_chrome_trace(events: list[dict], path: Path) -> None:
    """Pipeline events as a Chrome / Perfetto trace (:func:`teton.report.chrome_trace.chrome_trace`)."""
    import json

    from teton.atomic import write_text
    from teton.report.chrome_trace import chrome_trace

    try:
        write_text(path, json.dumps(chrome_trace(events)))
    except OSError as err:
        from teton.errors import SpecError

        raise SpecError("--timeline", str(path), f"cannot write the trace ({err.strerror})") from None




def print_table(d: dict) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console
    from teton.workload.headroom import fit_text, headroom_text

    console = output_console()
    lay = d["layout"]
    expert = (f"ep={lay['ep']} " if lay.get("ep", 1) > 1 else "") + (
        f"etp={lay['etp']} " if "etp" in lay and lay["etp"] != lay["tp"] else "")
    title = (f"{d['gpus']} GPUs  tp={lay['tp']} cp={lay['cp']} pp={lay['pp']} dp={lay['dp']} {expert}"
             f"{lay.get('pp_schedule') or 'v=' + str(lay['virtual_stages'])}  micro-batches/DP rank={d['micro_batches']}  "
             f"[{d['fidelity']}, {d['placement']}]")
    for line in spec_echo(d):
        console.print(line, markup=False, highlight=False)
    for warning in d.get("warnings") or []:  # before the tables, where it cannot be missed
        console.print(f"WARNING: {warning}", style="bold red", markup=False, highlight=False)
    t = Table(title=title, show_header=False)
    t.add_column("metric")
    t.add_column("value", justify="right")
    band = ""
    if d.get("step_time_s_low") is not None:
        band = f"  (band {d['step_time_s_low']:.3f} - {d['step_time_s_high']:.3f} s)"
    t.add_row("step time", f"{d['step_time_s']:.3f} s{band}")
    from teton.engine.result import PREDICTION_MODES

    t.add_row("prediction", PREDICTION_MODES.get(d.get("prediction_mode", ""), d.get("prediction_mode", "")))
    # MFU / HFU against the bf16 peak, as every table shows them; an fp8 job's against its own peak too
    t.add_row("MFU", f"{d['mfu_bf16'] * 100:.1f} %")
    own_peak = d.get("precision", "bf16") != "bf16"
    if own_peak:
        t.add_row(f"MFU ({d['precision']} peak)", f"{d['mfu'] * 100:.1f} %")
    t.add_row("HFU", f"{d['hfu_bf16'] * 100:.1f} %")
    if own_peak:
        t.add_row(f"HFU ({d['precision']} peak)", f"{d['hfu'] * 100:.1f} %")
    t.add_row("TFLOPs / GPU", f"{d['tflops_per_gpu']:.0f}")
    t.add_row("tokens / s", f"{d['tokens_per_s']:,.0f}")
    fits = fit_text(d["memory_verdict"], -d["headroom_bytes"], d["memory_reserved"].get("fragmentation", 0.0),
                    d["largest_memory_term"])
    room = headroom_text(d["memory_per_gpu_bytes"], d["usable_hbm_bytes"], d["hbm_bytes"], d["memory_reserved"])
    t.add_row("memory / GPU", f"{room}  {fits}")
    for key, (label, fmt) in EXTRA_ROWS.items():
        if key in d:  # None: the whole-run figure has no value (e.g. a run too short to train)
            t.add_row(label, "n/a" if d[key] is None else fmt(d[key]))
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
        trace: Annotated[Path | None, typer.Option("--timeline", help="write the pipeline schedule as a "
                                                   "Chrome/Perfetto trace (JSON)")] = None,
    ) -> None:
        """Simulate one training step of SPEC: step time, MFU, memory, where the time goes."""
        d = run_spec(spec, set_, trace)
        if json_:
            print_json(d)
        else:
            print_table(d)
