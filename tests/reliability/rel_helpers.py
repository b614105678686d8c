"""Helpers for the reliability tests: the Llama 3 405B job of Table 4 / Table 5 on meta-roce-24k."""

from __future__ import annotations

from teton.spec import load_spec

JOB_405B = {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048, "zero": 1,
            "pp_schedule": "interleaved", "virtual_stages": 8, "pp_embedding_slots": True}
# Explicit checkpoint costs keep these tests independent of the storage model's evolution.
CKPT = {"checkpoint_save_s": 30.0, "checkpoint_blocking_s": 10.0, "checkpoint_restore_s": 60.0}


def spec_405b(reliability: dict | None = None, **job):
    data = {"cluster": "meta-roce-24k", "model": "llama3-405b", "job": {**JOB_405B, **job}}
    if reliability is not None:
        data["reliability"] = reliability
    return load_spec(data)
