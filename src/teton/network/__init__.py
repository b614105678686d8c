"""Network cost models: analytical alpha-beta over fabric layers (and the flow-level solver)."""

from teton.network.analytical import OPS, AnalyticalCostModel, bus_factor

__all__ = ["OPS", "AnalyticalCostModel", "bus_factor"]
