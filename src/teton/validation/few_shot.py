"""The few-shot protocol: how well k measured runs of a stack calibrate the rest of that stack.

For each training stack with at least four configurations: the prior is the fit *without* that
stack (its leave-one-stack-out refit: centres and spreads as a user's ``teton fit RUNS --stack``
would get them from a catalog that never saw the stack); k = 1, 2, 3 of its configurations are
drawn (every combination, or ``MAX_DRAWS`` of them drawn with a fixed seed), the stack's values are
fitted to those runs against that prior, and the stack's *other* configurations are predicted by
exact simulation. k = 0 is the prior alone (the leave-one-stack-out prediction).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from teton.validation.hierarchy import fit

FEW_SHOT_K = (1, 2, 3)
MAX_DRAWS = 12
MIN_CONFIGS = 4


def _draws(n: int, k: int) -> list[tuple[int, ...]]:
    combos = list(itertools.combinations(range(n), k))
    if len(combos) <= MAX_DRAWS:
        return combos
    rng = np.random.default_rng(k)
    return [combos[i] for i in sorted(rng.choice(len(combos), MAX_DRAWS, replace=False))]


def few_shot(result, progress=None) -> list[dict]:
    """One row per stack: configurations, and the mean / max absolute error on its other
    configurations when fitted on k = 0 (prior only), 1, 2, 3 of them."""
    from teton.validation.predict import predict_s

    sur, runs, cells = result.surrogates, result.runs, result.cells
    logm = np.log([r.step_time_s for r in runs])
    stacks = [s for s in dict.fromkeys(c[0] for c in cells)
              if len({r.config for r, c in zip(runs, cells, strict=True) if c[0] == s}) >= MIN_CONFIGS]
    out = []
    for n_done, stack in enumerate(stacks):
        if progress is not None:
            progress(n_done, len(stacks))
        mine = [i for i, c in enumerate(cells) if c[0] == stack]
        rest = [i for i, c in enumerate(cells) if c[0] != stack]
        prior = fit([cells[i] for i in rest], logm[rest], sur.subset(rest), result.hyper, x0=result.solution)
        configs = list(dict.fromkeys(runs[i].config for i in mine))
        loso = np.abs(result.errors("loso")[mine])
        row = {"stack": stack, "configs": len(configs), "rows": len(mine),
               "k0_mean_abs": float(loso.mean()), "k0_max_abs": float(loso.max())}
        for k in FEW_SHOT_K:
            errs = []
            for draw in _draws(len(configs), k):
                chosen = {configs[j] for j in draw}
                fit_idx = [i for i in mine if runs[i].config in chosen]
                test_idx = [i for i in mine if runs[i].config not in chosen]
                sol = fit([cells[i] for i in fit_idx], logm[fit_idx], sur.subset(fit_idx), result.hyper,
                          fixed_centres=dict(prior.centre_z), x0=prior)
                pred = predict_s([runs[i] for i in test_idx], [sol.values(cells[i]) for i in test_idx])
                errs += list(np.abs(pred / np.exp(logm[test_idx]) - 1.0))
            row[f"k{k}_mean_abs"] = float(np.mean(errs)) if errs else math.nan
            row[f"k{k}_max_abs"] = float(np.max(errs)) if errs else math.nan
        out.append(row)
    if progress is not None:
        progress(len(stacks), len(stacks))
    return out
