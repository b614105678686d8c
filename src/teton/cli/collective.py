"""``teton collective``: an nccl-tests-like sweep of one collective on a cluster.

The rows (size, time, algbw, busbw as nccl-tests defines them) are
:func:`teton.studies.nccl_tests.collective_sweep`'s; ``--placement-study`` and ``--pinning-study``
print :mod:`teton.studies.network`'s studies instead.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from teton.cli._common import JsonFlag, check_figure_path, parse_size, print_json
from teton.errors import SpecError, closest
from teton.progress import progress_bar, progress_task
from teton.spec.load import DEFAULT_CLUSTER, load_cluster
from teton.spec.reliability import check_runs_seed
from teton.studies.nccl_tests import collective_sweep, default_qps


def sweep(cluster_name: str, *args, **kwargs) -> list[dict]:
    """:func:`teton.studies.nccl_tests.collective_sweep` on a cluster named by preset or file."""
    return collective_sweep(load_cluster(cluster_name), *args, **kwargs)


DEFAULT_TRIALS, MAX_TRIALS = 24, 1000  # placements of --placement-study: 24 take ~6 s, 1,000 about four minutes


def _check_flags(*, placement_study: bool, pinning_study: bool, png: Path | None, neighbours: bool, algo: str,
                 fidelity: str, flow_only: dict, trials: int) -> None:
    """Flags that mean nothing for what was asked: one-line errors before any work (``flow_only``:
    the flow-fidelity options as given, None where not)."""
    if placement_study and pinning_study:
        raise SpecError("--pinning-study", True, "runs instead of --placement-study: give one study")
    if not placement_study and (png or neighbours or trials != DEFAULT_TRIALS):  # silently ignored before
        flag, value = ("--png", str(png)) if png else ("--neighbours", True) if neighbours else ("--trials", trials)
        raise SpecError(flag, value, "applies to --placement-study only")
    if not 1 <= trials <= MAX_TRIALS:
        raise SpecError("--trials", trials, f"must be from 1 to {MAX_TRIALS:,}")
    from teton.network.flow_model import FLOW_ALGOS

    if algo != "auto" and algo not in FLOW_ALGOS:
        raise SpecError("algo", algo, closest(algo, tuple(dict.fromkeys(("auto", *FLOW_ALGOS)))))
    given = next((k for k, v in flow_only.items() if v is not None), None)
    if given and fidelity != "flow" and not (placement_study or pinning_study):
        raise SpecError(given, flow_only[given], "applies to --fidelity flow only (the analytical model "
                        "has no routing, QPs, failed links, leaf uplinks or algorithm choice)")


def _pinning_study(cluster_name: str, seed: int, json_: bool) -> None:
    """``--pinning-study``: :func:`teton.studies.network.pinning_study` on the cluster, printed."""
    from teton.studies.network import pinning_racks, pinning_study

    c = load_cluster(cluster_name)
    res = pinning_study(c, racks=pinning_racks(c), seed=seed)
    if json_:
        print_json(res)
    else:
        for name, v in res["normalized_busbw"].items():
            print(f"{name:<45s} {v:6.1%} of the small-cluster bus bandwidth")


def _placement_study(cluster_name: str, trials: int, seed: int, neighbours: bool, png: Path | None,
                     json_: bool) -> None:
    """``--placement-study``: :func:`teton.studies.network.placement_study`, printed (and plotted)."""
    from teton.report.network_plots import plot_placement_study
    from teton.studies.network import placement_study

    if png:
        check_figure_path(png, "--png")
    with progress_task("placement study: trials x series") as tick:
        res = placement_study(load_cluster(cluster_name), trials=trials, seed=seed, neighbours=neighbours,
                              progress=tick)
    if png:
        try:
            plot_placement_study(res, png)
        except OSError as err:
            raise SpecError("--png", png, f"cannot write the plot ({err.strerror})") from None
        print(f"wrote {png}", file=sys.stderr)
    if json_:
        print_json(res)
    else:
        for name, vals in res["normalized_busbw"].items():
            v = np.asarray(vals)
            print(f"{name:<40s} min {v.min():5.1%}  median {np.median(v):5.1%}  max {v.max():5.1%}")


def _one_count(text: str) -> int:
    from teton.spec.plan import parse_counts

    counts = parse_counts(text, "--gpus")
    if len(counts) != 1:
        raise SpecError("--gpus", text, "collective times one communicator: give one GPU count")
    return counts[0]


def _print_table(rows: list[dict], title: str) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    table = Table(title=title)
    for col in ("size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(f"{r['size_bytes']:,}", f"{r['time_s'] * 1e6:,.1f}", f"{r['algbw_gbytes_s']:.2f}",
                      f"{r['busbw_gbytes_s']:.2f}")
    output_console().print(table)


def register(app: typer.Typer) -> None:
    @app.command()
    def collective(
        cluster: Annotated[str | None, typer.Option(help="cluster preset or file (default: meta-roce-24k)")] = None,
        op: Annotated[str, typer.Option(help="all_gather | reduce_scatter | all_reduce | all_to_all | send_recv | broadcast")] = "all_reduce",
        gpus: Annotated[str, typer.Option(help="ranks in the communicator (one count)")] = "8",
        policy: Annotated[str, typer.Option("--policy", help="placement policy: topology-aware | linear | random | "
                                            "fragmented")] = "topology-aware",
        min_bytes: Annotated[str, typer.Option("--min-bytes", "-b", help="smallest size S (1K, 1M, 1G)")] = "1M",
        max_bytes: Annotated[str, typer.Option("--max-bytes", "-e", help="largest size S")] = "1G",
        step_factor: Annotated[int, typer.Option("--step-factor", "-f", help="size multiplier per row")] = 2,
        routing: Annotated[str | None, typer.Option(help="ecmp | e-ecmp | pinned | adaptive; flow fidelity "
                                                    "(default: the cluster's, e-ecmp on RoCE, adaptive on InfiniBand)")] = None,
        qps: Annotated[int | None, typer.Option(help="QPs per connection (default 16 for e-ecmp, else 1)")] = None,
        algo: Annotated[str, typer.Option(help="auto | ring | tree | rhd | hierarchical | nvls | sharp")] = "auto",
        fail_links: Annotated[int, typer.Option("--fail-links", help="switch cables removed (seeded)")] = 0,
        leaf_uplink_ratio: Annotated[float | None, typer.Option("--leaf-uplink-ratio", help="leaf (RTSW) uplink / downlink capacity, e.g. 2 or 1.125 (SIGCOMM'24); default from the cluster")] = None,
        fidelity: Annotated[str, typer.Option(help="analytical (alpha-beta) | flow (max-min fair flows: ECMP "
                                              "collisions, oversubscription)")] = "analytical",
        seed: Annotated[int | None, typer.Option(help="seed for placement, ECMP hashing and failures "
                                                 "(default: 0)")] = None,
        json_: JsonFlag = False,
        placement_study: Annotated[bool, typer.Option("--placement-study", help="run the AllGather placement study (Meta blog figure) instead of a sweep")] = False,
        pinning_study: Annotated[bool, typer.Option("--pinning-study", help="compare path pinning and E-ECMP on full and half-filled racks")] = False,
        trials: Annotated[int, typer.Option(help="placements in --placement-study")] = DEFAULT_TRIALS,
        neighbours: Annotated[bool, typer.Option("--neighbours", help="--placement-study: the busy half of the "
                                                 "cluster runs other jobs' all-reduces on the same fabric")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="--placement-study: write the figure as a PNG "
                                                "here")] = None,
    ) -> None:
        """nccl-tests-style sweep: size, time, algbw and busbw of one collective on a cluster."""
        _check_flags(placement_study=placement_study, pinning_study=pinning_study, png=png, neighbours=neighbours,
                     algo=algo, fidelity=fidelity,
                     flow_only={"--routing": routing, "--qps": qps, "--fail-links": fail_links or None,
                                "--leaf-uplink-ratio": leaf_uplink_ratio, "--algo": None if algo == "auto" else algo},
                     trials=trials)
        if placement_study or pinning_study:  # the sweep's own options mean nothing to a study (silently unused before)
            given = {"--op": (op, "all_reduce"), "--gpus": (gpus, "8"), "--policy": (policy, "topology-aware"),
                     "--min-bytes": (min_bytes, "1M"), "--max-bytes": (max_bytes, "1G"), "--step-factor": (step_factor, 2)}
            flag = next((k for k, (v, default) in given.items() if v != default), None)
            if flag:
                study = "--placement-study" if placement_study else "--pinning-study"
                raise SpecError(flag, given[flag][0], f"applies to the size sweep, not {study} (the study picks its "
                                "own collectives, sizes and placements)")
        cluster = DEFAULT_CLUSTER if cluster is None else cluster
        check_runs_seed(None, seed)  # as every verb's --seed and the spec's seed
        seed = 0 if seed is None else seed
        gpus = _one_count(gpus)
        routing = routing or load_cluster(cluster).routing  # the fabric's own
        if pinning_study:
            _pinning_study(cluster, seed, json_)
            return
        if placement_study:
            _placement_study(cluster, trials, seed, neighbours, png, json_)
            return
        lo = parse_size(min_bytes, "min_bytes")
        hi = parse_size(max_bytes, "max_bytes")

        with progress_bar() as progress:
            progress.add_task(f"solving {op} on {gpus} GPUs ({fidelity})", total=None)
            rows = sweep(cluster, op, gpus, policy, lo, hi, step_factor, routing, qps, algo, fail_links,
                         fidelity, seed, leaf_uplink_ratio)
        if json_:
            print_json(rows)
        else:
            q = "" if fidelity == "analytical" else f", {routing}, qps {qps if qps is not None else default_qps(routing)}"
            _print_table(rows, f"{op} on {gpus} GPUs of {cluster} ({policy}, {fidelity}{q})")
