"""Residuals of a fit against layout features, and the comparison of candidate parameter sets.

A mechanism is kept only if it leaves no trend in the residuals. For each feature x (parallel
degrees, GPU count, recompute, sequence length, model size, and the shares of the step's time
that GEMMs, attention, memory-bound kernels and exposed communication take in the burst
prediction) and the in-sample log residuals r = log(t / T):

* both are centred within each cell (software stack, GPU family): a cell's own in-situ values
  absorb its level, so only the trend inside cells is evidence;
* ``slope`` is the least-squares slope of r on x, ``effect`` the residual change it implies over
  the feature's range (``slope * (max x - min x)``, a relative error), ``r`` Pearson's correlation;
* a feature shows a **trend** when |r| >= 0.7 and |effect| >= 2 %: strong and large enough to
  matter next to the ~1-2 % scatter of the measurements.
"""

from __future__ import annotations

import math

import numpy as np

from teton.validation.fit import FitResult, fit_runs
from teton.validation.predict import run_spec
from teton.validation.runs import MeasuredRun

TREND_R, TREND_EFFECT = 0.7, 0.02
RECOMPUTE_LEVEL = {"none": 0.0, "selective": 1.0, "selective_op": 1.0, "selective_layer": 1.5, "full": 2.0}
SHARE_KINDS = ("gemm", "attention", "memory", "comm")


def run_features(run: MeasuredRun) -> dict[str, float]:
    """Layout features of a run, and where its burst-predicted layer time goes."""
    from teton.engine.op_table import op_rows

    job, model = run.spec.job, run.spec.model
    spec = run_spec(run, {})
    shares = dict.fromkeys(SHARE_KINDS, 0.0)
    for row in op_rows(spec):
        if row["block"] != "layer":
            continue
        kind = row.get("kind") if row["category"] == "compute" else "comm"
        if kind in shares:
            shares[kind] += row["exposed_s"]
    total = sum(shares.values()) or 1.0
    return {
        "tp": float(job.layout.tp), "pp": float(job.layout.pp), "cp": float(job.layout.cp), "dp": float(job.layout.dp),
        "log2_gpus": math.log2(job.gpus), "recompute": RECOMPUTE_LEVEL.get(job.recompute, 1.0),
        "log2_seq_len": math.log2(job.layout.seq_len), "log10_params": math.log10(model.total_params()),
        **{f"{k}_share": v / total for k, v in shares.items()},
    }


def residual_trends(result: FitResult, features: list[dict[str, float]] | None = None) -> list[dict]:
    """One row per feature: slope, effect over its range, correlation, and whether it is a trend."""
    runs = result.runs
    feats = features if features is not None else [run_features(r) for r in runs]
    resid = np.log1p(result.errors("in_sample"))
    fam = np.array(["/".join(c) for c in result.cells])
    rc = resid.copy()
    for f in set(fam):
        rc[fam == f] -= rc[fam == f].mean()
    out = []
    for name in feats[0]:
        x = np.array([f[name] for f in feats], dtype=float)
        xc = x.copy()
        for f in set(fam):
            xc[fam == f] -= xc[fam == f].mean()
        spread = float(x.max() - x.min())
        if float(xc @ xc) < 1e-12:
            out.append({"feature": name, "slope": 0.0, "effect": 0.0, "r": 0.0, "trend": False,
                        "note": "constant within every stack"})
            continue
        slope = float(xc @ rc / (xc @ xc))
        denom = math.sqrt(float(xc @ xc) * float(rc @ rc))
        corr = float(xc @ rc) / denom if denom > 0 else 0.0
        effect = slope * spread
        out.append({"feature": name, "slope": slope, "effect": effect, "r": corr,
                    "trend": abs(corr) >= TREND_R and abs(effect) >= TREND_EFFECT, "note": ""})
    return out


CANDIDATE_SETS: tuple[tuple[str, ...], ...] = (
    ("tensor_core_in_situ",),
    ("tensor_core_in_situ", "collective_in_situ"),
    ("tensor_core_in_situ", "collective_in_situ", "mxfp8_gemm_in_situ"),
    ("tensor_core_in_situ", "collective_in_situ", "mxfp8_gemm_in_situ", "nvfp4_gemm_in_situ"),
    ("tensor_core_in_situ", "collective_in_situ", "mxfp8_gemm_in_situ", "nvfp4_gemm_in_situ", "cudnn_attention_in_situ"),
    ("tensor_core_in_situ", "attention_in_situ", "collective_in_situ"),
    ("tensor_core_in_situ", "collective_in_situ", "kernel_gap_s"),
    ("tensor_core_in_situ", "collective_in_situ", "step_overhead_s"),
    ("tensor_core_in_situ", "collective_in_situ", "gpu_speed_cv"),
)


def ratio_errors(result: FitResult, pairs) -> list[dict]:
    """Per (label, run a, run b, tolerance): the step-time ratio a / b as measured and its relative
    error in-sample and leave-pair-out (both runs held out of the fit)."""
    names = [r.name for r in result.runs]
    out = []
    for label, a, b, tol in pairs:
        i, j = names.index(a), names.index(b)
        measured = result.runs[i].step_time_s / result.runs[j].step_time_s
        ins = result.in_sample_s[i] / result.in_sample_s[j] / measured - 1
        held = result.pair_loo_s.get((a, b))
        lpo = held[0] / held[1] / measured - 1 if held else math.nan
        out.append({"label": label, "measured": measured, "error_in_sample": ins, "error_leave_pair_out": lpo,
                    "tolerance": tol})
    return out


def compare_candidates(runs, sets=CANDIDATE_SETS, progress=None, pairs=()) -> list[dict]:
    """Fit each candidate parameter set; its values, errors, ratio errors (``pairs``: label, run
    a, run b, tolerance) and residual trends, side by side."""
    features = [run_features(r) for r in runs]
    out = []
    for i, keys in enumerate(sets):
        if progress is not None:
            progress(i, len(sets))
        res = fit_runs(runs, keys, pairs=tuple((a, b) for _, a, b, _ in pairs))
        loo, ins, loso = res.errors("loo"), res.errors("in_sample"), res.errors("loso")
        trends = residual_trends(res, features)
        ratios = ratio_errors(res, pairs)
        params = res.parameter_rows()
        out.append({
            "parameters": list(keys),
            "identified": sum(p["identified"] for p in params), "values": len(params),
            "spread": {"sigma": res.hyper.sigma, **{f"tau_{k}": v for k, v in res.hyper.tau}},
            "in_sample_mean_abs": float(np.mean(np.abs(ins))), "loo_mean_abs": float(np.mean(np.abs(loo))),
            "loo_max_abs": float(np.max(np.abs(loo))), "loso_mean_abs": float(np.mean(np.abs(loso))),
            "loso_max_abs": float(np.max(np.abs(loso))), "coverage_unseen": res.coverage("loso"),
            "ratios_within_in_sample": sum(abs(r["error_in_sample"]) <= r["tolerance"] for r in ratios),
            "ratios_within_leave_pair_out": sum(abs(r["error_leave_pair_out"]) <= r["tolerance"] for r in ratios),
            "ratios": len(ratios),
            "trends": [t["feature"] for t in trends if t["trend"]],
        })
    if progress is not None:
        progress(len(sets), len(sets))
    return out
