"""teton: a digital twin of GenAI training clusters.

    >>> import teton
    >>> r = teton.simulate("examples/llama3-405b-16k.yaml")   # doctest: +SKIP
    >>> r.step_time_s, r.mfu, r.breakdown                      # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from teton.errors import SpecError
from teton.version import __version__

if TYPE_CHECKING:
    from teton.engine.result import StepResult
    from teton.spec import Spec

_LAZY = {"Spec": "teton.spec", "load_spec": "teton.spec", "StepResult": "teton.engine.result"}


def __getattr__(name: str) -> Any:
    """The spec and result types load on first use, so that ``import teton`` (and the ``teton``
    command's first moment) stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'teton' has no attribute {name!r}")


def simulate(spec: Spec | str | Path | dict[str, Any], overrides: list[str] | None = None,
             placement=None, cost_model=None) -> StepResult:
    """Simulate one training step of ``spec`` (a Spec, a spec file path, or a mapping).

    ``overrides`` are ``key.path=value`` strings like the CLI's ``--set``; ``placement`` a
    :class:`teton.placement.Placement` to use instead of the spec's policy.
    """
    from teton.engine.step import simulate_step
    from teton.spec import Spec, load_spec

    if not isinstance(spec, Spec):
        spec = load_spec(spec, overrides)
    elif overrides:
        raise SpecError("overrides", overrides, "apply overrides to a spec file or mapping, not a resolved Spec")
    return simulate_step(spec, placement=placement, cost_model=cost_model)


__all__ = ["simulate", "load_spec", "Spec", "StepResult", "SpecError", "__version__"]
