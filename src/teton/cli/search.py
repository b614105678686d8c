"""``teton search SPEC``: which TP/CP/PP/DP/EP/expert-TP layout (and, for an MoE model, rank
order) is fastest, and does it fit?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from teton.cli._common import MAX_TOP, JsonFlag, SetOverrides, SpecPath, print_json
from teton.progress import progress_bar
from teton.units import GIB  # memory per GPU in GiB, as teton run prints it

if TYPE_CHECKING:
    from rich.table import Table

    from teton.spec.schema import Spec
    from teton.sweep.space import SearchSpace


def register(app: typer.Typer) -> None:
    @app.command()
    def search(
        spec: SpecPath,
        set_: SetOverrides = None,
        top: Annotated[int, typer.Option("--top", min=1, max=MAX_TOP, help="rows to print")] = 10,
        tp: Annotated[str | None, typer.Option("--tp", help="TP degrees to try, e.g. 4,8")] = None,
        cp: Annotated[str | None, typer.Option("--cp", help="CP degrees to try")] = None,
        pp: Annotated[str | None, typer.Option("--pp", help="PP degrees to try")] = None,
        vs: Annotated[str | None, typer.Option("--virtual-stages", help="virtual stages to try")] = None,
        ep: Annotated[str | None, typer.Option("--ep", help="EP degrees to try (MoE models; default: every "
                                               "divisor of model.experts)")] = None,
        etp: Annotated[str | None, typer.Option("--etp", help="expert-TP degrees to try (MoE models; default: 1 "
                                                "and tp)")] = None,
        cp_algo: Annotated[str | None, typer.Option("--cp-algo", help="CP algorithms to try at cp > 1, e.g. "
                                                    "ring,a2a (all_gather, ring, a2a, a2a+p2p; default: the job's own)")] = None,
        exhaustive: Annotated[bool, typer.Option(
            "--exhaustive", help="simulate every layout: dominated ones too (more recompute or ZeRO than a layout of the "
            "same degrees that fits, or misses the HBM by no more) and, on MoE models, every EP degree, expert-TP degree and "
            "rank order (default: a first pass at the largest EP that fits, refined on its best layouts)")] = False,
        json_: JsonFlag = False,
    ) -> None:
        """Simulate every valid layout of SPEC's job; rank those that fit in memory by step time."""

        from teton.spec import load_spec
        from teton.sweep.search import ep_degrees, search_layouts, search_space

        s = load_spec(spec, set_)
        space = search_space(tp=tp, cp=cp, pp=pp, virtual_stages=vs, ep=ep, etp=etp, exhaustive=exhaustive,
                             cp_algo=cp_algo)
        ep_degrees(s, space)  # --ep or --etp on a dense model: an error before anything runs
        with progress_bar(disable=json_) as bar:
            task = bar.add_task("simulating layouts", total=None)
            d = search_layouts(s, space, lambda i, n: bar.update(task, completed=i, total=n))
        if not d["evaluated"]:
            from teton.errors import SpecError

            j = s.job
            tried = " ".join(f"--{k} {','.join(map(str, v))}" for k, v in (
                ("tp", space.tp), ("cp", space.cp), ("pp", space.pp), ("virtual-stages", space.virtual_stages),
                ("ep", ep_degrees(s, space)), *((("etp", space.etp),) if space.etp else ())))
            raise SpecError("search", tried,
                            f"no layout passes the job rules for {j.gpus} GPUs, {j.layout.tokens_per_step:,} tokens a step "
                            f"of {j.layout.seq_len}-token sequences and {s.model.name} ({s.model.heads} heads, "
                            f"{s.model.n_kv_heads} KV heads, {s.model.layers} layers"
                            + (f", {s.model.experts} experts" if s.model.experts > 1 else "") + "); widen --tp/--cp/--pp"
                            + ("/--ep/--etp" if s.model.experts > 1 else ""))
        if json_:
            print_json({**d, "rows": d["rows"][:top]})
            return
        from teton.cli._common import console as output_console

        output_console().print(_table(d, s, space, top))
        if not d["fitting"] and d["rows"]:  # the table is ranked by step time: say which comes closest
            near = max(d["rows"], key=lambda r: r["headroom_bytes"])
            output_console().print(
                f"  note: no layout fits in memory; the closest, tp {near['tp']} cp {near['cp']} pp {near['pp']} "
                f"dp {near['dp']} ({near['recompute']} recompute, ZeRO {near['zero']}), is "
                f"{-near['headroom_bytes'] / GIB:,.1f} GiB short: more GPUs, offload or a smaller micro-batch")
        elif d.get("dominated"):
            where = (" at an expert choice of the first pass" if d.get("refined_top")
                     else ", never slower")  # a staged MoE pass compares savers across EP degrees
            output_console().print(f"  note: {d['dominated']:,} layouts not simulated: the same degrees fit with less "
                                   f"recompute or a lower ZeRO stage{where} (--exhaustive: every one)")
        if d.get("refined_top"):
            output_console().print(f"  note: every EP degree, then expert TP and rank order, tried on the best "
                                   f"{d['refined_top']} layouts of a first pass at the largest EP that fits "
                                   "(--exhaustive: every combination)")


def _table(d: dict, s: Spec, space: SearchSpace, top: int) -> Table:
    """The search's rows as a rich Table: degrees, the CP algorithm when several were tried, an MoE
    layout's expert TP and rank order, savers, step, MFU, memory."""
    from rich.table import Table

    from teton.engine.compute import gemm_precision

    t = Table(title=f"{d['evaluated']:,} layouts, {len(d['rows']):,} simulated, {d['fitting']:,} fit in memory "
                    f"(top {top})")
    # MFU against the bf16 peak (as every table shows it); an fp8 job's against its own peak too
    peak = gemm_precision(s.job.precision, s.job.software.fp8_recipe)  # fp4 under NVFP4
    own_peak = [f"MFU ({peak} peak)"] if peak != "bf16" else []
    moe = s.model.experts > 1  # an MoE layout's expert TP and rank order (Megatron's tp-cp-ep-dp-pp spelling)
    algo = space.cp_algo is not None  # the CP algorithm, when the search tries several
    for col in ("tp", "cp", *(("cp algo",) if algo else ()), "pp", "ep", *(("etp", "order") if moe else ()), "dp",
                "v (schedule)", "mb", "recompute", "zero",
                "step s", "MFU", *own_peak, "mem GiB", "headroom GiB", "fits"):
        t.add_column(col, justify="right")
    for r in d["rows"][:top]:
        zero = f"{r['zero']} (per mb)" if r["zero"] == 2 and r["grad_reduce"] == "per_microbatch" else str(r["zero"])
        expert = (str(r["etp"]), "-".join(r["parallel_order"])) if moe else ()
        cells = {**r, "cp_algo": r["cp_algo"] + (f" ({r['cp_a2a']})" if r.get("cp_a2a") else "")}
        t.add_row(*(str(cells[k]) for k in ("tp", "cp", *(("cp_algo",) if algo else ()), "pp", "ep")), *expert,
                  str(r["dp"]), _pipeline_cell(r), str(r["micro_batch"]), _recompute_cell(r), zero,
                  f"{r['step_time_s']:.3f}", f"{r['mfu_bf16'] * 100:.1f} %",
                  *([f"{r['mfu'] * 100:.1f} %"] if own_peak else []), f"{r['memory_per_gpu_bytes'] / GIB:.1f}",
                  f"{r['headroom_bytes'] / GIB:.1f}", "yes" if r["fits_in_memory"] else "no")
    return t


def _pipeline_cell(r: dict) -> str:
    """Virtual stages with the schedule and split where they are not the plain ones (``4``,
    ``1 (dualpipe)``, ``1 (1f1b, balanced)``): what ``--set job.pp_schedule`` / ``job.pp_split``
    reproduce."""
    plain = "interleaved" if r["virtual_stages"] > 1 else "1f1b"
    balanced = r["pp_split"] == "balanced"
    if r["pp_schedule"] == plain and not balanced:
        return str(r["virtual_stages"])
    return f"{r['virtual_stages']} ({r['pp_schedule']}{', balanced' if balanced else ''})"


def _recompute_cell(r: dict) -> str:
    """The recompute mode, with its modules under selective recompute that names them."""
    mods = r.get("recompute_modules")
    return f"{r['recompute']} ({', '.join(mods) or 'nothing'})" if mods is not None else r["recompute"]
