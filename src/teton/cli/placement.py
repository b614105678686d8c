"""``teton placement SPEC``: the cost of each placement policy for one job; Slurm topology export."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, SetOverrides, parse_names, print_json
from teton.errors import SpecError
from teton.network.cost_model import FIDELITIES
from teton.progress import progress_task
from teton.spec.reliability import check_runs_seed


def compare(spec_path: Path, overrides: list[str] | None, occupancy: float, seed: int | None,
            policies: list[str] | None, show_progress: bool = True, neighbours: bool = False) -> list[dict]:
    import teton
    from teton.placement import POLICIES
    from teton.placement.compare import compare_policies

    chosen = parse_names(policies, tuple(POLICIES), "--policy")
    spec = teton.load_spec(spec_path, overrides)
    seed = spec.seed if seed is None else seed
    with progress_task("placing and simulating: policies", len(chosen), disable=not show_progress) as tick:
        rows = compare_policies(spec, occupancy, seed, chosen, simulate=teton.simulate, progress=tick,
                                neighbours=neighbours)
    return rows


def print_table(rows: list[dict]) -> None:
    from rich.table import Table

    from teton.cli._common import console as output_console

    console = output_console()
    occ = rows[0]["occupancy"]
    layers = [k for k in rows[0]["span"] if k != "hosts"][:-1]  # the top layer always spans 1
    t = Table(title=f"placement policies; other jobs hold {occ * 100:.0f} % of the cluster; "
                    "slowdown vs topology-aware on an empty cluster")
    for col in ("policy", "step time", "slowdown", "axis that pays", "hosts", *layers):
        t.add_column(col, justify="left" if col in ("policy", "axis that pays") else "right")
    for r in rows:
        t.add_row(r["policy"], f"{r['step_time_s']:.3f} s", f"{r['slowdown']:.3f}", r["axis_pays"] or "-",
                  str(r["span"]["hosts"]), *[str(r["span"][k]) for k in layers])
    console.print(t)
    for note in dict.fromkeys(n for r in rows for n in r.get("notes", ())):  # once each, in order
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    b = Table(title="step time breakdown (s); in brackets: change vs the ideal")
    b.add_column("category")
    for r in rows:
        b.add_column(r["policy"], justify="right")
    for k in rows[0]["breakdown"]:
        cells = []
        for r in rows:
            d = r["delta_vs_ideal_s"].get(k, 0.0)
            cells.append(f"{r['breakdown'][k]:.3f}" + (f" ({d:+.3f})" if abs(d) >= 5e-4 else ""))
        b.add_row(k, *cells)
    console.print(b)


def register(app: typer.Typer) -> None:
    @app.command()
    def placement(
        spec: Annotated[Path | None, typer.Argument(metavar="SPEC", help="spec file (YAML, TOML or JSON)")] = None,
        set_: SetOverrides = None,
        occupancy: Annotated[float, typer.Option("--occupancy", help="fraction of the cluster other jobs hold "
                                                 "(capped to leave room for the job)")] = 0.0,
        seed: Annotated[int | None, typer.Option("--seed", help="seed of the occupancy pattern and random "
                                                 "policy (default: the spec's)")] = None,
        policy: Annotated[list[str] | None, typer.Option("--policy", help="topology-aware | linear | random | "
                                                         "fragmented; repeatable or comma-separated (default: all)")] = None,
        slurm_topology: Annotated[Path | None, typer.Option("--slurm-topology",
                                  help="write the cluster's Slurm topology.conf (tree plugin) here")] = None,
        cluster: Annotated[str | None, typer.Option("--cluster", help="cluster for --slurm-topology "
                                                    "(default: the spec's)")] = None,
        node_prefix: Annotated[str, typer.Option("--node-prefix", help="node name prefix in topology.conf")] = "node",
        neighbours: Annotated[bool, typer.Option("--neighbours", help="the other jobs on the busy GPUs "
                                                 "all-reduce on the same fabric (flow model; slow)")] = False,
        fidelity: Annotated[str | None, typer.Option("--fidelity", help="network model: analytical | flow "
                                                     "(default: the spec's network.fidelity)")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Compare placement policies for the job of SPEC: step time and breakdown vs the ideal."""
        check_runs_seed(None, seed)
        if fidelity is not None:
            if fidelity not in FIDELITIES:
                raise SpecError("--fidelity", fidelity, f"must be one of {', '.join(FIDELITIES)}")
            set_ = [*(set_ or []), f"network.fidelity={fidelity}"]
        if slurm_topology is None and (cluster is not None or node_prefix != "node"):
            flag, value = ("--cluster", cluster) if cluster is not None else ("--node-prefix", node_prefix)
            raise SpecError(flag, value, "applies to --slurm-topology only (the comparison runs on the spec's cluster)")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", node_prefix):
            raise SpecError("--node-prefix", node_prefix, "a Slurm node name prefix: a letter, then letters, digits, "
                            "'-' or '_'")
        if spec is None and slurm_topology is None:
            raise SpecError("SPEC", None, "give a spec file to compare policies, or --slurm-topology FILE --cluster NAME")
        if slurm_topology is not None:
            from teton.placement.slurm import slurm_topology as export
            from teton.spec.load import load_cluster

            if cluster is not None:
                cl = load_cluster(cluster)
            elif spec is not None:
                from teton.spec import load_spec

                cl = load_spec(spec, set_).cluster
            else:
                raise SpecError("--cluster", None, "needed with --slurm-topology when no SPEC is given")
            from teton.atomic import write_text

            text = export(cl, node_prefix)
            try:
                write_text(slurm_topology, text)
            except OSError as err:
                raise SpecError("--slurm-topology", str(slurm_topology), f"cannot write ({err.strerror})") from None
            lines = sum(1 for ln in text.splitlines() if ln.startswith("SwitchName="))
            print(f"wrote {slurm_topology}: {lines} switches for {cl.name}", file=sys.stderr)
            if spec is None:
                if json_:  # --json asks one JSON document: what was written
                    print_json({"slurm_topology": str(slurm_topology), "switches": lines, "cluster": cl.name})
                return
        rows = compare(spec, set_, occupancy, seed, policy, neighbours=neighbours)
        if json_:
            print_json(rows)
        else:
            print_table(rows)
