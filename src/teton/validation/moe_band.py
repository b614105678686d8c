"""The band of an MoE job: the held-out errors of training set 2's MoE rows.

The in-situ values are fitted on the dense rows alone; the MoE rows are predicted with them, not
fitted (``training_set2.PREDICTED``, issue #25), so their errors are out of sample. Those errors are
far wider than the dense rows' leave-one-out band: in step time they spread from about -40 %
(teton too fast) to a few per cent too slow, and mostly *from model to model* (in one release
GPT-OSS comes out too fast and DeepSeek-V3 too slow). A dense band printed for an MoE job would claim far more than teton's MoE model delivers.

So an MoE job's band is the weighted p10-p90 of the MoE rows' step-time errors, each **model**
counting once (a user's question is a new MoE job, often a new model: the spread between models is
its uncertainty), and its coverage is measured nested, each model's rows against the band of the
other models (leave-one-model-out), as ``teton.validation.bands`` does for stacks.

For a stack without training runs on the GPU family the dense bands' widening is added: in log
space the MoE band's centre moves by the unseen band's centre minus the seen one's, and its
half-width grows in quadrature by the unseen band's extra half-width
(``teton.hardware.in_situ.widened_for_unseen``).
"""

from __future__ import annotations

import math

import numpy as np

from teton.validation import bands


def moe_errors(result) -> tuple[np.ndarray, list[str], tuple]:
    """(step-time errors predicted / measured - 1, model name, run) of every MoE row of training set
    2, each predicted with its (stack, GPU family) values of ``result`` (a bundled FitResult; a
    cell without dense runs takes its family's prior centre, as the catalog does)."""
    from teton.hardware.efficiency import family_of
    from teton.validation.predict import predict_s
    from teton.validation.training_set2 import moe_runs_2

    runs = moe_runs_2()
    values = [result.solution.values((r.spec.job.software.name, family_of(r.spec.cluster.gpu_spec))) for r in runs]
    pred = predict_s(runs, values)
    errors = pred / np.array([r.step_time_s for r in runs]) - 1.0
    return errors, [r.spec.model.name for r in runs], runs


def moe_band(errors: np.ndarray, models: list[str]) -> tuple[float, float]:
    """(p10, p90) of the MoE rows' errors, each model counting once."""
    return bands.band(errors, bands.inverse_counts(models))


def moe_coverage(errors: np.ndarray, models: list[str]) -> float:
    """Share of the MoE rows (each model once) inside the band of the *other* models' errors."""
    return bands.nested_coverage(errors, bands.inverse_counts(models), models)


def by_model(errors: np.ndarray, models: list[str]) -> list[dict]:
    """Per model: rows, mean signed and mean / max absolute step-time error, and the share of its
    rows inside the band of the other models (the nested coverage's per-model part)."""
    out = []
    models_arr = np.array(models, dtype=object)
    weights = bands.inverse_counts(models)
    for m in dict.fromkeys(models):
        mine = models_arr == m
        e = errors[mine]
        lo, hi = bands.band(errors[~mine], weights[~mine]) if (~mine).any() else (math.nan, math.nan)
        out.append({"model": m, "rows": int(mine.sum()), "mean_error": float(e.mean()),
                    "mean_abs_error": float(np.abs(e).mean()), "max_abs_error": float(np.abs(e).max()),
                    "inside_band": float(np.mean((e >= lo) & (e <= hi)))})
    return out


def moe_summary(result) -> dict:
    """The MoE rows against ``result``: mean / max absolute error, band, nested coverage, per model."""
    errors, models, _ = moe_errors(result)
    return {"rows": len(errors), "mean_abs_error": float(np.abs(errors).mean()),
            "max_abs_error": float(np.abs(errors).max()), "band": list(moe_band(errors, models)),
            "coverage": moe_coverage(errors, models), "models": by_model(errors, models)}
