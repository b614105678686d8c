"""Fabrics: the explicit switch graph of a cluster spec (``graph``) for the flow-level model."""
