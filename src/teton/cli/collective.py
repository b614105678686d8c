"""``teton collective``: an nccl-tests-like sweep of one collective on a cluster.

Rows follow nccl-tests (doc/PERFORMANCE.md): ``algbw = S / t``, ``busbw = algbw * factor`` with
factor 2(n-1)/n for all_reduce, (n-1)/n for all_gather / reduce_scatter / all_to_all, 1 for
send_recv and broadcast; S is the total size (nccl-tests convention); GB/s = 1e9 bytes/s.
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

FIDELITIES = ("flow", "analytical")


def _cluster(name: str):
    return load_cluster(name)


def job_group(cluster, gpus: int, placement: str, seed: int) -> np.ndarray:
    """One communicator of ``gpus`` ranks placed by ``placement``: a (1, gpus) array of GPU ids."""
    from teton.placement.mapping import POLICIES, place

    if gpus < 1:
        raise SpecError("gpus", gpus, "must be at least 1")
    if gpus > cluster.gpus:
        raise SpecError("gpus", gpus, f"cluster {cluster.name} has {cluster.gpus} GPUs")
    if placement not in POLICIES:
        raise SpecError("--policy", placement, closest(placement, POLICIES))
    pl = place(cluster, {"tp": 1, "cp": 1, "pp": 1, "dp": gpus}, policy=placement, seed=seed)
    return pl.groups("dp")


def sweep(cluster_name: str, op: str, gpus: int, placement: str = "topology-aware", min_bytes: int = 1 << 20,
          max_bytes: int = 1 << 30, step_factor: int = 2, routing: str = "e-ecmp", qps: int | None = None,
          algo: str = "auto", fail_links: int = 0, fidelity: str = "flow", seed: int = 0,
          leaf_uplink_ratio: float | None = None) -> list[dict]:
    """nccl-tests rows (size_bytes, time_s, algbw_gbps, busbw_gbps) for sizes min..max by ``step_factor``."""
    from teton.network.analytical import OPS, AnalyticalCostModel, bus_factor

    cluster = _cluster(cluster_name)
    if op not in OPS:
        raise SpecError("op", op, closest(op, OPS))
    if fidelity not in FIDELITIES:
        raise SpecError("fidelity", fidelity, closest(fidelity, FIDELITIES))
    if min_bytes > max_bytes:
        raise SpecError("min_bytes", min_bytes, f"must not exceed max_bytes ({max_bytes})")
    if step_factor < 2:
        raise SpecError("step_factor", step_factor, "must be an integer >= 2")
    if op == "send_recv" and gpus < 2:
        raise SpecError("gpus", gpus, "send_recv needs at least 2 GPUs")
    groups = job_group(cluster, gpus, placement, seed)
    if fidelity == "flow":
        from teton.network.flow_model import FlowCostModel

        if qps is None:
            qps = 16 if routing == "e-ecmp" else 1
        if leaf_uplink_ratio is not None and not 0.05 <= leaf_uplink_ratio <= 16:
            raise SpecError("leaf_uplink_ratio", leaf_uplink_ratio, "must be between 0.05 and 16")
        model = FlowCostModel(cluster, routing=routing, qps=qps, algo=algo, seed=seed, failed_links=fail_links,
                              leaf_uplink_ratio=leaf_uplink_ratio)
    else:
        model = AnalyticalCostModel(cluster)
    sizes = []
    s = min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= step_factor
    rows = []
    factor = bus_factor(op, gpus) if gpus > 1 else 0.0
    for size in sizes:
        t = model.collective_time(op, groups, float(size))
        algbw = size / t / 1e9 if t > 0 else 0.0
        rows.append({"size_bytes": int(size), "time_s": t, "algbw_gbps": algbw, "busbw_gbps": algbw * factor})
    return rows


PINNING_RACKS = 64  # racks of the pinning study's job (SIGCOMM'24 §5.1 scale) where the cluster has them


def pinning_racks(cluster) -> int:
    """Racks for the pinning study: 64, or as many whole first-layer switch domains as the cluster has."""
    racks = min(PINNING_RACKS, cluster.gpus // cluster.layers[0].span_gpus)
    if racks < 2:
        raise SpecError("cluster", cluster.name, "the pinning study needs at least 2 racks (first-layer "
                        f"switch domains of {cluster.layers[0].span_gpus} GPUs)")
    return racks


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
        table.add_row(f"{r['size_bytes']:,}", f"{r['time_s'] * 1e6:,.1f}", f"{r['algbw_gbps']:.2f}",
                      f"{r['busbw_gbps']:.2f}")
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
                                                    "(default: e-ecmp)")] = None,
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
        trials: Annotated[int, typer.Option(help="placements in --placement-study")] = 24,
        neighbours: Annotated[bool, typer.Option("--neighbours", help="--placement-study: the busy half of the "
                                                 "cluster runs other jobs' all-reduces on the same fabric")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="--placement-study: write the figure as a PNG "
                                                "here")] = None,
    ) -> None:
        """nccl-tests-style sweep: size, time, algbw and busbw of one collective on a cluster."""
        if not placement_study and (png or neighbours):  # silently ignored before
            flag = "--png" if png else "--neighbours"
            raise SpecError(flag, png or True, "applies to --placement-study only")
        from teton.network.flow_model import FLOW_ALGOS

        if algo != "auto" and algo not in FLOW_ALGOS:
            raise SpecError("algo", algo, closest(algo, ("auto", *FLOW_ALGOS)))
        flow_only = {"--routing": routing, "--qps": qps, "--fail-links": fail_links or None,
                     "--leaf-uplink-ratio": leaf_uplink_ratio, "--algo": None if algo == "auto" else algo}
        given = next((k for k, v in flow_only.items() if v is not None), None)
        if given and fidelity != "flow" and not (placement_study or pinning_study):
            raise SpecError(given, flow_only[given], "applies to --fidelity flow only (the analytical model "
                            "has no routing, QPs or failed links)")
        cluster = cluster or DEFAULT_CLUSTER
        seed = 0 if seed is None else seed
        gpus = _one_count(gpus)
        routing = routing or "e-ecmp"
        if pinning_study:
            from teton.report.network_plots import pinning_study as pin

            c = _cluster(cluster)
            res = pin(c, racks=pinning_racks(c), seed=seed)
            if json_:
                print_json(res)
            else:
                for name, v in res["normalized_busbw"].items():
                    print(f"{name:<45s} {v:6.1%} of the small-cluster bus bandwidth")
            return
        if placement_study:
            from teton.report.network_plots import placement_study as study
            from teton.report.network_plots import plot_placement_study

            if trials < 1:
                raise SpecError("trials", trials, "must be at least 1")
            if png:
                check_figure_path(png, "--png")
            with progress_task("placement study: trials x series") as tick:
                res = study(_cluster(cluster), trials=trials, seed=seed, neighbours=neighbours, progress=tick)
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
            q = "" if fidelity == "analytical" else f", {routing}, qps {qps if qps is not None else (16 if routing == 'e-ecmp' else 1)}"
            _print_table(rows, f"{op} on {gpus} GPUs of {cluster} ({policy}, {fidelity}{q})")
