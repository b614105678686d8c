"""``teton plan SPEC --tokens 15.6T``: how many GPUs, which layout, how much storage, how long and at
what cost (see :mod:`teton.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import MAX_TOP, JsonFlag, SetOverrides, SpecPath, print_json
from teton.spec.reliability import MAX_RUNS
from teton.units import format_count


def _print(d: dict, top: int) -> None:
    """The front (``top`` rows) as a table, then the plan in words, the batch at each size and the notes."""
    from rich.table import Table

    from teton.cli._common import console as output_console
    from teton.plan.answer import layout_text, storage_text, usd

    plans = {p["id"]: p for p in d["plans"]}
    rows = [plans[i] for i in d["front"][:top]]
    # the parts of the cost split some plan pays (a rental price holds energy and network)
    parts = [k for k in ("gpus", "storage", "energy", "network") if any(p["cost_split_usd"][k] for p in rows)]
    held = [k for k in ("energy", "network") if k not in parts]
    t = Table(title=f"{d['model']} on {format_count(d['tokens'])} tokens: the Pareto front "
                    f"({len(d['front'])} of {len(plans)} plans; days = time to train with failures; cost = "
                    f"{' + '.join('GPUs' if k == 'gpus' else k for k in parts)}"
                    + (f", {' and '.join(held)} in the GPU-hour price" if held else "") + ")")
    for col in ("GPUs", "cluster", "layout", "batch", "storage servers", "days p50", "days p90", "cost",
                *(f"{k} $" if k != "gpus" else "GPUs $" for k in parts), "MWh", "GPU-hours", "ETTR", ""):
        t.add_column(col, justify="left" if col in ("cluster", "layout", "") else "right")
    for p in rows:
        t.add_row(f"{p['gpus']:,}", p["cluster"], layout_text(p), format_count(p["batch_tokens"]),
                  storage_text(p, cell=True), f"{p['days_p50']:.1f}", f"{p['days_p90']:.1f}", usd(p["cost_usd"]),
                  *(usd(p["cost_split_usd"][k]) for k in parts), f"{p['energy_mwh']:,.0f}",
                  f"{p['gpu_hours'] / 1e6:,.2f}M", f"{p['ettr'] * 100:.1f} %", "<- chosen" if p["chosen"] else "")
    console = output_console(t)
    console.print(t)
    chosen = plans[d["chosen"]]
    console.print(f"[bold]Plan:[/bold] {d['why']}", highlight=False)
    console.print(f"spread: {chosen['days_spread']}; {d['runs']:,} Monte Carlo runs, seed {d['seed']}; "
                  f"batch rule: {d['global_batch_rule']}; storage: {storage_note(d, chosen)}", highlight=False)
    sizes = {(c["cluster"], c["gpus"]): c["batch_tokens"] for c in d["counts"]}
    console.print("batch at each size: " + ", ".join(f"{n:,} GPUs ({cl}) {format_count(b)} tokens"
                                                     for (cl, n), b in sizes.items()), highlight=False)
    for c in d["counts"]:
        if c.get("reason"):
            console.print(f"note: {c['gpus']:,} GPUs of {c['cluster']}: {c['reason']}", highlight=False)
    for n in d["notes"]:
        console.print(f"note: {n}", highlight=False)


def storage_note(d: dict, chosen: dict) -> str:
    """How storage is priced, and what the chosen plan holds and writes."""
    use = chosen["storage_use"]
    how = ("the hosts' own drives, in the GPUs' price" if chosen["storage_servers_charged"] == 0 else
           "a share of the shared system, the servers' worth the run uses" if d["storage_pricing"] == "share"
           else "a system dedicated to the run, every server")
    return (f"{how} ({d['storage_preset']}); the chosen plan holds {use['capacity_bytes'] / 1e12:,.1f} TB "
            f"({use['checkpoints_kept']} checkpoints of {use['checkpoint_bytes'] / 1e12:,.2f} TB + "
            f"{use['dataset_bytes'] / 1e12:,.1f} TB of data), writes {use['write_bytes_s'] / 1e9:,.2f} GB/s on average "
            f"and reads {use['read_bytes_s'] / 1e9:,.3f} GB/s; {use['binding']} sets its share "
            f"({use['share'] * 100:,.3g} % of the system)")


def _search_command_lines(d: dict) -> None:
    """Each count's and plan's ``reproduce_search``: its layout space as ``teton search``'s flags
    (``options``)."""
    for c in (*d["counts"], *d["plans"]):
        rs = c.get("reproduce_search")
        if rs is not None and "space" in rs:
            c["reproduce_search"] = {"set": rs["set"], "options": [
                a for name, value in rs["space"].items() for a in ("--" + name.replace("_", "-"), value)]}


def register(app: typer.Typer) -> None:
    @app.command()
    def plan(
        spec: SpecPath,
        set_: SetOverrides = None,
        tokens: Annotated[str | None, typer.Option("--tokens", help="tokens to train on, e.g. 15.6T "
                                                   "(default: plan.tokens)")] = None,
        deadline_days: Annotated[float | None, typer.Option("--deadline-days", help="pick the cheapest plan "
                                                            "that finishes by then at p90")] = None,
        budget_usd: Annotated[float | None, typer.Option("--budget-usd", help="pick the fastest plan that "
                                                         "costs at most this")] = None,
        gpus: Annotated[str | None, typer.Option("--gpus", help="GPU counts: 8192,16384 | lo:hi:step | lo:hi "
                                                 "(default: 0.5x ... 2x the spec's)")] = None,
        storage_servers: Annotated[str | None, typer.Option("--storage-servers", help="storage sizes in "
                                                            "servers, as --gpus (default: the preset's)")] = None,
        global_batch: Annotated[str | None, typer.Option("--global-batch", help="fixed (the spec's tokens "
                                                         "per step at every size) | per_gpu | 16M")] = None,
        storage_pricing: Annotated[str | None, typer.Option("--storage-pricing", help="share (pay for the share "
                                                            "of a shared system the run uses) | dedicated (a system "
                                                            "sized to the run, paid in full)")] = None,
        prefer: Annotated[str | None, typer.Option("--prefer", help="what breaks a tie between plans within "
                                                   "each other's band: fewer_gpus | cheaper | faster")] = None,
        runs: Annotated[int | None, typer.Option("--runs", min=1, max=MAX_RUNS, help="Monte Carlo runs per plan "
                                                 "(default: the spec's reliability.runs, 1,000)")] = None,
        seed: Annotated[int | None, typer.Option("--seed", min=0, help="seed of the Monte Carlo "
                                                 "(default: the spec's)")] = None,
        executor: Annotated[str, typer.Option("--executor", help="local (process pool) | ray | serial")] = "local",
        workers: Annotated[int | None, typer.Option("--workers", min=1, help="parallel workers "
                                                    "(default: CPU count)")] = None,
        tp: Annotated[str | None, typer.Option("--tp", help="TP degrees to try (default: all)")] = None,
        cp: Annotated[str | None, typer.Option("--cp", help="CP degrees to try")] = None,
        pp: Annotated[str | None, typer.Option("--pp", help="PP degrees to try")] = None,
        vs: Annotated[str | None, typer.Option("--virtual-stages", help="virtual stages to try")] = None,
        ep: Annotated[str | None, typer.Option("--ep", help="EP degrees to try (MoE models)")] = None,
        etp: Annotated[str | None, typer.Option("--etp", help="expert-TP degrees to try (MoE models; default: "
                                                "1 and tp)")] = None,
        top: Annotated[int, typer.Option("--top", min=1, max=MAX_TOP, help="rows to print")] = 10,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="also write an offline HTML page: the "
                                                 "Pareto plot and the chosen plan's breakdown")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """GPUs, layout, storage, days (p10/p50/p90), GPU-hours, MWh and cost to train SPEC's model on N tokens."""
        from teton.plan import make_plan, plan_request
        from teton.progress import progress_task
        from teton.report.html import check_writable_file
        from teton.spec import load_spec
        from teton.sweep.run import check_executor
        from teton.sweep.search import ep_degrees, search_space

        check_executor(executor, workers)
        if out is not None:
            check_writable_file(out, "out")
        s = load_spec(spec, set_)
        req = plan_request(s, {"tokens": tokens, "deadline_days": deadline_days, "budget_usd": budget_usd,
                               "gpus": gpus, "storage_servers": storage_servers, "global_batch": global_batch,
                               "storage_pricing": storage_pricing, "prefer": prefer,
                               "runs": runs, "seed": seed,
                               "space": search_space(tp=tp, cp=cp, pp=pp, virtual_stages=vs, ep=ep, etp=etp)})
        ep_degrees(s, req.space)
        with progress_task("planning: layouts and runs per GPU count", disable=json_) as tick:
            d = make_plan(req, executor, workers, tick)
        _search_command_lines(d)
        if out is not None:
            from teton.plan.page import write_plan_page

            write_plan_page(d, str(spec), out)
        if json_:
            print_json(d)
        else:
            _print(d, top)
            if out is not None:
                print(f"wrote {out}")
