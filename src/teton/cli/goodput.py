"""``teton goodput SPEC``: failures over a whole run -> ETTR, time-to-train, energy, cost."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, SpecPath
from teton.errors import SpecError
from teton.progress import progress_task
from teton.units import format_gb_s


def _print_tables(out: dict) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    con = output_console()
    for w in out.get("warnings", ()):  # before the table: the figures below depend on it
        con.print(f"[bold yellow]warning:[/bold yellow] {w}", highlight=False, soft_wrap=True)
    t = Table(title=f"goodput: {out['gpus']} GPUs, {out['runs']} runs, seed {out['seed']}", show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    e = out["ettr_percentiles"]
    none = "n/a (no unexpected interruptions)"  # MTBI and the Young / Daly optima are undefined
    rows = [
        ("unexpected interruptions, rate x wall time", f"{out['unexpected_interruptions']:.1f}"),
        ("unexpected interruptions MC (drawn while up) p5/p50/p95",
         "{p5:.0f} / {p50:.0f} / {p95:.0f}".format(**out["unexpected_interruptions_mc"])),
        ("MTBI (unexpected)", none if out["mtbi_h"] is None else f"{out['mtbi_h']:.2f} h"),
        ("ETTR mean (p5/p50/p95)", f"{out['ettr']:.2%} ({e['p5']:.2%} / {e['p50']:.2%} / {e['p95']:.2%})"),
        ("goodput", f"{out['goodput']:.2%}"),
        ("checkpoint interval (used)", _interval(out["checkpoint_interval_s"]) + f", {out['checkpoint_interval_source']}"),
        *_interval_rows(out["interval_recommendation"]),
        ("Young / Daly interval", none if out["young_interval_s"] is None else
         f"{out['young_interval_s']:.0f} s / {out['young_daly_interval_s']:.0f} s"),
    ]
    if out["time_to_train_days"] is not None:
        tt = out["time_to_train_percentiles"]
        rows += [("time to train p5/p50/p95", f"{tt['p5']:.1f} / {tt['p50']:.1f} / {tt['p95']:.1f} days"),
                 ("failure-free time", f"{out['ideal_days']:.1f} days"),
                 ("GPU-hours (mean / failure-free)", f"{out['gpu_hours']:,.0f} / {out['ideal_gpu_hours']:,.0f}")]
    else:
        rows.append(("tokens trained p50", f"{out['tokens_trained']['p50']:.4g}"))
    kinds = out["lost_gpu_hours_by_kind"]
    rows += [("lost GPU-hours p50", f"{out['lost_gpu_hours']['p50']:,.0f}"),
             ("GPU-hours by kind (mean)", ", ".join(f"{k.replace('_', ' ')} {v:,.0f}" for k, v in kinds.items() if v)),
             ("energy (facility)", f"{out['energy_mwh']:,.0f} MWh"),
             ("power training / idle", f"{out['power_train_mw']:.2f} / {out['power_idle_mw']:.2f} MW"),
             ("power swing when all GPUs stop", f"{out['power_swing_mw']:.2f} MW (peak {out['power_swing_peak_mw']:.2f})"),
             ("cost", f"${out['cost_usd']:,.0f}")]
    for k, v in rows:
        t.add_row(k, v)
    con.print(t)
    c = Table(title="interruptions by category (mean per run)")
    c.add_column("category")
    c.add_column("count", justify="right")
    for k, v in sorted(out["interruptions_by_category"].items(), key=lambda kv: -kv[1]):
        c.add_row(k, f"{v:.1f}")
    con.print(c)
    if out["interval_sweep"]:
        con.print(_sweep_table(out["interval_sweep"], out["interval_recommendation"]))
    con.print("[bold]assumptions[/bold]")
    for a in out["assumptions"]:
        con.print(f"  - {a}")


def _interval(seconds: float) -> str:
    """An interval in seconds; ``never`` for the one without unexpected interruptions (no
    checkpoint is needed to survive them)."""
    from teton.reliability.recommend import NO_FAILURES_INTERVAL_S

    return "never (no unexpected interruptions)" if seconds >= 0.999 * NO_FAILURES_INTERVAL_S else f"{seconds:.0f} s"


def _interval_rows(rec: dict) -> list[tuple[str, str]]:
    """The recommendation's rows: the practical interval, the flat region, the optimum, the storage."""
    lo, hi = rec["flat_region_s"]
    rows = [("practical interval (recommended)", f"{_interval(rec['practical_interval_s'])}, ETTR {rec['practical_ettr']:.2%}"),
            (f"flat region (within {rec['ettr_tolerance_pp']:g} pp of the best)",
             f"{lo:.0f} s - {_interval(hi)} ({rec['method']})"),
            ("optimum", f"{_interval(rec['optimal_interval_s'])} (ETTR {rec['optimal_ettr']:.2%})"),
            ("shortest interval offered", f"{rec['min_interval_s']:.0f} s ({rec['min_interval_bound']})")]
    if rec["storage_available_write_bytes_s"] is not None and not _interval(rec["practical_interval_s"]).startswith("never"):
        rows.append(("checkpoint writes at the practical interval",
                     f"{format_gb_s(rec['write_bytes_s'])} = {rec['storage_use']:.1%} of "
                     f"{format_gb_s(rec['storage_available_write_bytes_s'])} left (other jobs "
                     f"{rec['storage_other_jobs_share']:.0%})"))
    return rows


def _sweep_table(rows: list[dict], rec: dict):
    """Interval vs ETTR, with what each interval writes and where the flat region lies."""
    from rich.table import Table

    lo, hi = rec["flat_region_s"]
    s = Table(title=f"checkpoint interval vs ETTR (flat: within {rec['ettr_tolerance_pp']:g} pp of the best)")
    for col in ("interval", "steps", "ETTR mean", "p5", "p95", "wall days p50", "writes GB/s", "storage use", ""):
        s.add_column(col, justify="right")
    for r in rows:
        x = r["interval_s"]
        mark = ("practical" if x == rec["practical_interval_s"] else "optimum" if x == rec["optimal_interval_s"]
                else "flat" if lo <= x <= hi else "")
        use = "-" if r["storage_use"] is None else f"{r['storage_use']:.1%}"
        s.add_row(f"{x:.0f} s", f"{r['steps']:,}", f"{r['ettr_mean']:.2%}", f"{r['ettr_p5']:.2%}",
                  f"{r['ettr_p95']:.2%}", f"{r['wall_days_p50']:.1f}", f"{r['write_bytes_s'] / 1e9:,.1f}", use, mark)
    return s


def register(app: typer.Typer) -> None:
    @app.command("goodput")
    def goodput_cmd(
        spec: SpecPath,
        set_: SetOverrides = None,
        days: Annotated[float | None, typer.Option("--days", help="run length in days")] = None,
        tokens: Annotated[str | None, typer.Option("--tokens", help="token budget, e.g. 15.6e12 or 15.6T")] = None,
        runs: Annotated[int | None, typer.Option("--runs", min=1, help="Monte Carlo runs (default: the "
                                                 "spec's reliability.runs)")] = None,
        seed: Annotated[int | None, typer.Option("--seed", help="random seed (default: the spec's)")] = None,
        step_time: Annotated[float | None, typer.Option("--step-time", help="step time, s (else teton.simulate)")] = None,
        interval: Annotated[float | None, typer.Option("--interval", help="checkpoint interval, s")] = None,
        interval_sweep: Annotated[bool, typer.Option("--interval-sweep", help="table of interval vs ETTR; the "
                                                     "flat region and practical interval from the Monte Carlo")] = False,
        json_: JsonFlag = False,
    ) -> None:
        """Failures over a whole run: ETTR, time-to-train, checkpoint interval, energy and cost."""
        from teton.cli._common import print_json
        from teton.engine.step import simulate_step
        from teton.reliability import goodput
        from teton.spec import load_spec
        from teton.spec.reliability import MAX_RUNS, parse_reliability
        from teton.units import parse_count

        s = load_spec(spec, set_)
        tok = parse_count(tokens, "--tokens") if tokens is not None else None
        for name, v in (("--days", days), ("--step-time", step_time), ("--interval", interval)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise SpecError(name, v, "must be a positive number")
        if runs is not None and not 0 < runs <= MAX_RUNS:
            raise SpecError("--runs", runs, f"must be a positive integer, at most {MAX_RUNS:,}")
        if seed is not None and seed < 0:
            raise SpecError("--seed", seed, "must be a non-negative integer")
        cfg = parse_reliability(s.reliability)
        with progress_task("monte carlo", counts=False) as prog:
            out = goodput(s, cfg, step_time_s=step_time, days=days, tokens=tok, runs=runs, seed=seed,
                          interval_s=interval, interval_sweep=interval_sweep, progress=prog,
                          simulate=simulate_step).to_dict()
        if json_:
            print_json(out)
        else:
            _print_tables(out)
