"""Time-weighted statistics of a scheduler simulation's event series.

The simulation records, at every event (arrivals and job ends), the busy GPU fraction and the
fragmentation; both are step functions of time, constant until the next event. Their means are
integrals of the step function over the window divided by its length; percentiles are over jobs.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def percentiles(x: np.ndarray) -> dict[str, float]:
    """Mean, p50 / p90 / p99 and max of a per-job figure (all 0 with no jobs)."""
    if x.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    p = np.percentile(x, [50, 90, 99])
    return {"mean": float(x.mean()), "p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
            "max": float(x.max())}


def window_mean(t: np.ndarray, busy: np.ndarray, a: float, b: float) -> float:
    """Time-weighted mean of the step function (t, busy) over [a, b]."""
    if t.size < 2 or b <= a:
        return float(busy[0]) if busy.size else 0.0
    cum = np.concatenate([[0.0], np.cumsum(busy[:-1] * np.diff(t))])
    at = []
    for x in (a, b):
        i = int(np.clip(np.searchsorted(t, x, side="right") - 1, 0, t.size - 1))
        at.append(cum[i] + busy[i] * (x - t[i]))
    return float((at[1] - at[0]) / (b - a))


def binned_series(t: np.ndarray, busy: np.ndarray, bins: int) -> tuple[tuple[float, float], ...]:
    """Time-weighted mean busy fraction in ``bins`` equal time bins (a step function's average)."""
    if t.size < 2 or t[-1] <= t[0]:
        return ()
    edges = np.linspace(t[0], t[-1], bins + 1)
    # integral of the step function up to each event, then at the bin edges
    cum = np.concatenate([[0.0], np.cumsum(busy[:-1] * np.diff(t))])
    idx = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, t.size - 1)
    at_edges = cum[idx] + busy[idx] * (edges - t[idx])
    mean = np.diff(at_edges) / np.diff(edges)
    return tuple((float(a), float(b)) for a, b in zip(edges[:-1], mean, strict=True))


def utilisation_figures(event_t_s: list[float], busy_gpus: list[int], fragmentation: list[float], cluster_gpus: int,
                        first_arrival_s: float, last_arrival_s: float, series_bins: int) -> dict[str, Any]:
    """The run's makespan (first to last event) and, time-weighted over it, the mean GPU
    utilisation and fragmentation; the utilisation over the arrival window (the loaded regime)
    and in ``series_bins`` time bins. Keys are :class:`~teton.placement.scheduler.ScheduleResult`
    fields."""
    ev_t = np.array(event_t_s)
    busy = np.array(busy_gpus, dtype=float) / cluster_gpus
    dt = np.diff(ev_t)
    horizon = float(ev_t[-1] - ev_t[0]) if ev_t.size > 1 else 0.0
    return {
        "makespan_s": horizon,
        "utilisation_mean": float((busy[:-1] * dt).sum() / horizon) if horizon > 0 else 0.0,
        "utilisation_arrivals": window_mean(ev_t, busy, first_arrival_s, last_arrival_s),
        "utilisation_series": binned_series(ev_t, busy, series_bins),
        "fragmentation_mean": float((np.array(fragmentation[:-1]) * dt).sum() / horizon) if horizon > 0 else 0.0,
    }
