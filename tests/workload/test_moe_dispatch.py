"""Node-limited routing (DeepEP's hierarchical all-to-all) and fp8 dispatch of an MoE layer."""

import numpy as np
import pytest

import teton
from teton.collectives.node_limited import expected_nodes, node_limited_all_to_all_s, rail_and_node_groups
from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.hf_config import _moe_fields
from teton.spec.model import MODEL_PRESETS, ModelSpec
from teton.workload.items import Collective
from teton.workload.moe import FP8_DISPATCH_BYTES
from teton.workload.ops import layer_block

_DS = {"cluster": "deepseek-h800-2k", "model": "deepseek-v3",
       "software": {"base": "unknown", "fp8_recipe": "blockwise"},
       "job": {"gpus": 2048, "tp": 1, "pp": 16, "ep": 64, "seq_len": 4096, "micro_batch": 1,
               "global_batch": 15360, "precision": "fp8", "recompute": "full", "attention_kernel": "fa3"}}


def _spec(model: dict | None = None, software: dict | None = None) -> dict:
    out = {**_DS, "software": {**_DS["software"], **(software or {})}}
    if model is not None:
        out["model"] = {**MODEL_PRESETS["deepseek-v3"], **model}
    return out


def test_expected_nodes():
    assert expected_nodes(8, 4, 8) == pytest.approx(4 * (1 - 0.75 ** 8))  # 3.60
    assert expected_nodes(8, 4, 2) == pytest.approx(2 * (1 - 0.5 ** 8))  # the limit does not bind
    assert expected_nodes(1, 1, 16) == 1.0


def test_rail_and_node_groups():
    groups = np.array([[0, 1, 8, 9], [2, 3, 10, 11]])
    rails, nodes = rail_and_node_groups(groups, 8)
    assert rails.tolist() == [[0, 8], [1, 9], [2, 10], [3, 11]]
    assert nodes.tolist() == [[0, 1], [8, 9], [2, 3], [10, 11]]
    assert rail_and_node_groups(np.array([[0, 1, 2, 3]]), 8) is None  # one domain
    assert rail_and_node_groups(np.array([[0, 1, 2, 8]]), 8) is None  # unequal members per domain


class _Cost:
    """A cost model that records its calls and charges the bytes."""

    def __init__(self):
        self.calls = []

    def collective_time(self, op, groups, size_bytes):
        self.calls.append((op, groups.shape, size_bytes))
        return size_bytes


def test_node_limited_all_to_all_is_the_slower_of_its_two_parts():
    cost = _Cost()
    groups = np.arange(64).reshape(1, 64)  # 8 domains of 8
    t = node_limited_all_to_all_s(cost, groups, 8, 800.0, 8, 4)
    assert cost.calls == [("all_to_all", (8, 8), pytest.approx(800.0 * expected_nodes(8, 4, 8) / 8)),
                          ("all_to_all", (8, 8), 800.0)]
    assert t == 800.0
    assert node_limited_all_to_all_s(cost, np.arange(8).reshape(1, 8), 8, 10.0, 8, 4) == 10.0  # one domain: flat


def test_model_field_checks_and_hf_import():
    assert ModelSpec(**MODEL_PRESETS["deepseek-v3"]).moe_max_nodes == 4
    with pytest.raises(SpecError, match="moe_max_nodes"):
        load_spec(_spec(model={"moe_max_nodes": 9}))
    with pytest.raises(SpecError, match="moe_max_nodes"):
        load_spec({**_DS, "model": {**MODEL_PRESETS["llama3-8b"], "moe_max_nodes": 1}})
    cfg = {"n_routed_experts": 256, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4}
    assert _moe_fields(cfg, "x")["moe_max_nodes"] == 4
    assert "moe_max_nodes" not in _moe_fields({**cfg, "n_group": 1}, "x")


def _ep_items(spec) -> list[Collective]:
    s = load_spec(spec)
    moe = s.model.as_layer(s.model.layer_types()[-1])
    blk = layer_block(moe, s.job)
    return [i for i in (*blk.fwd, *blk.bwd) if isinstance(i, Collective) and i.axis == "ep"]


def test_all_to_alls_node_limited_and_fp8_towards_the_experts():
    plain = {c.name: c for c in _ep_items(_spec())}
    assert all(c.max_nodes == 4 and c.top_k == 8 for c in plain.values())
    fp8 = {c.name: c for c in _ep_items(_spec(software={"moe_fp8_dispatch": True}))}
    for name in ("ep.dispatch", "ep.combine_grad"):
        assert fp8[name].bytes == pytest.approx(plain[name].bytes * FP8_DISPATCH_BYTES / 2)
    for name in ("ep.combine", "ep.dispatch_grad"):
        assert fp8[name].bytes == plain[name].bytes
    with pytest.raises(SpecError, match="moe_fp8_dispatch"):
        load_spec({**_spec(software={"moe_fp8_dispatch": True}), "job": {**_DS["job"], "precision": "bf16"}})


def test_deepseek_v3_ep_comm_falls_with_each_mechanism():
    flat = teton.simulate(_spec(model={"moe_max_nodes": None})).breakdown["ep_comm"]
    limited = teton.simulate(_spec()).breakdown["ep_comm"]
    fp8 = teton.simulate(_spec(software={"moe_fp8_dispatch": True})).breakdown["ep_comm"]
    assert fp8 < limited < 0.6 * flat


def _overlapped(v: int | None, overlap: bool) -> dict:
    job = dict(_DS["job"], global_batch=16384, **({"pp_schedule": "interleaved", "virtual_stages": v} if v else {}))
    return {**_DS, "software": {**_DS["software"], "moe_fp8_dispatch": True, "ep_comm_overlap": overlap}, "job": job}


def test_all_to_all_overlap_hides_the_dispatch_and_holds_memory_for_one_more_micro_batch():
    """Merged forward-backward ops (Megatron-Core's --overlap-moe-expert-parallel-comm) hide most
    of DeepSeek-V3's exposed all-to-all; what they hide still holds the SMs of the all-to-all's
    kernels (sm_contention), the breakdown still sums to the step, and every rank holds one
    micro-batch's activations more."""
    plain = teton.simulate(_overlapped(2, False))
    merged = teton.simulate(_overlapped(2, True))
    assert merged.breakdown["ep_comm"] < 0.3 * plain.breakdown["ep_comm"]
    assert merged.breakdown["sm_contention"] > plain.breakdown["sm_contention"]
    assert plain.step_time_s - merged.step_time_s > 0.5 * (plain.breakdown["ep_comm"] - merged.breakdown["ep_comm"])
    assert sum(merged.breakdown.values()) == pytest.approx(merged.step_time_s, rel=1e-9)
    assert merged.memory_per_gpu_bytes > plain.memory_per_gpu_bytes


def test_all_to_all_overlap_under_a_pipeline_needs_virtual_stages():
    with pytest.raises(SpecError, match="software.ep_comm_overlap.*virtual_stages >= 2"):
        load_spec(_overlapped(None, True))
