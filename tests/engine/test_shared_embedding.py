"""An embedding on both ends of the pipeline: the last stage's copy (a tied head, multi-token
prediction's lookup), its gradient sum once a step, and DualPipe's shared one (engine.shared_embedding)."""

import pytest

from teton.engine.step import simulate_step
from teton.spec import load_spec
from teton.workload.mtp import mtp_params_per_gpu
from teton.workload.step_work import step_work


def _gpt3(pp: int):
    return load_spec({"cluster": "dgx-h100-superpod", "model": "gpt3-175b",
                      "job": {"gpus": 128, "tp": 8, "pp": pp, "seq_len": 2048, "global_batch": 256,
                              "recompute": "full"}})


def test_a_tied_head_on_another_stage_holds_a_copy_and_sums_its_gradient():
    spec = _gpt3(8)
    m, lay = spec.model, spec.job.layout
    work = step_work(m, spec.job)
    shard = lay.local_vocab(m.vocab) * m.hidden
    assert work.chunk_params[-1, -1] - work.chunk_params[-2, -1] == pytest.approx(shard + m.norm_params(), rel=0.02)
    r = simulate_step(spec)
    t = r.comm_times_s["embedding_group.all_reduce"]
    assert t > 0 and r.breakdown["dp_comm"] >= t
    # the sum is the shard's gradient in the job's gradient dtype over two ranks: no faster than its bytes
    # at the scale-out NIC (the two ends of the pipeline sit on different hosts)
    assert t > shard * 4 / spec.cluster.nic.bytes_s


def test_one_stage_keeps_one_embedding():
    r = simulate_step(_gpt3(1))
    assert "embedding_group.all_reduce" not in r.comm_times_s


def _deepseek(schedule: str):
    return load_spec({"cluster": "deepseek-h800-2k", "model": "deepseek-v3",
                      "job": {"gpus": 2048, "tp": 1, "pp": 16, "ep": 64, "seq_len": 4096, "global_batch": 4096,
                              "precision": "fp8", "recompute": "full", "pp_schedule": schedule}})


def test_dualpipe_shares_the_mtp_embedding_with_the_main_model():
    dual, one = _deepseek("dualpipe"), _deepseek("1f1b")
    shard = dual.job.layout.local_vocab(dual.model.vocab) * dual.model.hidden
    assert mtp_params_per_gpu(one.model, one.job, 16)[0] - mtp_params_per_gpu(dual.model, dual.job, 16)[0] == shard
    assert "embedding_group.all_reduce" not in simulate_step(dual).comm_times_s
    assert simulate_step(one).comm_times_s["embedding_group.all_reduce"] > 0
