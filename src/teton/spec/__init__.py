"""Spec files: schema, presets resolution, overrides and one-line validation errors."""

from teton.spec.load import load_spec, read_file
from teton.spec.schema import Spec

__all__ = ["load_spec", "read_file", "Spec"]
