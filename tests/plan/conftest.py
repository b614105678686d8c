"""Shared by the plan tests: a small spec (Llama 3 8B on a DGX H100 SuperPOD) and plan options
with a narrow layout space, so that each plan takes a second or two."""

import pytest
import yaml

SMALL = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
         "job": {"gpus": 128, "tp": 1, "pp": 1, "dp": 128, "seq_len": 8192, "global_batch": 512, "micro_batch": 1,
                 "precision": "bf16", "zero": 1},
         "storage": {"preset": "tectonic-llama3", "servers": 200}}
# a narrow layout space keeps each plan to a second or two
PLAN_ARGS = ("--tokens", "1T", "--gpus", "64,128,256", "--storage-servers", "20,200", "--runs", "200",
             "--executor", "serial", "--tp", "1,2", "--cp", "1", "--pp", "1,2", "--virtual-stages", "1")


@pytest.fixture
def small_spec(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


@pytest.fixture
def small_dict():
    return SMALL


@pytest.fixture
def plan_args():
    return PLAN_ARGS
