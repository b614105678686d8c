"""``teton ops SPEC``: one micro-batch of the spec's layout, op by op, as the step model prices it."""

from __future__ import annotations

from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath, print_json


def register(app: typer.Typer) -> None:
    @app.command()
    def ops(
        spec: SpecPath,
        set_: SetOverrides = None,
        block: Annotated[str, typer.Option("--block", help="layer | embedding | head | all")] = "layer",
        json_: JsonFlag = False,
    ) -> None:
        """Per-op FLOPs, bytes, GEMM shape, achieved fraction of peak and time of one micro-batch."""
        from teton.engine.op_table import block_totals, op_rows
        from teton.errors import SpecError
        from teton.spec import load_spec

        if block not in ("layer", "embedding", "head", "all"):
            raise SpecError("--block", block, "one of layer, embedding, head, all")
        spec = load_spec(spec, set_)
        # --block layer: the plain layer and, under selective_layer, the checkpointed one
        rows = [r for r in op_rows(spec)
                if block in ("all", r["block"]) or (block == "layer" and r["block"].endswith("layer"))]
        totals = block_totals(rows)
        if json_:
            print_json({"rows": rows, "totals_s": totals})
            return
        from rich.table import Table

        from teton.cli._common import console as output_console

        j = spec.job
        lay = j.layout
        t = Table(title=f"{spec.model.name}: one micro-batch on one GPU, tp={lay.tp} cp={lay.cp} "
                        f"seq={lay.seq_len} mb={lay.micro_batch} {j.precision}")
        cols = (["block"] if block == "all" else []) + ["op", "kind", "shape", "GFLOP", "MB", "%pk", "ms", "exp ms"]
        for col in cols:
            t.add_column(col, justify="left" if col in ("block", "op", "kind", "shape") else "right")
        short = {"attention": "attn", "memory": "mem", "all_gather": "AG", "reduce_scatter": "RS",
                 "all_reduce": "AR", "all_to_all": "A2A", "send_recv": "p2p"}
        for r in rows:
            kind = short.get(r["kind"], r["kind"]) + ("*" if r["bound"] == "memory" and r["kind"] == "gemm" else "")
            cells = ([r["block"]] if block == "all" else []) + [
                f"{r['pass']} {r['name']}", kind, r["shape"],
                f"{r['flops'] / 1e9:,.0f}" if r["flops"] else "", f"{r['bytes'] / 1e6:,.0f}",
                f"{r['fraction_of_peak'] * 100:.0f}" if r["fraction_of_peak"] else "",
                f"{r['time_s'] * 1e3:.3f}", f"{r['exposed_s'] * 1e3:.3f}"]
            t.add_row(*cells)
        console = output_console()
        console.print(t)
        console.print("%pk: achieved fraction of the dense peak; exp ms: exposed time (collectives run "
                      "alongside a GEMM with job.tp_overlap); gemm*: HBM-bound")
        for key, cats in totals.items():
            parts = ", ".join(f"{c} {s * 1e3:.2f} ms" for c, s in cats.items() if s)
            console.print(f"{key}: {parts}")
