"""Measured efficiencies into a cluster spec: what ``teton calibrate`` and ``teton fit --trace``
write, and ``teton validate --calibration`` reads.

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
