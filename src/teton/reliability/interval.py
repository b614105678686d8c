"""Checkpoint interval: Young's and Daly's optima.

- Young (1974), "A first order approximation to the optimum checkpoint interval", CACM 17(9):
  ``tau = sqrt(2 * delta * M)``, with ``delta`` the checkpoint cost and ``M`` the mean time
  between interruptions.
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
  FGCS 22(3), eq. 37: for ``delta < 2M``
  ``tau = sqrt(2 delta M) * [1 + sqrt(delta / (2M)) / 3 + (delta / (2M)) / 9] - delta``,
  else ``tau = M``.

``delta`` is the time training pauses per checkpoint (the blocking part); ``M`` counts the
interruptions that lose work (planned maintenance drains at a checkpoint and loses none). The
interval a run uses, the flat region around the optimum and the Monte Carlo sweep:
:mod:`teton.reliability.recommend` and :mod:`teton.reliability.sweep`.
"""

from __future__ import annotations

import math


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
