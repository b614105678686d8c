"""What a spec asks beyond one step, shared by ``teton run`` and ``teton sweep``.

* a ``storage:`` section: checkpoint save / async pause / restore times, sizes and bottleneck
  (:func:`teton.storage.checkpoint_summary`);
* ``reliability:`` with a run length (``tokens`` or ``days``): goodput, ETTR, time-to-train,
  energy and cost over the whole run (:func:`teton.reliability.run_summary`), using the step the
  engine simulated and, when the spec has storage, the checkpoint times above.
"""

from __future__ import annotations

from typing import Any


def run_extras(spec, result) -> dict[str, Any]:
    """The extra keys for ``spec`` given its simulated step ``result`` (empty when it asks none)."""
    extra: dict[str, Any] = {}
    if spec.storage is not None:
        from teton.storage import checkpoint_summary

        extra.update(checkpoint_summary(spec))
    rel = spec.reliability
    if rel is not None and (rel.tokens is not None or rel.days is not None):
        from teton.engine.step import simulate_step
        from teton.reliability import run_summary

        extra.update(run_summary(spec, result.step_time_s, result.tokens_per_step, result.breakdown,
                                 simulate=simulate_step))
    return extra
