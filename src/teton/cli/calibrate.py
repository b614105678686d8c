"""``teton calibrate``: turn a GPU microbenchmark run into a calibrated cluster spec.

``benchmarks/device/calibrate_hopper.py`` (run on a real GPU) measures GEMM, attention and HBM
throughput, burst and sustained, and writes a JSON file whose ``efficiency_overrides`` are
fractions of the datasheet peaks. This verb checks them against the catalog, shows what each one
changes, and writes a cluster spec (``base: <preset>`` + ``efficiency:``) that every other verb
accepts as ``cluster: <file>``. Measured values replace catalogued ones; nothing is fitted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.errors import SpecError
from teton.validation.calibration import (
    calibrated_cluster,
    check_device,
    layer_comparison,
    override_rows,
    read_calibration,
)


def register(app: typer.Typer) -> None:
    @app.command()
    def calibrate(
        calibration: Annotated[Path, typer.Argument(metavar="CALIBRATION", help="JSON from benchmarks/device/calibrate_hopper.py")],
        cluster: Annotated[str | None, typer.Option("--cluster", help="preset to calibrate (default: "
                                                    "meta-roce-24k)")] = None,
        out: Annotated[Path | None, typer.Option("--cluster-out", help="write the calibrated cluster spec "
                                                 "(YAML) here")] = None,
        json_: JsonFlag = False,
    ) -> None:
        """Check measured efficiencies against the catalog and write a calibrated cluster spec."""
        import yaml

        from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
        from teton.spec.load import DEFAULT_CLUSTER

        cluster = DEFAULT_CLUSTER if cluster is None else cluster
        read = read_calibration(calibration)
        overrides, provenance = dict(read.efficiency_overrides), read.provenance
        spec = calibrated_cluster(cluster, overrides)
        gpu = ClusterSpec(**CLUSTER_PRESETS[cluster]).gpu_spec
        check_device(provenance, cluster, gpu)
        rows = override_rows(gpu, overrides)
        layer = None if read.layer is None else read.layer.model_dump()
        layer_row = None if layer is None else layer_comparison(layer, provenance, gpu.name, overrides)
        if out is not None:
            header = f"# {cluster} calibrated from {calibration.name}"
            if provenance:
                header += " (" + ", ".join(f"{k} {v}" for k, v in provenance.items()) + ")"
            from teton.atomic import write_text

            try:
                write_text(out, header + "\n" + yaml.safe_dump(spec, sort_keys=False))
            except OSError as err:
                raise SpecError("--cluster-out", str(out), f"cannot be written ({err.strerror})") from None
        if json_:
            print_json({"cluster": spec, "rows": rows, "provenance": provenance, "layer": layer_row,
                        "out": str(out) if out is not None else None})
            return
        from rich.table import Table

        from teton.cli._common import console as output_console

        t = Table(title=f"{cluster} ({gpu.name}): measured vs catalog, fractions of peak")
        for col in ("key", "catalog", "measured", "change"):
            t.add_column(col, justify="left" if col == "key" else "right")
        for r in rows:
            cat = r["catalog"]
            change = f"{r['measured'] / cat - 1:+.1%}" if cat else "new"
            t.add_row(r["key"], f"{cat:.3f}" if cat is not None else "-", f"{r['measured']:.3f}", change)
        console = output_console()
        console.print(t)
        if layer_row is not None:
            shape = ", ".join(f"{k} {layer[k]}" for k in ("tokens", "hidden", "ffn", "heads", "kv_heads", "tp"))
            lt = Table(title=f"one Llama layer fwd+bwd on one TP rank ({shape}; "
                             f"{layer.get('kernel_fusion', 'eager')} elementwise kernels), ms")
            for col in ("measured burst", "measured sustained", "teton, catalog", "teton, measured kernels"):
                lt.add_column(col, justify="right")
            lt.add_row(*(f"{layer_row[k] * 1e3:.2f}" if isinstance(layer_row[k], (int, float)) else "-"
                         for k in ("measured_burst_s", "measured_sustained_s", "predicted_catalog_s",
                                   "predicted_calibrated_s")))
            console.print(lt)
        if out is not None:
            where = out.resolve()  # a spec's relative paths are read next to the spec, so give the full one
            console.print(f"wrote {out}: use it as `cluster: {where}` or `--set cluster={where}`")
