"""Mixture-of-experts layers: parameter counts, routed FLOPs, expert-parallel all-to-all, memory."""

import pytest

import teton
from teton.spec import load_spec
from teton.spec.model import MODEL_PRESETS, ModelSpec
from teton.workload.items import Collective, ComputeOp
from teton.workload.ops import layer_block


def _spec(ep=8, **job):
    base = {"gpus": 256, "tp": 2, "ep": ep, "seq_len": 4096, "global_batch": 512}
    base.update(job)
    return load_spec({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b", "job": base})


@pytest.mark.parametrize("name", ["mixtral-8x7b", "mixtral-8x22b"])
def test_mixtral_params_within_one_percent(name):
    m = ModelSpec(**MODEL_PRESETS[name])
    assert abs(m.total_params() / m.published_params - 1) < 0.01


def test_routed_expert_flops_are_top_k_times_dense():
    spec = _spec()
    blk = layer_block(spec.model, spec.job)
    expert = sum(i.flops for i in blk.fwd if isinstance(i, ComputeOp) and i.name.startswith("expert_"))
    tok, h, f, t = 4096, 4096, 14336, 2
    assert expert == pytest.approx(2 * 3 * h * f * tok * 2 / t)  # SwiGLU, top-2, TP-sharded


def test_expert_parallel_all_to_all_in_both_passes():
    blk = layer_block(_spec().model, _spec().job)
    fwd = [i for i in blk.fwd if isinstance(i, Collective) and i.axis == "ep"]
    bwd = [i for i in blk.bwd if isinstance(i, Collective) and i.axis == "ep"]
    assert [c.op for c in fwd] == ["all_to_all", "all_to_all"] and len(bwd) == 2
    assert fwd[0].bytes == 2 * 4096 * 2 * 4096 / 2  # bf16 x tokens x top_k x hidden / tp
    assert not [i for i in layer_block(_spec(ep=1).model, _spec(ep=1).job).fwd if isinstance(i, Collective)
                and i.axis == "ep"]


def test_expert_parallelism_makes_the_model_fit_and_shows_ep_comm():
    one = teton.simulate(_spec(ep=1))
    eight = teton.simulate(_spec(ep=8))
    assert not one.fits_in_memory and eight.fits_in_memory
    assert eight.breakdown["ep_comm"] > 0 == one.breakdown["ep_comm"]
    assert eight.memory_breakdown["weights"] < one.memory_breakdown["weights"] / 3


def test_mfu_counts_active_params_only():
    r = teton.simulate(_spec())
    m = ModelSpec(**MODEL_PRESETS["mixtral-8x7b"])
    per_token = 6 * m.matmul_params() + 12 * 32 * 4096 * 4096
    assert r.model_flops_per_step == pytest.approx(per_token * 512 * 4096)
    assert m.matmul_params() < m.total_params() / 3


def test_ep_must_divide_dp(cli, tmp_path):
    import yaml

    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
                                    "job": {"gpus": 24, "tp": 2, "ep": 8, "seq_len": 4096, "global_batch": 48}}))
    code, _, err = cli("run", path)
    assert code == 2 and "job.ep" in err


@pytest.mark.parametrize("overlap", ["bwd", "full"])
def test_tp_overlap_pairs_the_expert_gemms_of_moe_layers(overlap):
    spec = _spec(tp_overlap=overlap, precision="fp8")
    blk = layer_block(spec.model, spec.job)
    for items in (blk.fwd, blk.bwd):
        names = {i.name for i in items if isinstance(i, ComputeOp)}
        paired = [i for i in items if isinstance(i, Collective) and i.overlap]
        assert all(i.overlap in names for i in paired)
        assert paired or (overlap == "bwd" and items is blk.fwd)  # "bwd" pairs only backward collectives
    assert any(i.overlap == "expert_up.dgrad" for i in blk.bwd if isinstance(i, Collective))
    r = teton.simulate({"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b", "job": dict(spec.job)})
    assert r.step_time_s > 0
