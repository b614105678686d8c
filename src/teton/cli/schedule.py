"""``teton schedule TRACE``: a job trace on a shared cluster under a scheduling policy."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, parse_names, print_json
from teton.errors import SpecError
from teton.progress import eta_columns, progress_bar
from teton.spec.load import DEFAULT_CLUSTER, load_cluster
from teton.spec.reliability import check_runs_seed

MAX_WARNINGS = 20


def load_trace(trace: str, fmt: str, strict: bool, cluster, seed: int, load: float):
    """A trace file, or ``synthetic:N`` for the seeded generator."""
    from teton.placement.traces import FORMATS, read_trace, synthetic_trace

    if fmt != "auto" and fmt not in FORMATS:  # refused for a synthetic trace too, whose jobs it does not read
        raise SpecError("format", fmt, f"must be auto or one of {', '.join(FORMATS)}")
    if trace.startswith("synthetic:"):
        if fmt != "auto":
            raise SpecError("format", fmt, "reads a trace file; synthetic:N generates its jobs (leave --format out)")
        try:
            n = int(trace.split(":", 1)[1])
        except ValueError:
            raise SpecError("TRACE", trace, "expected synthetic:N (N jobs)") from None
        return synthetic_trace(n, cluster.gpus, seed=seed, load=load)
    return read_trace(trace, fmt, strict)


def warn_issues(trace) -> None:
    for issue in trace.issues[:MAX_WARNINGS]:
        print(f"warning: {trace.source}:{issue.line}: {issue.message}; skipped", file=sys.stderr)
    if len(trace.issues) > MAX_WARNINGS:
        print(f"warning: {len(trace.issues) - MAX_WARNINGS} more malformed lines skipped", file=sys.stderr)


def run_policies(trace, cluster, policies: list[str], fidelity: str, show_progress: bool = True) -> list:
    from teton.placement.scheduler import simulate_schedule

    results = []
    with progress_bar(*eta_columns(), disable=not show_progress) as bar:
        for policy in policies:
            task = bar.add_task(f"{policy}: jobs finished", total=max(1, len(trace.jobs)))
            last = [0]

            def tick(done: int, total: int, task=task, last=last) -> None:
                if done != last[0]:
                    last[0] = done
                    bar.update(task, completed=done, total=max(1, total))

            results.append(simulate_schedule(trace, cluster, policy, fidelity, progress=tick))
    return results


def _fmt_h(s: float) -> str:
    return f"{s / 3600:.2f} h"


def print_table(results, trace) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    t = Table(title=f"{trace.source} on {results[0].cluster}: {results[0].jobs} jobs")
    t.add_column("metric")
    for r in results:
        t.add_column(r.policy, justify="right")
    rows = [
        ("jobs finished", lambda r: f"{r.finished} / {r.jobs}"),
        ("GPU utilisation (arrival window)", lambda r: f"{r.utilisation_arrivals * 100:.1f} %"),
        ("GPU utilisation (whole run)", lambda r: f"{r.utilisation_mean * 100:.1f} %"),
        ("makespan", lambda r: _fmt_h(r.makespan_s)),
        ("queue delay mean", lambda r: _fmt_h(r.queue_delay_s["mean"])),
        ("queue delay p50", lambda r: _fmt_h(r.queue_delay_s["p50"])),
        ("queue delay p90", lambda r: _fmt_h(r.queue_delay_s["p90"])),
        ("queue delay p99", lambda r: _fmt_h(r.queue_delay_s["p99"])),
        ("slowdown vs ideal placement, mean (multi-GPU jobs)", lambda r: f"{r.slowdown['mean']:.3f}"),
        ("slowdown p90", lambda r: f"{r.slowdown['p90']:.3f}"),
        ("slowdown max", lambda r: f"{r.slowdown['max']:.3f}"),
        ("fragmentation (free GPUs on partly used hosts)", lambda r: f"{r.fragmentation_mean * 100:.1f} %"),
        ("head-job reservations kept", lambda r: "-" if r.policy == "fifo" else
         f"{r.reservations()['held'] - r.reservations()['delayed']} / {r.reservations()['held']}"),
        ("simulated in", lambda r: f"{r.wall_s:.1f} s"),
    ]
    for name, fn in rows:
        t.add_row(name, *[fn(r) for r in results])
    output_console().print(t)
    from teton.placement.scheduler import schedule_notes

    for note in schedule_notes(results):
        output_console().print(f"note: {note}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def schedule(
        trace: Annotated[str, typer.Argument(metavar="TRACE", help="trace file, or synthetic:N for N seeded synthetic jobs")],
        cluster: Annotated[str | None, typer.Option("--cluster", help="cluster preset or file "
                                                    "(default: meta-roce-24k)")] = None,
        policy: Annotated[list[str] | None, typer.Option("--policy", help="fifo | backfill | topology-aware; "
                                                         "repeatable or comma-separated (default: all)")] = None,
        fmt: Annotated[str, typer.Option("--format", help="auto | ours | philly | alibaba (pai_task_table.csv)")] = "auto",
        strict: Annotated[bool, typer.Option("--strict", help="reject the trace on a malformed line")] = False,
        fidelity: Annotated[str, typer.Option("--fidelity", help="network model: analytical | flow")] = "analytical",
        seed: Annotated[int | None, typer.Option("--seed", help="seed of synthetic:N traces (default: 0)")] = None,
        load: Annotated[float, typer.Option("--load", help="offered load of synthetic:N traces")] = 0.9,
        jobs_detail: Annotated[bool, typer.Option("--per-job", help="with --json: one row per job")] = False,
        json_: JsonFlag = False,
    ) -> None:
        """Simulate a job trace on a cluster: utilisation, queueing delay, fragmentation, slowdown."""
        from teton.placement.scheduler import SCHEDULER_POLICIES

        if jobs_detail and not json_:  # silently unused before
            raise SpecError("--per-job", True, "applies to --json only (the table shows each policy's totals)")
        policies = list(parse_names(policy, tuple(SCHEDULER_POLICIES), "--policy"))
        check_runs_seed(None, seed)  # as every verb's --seed and the spec's seed
        seed = 0 if seed is None else seed
        cl = load_cluster(DEFAULT_CLUSTER if cluster is None else cluster)
        tr = load_trace(trace, fmt, strict, cl, seed, load)
        warn_issues(tr)
        if not tr.jobs:
            raise SpecError("TRACE", trace, "has no valid jobs")
        if all(j.gpus > cl.gpus for j in tr.jobs):
            raise SpecError("TRACE", trace, f"no job fits the cluster: every job asks for more than "
                            f"{cl.name}'s {cl.gpus} GPUs")
        results = run_policies(tr, cl, policies, fidelity)
        for issue in results[0].skipped[len(tr.issues):]:  # the same jobs for every policy: warn once
            print(f"warning: {issue.message}; skipped", file=sys.stderr)
        if json_:
            rows = [r.to_dict(include_jobs=jobs_detail) for r in results]
            from teton.placement.scheduler import schedule_notes

            print_json(rows[0] if len(rows) == 1 else {"trace": tr.source, "results": rows,
                                                       "notes": schedule_notes(results)})
        else:
            print_table(results, tr)
