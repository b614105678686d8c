"""Reliability: failure taxonomy and rates, recovery, Monte Carlo of a whole run, checkpoint
interval policy, goodput, time-to-train, energy and cost. The ``reliability:`` spec section it
reads is :mod:`teton.spec.reliability`."""

from teton.reliability.goodput import GoodputResult, failure_model, goodput, interruption_table, run_summary
from teton.reliability.interval import daly_interval_s, young_interval_s
from teton.reliability.montecarlo import MCInputs, simulate_runs
from teton.reliability.rates import job_components

__all__ = ["GoodputResult", "failure_model", "goodput", "interruption_table", "run_summary", "daly_interval_s", "young_interval_s",
           "MCInputs", "simulate_runs", "job_components"]
