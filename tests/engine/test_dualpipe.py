"""DualPipe (job.pp_schedule: dualpipe): the op orders, the simulated bubble against the DualPipe
README's formula, activation and parameter memory, the step and its one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

from teton.engine.dualpipe import DualPipeSchedule
from teton.engine.pipeline_schedule import PipelineSchedule
from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec.load import load_spec
from teton.workload.dualpipe import BWD, BWD_INPUT, BWD_WEIGHT, FWD, NO_OP, activation_states, dualpipe_orders


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 20), (16, 64)])
def test_every_rank_runs_each_micro_batch_once_each_way(p, m):
    orders = dualpipe_orders(p, m)
    for order in orders:
        ops = order[order[:, 0] != NO_OP]
        for c in (0, 1):
            mine = ops[ops[:, 1] == c]
            fwd = mine[mine[:, 0] == FWD, 2]
            bwd = mine[np.isin(mine[:, 0], (BWD, BWD_INPUT)), 2]
            assert fwd.tolist() == list(range(m // 2)) and bwd.tolist() == list(range(m // 2))
            # a deferred weight gradient for every input-gradient backward, after it
            for mb in mine[mine[:, 0] == BWD_INPUT, 2]:
                at = [i for i, op in enumerate(ops) if op[1] == c and op[2] == mb]
                kinds = [ops[i, 0] for i in at]
                assert kinds.index(BWD_WEIGHT) > kinds.index(BWD_INPUT)
        merged = np.flatnonzero(ops[:, 3])
        assert (ops[merged, 0] == FWD).all() and (ops[merged + 1, 0] == BWD).all()
        assert (ops[merged, 1] != ops[merged + 1, 1]).all()  # one direction's forward, the other's backward


@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 20), (16, 64)])
def test_bubble_is_the_dualpipe_readme_formula(p, m):
    """Uniform stages, no communication, W = B / 2: the simulated idle time of the busiest rank
    is (p/2 - 1)(F&B + B - 3W) (DualPipe README), far below 1F1B's (p - 1)(F + B)."""
    f, b, w = 1.0, 2.0, 1.0
    sched = DualPipeSchedule(np.full((p, 2), f), np.full((p, 2), b), m, w_s=np.full((p, 2), w))
    finish, busy, _ = sched.run()
    assert finish.max() - busy.max() == pytest.approx((p / 2 - 1) * ((f + b) + b - 3 * w))
    assert busy.max() == pytest.approx(m * (f + b))  # m/2 micro-batches through each of two stages
    one_f1b = PipelineSchedule(np.full((p, 1), f), np.full((p, 1), b), m)
    finish1, busy1, _ = one_f1b.run()
    assert finish1.max() - busy1.max() == pytest.approx((p - 1) * (f + b))


def test_activations_peak_at_p_plus_one_stage_micro_batches():
    """DualPipe README: activations (p + 1) x a stage's micro-batch, on every rank."""
    for p, m in ((4, 8), (8, 20), (16, 64)):
        assert [int(s.sum(axis=1).max()) for s in activation_states(p, m)] == [p + 1] * p


def test_timeline_keeps_each_direction_in_order():
    p, m = 4, 8
    sched = DualPipeSchedule(np.full((p, 2), 1.0), np.full((p, 2), 2.0), m, p2p_s=np.full(p, 0.1),
                             w_s=np.full((p, 2), 1.0))
    events = sched.timeline()
    fwd = {(e["rank"], e["chunk"], e["microbatch"]): e for e in events if e["pass"] == "fwd"}
    for (r, c, mb), e in fwd.items():
        src = r - 1 if c == 0 else r + 1
        if 0 <= src < p:
            assert e["start_s"] >= fwd[(src, c, mb)]["end_s"] + 0.1 - 1e-9
    assert {e["pass"] for e in events} == {"fwd", "bwd", "bwd_input", "bwd_weight"}


def _spec(**job):
    base = {"tp": 8, "pp": 4, "micro_batch": 1, "global_batch": 64, "seq_len": 4096, "recompute": "full",
            "zero": 1, **job}
    return load_spec({"cluster": "meta-roce-24k", "model": "llama3-70b", "job": {"gpus": 64, **base}})


def test_dualpipe_step_holds_two_stages_and_shrinks_the_bubble():
    one = simulate_step(_spec())
    dual = simulate_step(_spec(pp_schedule="dualpipe"))
    b1, b2 = one.breakdown, dual.breakdown
    assert b2["pipeline_bubble"] < 0.5 * b1["pipeline_bubble"]
    assert dual.step_time_s < one.step_time_s
    assert dual.memory_breakdown["weights"] == pytest.approx(2 * one.memory_breakdown["weights"], rel=0.05)
    assert sum(b2.values()) == pytest.approx(dual.step_time_s, rel=1e-9)


@pytest.mark.parametrize(("job", "field"), [
    ({"pp": 3, "gpus": 48, "global_batch": 48}, "job.pp"),
    ({"virtual_stages": 2}, "job.virtual_stages"),
    ({"zero": 3}, "job.zero"),
    ({"global_batch": 12}, "job.global_batch"),  # 6 micro-batches per DP rank (dp 2), under 2 pp
    ({"global_batch": 18}, "job.global_batch"),  # 9: not even
])
def test_dualpipe_refuses_what_it_cannot_run(job, field):
    base = {"gpus": 64, "tp": 8, "pp": 4, "micro_batch": 1, "global_batch": 64, "seq_len": 4096,
            "pp_schedule": "dualpipe"}
    with pytest.raises(SpecError) as err:
        load_spec({"cluster": "meta-roce-24k", "model": "llama3-70b", "job": {**base, **job}})
    assert field in str(err.value) and "\n" not in str(err.value)


def test_dualpipe_hides_the_moe_all_to_all_under_the_other_direction():
    """F&B ops run one direction's forward with the other's backward: the all-to-all each hides
    leaves the exposed EP time, and holds the SMs meanwhile (sm_contention grows)."""
    def run(schedule):
        return simulate_step(load_spec({"cluster": "meta-roce-24k", "model": "mixtral-8x7b", "job": {
            "gpus": 64, "tp": 1, "pp": 4, "ep": 8, "micro_batch": 1, "global_batch": 256, "seq_len": 4096,
            "recompute": "full", "pp_schedule": schedule}})).breakdown
    one, dual = run("1f1b"), run("dualpipe")
    assert dual["ep_comm"] < 0.5 * one["ep_comm"]
    assert dual["sm_contention"] > one["sm_contention"]


def test_search_keeps_dualpipe_and_drops_what_it_cannot_run():
    from teton.sweep.search import SearchSpace, candidate_jobs

    spec = load_spec("examples/deepseek-v3-h800-2k.yaml")
    space = SearchSpace(tp=(1,), cp=(1,), pp=(1, 4, 8, 16), virtual_stages=(1,), micro_batch=(1,),
                        recompute=("full",), zero=(1, 3), ep=(64,))
    jobs = [c.job for c in candidate_jobs(spec, space)]
    piped = [j for j in jobs if j.pp > 1]
    assert piped and all(j.pp_schedule == "dualpipe" and j.zero != 3 for j in piped)  # ZeRO-3 asked, dropped


def test_mirrored_ranks_hold_the_same_activations():
    """Rank r and rank p-1-r hold the same two stages and run mirrored orders, so their peak
    activation bytes match, recompute buffers of every layer type they hold included (DeepSeek-V3:
    the dense prefix on stage 0, MoE layers on the mirror stage of rank 0)."""
    from teton.workload.memory import activation_bytes_per_rank
    from teton.workload.step_work import step_work

    spec = load_spec("examples/deepseek-v3-h800-2k.yaml")
    work = step_work(spec.model, spec.job)
    acts = activation_bytes_per_rank(spec.model, spec.job, work.split)
    assert acts == pytest.approx(acts[::-1], rel=1e-12)
