"""Bands from held-out errors: weighted p10-p90, and how often such a band contains reality.

A prediction t with relative error e (t / measured - 1) measured ``t / (1 + e)``; the band of a
prediction is ``[t / (1 + e90), t / (1 + e10)]`` with e10, e90 the 10th and 90th percentiles of
held-out errors. Errors are weighted so that every configuration (leave-one-out) or every stack
(leave-one-stack-out) counts once, whatever its number of rows. Coverage is measured *nested*: the
rows of each unit (configuration or stack) against a band built from the other units' errors, the
honest estimate of how often a band printed for a new run will contain it.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

P_LOW, P_HIGH = 0.10, 0.90
Z_90 = 1.2816  # the standard normal's 90th percentile
MIN_EMPIRICAL = 10  # units below which a band's percentiles come from a normal, not the sample


def inverse_counts(units: list) -> np.ndarray:
    """Weights 1 / (rows of the unit) for each row."""
    counts = Counter(units)
    return np.array([1.0 / counts[u] for u in units])


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` with ``weights`` (midpoint interpolation of the weighted CDF)."""
    values, weights = np.asarray(values, float), np.asarray(weights, float)
    ok = np.isfinite(values)
    values, weights = values[ok], weights[ok]
    if not len(values):
        return float("nan")
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cdf = (np.cumsum(w) - 0.5 * w) / w.sum()
    return float(np.interp(q, cdf, v))


def band(errors: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """(p10, p90) of the weighted errors."""
    return weighted_quantile(errors, weights, P_LOW), weighted_quantile(errors, weights, P_HIGH)


def nested_coverage(errors: np.ndarray, weights: np.ndarray, units: list) -> float:
    """Weighted share of rows whose error lies in the band of the *other* units' errors."""
    inside, total = _nested(errors, weights, units, lambda e, w, _u: band(e, w))
    return inside / total if total else float("nan")


def _nested(errors, weights, units: list, band_of) -> tuple[float, float]:
    """(weight inside, weight in all) of the rows of each unit against ``band_of(errors, weights,
    units)`` of the other units' rows; a unit that is every row has no such band."""
    errors, weights = np.asarray(errors, float), np.asarray(weights, float)
    units = np.array(units, dtype=object)
    inside, total = 0.0, 0.0
    for u in dict.fromkeys(units.tolist()):
        mine = units == u
        if mine.all():
            continue
        lo, hi = band_of(errors[~mine], weights[~mine], list(units[~mine]))
        e = errors[mine]
        inside += float(weights[mine][(e >= lo) & (e <= hi)].sum())
        total += float(weights[mine].sum())
    return inside, total


def small_sample_band(errors: np.ndarray, weights: np.ndarray, sigma: float, units: int | None = None
                      ) -> tuple[float, float]:
    """(p10, p90) of a normal around the weighted mean held-out error, with a spread shrunk towards
    ``sigma`` (the catalog's per-run scatter) by one pseudo-observation: ``s^2 = (sum w e^2 / sum w
    x n + sigma^2) / (n + 1)`` over the held-out errors' deviations, n the independent units among
    them (``units``, default one per row); too few rows for percentiles. Under three units the
    spread is at least ``sigma``."""
    e, w = np.asarray(errors, float), np.asarray(weights, float)
    ok = np.isfinite(e)
    e, w = e[ok], w[ok]
    if not len(e):
        return -Z_90 * sigma, Z_90 * sigma
    mean = float(np.average(e, weights=w))
    n = len(e) if units is None else max(1, min(units, len(e)))
    s = float(np.sqrt((np.average((e - mean) ** 2, weights=w) * n + sigma ** 2) / (n + 1)))
    s = max(s, sigma) if n < 3 else s
    return mean - Z_90 * s, mean + Z_90 * s


def family_band(errors: np.ndarray, units: list, sigma: float) -> tuple[float, float]:
    """(p10, p90) of one GPU family's held-out ``errors``, each of its ``units`` (configurations)
    counted once: the weighted percentiles from ``MIN_EMPIRICAL`` units on, a normal shrunk towards
    ``sigma`` below (:func:`small_sample_band`)."""
    weights, n = inverse_counts(units), len(set(units))
    if n >= MIN_EMPIRICAL:
        return band(errors, weights)
    return small_sample_band(errors, weights, sigma, n)


def nested_family_coverage(errors: np.ndarray, units: list, families: list, sigma: float
                           ) -> tuple[float, dict[str, float]]:
    """(all rows, per family) weighted share of rows inside the band of their family's *other*
    units (:func:`family_band`), each unit weighing one; a family of one unit has no such band."""
    errors, units_a, fams = np.asarray(errors, float), np.array(units, dtype=object), np.array(families, dtype=object)
    weights = inverse_counts(units)
    per: dict[str, float] = {}
    inside_all = total_all = 0.0
    for f in dict.fromkeys(families):
        in_f = fams == f
        inside, total = _nested(errors[in_f], weights[in_f], list(units_a[in_f]),
                                lambda e, _w, u: family_band(e, u, sigma))
        if total:
            per[f] = inside / total
        inside_all, total_all = inside_all + inside, total_all + total
    return (inside_all / total_all if total_all else float("nan")), per


def spread_of(band_: tuple[float, float]) -> float:
    """The standard deviation of a normal whose p10-p90 is ``band_``'s width."""
    return (band_[1] - band_[0]) / (2 * Z_90)


def widened_band(errors: np.ndarray, units: list, pooled: tuple[float, float]) -> tuple[float, float]:
    """An unseen stack's band on one GPU family: the ``pooled`` leave-one-stack-out band of every
    family, widened to the family's own (:func:`family_band` of its rows' ``errors``, each stack
    of ``units`` once, small samples shrunk towards the pooled spread) where that reaches further.
    A family's stacks may scatter more than the pool's (A100's two land on either side of it);
    too few stacks a family to trust a narrower one."""
    lo, hi = family_band(errors, units, spread_of(pooled))
    return min(lo, pooled[0]), max(hi, pooled[1])


def nested_unseen_coverage(errors: np.ndarray, weights: np.ndarray, stacks: list, families: list
                           ) -> tuple[float, dict[str, float]]:
    """(all rows, per family) weighted share of each stack's rows inside the band their family
    would get without the stack (:func:`widened_band` over the other stacks' rows)."""
    errors, weights = np.asarray(errors, float), np.asarray(weights, float)
    stacks_a, fams = np.array(stacks, dtype=object), np.array(families, dtype=object)
    inside: dict[str, float] = {}
    total: dict[str, float] = {}
    for s in dict.fromkeys(stacks):
        mine = stacks_a == s
        if mine.all():
            continue
        pooled = band(errors[~mine], weights[~mine])
        for f in dict.fromkeys(fams[mine].tolist()):
            rows, others = mine & (fams == f), ~mine & (fams == f)
            lo, hi = widened_band(errors[others], list(stacks_a[others]), pooled) if others.any() else pooled
            e = errors[rows]
            inside[f] = inside.get(f, 0.0) + float(weights[rows][(e >= lo) & (e <= hi)].sum())
            total[f] = total.get(f, 0.0) + float(weights[rows].sum())
    all_in, all_total = sum(inside.values()), sum(total.values())
    return (all_in / all_total if all_total else float("nan")), {f: inside[f] / total[f] for f in total if total[f]}


def catalog_seen_band(families, moe: bool, sigma: float) -> tuple[float, float]:
    """The catalog's band of a stack with training runs on ``families`` (their envelope; the MoE
    rows' for ``moe``; a normal of sd ``sigma`` where the catalog has none): what a user's fit of
    one configuration, which leaves no run to hold out, carries about its calibrated point
    (``teton.hardware.in_situ.band``)."""
    from teton.hardware.in_situ import band as catalog_band

    found = [catalog_band(True, moe, f) for f in dict.fromkeys(families)]
    found = [b for b in found if b is not None] or [(-Z_90 * sigma, Z_90 * sigma)]
    return min(b[0] for b in found), max(b[1] for b in found)
