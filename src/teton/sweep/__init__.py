"""Design-space sweeps and searches over specs."""

from teton.sweep.search import SearchSpace, candidate_jobs, search_layouts

__all__ = ["SearchSpace", "candidate_jobs", "search_layouts"]
