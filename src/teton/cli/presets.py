"""``teton presets``: list cluster, model, software-stack and hardware presets."""

from __future__ import annotations

from typing import Annotated

import typer

from teton.cli._common import JsonFlag, print_json
from teton.errors import SpecError

SHOW_FORMATS = ("yaml", "json")


def presets_dict() -> dict:
    from teton.hardware import GPUS, HOSTS, NICS
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
    from teton.spec.model import MODEL_PRESETS, ModelSpec

    clusters = {}
    for name, fields in CLUSTER_PRESETS.items():
        c = ClusterSpec(**fields)
        clusters[name] = {"gpus": c.gpus, "gpu": c.gpu_spec.name, "host": c.host_spec.name, "topology": c.topology,
                          "nic_gbps": c.nic.gbps, "nvlink_domain_gpus": c.domain_gpus, "layers": [layer.name for layer in c.layers],
                          "description": c.description}
    models = {}
    for name, fields in MODEL_PRESETS.items():
        m = ModelSpec(**fields)
        models[name] = {"params": m.total_params(), "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                        "kv_heads": m.n_kv_heads, "vocab": m.vocab}
    gpus = {n: {"bf16_tflops": g.peak_tflops["bf16"], "fp8_tflops": g.peak_tflops.get("fp8"),
                "hbm_gb": g.hbm_bytes / 1e9, "hbm_gib": g.hbm_bytes / 2**30, "hbm_tb_s": g.hbm_bw_bytes_s / 1e12,
                "fp4_tflops": g.peak_tflops.get("fp4"), "tdp_w": g.tdp_w, "family": g.family}
            for n, g in GPUS.items()}
    out = {"clusters": clusters, "models": models, "gpus": gpus,
           "hosts": {n: {"gpu": h.gpu_spec.name, "gpus": h.gpus, "backend_nic": h.backend_nic_spec.name,
                         "backend_nics": h.backend_nics, "nvlink_domain_gpus": h.domain_gpus}
                     for n, h in HOSTS.items()},
           "nics": {n: {"gbps": x.gbps} for n, x in NICS.items()}}
    from teton.spec.storage import STORAGE_PRESETS

    out["storage"] = sorted(STORAGE_PRESETS)
    out["software"] = software_presets()
    return out


def software_presets() -> dict:
    """Each software stack preset: framework, version, what it sets, and whether the in-situ
    catalog has fitted values for it (on which GPU families)."""
    from teton.hardware.in_situ import fitted_catalog
    from teton.spec.software import SOFTWARE_PRESETS, SoftwareSpec

    fitted = fitted_catalog().get("stacks", {})
    out = {}
    for name, fields in SOFTWARE_PRESETS.items():
        s = SoftwareSpec(**fields)
        out[name] = {"framework": s.framework, "version": s.version, "fitted_on": sorted(fitted.get(name, {})),
                     "attention": s.attention, "tp_comm_overlap": s.tp_comm_overlap, "cross_entropy": s.cross_entropy,
                     "fp8_recipe": s.fp8_recipe, "grad_accum_dtype": s.grad_accum_dtype, "description": s.description}
    return out


def show_text(name: str, fmt: str) -> str:
    """Preset ``name`` as an editable file's text (``fmt``: yaml | json), loadable back to the
    identical object (``teton.spec.presets``); YAML opens with a comment saying where it goes."""
    import json

    import yaml

    from teton.errors import SpecError
    from teton.spec.presets import KINDS, document, find

    if fmt not in SHOW_FORMATS:
        raise SpecError("--format", fmt, f"must be one of {', '.join(SHOW_FORMATS)} with --show")
    kind, name = find(name, "--show")
    doc = document(kind, name)
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    head = (f"# teton preset: {kind} {name} (teton presets --show {name}). Edit it, rename it (name:) if its\n"
            f"# figures change, and load it as {KINDS[kind]}: <this file>. Sources: docs/hardware.md.\n")
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def presets(
        show: Annotated[str | None, typer.Option("--show", help="write this preset as an editable file on stdout "
                                                 "(KIND:NAME where kinds share a name)")] = None,
        fmt: Annotated[str, typer.Option("--format", help="with --show: yaml | json")] = "yaml",
        json_: JsonFlag = False,
    ) -> None:
        """List cluster, model, software-stack, GPU, host and NIC presets; --show writes one as a file."""
        import sys

        if show is not None:
            sys.stdout.write(show_text(show, fmt))
            return
        if fmt != "yaml":  # silently unused before
            raise SpecError("--format", fmt, "applies to --show only (the list takes --json)")
        d = presets_dict()
        if json_:
            print_json(d)
            return
        from rich.table import Table

        from teton.cli._common import console as output_console

        console = output_console()
        t = Table(title="clusters")
        for col in ("name", "GPUs", "GPU", "NVLink domain", "topology", "NIC Gb/s", "description"):
            t.add_column(col)
        for n, c in d["clusters"].items():
            t.add_row(n, f"{c['gpus']:,}", c["gpu"], str(c["nvlink_domain_gpus"]), c["topology"],
                      f"{c['nic_gbps']:.0f}", c["description"])
        console.print(t)
        t = Table(title="models")
        for col in ("name", "params (B)", "layers", "hidden", "heads", "kv heads", "vocab"):
            t.add_column(col)
        for n, m in d["models"].items():
            t.add_row(n, f"{m['params'] / 1e9:.2f}", str(m["layers"]), str(m["hidden"]), str(m["heads"]),
                      str(m["kv_heads"]), str(m["vocab"]))
        console.print(t)
        t = Table(title="GPUs")
        for col in ("name", "bf16 TFLOPS", "fp8 TFLOPS", "fp4 TFLOPS", "HBM GiB", "HBM TB/s", "TDP W"):
            t.add_column(col)
        for n, g in d["gpus"].items():  # HBM in GiB, as teton run reports memory against it
            fp8, fp4 = ("-" if g[k] is None else f"{g[k]:.0f}" for k in ("fp8_tflops", "fp4_tflops"))
            t.add_row(n, f"{g['bf16_tflops']:.0f}", fp8, fp4, f"{g['hbm_gib']:.1f}",
                      f"{g['hbm_tb_s']:.2f}", f"{g['tdp_w']:.0f}")
        console.print(t)
        t = Table(title="software stacks (software:)")
        for col in ("name", "framework", "version", "fitted on", "attention", "TP overlap", "fp8 recipe"):
            t.add_column(col)
        for n, s in d["software"].items():
            t.add_row(n, s["framework"], s["version"], ", ".join(s["fitted_on"]) or "- (prior)", s["attention"],
                      s["tp_comm_overlap"], s["fp8_recipe"])
        console.print(t)
        t = Table(title="hosts (cluster.host)")
        for col in ("name", "GPU", "GPUs", "NVLink domain", "backend NICs"):
            t.add_column(col)
        for n, h in d["hosts"].items():
            t.add_row(n, h["gpu"], str(h["gpus"]), str(h["nvlink_domain_gpus"]),
                      f"{h['backend_nics']} x {h['backend_nic']} ({d['nics'][h['backend_nic']]['gbps']:g} Gb/s)"
                      if h["backend_nic"] in d["nics"] else f"{h['backend_nics']} x {h['backend_nic']}")
        console.print(t)
        console.print("NICs: " + ", ".join(f"{n} ({x['gbps']:g} Gb/s)" for n, x in d["nics"].items()))
        if "storage" in d:
            console.print("storage: " + ", ".join(d["storage"]))
