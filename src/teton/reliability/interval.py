"""Checkpoint interval: Young's and Daly's optima, and the Monte Carlo optimum by sweep.

- Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
  ``tau = sqrt(2 * delta * M)``, with ``delta`` the checkpoint cost and ``M`` the mean time
  between interruptions.
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
  FGCS 22(3), eq. 37: for ``delta < 2M``
  ``tau = sqrt(2 delta M) * [1 + sqrt(delta / (2M)) / 3 + (delta / (2M)) / 9] - delta``,
  else ``tau = M``.

``delta`` is the time training pauses per checkpoint (the blocking part); ``M`` counts the
interruptions that lose work (planned maintenance drains at a checkpoint and loses none).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from teton.reliability.montecarlo import MCInputs, simulate_runs


def young_interval_s(checkpoint_cost_s: float, mtbi_s: float) -> float:
    """Young (1974)'s optimum interval ``sqrt(2 delta M)`` for checkpoint cost ``delta`` and MTBI ``M``."""
    return math.sqrt(2.0 * checkpoint_cost_s * mtbi_s)


def daly_interval_s(checkpoint_cost_s: float, mtbi_s: float) -> float:
    """Daly (2006, eq. 37)'s optimum interval: ``sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 +
    (delta / 2M) / 9] - delta`` for ``delta < 2M``, else ``M`` (module docstring)."""
    d, m = checkpoint_cost_s, mtbi_s
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def sweep_intervals(inp: MCInputs, intervals_s: list[float], runs: int, seed: int,
                    progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Monte Carlo ETTR and wall-clock for each checkpoint interval (same seed: common random
    numbers). ``progress(done, total)``: runs finished so far, over every interval."""
    rows = []
    total = len(intervals_s) * runs
    for i, tau in enumerate(intervals_s):
        sub = None if progress is None else (lambda done, _, i=i: progress(i * runs + done, total))
        res = simulate_runs(replace(inp, interval_s=float(tau)), runs, seed, sub)
        ettr = res.ettr
        rows.append({"interval_s": float(tau), "ettr_mean": float(ettr.mean()),
                     "ettr_p5": float(np.percentile(ettr, 5)), "ettr_p50": float(np.percentile(ettr, 50)),
                     "ettr_p95": float(np.percentile(ettr, 95)),
                     "wall_days_p50": float(np.percentile(res.wall_s, 50) / 86400.0)})
    return rows


def default_sweep_grid(center_s: float, points: int = 13) -> list[float]:
    """Log-spaced intervals from center/16 to center*16 (centre = Young/Daly); the caller rounds
    them to whole steps."""
    return [float(x) for x in np.geomspace(center_s / 16.0, center_s * 16.0, points)]
