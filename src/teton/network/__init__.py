"""Network cost models: analytical alpha-beta over fabric layers and the flow-level solver, behind
one ``CostModel`` interface (``teton.network.cost_model``)."""

from teton.network.analytical import AnalyticalCostModel
from teton.network.cost_model import CostModel, cost_model

__all__ = ["AnalyticalCostModel", "CostModel", "cost_model"]
