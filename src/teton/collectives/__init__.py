"""Collective algorithms: a collective on groups of GPUs as phases of flows (see ``algorithms``)."""

from teton.collectives.algorithms import ALGOS, Phase, phases_for

__all__ = ["ALGOS", "Phase", "phases_for"]
