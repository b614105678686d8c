"""Spec files: schema, presets resolution, overrides and one-line validation errors."""

from teton.spec.load import apply_overrides, load_spec, read_file
from teton.spec.schema import JobSpec, NetworkSpec, Spec, check_job

__all__ = ["apply_overrides", "load_spec", "read_file", "JobSpec", "NetworkSpec", "Spec", "check_job"]
