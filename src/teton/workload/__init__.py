"""Models and the per-step work of a parallel layout."""

from teton.workload.model import MODEL_PRESETS, ModelSpec, model_from_hf_config

__all__ = ["MODEL_PRESETS", "ModelSpec", "model_from_hf_config"]
