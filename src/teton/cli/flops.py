"""``teton flops SPEC``: teton's per-layer FLOPs next to PyTorch's FlopCounterMode on a reference layer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath, print_json


def flops_spec(spec_path: Path, overrides: list[str] | None, attention_kernel: str = "flash") -> dict:
    """The comparison dict of ``teton flops`` for the spec's layer under its TP / CP / seq_len / micro_batch."""
    from teton.progress import progress_task
    from teton.spec import load_spec
    from teton.workload.torch_reference import ATTENTION_KERNELS, compare_layer_flops, require_torch

    if attention_kernel not in ATTENTION_KERNELS:
        from teton.errors import SpecError

        raise SpecError("--attention-kernel", attention_kernel, f"one of {', '.join(ATTENTION_KERNELS)}")
    spec = load_spec(spec_path, overrides)
    with progress_task("importing torch, counting a reference layer and head") as tick:
        tick(0, 3)
        require_torch()
        return compare_layer_flops(spec.model, spec.job, attention_kernel,
                                   progress=lambda done, total: tick(1 + done, 1 + total))


def _print_table(d: dict) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    console = output_console()
    title = (f"{d['model']} tp={d['tp']} cp={d['cp']} seq_len={d['seq_len']} micro_batch={d['micro_batch']} "
             f"kernel={d['attention_kernel']}: one GPU, one micro-batch")
    t = Table(title=title)
    for col in ("category", "teton TFLOP", "PyTorch TFLOP", "teton / PyTorch", "expected"):
        t.add_column(col, justify="left" if col == "category" else "right")
    for r in d["rows"]:
        t.add_row(r["category"], f"{r['teton_flops'] / 1e12:.4f}", f"{r['torch_flops'] / 1e12:.4f}",
                  f"{r['ratio']:.6f}", f"{r['expected_ratio']:g}")
    console.print(t)
    console.print("note: FlopCounterMode counts the full s x s attention matrix (the causal mask is ignored); "
                  "teton counts the causal half. Backward: "
                  + ("flash kernel formula, 2.5x forward (score recomputation), as teton."
                     if d["attention_kernel"] == "flash" else
                     "math path on meta, 2x forward (no recomputation); teton uses 2.5x."))
    if d["teton_recompute_flops"]:
        console.print(f"note: teton's backward also recomputes {d['teton_recompute_flops'] / 1e12:.4f} TFLOP "
                      f"of forward ops per {d['teton_recompute_per']} (job.recompute), not in the rows above")


def register(app: typer.Typer) -> None:
    @app.command()
    def flops(
        spec: SpecPath,
        set_: SetOverrides = None,
        json_: JsonFlag = False,
        attention_kernel: Annotated[str, typer.Option(
            "--attention-kernel", help="flash (what SDPA runs on a GPU) or math (SDPA on the meta device)")] = "flash",
    ) -> None:
        """Cross-check teton's per-layer FLOPs against PyTorch's FlopCounterMode on a reference layer."""
        d = flops_spec(spec, set_, attention_kernel)
        if json_:
            print_json(d)
        else:
            _print_table(d)
