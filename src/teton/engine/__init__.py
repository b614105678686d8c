"""The step simulator: compute model, pipeline schedule timeline, result."""
