"""Shared specs: Llama 3 405B at the Llama 3 paper's Table 4 layouts on Meta's RoCE cluster."""

from __future__ import annotations

import pytest
from layouts import JOB_405B_16K

from teton.spec import load_spec

TABLE4 = {
    "8k": dict(JOB_405B_16K, gpus=8192),
    "16k": JOB_405B_16K,
    # row 3: TP 8, CP 16, PP 16 at 131,072 tokens; DP = 16,384 / (8*16*16) = 8 (the printed DP 4
    # does not multiply out to 16,384), 16M tokens = 128 sequences.
    "16k-cp16": dict(JOB_405B_16K, cp=16, seq_len=131072, global_batch=128),
}


def _make_spec(job: dict | None = None, storage: dict | None = None, cluster: str = "meta-roce-24k",
              model: str = "llama3-405b", overrides: list[str] | None = None):
    data = {"cluster": cluster, "model": model, "job": dict(job or JOB_405B_16K)}
    if storage is not None:
        data["storage"] = storage
    return load_spec(data, overrides)


@pytest.fixture(scope="session")
def make_spec():
    """The spec factory: make_spec(job=None, storage=None, cluster=..., model=..., overrides=None)."""
    return _make_spec


@pytest.fixture(scope="session")
def table4():
    return TABLE4


@pytest.fixture(scope="session")
def spec16k():
    return _make_spec()
