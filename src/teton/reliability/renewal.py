"""ETTR of a run that checkpoints every ``tau`` seconds of training, in closed form (renewal model).

A checkpoint cycle is ``c = tau + delta`` of up-time (``delta``: the blocking part of a save),
and an *attempt* at it starts fresh after each checkpoint, restart or planned drain. Unexpected
interruptions (rate ``lambda``) and planned drains (rate ``lambda_p``) arrive as Poisson
processes over the up-time, ``L = lambda + lambda_p``. An attempt ends at the first of them or
at ``c``: it lasts ``E[min(T, c)] = (1 - e^(-L c)) / L`` of up-time, and ends in an event with
probability ``p = 1 - e^(-L c)``. An unexpected interruption loses the attempt's training and
costs its downtime ``R`` (mean over the causes); a planned drain saves first, keeping
``min(T, tau)`` of training, and costs its downtime and the save ``R_p`` (the Monte Carlo's
model, :mod:`teton.reliability.montecarlo`: no interruption is drawn while the job is down, that
save included). By renewal-reward, per attempt::

    wall    = (1 - e^(-L c)) / L + p (lambda R + lambda_p R_p) / L
    trained = tau e^(-L c) + (lambda_p / L) E[min(T, tau); T < c]
    ETTR    = trained / wall - lambda lag (tau / c) (up-time share)

with ``E[min(T, tau); T < c] = (1 - e^(-L tau) (1 + L tau)) / L + tau (e^(-L tau) - e^(-L c))``,
and the last term the first-order loss of an interruption in the ``lag = save - delta`` before a
save is durable (it loses the cycle before too). Without planned drains this is Daly's
exponential form ``lambda tau / ((e^(lambda c) - 1)(1 + lambda R))`` (Daly 2006, "A higher
order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3)).

For ``lambda c << 1`` this is Young's first-order ETTR ``[tau / c - lambda (tau / 2 + lag tau / c)]
/ (1 + D)`` (``lambda tau / (e^(lambda c) - 1) ~ tau / c - lambda tau / 2``); where a pause is a
sizeable share of the time between interruptions the first order goes to zero or below while a
run still makes progress (a 15,000 s pause against one interruption every 11,000 s: 8 % by
renewal and by the Monte Carlo, 2 % first order).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the Monte Carlo's inputs; montecarlo imports this module to check a run's progress
    from teton.reliability.montecarlo import MCInputs

NO_PROGRESS_ETTR = 1e-6  # below this a run takes a million times its failure-free time: none in practice


def interruption_rates(inp: MCInputs) -> tuple[float, float, float, float]:
    """(unexpected interruptions per s, their downtime per second of up-time, planned drains'
    downtime and save per second of up-time, durability lag s)."""
    unexpected = ~inp.planned
    lam = float(np.sum(inp.rates_per_s[unexpected]))
    down_unexpected = float(np.sum(inp.rates_per_s[unexpected] * inp.downtime_s[unexpected]))
    down_planned = float(np.sum(inp.rates_per_s[inp.planned] * (inp.downtime_s[inp.planned] + inp.save_s)))
    return lam, down_unexpected, down_planned, max(inp.save_s - inp.blocking_s, 0.0)


def renewal_ettr(inp: MCInputs, interval_s: float) -> float:
    """ETTR at a checkpoint every ``interval_s`` of training (module docstring), at least 0."""
    lam, down_u, down_p, lag = interruption_rates(inp)
    lam_p = float(np.sum(inp.rates_per_s[inp.planned]))
    total = lam + lam_p
    tau, c = interval_s, interval_s + inp.blocking_s
    if total <= 0:
        return tau / c
    r_u = down_u / lam if lam > 0 else 0.0  # mean downtime of an unexpected interruption
    r_p = down_p / lam_p if lam_p > 0 else 0.0  # of a planned drain, its save included
    p_event = -math.expm1(-total * c)
    up_s = p_event / total  # E[min(T, c)]: up-time of one attempt
    wall_s = up_s + p_event * (lam * r_u + lam_p * r_p) / total
    kept_at_drain = (-math.expm1(-total * tau) - total * tau * math.exp(-total * tau)) / total \
        + tau * (math.exp(-total * tau) - math.exp(-total * c))  # E[min(T, tau); T < c]
    trained = tau * math.exp(-total * c) + lam_p / total * kept_at_drain
    return max(trained / wall_s - lam * lag * tau / c * up_s / wall_s, 0.0)


def renewal_optimum_s(inp: MCInputs, shortest_s: float) -> float:
    """The interval of best renewal ETTR, at least ``shortest_s``: a log scan from Young's
    first-order optimum / 100 to x 100, refined by golden section around the best point."""
    lam, _, _, lag = interruption_rates(inp)
    young = math.sqrt(2.0 * max(inp.blocking_s, 1e-9) * max(1.0 - lam * lag, 1e-9) / lam)
    lo = max(shortest_s, young / 100.0, 1e-6)
    grid = np.geomspace(lo, max(young * 100.0, lo * 2.0), 241)
    vals = [renewal_ettr(inp, float(x)) for x in grid]
    i = int(np.argmax(vals))
    a, b = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, grid.size - 1)])
    g = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        m1, m2 = b - g * (b - a), a + g * (b - a)
        if renewal_ettr(inp, math.exp(m1)) >= renewal_ettr(inp, math.exp(m2)):
            b = m2
        else:
            a = m1
    return math.exp(0.5 * (a + b))
