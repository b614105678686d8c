"""Reliability: failure taxonomy and rates, recovery, Monte Carlo of a whole run, checkpoint
interval policy, goodput, time-to-train, energy and cost."""

from teton.reliability.config import InfantMortality, ReliabilityConfig, parse_reliability
from teton.reliability.goodput import FailureModel, failure_model, goodput, interruption_table, run_summary
from teton.reliability.interval import daly_interval_s, young_interval_s
from teton.reliability.montecarlo import MCInputs, MCResult, simulate_runs
from teton.reliability.rates import CAUSES, default_rates_per_hour, job_components

__all__ = ["InfantMortality", "ReliabilityConfig", "parse_reliability", "FailureModel", "failure_model",
           "goodput", "interruption_table", "run_summary", "daly_interval_s", "young_interval_s", "MCInputs",
           "MCResult", "simulate_runs", "CAUSES", "default_rates_per_hour", "job_components"]
