"""``teton compare``: two variants of a job side by side: what one change buys, category by category.

    teton compare SPEC --b job.precision=fp8                  # SPEC vs SPEC with fp8
    teton compare SPEC --a cluster=meta-roce-24k --b cluster=meta-ib-24k
    teton compare A.yaml B.yaml                              # two spec files
    teton compare A.yaml B.yaml --set job.gpus=8192 --set job.dp=64   # both, then --a / --b per side

Both variants are simulated by the same step model; every number is the model's, and the deltas
are B relative to A. The table's MFU and HFU are against the bf16 dense peak for both variants
(``mfu_bf16`` / ``hfu_bf16``), so fp8 against bf16 compares against one peak; the figures against
the job's own precision peak (JSON ``mfu`` / ``hfu``) are shown, as "MFU (fp8 peak)", only when
both variants have that precision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import OVERRIDE_WHERE, JsonFlag, SetOverrides, print_json
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it

METRICS = ("step_time_s", "mfu_bf16", "mfu", "hfu_bf16", "hfu", "tflops_per_gpu", "tokens_per_s",
           "memory_per_gpu_bytes")
OWN_PEAK = ("mfu", "hfu")  # against the job's precision peak: a table row only when A and B share it


def compare_specs(spec_a: Path, spec_b: Path | None, set_a: list[str] | None, set_b: list[str] | None,
                  set_both: list[str] | None = None) -> dict:
    """Both variants' results and B's change against A: each metric's relative change
    (``change``; memory per GPU among them), the shares' (MFU, HFU, ETTR) in percentage points
    too (``change_points``), and each breakdown category's seconds (``breakdown_delta_s``).
    ``set_both`` applies to both variants, before each one's own ``set_a`` / ``set_b``."""
    from teton.engine.step import simulate_step
    from teton.errors import SpecError
    from teton.spec import load_spec
    from teton.whole_run import run_extras

    if spec_b is None and not (set_a or set_b):
        raise SpecError("SPEC_B", "(none)", "give a second spec, or --a / --b overrides that make the variants differ")
    both = list(set_both or [])
    variants = (("a", spec_a, [*both, *(set_a or [])]), ("b", spec_b or spec_a, [*both, *(set_b or [])]))
    specs = {}
    for name, path, sets in variants:
        try:  # both variants validated before either is simulated
            specs[name] = load_spec(path, sets)
        except SpecError as err:  # say which variant is bad: both may come from one file
            raise SpecError(err.field, err.value, err.allowed, where=_variant_where(err.where, name, both)) from None
    out = {}
    for name, path, sets in variants:
        r = simulate_step(specs[name])
        d = r.to_dict()
        d.update(run_extras(specs[name], r))
        d["label"] = str(path) + "".join(f" {s}" for s in (sets or []))
        out[name] = d
    a, b = out["a"], out["b"]
    keys = [k for k in (*METRICS, "checkpoint_save_s", "ettr", "time_to_train_days", "cost_usd") if k in a and k in b]
    out["change"] = {k: _rel(a[k], b[k]) for k in keys}
    out["change_points"] = {k: 100 * (b[k] - a[k]) for k in keys if k in SHARES}
    out["breakdown_delta_s"] = {k: b["breakdown"].get(k, 0.0) - a["breakdown"].get(k, 0.0)
                                for k in dict.fromkeys([*a["breakdown"], *b["breakdown"]])}
    return out


def _variant_where(where: str | None, name: str, both: list[str]) -> str:
    """``variant A (--set ITEM)`` / ``variant B (--b ITEM)``: the variant, and the flag that gave
    each override an error names (an override in ``both`` came from --set)."""
    at = None
    if where:
        parts = where.split(OVERRIDE_WHERE)
        at = parts[0] + "".join(("--set " if p.strip() in both else f"--{name} ") + p for p in parts[1:])
    return f"variant {name.upper()}" + (f" ({at.strip()})" if at else "")


SHARES = ("mfu_bf16", "mfu", "hfu_bf16", "hfu", "ettr")  # fractions: compared in percentage points


def _pct(v: float) -> str:
    return f"{v * 100:.1f} %"


def _rel(a: float, b: float) -> float | None:
    return None if not a else b / a - 1


def register(app: typer.Typer) -> None:
    @app.command()
    def compare(
        spec_a: Annotated[Path, typer.Argument(metavar="SPEC", help="spec file of variant A")],
        spec_b: Annotated[Path | None, typer.Argument(metavar="[SPEC_B]", help="spec file of variant B "
                                                      "(default: SPEC again, with --b overrides)")] = None,
        set_a: Annotated[list[str] | None, typer.Option("--a", help="override for A: key.path=value")] = None,
        set_b: Annotated[list[str] | None, typer.Option("--b", help="override for B: key.path=value")] = None,
        set_both: SetOverrides = None,
        json_: JsonFlag = False,
    ) -> None:
        """Two variants of a job side by side: metrics, where the time goes, memory; B against A.

        Overrides given with --set apply to both variants, before --a / --b."""
        d = compare_specs(spec_a, spec_b, set_a, set_b, set_both)
        if json_:
            print_json(d)
            return
        from rich.table import Table

        from teton.cli._common import console as output_console

        a, b = d["a"], d["b"]
        console = output_console()
        console.print(f"A: {a['label']}\nB: {b['label']}")
        for name, v in (("A", a), ("B", b)):
            for warning in v.get("warnings") or []:
                console.print(f"WARNING ({name}): {warning}", style="bold red", markup=False, highlight=False)
        t = Table(title="B against A")
        for col in ("", "A", "B", "change"):
            t.add_column(col, justify="left" if not col else "right")
        pct = _pct
        prec = a.get("precision", "bf16")
        fmt = {"step_time_s": ("step time", lambda v: f"{v:.3f} s"), "mfu_bf16": ("MFU", pct),
               "mfu": (f"MFU ({prec} peak)", pct), "hfu_bf16": ("HFU", pct), "hfu": (f"HFU ({prec} peak)", pct),
               "tflops_per_gpu": ("TFLOPs / GPU", lambda v: f"{v:.0f}"),
               "tokens_per_s": ("tokens / s", lambda v: f"{v:,.0f}"),
               "memory_per_gpu_bytes": ("memory / GPU", lambda v: f"{v / GIB:.1f} GiB"),
               "checkpoint_save_s": ("checkpoint save", lambda v: f"{v:.2f} s"), "ettr": ("ETTR", lambda v: f"{v * 100:.1f} %"),
               "time_to_train_days": ("time to train", lambda v: f"{v:.1f} days"),
               "cost_usd": ("cost", lambda v: f"${v:,.0f}")}
        own_peak = prec != "bf16" and b.get("precision", "bf16") == prec  # both fp8: their own peak is one
        for k, change in d["change"].items():
            if k in OWN_PEAK and not own_peak:
                continue
            label, f = fmt[k]
            if k in SHARES:  # a share's change in percentage points, not relative
                t.add_row(label, f(a[k]), f(b[k]), f"{d['change_points'][k]:+.1f} pts")
                continue
            t.add_row(label, f(a[k]), f(b[k]), "-" if change is None else f"{change * 100:+.1f} %")
        t.add_row("headroom / GPU", f"{a['headroom_bytes'] / GIB:.1f} GiB", f"{b['headroom_bytes'] / GIB:.1f} GiB",
                  f"{(b['headroom_bytes'] - a['headroom_bytes']) / GIB:+.1f} GiB")
        t.add_row("fits in memory", "yes" if a["fits_in_memory"] else "no", "yes" if b["fits_in_memory"] else "no", "")
        console.print(t)
        bd = Table(title="where the step time goes (seconds)")
        for col in ("category", "A", "B", "B - A"):
            bd.add_column(col, justify="left" if col == "category" else "right")
        for k, delta in d["breakdown_delta_s"].items():
            va, vb = a["breakdown"].get(k, 0.0), b["breakdown"].get(k, 0.0)
            if va or vb:
                bd.add_row(k, f"{va:.3f}", f"{vb:.3f}", f"{delta:+.3f}")
        console.print(bd)
