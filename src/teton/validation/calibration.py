"""Measured efficiencies into a cluster spec: what ``teton calibrate``, ``teton fit --out`` and
``teton fit --trace --out`` write, and ``teton validate --calibration`` reads.

A calibration JSON is ``benchmarks/device/calibrate_hopper.py``'s output (its
``efficiency_overrides``: fractions of the datasheet peaks) or a plain mapping of override keys.
A calibrated cluster is ``{base: <preset>, efficiency: {...}}``, validated as every spec is.
``teton calibrate`` also shows each override against the catalog (:func:`override_rows`) and the
one decoder layer the script timed against teton's price for it (:func:`layer_comparison`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator

from teton.errors import SpecError, from_validation
from teton.spec.fields import MAX_GPUS, MAX_REAL, MAX_SEQ_LEN, MAX_WIDTH, Section, number_problem


class CalibrationLayer(Section):
    """The one decoder layer ``calibrate_hopper.py`` timed (its ``layer``)."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    tokens: int = Field(gt=0, le=MAX_SEQ_LEN)
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    ffn: int = Field(gt=0, le=MAX_WIDTH)
    heads: int = Field(gt=0, le=MAX_WIDTH)
    kv_heads: int = Field(gt=0, le=MAX_WIDTH)
    tp: int = Field(gt=0, le=MAX_GPUS)
    kernel_fusion: Literal["fused", "eager"] = "eager"
    burst_s: float | None = Field(default=None, gt=0)
    sustained_s: float | None = Field(default=None, gt=0)


class CalibrationFile(Section):
    """A calibration JSON: the script's output (other keys it writes are kept out), or a plain
    mapping of override keys, read into ``efficiency_overrides``."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    efficiency_overrides: dict[str, Any] = Field(min_length=1)  # numbers, and profile: a name
    device: str | None = None
    torch: str | None = None
    layer: CalibrationLayer | None = None

    @field_validator("efficiency_overrides")
    @classmethod
    def _numbers(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key, value in v.items():
            if key == "profile" and isinstance(value, str):
                continue
            problem = number_problem(value, -MAX_REAL, MAX_REAL) if isinstance(value, (int, float)) else \
                "must be a number (a fraction of peak, or seconds for a duration)"
            if problem:
                raise SpecError(f"calibration.efficiency_overrides.{key}", value, problem)
        return v

    @property
    def provenance(self) -> dict:
        return {k: getattr(self, k) for k in ("device", "torch") if getattr(self, k) is not None}


def _unique_keys(pairs: list) -> dict:
    """A JSON object, refusing a key given twice (``json`` lets the last silently win)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise SpecError(f"calibration.{key}", "given twice", "each key once per object")
        out[key] = value
    return out


def read_calibration(path: Path) -> CalibrationFile:
    """A calibration JSON, checked (one-line errors naming ``calibration.<field>``)."""
    try:
        data = json.loads(path.read_text(), object_pairs_hook=_unique_keys)
    except SpecError:
        raise
    except UnicodeDecodeError:
        raise SpecError("calibration", str(path), "is not a UTF-8 JSON file") from None
    except OSError as err:
        raise SpecError("calibration", str(path), f"cannot be read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise SpecError("calibration", str(path), f"is not JSON (line {err.lineno}: {err.msg})") from None
    except RecursionError:
        raise SpecError("calibration", str(path), "is nested too deeply to be a calibration file") from None
    except ValueError:  # an integer past Python's 4,300-digit limit
        raise SpecError("calibration", str(path), "holds a number too large to read") from None
    if not isinstance(data, dict):
        raise SpecError("calibration", str(path), "must be a JSON object")
    fields = data if "efficiency_overrides" in data else {"efficiency_overrides": data}
    try:
        return CalibrationFile(**fields)
    except ValidationError as err:
        raise from_validation(err, "calibration", where=lambda loc: str(path)) from None


def read_overrides(path: Path) -> tuple[dict[str, float], dict]:
    """(overrides, provenance) from a calibration JSON: the script's whole output (its
    ``efficiency_overrides``) or a plain mapping of override keys to fractions of peak."""
    calibration = read_calibration(path)
    return dict(calibration.efficiency_overrides), calibration.provenance


def catalog_value(eff, key: str) -> float | None:
    """The catalog's value of an override key (``gemm_<precision>`` reads the MAMF table)."""
    if key.startswith("gemm_"):
        return eff.gemm_mamf.get(key.removeprefix("gemm_"))
    return getattr(eff, key, None)


def override_rows(gpu, overrides: dict[str, float]) -> list[dict]:
    """Measured vs catalog, one row per override key (sorted): ``key``, ``catalog`` (the GPU's
    catalog fraction of peak, None where the catalog has no such key) and ``measured``."""
    from teton.hardware import cluster_efficiency

    catalog = cluster_efficiency(gpu)
    return [{"key": k, "catalog": catalog_value(catalog, k), "measured": float(v)}
            for k, v in sorted(overrides.items()) if k != "profile"]  # profile: a name, not a measurement


def predicted_layer_s(layer: dict, gpu_name: str, efficiency: dict[str, float] | None = None) -> float:
    """teton's compute seconds for the layer ``calibrate_hopper.py`` timed: one Llama decoder layer
    on one TP rank, forward and backward, its elementwise kernels as ``layer['kernel_fusion']``
    says, no sequence parallelism and no collectives (the script runs none), fresh gradients (no
    accumulation pass), with the catalog's efficiencies or ``efficiency`` overrides."""
    from teton.engine.compute import ComputeModel
    from teton.hardware import cluster_efficiency
    from teton.hardware.gpus import GPUS
    from teton.spec.job import JobSpec
    from teton.spec.model import ModelSpec
    from teton.workload.items import ComputeOp
    from teton.workload.ops import layer_block

    try:
        model = ModelSpec(name="calibration-layer", layers=1, hidden=layer["hidden"], ffn_hidden=layer["ffn"],
                          heads=layer["heads"], kv_heads=layer["kv_heads"], vocab=32000)
        job = JobSpec(gpus=layer["tp"], tp=layer["tp"], dp=1, seq_len=layer["tokens"], global_batch=1,
                      sequence_parallel=False, kernel_fusion=layer.get("kernel_fusion", "eager"))
    except (KeyError, TypeError, ValueError) as err:
        raise SpecError("calibration.layer", layer, f"a layer shape as calibrate_hopper.py writes it ({err})") from None
    gpu = GPUS[gpu_name]
    # a microbenchmark of one layer: the burst profile, with the measured kernel efficiencies
    efficiency = {**(efficiency or {}), "profile": "burst"}
    cluster_efficiency(gpu, efficiency)  # a bad override is a one-line error
    compute = ComputeModel.for_gpu(gpu, "bf16", job.layout.seq_len, efficiency, job.attention_kernel)
    block = layer_block(model, job)
    return sum(compute.time_s(op) for op in (*block.fwd, *block.bwd)
               if isinstance(op, ComputeOp) and op.name != "grad_accumulate")


def device_gpu(provenance: dict, default: str) -> str:
    """The catalog GPU a calibration ran on, from the device name torch reported
    (:func:`teton.validation.trace_classes.catalog_gpu_name`), else ``default``."""
    from teton.validation.trace_classes import catalog_gpu_name

    device = provenance.get("device")
    return (catalog_gpu_name(device) if isinstance(device, str) else None) or default


def check_device(provenance: dict, cluster: str, gpu) -> None:
    """Fractions of peak measured on one GPU family calibrate a cluster of that family: a device
    the catalog knows whose family is not the cluster GPU's is a one-line error."""
    from teton.hardware.efficiency import family_of
    from teton.hardware.gpus import GPUS

    on = device_gpu(provenance, gpu.name)
    if on in GPUS and family_of(GPUS[on]) != family_of(gpu):
        raise SpecError("cluster", cluster, f"its GPU is {gpu.name} ({family_of(gpu)}), but the calibration ran on "
                        f"{provenance['device']} ({on}, {family_of(GPUS[on])}): calibrate a cluster of that GPU")


def layer_comparison(layer: dict, provenance: dict, default_gpu: str, overrides: dict[str, float]) -> dict:
    """The layer ``calibrate_hopper.py`` timed on the GPU it ran on (:func:`device_gpu`): its
    measured burst and sustained seconds vs :func:`predicted_layer_s` with the catalog's
    efficiencies and with the measured overrides (all but ``sustained_ratio``)."""
    on = device_gpu(provenance, default_gpu)
    return {"gpu": on, "measured_burst_s": layer.get("burst_s"),
            "measured_sustained_s": layer.get("sustained_s"),
            "predicted_catalog_s": predicted_layer_s(layer, on),
            "predicted_calibrated_s": predicted_layer_s(
                layer, on, {k: v for k, v in overrides.items() if k != "sustained_ratio"})}


def calibrated_cluster(cluster: str, overrides: dict[str, float]) -> dict:
    """A cluster spec mapping: the preset with ``overrides`` merged over its own ``efficiency``,
    validated as every spec is (unknown keys, microbenchmark figures outside (0, 2] and in-situ
    values outside their fit bounds are one-line errors)."""
    from teton.hardware import cluster_efficiency
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    if cluster not in CLUSTER_PRESETS:
        from difflib import get_close_matches

        close = get_close_matches(cluster, list(CLUSTER_PRESETS), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(CLUSTER_PRESETS)}"
        raise SpecError("cluster", cluster, hint)
    base = ClusterSpec(**CLUSTER_PRESETS[cluster])
    merged = {**(base.efficiency or {}), **{k: float(v) if isinstance(v, (int, float)) else v
                                           for k, v in overrides.items()}}
    cluster_efficiency(base.gpu_spec, merged)  # raises SpecError naming the bad key / value
    return {"base": cluster, "efficiency": merged}


def fitted_cluster(result, runs) -> tuple[dict, str]:
    """(cluster mapping, header) of a cluster calibrated by a fit on measured runs: the runs' one
    cluster with ``profile: burst`` and every in-situ value the fit used (fitted, held at their
    prior, or not fitted and so at the catalog's value for the runs' stack and GPU), so predictions
    from the file are the fit's; the band (:func:`_writable_band`: leave-one-out, or the catalog's
    for one configuration) and the values' posterior sd and correlations (``sd_<key>``,
    ``corr_<a>__<b>``, which ``teton.engine.band`` carries into each job's band) as
    ``efficiency:`` entries; its own microbenchmark overrides are kept. The mapping is checked as
    ``teton run`` will read it."""
    from teton.hardware import cluster_efficiency
    from teton.hardware.efficiency import microbenchmark_overrides
    from teton.spec.cluster import CLUSTER_PRESETS

    clusters = {r.spec.cluster.model_dump_json(exclude={"efficiency"}): r.spec.cluster for r in runs}
    if len(clusters) > 1:
        names = sorted({c.name for c in clusters.values()})
        raise SpecError("out", "one cluster file", f"the runs span {len(clusters)} clusters ({', '.join(names)}); "
                        "fit each cluster's runs separately")
    cluster = next(iter(clusters.values()))
    family = runs[0].family
    lo, hi = _writable_band(result)
    eff = {**microbenchmark_overrides(cluster.efficiency), "profile": "burst", **{k: round(v, 6) for k, v in result.overrides(family).items()},
           "band_low": round(lo, 6), "band_high": round(hi, 6), **_uncertainty(result, family)}
    cluster_efficiency(cluster.gpu_spec, eff)  # a value teton run would refuse is a one-line error here
    preset = CLUSTER_PRESETS.get(cluster.name)
    if preset is not None and cluster.model_dump(exclude={"efficiency"}) == type(cluster)(**preset).model_dump(
            exclude={"efficiency"}):
        mapping = {"base": cluster.name, "efficiency": eff}
    else:
        mapping = {**cluster.model_dump(exclude_defaults=True), "efficiency": eff}
    source = (f"one configuration (no run to hold out): the catalog's band for a seen stack on {family}"
              if result.catalog_banded else "leave-one-out errors")
    header = (f"# {cluster.name} calibrated by teton fit on {len(runs)} measured run(s); {source} "
              f"{lo * 100:+.1f} % .. {hi * 100:+.1f} %")
    held = sorted({k for c, h in result.held.items() if c[1] == family for k in h})
    if held:
        header += f"; held at their prior (the runs do not identify them): {', '.join(held)}"
    fixed = sorted({k for c, h in result.fixed.items() if c[1] == family for k in h})
    if fixed:
        header += f"; not fitted, at the catalog's values: {', '.join(fixed)}"
    if any(k.startswith("sd_") for k in eff):
        header += "\n# sd_ / corr_: the fitted values' uncertainty (log units), added to each job's band by teton run"
    return mapping, header


def _writable_band(result) -> tuple[float, float]:
    """The fit's band (``result.band("loo")``) as a cluster file can hold it, a relative error in
    (-1, 1) at each end; else a one-line error naming the run held out worst: runs that far apart
    are no calibration (a mistyped time, or a spec that is not the job that ran)."""
    import math

    lo, hi = result.band("loo")
    if -1 < lo <= hi < 1:
        return lo, hi
    errors = result.errors("loo")
    worst = max(range(len(errors)), key=lambda i: abs(errors[i]) if math.isfinite(errors[i]) else math.inf)
    run = result.runs[worst]
    raise SpecError("out", "a calibrated cluster", f"not written: its band {lo * 100:+.0f} % .. {hi * 100:+.0f} % "
                    "is past the -100 % .. +100 % a cluster's band can hold; the runs disagree with each other more "
                    f"than in-situ values can explain (worst: {run.name}, measured {run.step_time_s:.4g} s, "
                    f"{errors[worst] * 100:+.0f} % when held out): check its time and spec")


def _uncertainty(result, family: str) -> dict[str, float]:
    """``sd_<key>`` and ``corr_<a>__<b>`` of a user's fit on ``family`` (none for a bundled fit)."""
    import math

    from teton.hardware.efficiency import CORR_PREFIX, CORR_SEP, SD_PREFIX

    cell = next((c for c in result.covariance if c[1] == family), None)
    if cell is None:
        return {}
    cov, keys = result.covariance[cell], result.keys
    sd = [math.sqrt(max(float(cov[i, i]), 0.0)) for i in range(len(keys))]
    out = {f"{SD_PREFIX}{k}": round(sd[i], 6) for i, k in enumerate(keys)}
    for i, a in enumerate(keys):
        for j in range(i + 1, len(keys)):
            r = float(cov[i, j]) / (sd[i] * sd[j]) if sd[i] and sd[j] else 0.0
            out[f"{CORR_PREFIX}{a}{CORR_SEP}{keys[j]}"] = round(max(-1.0, min(1.0, r)), 6)
    return out


def trace_cluster(cluster: str | None, gpu: str) -> str:
    """The preset a trace's calibration is written onto: ``cluster`` (``--cluster``; its GPU family
    must be the trace's), or the first preset built on the trace's GPU (else on its family)."""
    from teton.hardware.efficiency import family_of
    from teton.hardware.gpus import GPUS
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    if cluster is None:
        gpus = {name: ClusterSpec(**fields).gpu_spec for name, fields in CLUSTER_PRESETS.items()}
        same = [n for n, g in gpus.items() if g.name == gpu] or [
            n for n, g in gpus.items() if family_of(g) == family_of(GPUS[gpu])]
        if same:
            return same[0]
        raise SpecError("cluster", None, f"no preset is built on the trace's GPU family ({gpu}); name the "
                        f"cluster to calibrate ({', '.join(CLUSTER_PRESETS)})")
    if cluster not in CLUSTER_PRESETS:
        from teton.errors import closest

        raise SpecError("cluster", cluster, closest(cluster, CLUSTER_PRESETS))
    theirs = ClusterSpec(**CLUSTER_PRESETS[cluster]).gpu_spec
    if family_of(theirs) != family_of(GPUS[gpu]):
        raise SpecError("cluster", cluster, f"runs {theirs.name}, but the trace ran on {gpu}: calibrate a "
                        "cluster of the same GPU family")
    return cluster


# an estimate at most this far past its parameter's bound (relative to the bound, or to the range
# for a bound of 0) is clipped to it; one farther is no value the parameter can take (the trace
# measured something else: waits for another rank, a kernel mix teton prices apart) and is left out
CLIP_TOLERANCE = 0.10


def trace_values(in_situ: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """(values to write, warnings) of a trace's in-situ estimates: those within their parameter's
    bounds (:data:`teton.hardware.in_situ.PARAMETERS`) as they are, those at most
    :data:`CLIP_TOLERANCE` past a bound clipped to it, the others left out; a warning for each
    clipped or left-out estimate."""
    from teton.hardware.in_situ import PARAMETERS

    values, warnings = {}, []
    for key, v in in_situ.items():
        lo, hi = PARAMETERS[key].bounds
        bound = min(hi, max(lo, v))
        if bound == v:
            values[key] = float(f"{v:.6g}")
            continue
        what = f"{key} = {v:.4g} from the trace is outside its bounds [{lo:g}, {hi:g}] ({PARAMETERS[key].unit})"
        if abs(v - bound) <= CLIP_TOLERANCE * (abs(bound) or hi - lo):
            values[key] = bound
            warnings.append(f"{what}: clipped to {bound:g}")
        else:
            warnings.append(f"{what}: the trace does not identify it, so it is not written (the cluster keeps "
                            "the catalog's value)")
    return values, warnings


def trace_calibrated_cluster(cal, cluster: str | None, trace_name: str) -> tuple[dict, str, list[str]]:
    """(cluster mapping, header, warnings) of a cluster calibrated from one rank's profiler trace
    (``cal``: :func:`teton.validation.trace.calibrate_from_trace`'s result): its in-situ estimates
    (:func:`trace_values`: clipped or left out past their bounds, with a warning) over the preset
    :func:`trace_cluster` picks, and a band: a trace gives no held-out step-time errors, so the
    catalog's band for a stack it has no runs of on the trace's GPU family
    (:func:`teton.hardware.in_situ.band`), the file carrying it as ``band_low`` / ``band_high``."""
    from teton.hardware.efficiency import family_of
    from teton.hardware.gpus import GPUS
    from teton.hardware.in_situ import band

    cluster = trace_cluster(cluster, cal.gpu)
    values, warnings = trace_values(cal.in_situ)
    if not values:
        raise SpecError("out", cluster, "nothing to write: no in-situ estimate of the trace lies within its "
                        "parameter's bounds")
    family = family_of(GPUS[cal.gpu])
    lo_hi = band(False, family=family)
    if lo_hi is not None:
        values |= {"band_low": round(lo_hi[0], 6), "band_high": round(lo_hi[1], 6)}
    mapping = calibrated_cluster(cluster, values)
    header = f"# {cluster} calibrated by teton fit --trace {trace_name} (GPU {cal.gpu})"
    clipped = [w.split(" = ")[0] for w in warnings if "clipped" in w]
    left_out = [w.split(" = ")[0] for w in warnings if "clipped" not in w]
    if clipped:
        header += f"; clipped to their bounds: {', '.join(clipped)}"
    if left_out:
        header += f"; outside their bounds, not written: {', '.join(left_out)}"
    if lo_hi is not None:
        header += (f"\n# band: the catalog's for a stack without training runs on {family} ({lo_hi[0] * 100:+.1f} % "
                   f".. {lo_hi[1] * 100:+.1f} %): a trace gives no held-out step-time errors")
    return mapping, header, warnings
