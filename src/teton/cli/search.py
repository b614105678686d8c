"""``teton search SPEC``: which TP/CP/PP/DP layout is fastest, and does it fit?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, print_json
from teton.progress import progress_bar

GIB = 2**30  # as teton run and teton compare print memory


def _ints(text: str | None, field: str, default: tuple[int, ...]) -> tuple[int, ...]:
    from teton.errors import SpecError

    if text is None:
        return default
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise SpecError(field, text, "expected a comma-separated list of positive integers") from None
    if not values or any(x <= 0 for x in values):
        raise SpecError(field, text, "expected a comma-separated list of positive integers")
    return values


def register(app: typer.Typer) -> None:
    @app.command()
    def search(
        spec: Annotated[Path, typer.Argument(help="spec file: cluster, model, GPUs, sequence length, batch")],
        set_: SetOverrides = None,
        top: Annotated[int, typer.Option("--top", min=1, help="rows to print")] = 10,
        tp: Annotated[str | None, typer.Option("--tp", help="TP degrees to try, e.g. 4,8")] = None,
        cp: Annotated[str | None, typer.Option("--cp", help="CP degrees to try")] = None,
        pp: Annotated[str | None, typer.Option("--pp", help="PP degrees to try")] = None,
        vs: Annotated[str | None, typer.Option("--virtual-stages", help="virtual stages to try")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Simulate every valid layout of SPEC's job; rank those that fit in memory by step time."""

        from teton.spec import load_spec
        from teton.sweep.search import (
            CP_CHOICES,
            PP_CHOICES,
            TP_CHOICES,
            V_CHOICES,
            SearchSpace,
            search_layouts,
        )

        s = load_spec(spec, set_)
        space = SearchSpace(tp=_ints(tp, "--tp", TP_CHOICES), cp=_ints(cp, "--cp", CP_CHOICES),
                            pp=_ints(pp, "--pp", PP_CHOICES), virtual_stages=_ints(vs, "--virtual-stages", V_CHOICES))
        with progress_bar(disable=json_) as bar:
            task = bar.add_task("simulating layouts", total=None)
            d = search_layouts(s, space, lambda i, n: bar.update(task, completed=i, total=n))
        if not d["evaluated"]:
            from teton.errors import SpecError

            j = s.job
            tried = " ".join(f"--{k} {','.join(map(str, v))}" for k, v in (
                ("tp", space.tp), ("cp", space.cp), ("pp", space.pp), ("virtual-stages", space.virtual_stages)))
            raise SpecError("search", tried,
                            f"no layout passes the job rules for {j.gpus} GPUs, {j.tokens_per_step:,} tokens a step "
                            f"of {j.seq_len}-token sequences and {s.model.name} ({s.model.heads} heads, "
                            f"{s.model.n_kv_heads} KV heads, {s.model.layers} layers); widen --tp/--cp/--pp")
        if json_:
            print_json({**d, "rows": d["rows"][:top]})
            return
        from rich.table import Table

        from teton.cli._common import console as output_console

        t = Table(title=f"{d['evaluated']} layouts simulated, {d['fitting']} fit in memory (top {top})")
        for col in ("tp", "cp", "pp", "dp", "v", "mb", "recompute", "zero", "step s", "MFU", "mem GiB", "fits"):
            t.add_column(col, justify="right")
        for r in d["rows"][:top]:
            zero = f"{r['zero']} (per mb)" if r["zero"] == 2 and r["grad_reduce"] == "per_microbatch" else str(r["zero"])
            t.add_row(*(str(r[k]) for k in ("tp", "cp", "pp", "dp", "virtual_stages", "micro_batch", "recompute")), zero,
                      f"{r['step_time_s']:.3f}", f"{r['mfu'] * 100:.1f} %", f"{r['memory_per_gpu_bytes'] / GIB:.1f}",
                      "yes" if r["fits_in_memory"] else "no")
        output_console().print(t)
