"""Rank placement on the cluster's GPUs and the groups of each parallel axis."""

from teton.placement.mapping import POLICIES, Placement, place

__all__ = ["POLICIES", "Placement", "place"]
