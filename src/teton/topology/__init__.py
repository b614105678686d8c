"""Clusters and their fabrics: layered cluster specs, presets and (later) explicit switch graphs."""

from teton.topology.cluster import CLUSTER_PRESETS, ClusterSpec, FabricLayer

__all__ = ["CLUSTER_PRESETS", "ClusterSpec", "FabricLayer"]
