"""NCCL's PAT for all-gather and reduce-scatter over one GPU per host: logarithmic latency
(``teton.collectives.algorithms.auto_steps``, ``software.nccl_pat``), in both fidelities."""

import math

import numpy as np
import pytest

from teton.collectives.algorithms import auto_steps, phases_for
from teton.engine.step import simulate_step
from teton.network.analytical import AnalyticalCostModel
from teton.spec import load_spec
from teton.spec.software import SOFTWARE_PRESETS


def test_pat_steps_only_for_gather_and_scatter_of_one_gpu_per_host():
    assert auto_steps("reduce_scatter", 1024, 1023, one_per_host=True, pat=True) == 10
    assert auto_steps("all_gather", 1024, 1023, one_per_host=True, pat=False) == 1023
    assert auto_steps("all_gather", 1024, 1023, one_per_host=False, pat=True) == 1023  # NCCL 2.23: one GPU per node
    assert auto_steps("all_reduce", 1024, 2046, one_per_host=True, pat=False) == 20  # trees, as before
    assert auto_steps("all_to_all", 1024, 1023, one_per_host=True, pat=True) == 1023


def test_pat_cuts_only_the_latency_of_a_large_dp_ring(roce):
    groups = (np.arange(1024) * 8)[None, :]  # one GPU on each of 1,024 hosts
    ring, pat = AnalyticalCostModel(roce, pat=False), AnalyticalCostModel(roce, pat=True)
    small, large = 1e3, 1e9
    assert pat.collective_time("reduce_scatter", groups, small) < ring.collective_time("reduce_scatter", groups, small) / 50
    # the bandwidth term is the ring's: a large message gains only the latency difference
    gain = ring.collective_time("all_gather", groups, large) - pat.collective_time("all_gather", groups, large)
    assert gain == pytest.approx(ring.collective_time("all_gather", groups, small)
                                 - pat.collective_time("all_gather", groups, small), rel=1e-6)
    # two GPUs of a host in the group: rings
    pairs = np.sort(np.r_[np.arange(512) * 8, np.arange(512) * 8 + 1])[None, :]
    assert pat.collective_time("all_gather", pairs, small) == ring.collective_time("all_gather", pairs, small)


def test_the_flow_model_takes_the_same_latency_steps():
    groups = (np.arange(64) * 8)[None, :]
    ring = phases_for("reduce_scatter", groups, 8, "auto", pat=False)
    pat = phases_for("reduce_scatter", groups, 8, "auto", pat=True)
    assert ring[0].steps == 63 and pat[0].steps == math.ceil(math.log2(64))


def test_stacks_before_nccl_2_23_run_rings():
    assert SOFTWARE_PRESETS["meta-llama3-2024"]["nccl_pat"] is False
    assert SOFTWARE_PRESETS["megatron-lm-2022"]["nccl_pat"] is False
    assert SOFTWARE_PRESETS["megatron-bridge-25.11"].get("nccl_pat", True) is True
    spec = load_spec("examples/llama3-405b-16k.yaml")  # Meta's 2024 stack
    on = load_spec("examples/llama3-405b-16k.yaml", ["software.nccl_pat=true"])
    assert simulate_step(on).breakdown["dp_comm"] < simulate_step(spec).breakdown["dp_comm"]
