"""Spec files: schema, presets resolution, overrides and one-line validation errors."""

from pathlib import Path
from typing import Any

from teton.errors import SpecError
from teton.spec.load import load_spec, read_file
from teton.spec.schema import Spec


def as_spec(spec: Any) -> Spec:
    """A resolved :class:`Spec` from what the library's entry points take: a Spec, a spec file's
    path or a spec mapping (each loaded as ``teton.simulate`` loads it); anything else is a
    one-line :class:`~teton.errors.SpecError`."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, (str, Path, dict)):
        return load_spec(spec)
    raise SpecError("spec", type(spec).__name__, "a Spec, a spec file path or a spec mapping")


__all__ = ["as_spec", "load_spec", "read_file", "Spec"]
