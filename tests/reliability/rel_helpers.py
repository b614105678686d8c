"""Helpers for the reliability tests: the Llama 3 405B job of Table 4 / Table 5 on meta-roce-24k."""

from __future__ import annotations

from layouts import JOB_405B_16K, LLAMA3_405B_16K

from teton.spec import load_spec

# Explicit checkpoint costs keep these tests independent of the storage model's evolution.
CKPT = {"checkpoint_save_s": 30.0, "checkpoint_blocking_s": 10.0, "checkpoint_restore_s": 60.0}
# The step time (s) the goodput tests give, so that no step is simulated.
STEP_S = 5.413


def spec_405b(reliability: dict | None = None, **job):
    data = {**LLAMA3_405B_16K, "job": {**JOB_405B_16K, **job}}
    if reliability is not None:
        data["reliability"] = reliability
    return load_spec(data)
