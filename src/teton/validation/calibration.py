"""Measured efficiencies into a cluster spec: what ``teton calibrate``, ``teton fit --out`` and
``teton fit --trace --out`` write, and ``teton validate --calibration`` reads.

A calibration JSON is ``benchmarks/device/calibrate_hopper.py``'s output (its
``efficiency_overrides``: fractions of the datasheet peaks) or a plain mapping of override keys.
A calibrated cluster is ``{base: <preset>, efficiency: {...}}``, validated as every spec is.
"""

from __future__ import annotations

import json
from pathlib import Path

from teton.errors import SpecError


def read_overrides(path: Path) -> tuple[dict[str, float], dict]:
    """(overrides, provenance) from a calibration JSON: the script's whole output (its
    ``efficiency_overrides``) or a plain mapping of override keys to fractions of peak."""
    try:
        data = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise SpecError("calibration", str(path), "is not a UTF-8 JSON file") from None
    except OSError as err:
        raise SpecError("calibration", str(path), f"cannot be read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise SpecError("calibration", str(path), f"is not JSON (line {err.lineno}: {err.msg})") from None
    except RecursionError:
        raise SpecError("calibration", str(path), "is nested too deeply to be a calibration file") from None
    if not isinstance(data, dict):
        raise SpecError("calibration", str(path), "must be a JSON object")
    overrides = data.get("efficiency_overrides", data)
    if not isinstance(overrides, dict) or not overrides:
        raise SpecError("calibration.efficiency_overrides", overrides, "a non-empty mapping of key -> fraction of peak")
    provenance = {k: data[k] for k in ("device", "torch") if k in data}
    return overrides, provenance


def catalog_value(eff, key: str) -> float | None:
    """The catalog's value of an override key (``gemm_<precision>`` reads the MAMF table)."""
    if key.startswith("gemm_"):
        return eff.gemm_mamf.get(key.removeprefix("gemm_"))
    return getattr(eff, key, None)


def calibrated_cluster(cluster: str, overrides: dict[str, float]) -> dict:
    """A cluster spec mapping: the preset with ``overrides`` merged over its own ``efficiency``,
    validated as every spec is (unknown keys and values outside (0, 2] are one-line errors)."""
    from teton.hardware import cluster_efficiency
    from teton.topology.cluster import CLUSTER_PRESETS, ClusterSpec

    if cluster not in CLUSTER_PRESETS:
        from difflib import get_close_matches

        close = get_close_matches(cluster, list(CLUSTER_PRESETS), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(CLUSTER_PRESETS)}"
        raise SpecError("--cluster", cluster, hint)
    base = ClusterSpec(**CLUSTER_PRESETS[cluster])
    merged = {**(base.efficiency or {}), **{k: float(v) if isinstance(v, (int, float)) else v
                                           for k, v in overrides.items()}}
    cluster_efficiency(base.gpu_spec, merged)  # raises SpecError naming the bad key / value
    return {"base": cluster, "efficiency": merged}


def fitted_cluster(result, runs) -> tuple[dict, str]:
    """(cluster mapping, header) of a cluster calibrated by a fit on measured runs: the runs' one
    cluster with ``profile: burst`` (the fit held every in-situ parameter it did not fit at its
    burst value, and so do predictions from the file), the fitted values and the leave-one-out
    band as ``efficiency:`` entries; its own microbenchmark overrides are kept."""
    from teton.hardware.efficiency import microbenchmark_overrides
    from teton.topology.cluster import CLUSTER_PRESETS

    clusters = {r.spec.cluster.model_dump_json(exclude={"efficiency"}): r.spec.cluster for r in runs}
    if len(clusters) > 1:
        names = sorted({c.name for c in clusters.values()})
        raise SpecError("--out", "one cluster file", f"the runs span {len(clusters)} clusters ({', '.join(names)}); "
                        "fit each cluster's runs separately")
    cluster = next(iter(clusters.values()))
    family = runs[0].family
    lo, hi = result.band(family)
    eff = {**microbenchmark_overrides(cluster.efficiency), "profile": "burst", **{k: round(v, 6) for k, v in result.overrides(family).items()},
           "band_low": round(lo, 6), "band_high": round(hi, 6)}
    preset = CLUSTER_PRESETS.get(cluster.name)
    if preset is not None and cluster.model_dump(exclude={"efficiency"}) == type(cluster)(**preset).model_dump(
            exclude={"efficiency"}):
        mapping = {"base": cluster.name, "efficiency": eff}
    else:
        mapping = {**cluster.model_dump(exclude_defaults=True), "efficiency": eff}
    header = (f"# {cluster.name} calibrated by teton fit on {len(runs)} measured run(s); leave-one-out "
              f"errors {lo * 100:+.1f} % .. {hi * 100:+.1f} %")
    return mapping, header
