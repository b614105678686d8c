"""Design-space sweeps and searches over specs."""

from teton.sweep.grid import Point, Sweep, parse_sweep
from teton.sweep.run import SweepSummary, run_sweep
from teton.sweep.search import SearchSpace, candidate_jobs, search_layouts
from teton.sweep.store import ResultStore

__all__ = ["SearchSpace", "candidate_jobs", "search_layouts", "Point", "Sweep", "parse_sweep", "SweepSummary",
           "run_sweep", "ResultStore"]
