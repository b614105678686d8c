"""Pipeline schedules simulated as schedules: the bubble falls out of the timeline."""

import numpy as np
import pytest

from teton.engine.pipeline_schedule import DP_ONCE, DP_PER_MICROBATCH, simulate_pipeline


@pytest.mark.parametrize("p,v,m", [(2, 1, 4), (4, 1, 8), (8, 1, 8), (4, 2, 8), (16, 8, 32), (16, 4, 16), (8, 3, 24)])
def test_uniform_bubble_is_textbook(p, v, m):
    fwd = np.full((p, v), 1.0 / v)
    finish, busy, _ = simulate_pipeline(fwd, 2 * fwd, m)
    bubble = (finish.max() - busy.max()) / busy.max()
    assert bubble == pytest.approx((p - 1) / (v * m), rel=1e-12)


def test_1f1b_step_closed_form():
    p, m, tf, tb = 4, 6, 1.0, 2.0
    finish, _, _ = simulate_pipeline(np.full((p, 1), tf), np.full((p, 1), tb), m)
    assert finish.max() == pytest.approx((m + p - 1) * (tf + tb))


def test_p2p_latency_lengthens_the_step():
    p, v, m = 8, 2, 16
    f = np.full((p, v), 0.5)
    base, _, _ = simulate_pipeline(f, 2 * f, m)
    slow, _, _ = simulate_pipeline(f, 2 * f, m, np.full(p, 0.1))
    assert slow.max() > base.max()


def test_unbalanced_stage_paces_the_pipeline():
    p, m = 4, 16
    f = np.ones((p, 1))
    f[2] = 1.5
    finish, _, _ = simulate_pipeline(f, 2 * f, m)
    assert finish.max() >= m * 4.5  # the slow stage's busy time


def test_dp_reduce_scatter_hidden_unless_it_outlasts_compute():
    p, v, m = 4, 2, 8
    f = np.full((p, v), 1.0)
    _, _, dp_small = simulate_pipeline(f, 2 * f, m, None, DP_ONCE, np.zeros((p, v)), np.full((p, v), 0.1))
    finish, busy, _ = simulate_pipeline(f, 2 * f, m)
    assert dp_small.max() - finish.max() <= 0.1 + 1e-12  # only the last chunk's reduce is exposed
    _, _, dp_big = simulate_pipeline(f, 2 * f, m, None, DP_PER_MICROBATCH, np.zeros((p, v)), np.full((p, v), 3.0))
    assert dp_big.max() > finish.max() + 1.0  # per-micro-batch reductions longer than the backward


def test_timeline_events_respect_dependencies(example_spec):
    from teton.engine.step import simulate_step
    from teton.spec import load_spec

    spec = load_spec(example_spec, ["job.gpus=512", "job.dp=4", "job.global_batch=64", "job.pp=16"])
    r = simulate_step(spec, timeline=True)
    events = r.extra["timeline"]
    p, v, m = 16, 8, 16
    assert len(events) == p * v * m * 2
    end = {(e["rank"], e["pass"], e["chunk"], e["microbatch"]): e["end_s"] for e in events}
    for e in events:
        if e["pass"] == "fwd" and e["rank"] > 0:
            assert e["start_s"] >= end[(e["rank"] - 1, "fwd", e["chunk"], e["microbatch"])]
        if e["pass"] == "bwd":
            assert e["start_s"] >= end[(e["rank"], "fwd", e["chunk"], e["microbatch"])]
    assert max(e["end_s"] for e in events) <= r.step_time_s


@pytest.mark.parametrize("p,v", [(2, 2), (4, 3), (8, 4), (16, 8)])
def test_llama3_rounds_of_n_keep_the_textbook_bubble(p, v):
    # Llama 3's schedule: N >= p consecutive micro-batches per chunk, any N dividing m
    for n in (p, p + 1, 2 * p + 1):
        for m in (n, 2 * n):
            f = np.ones((p, v))
            finish, busy, _ = simulate_pipeline(f, 2 * f, m, n_round=n)
            assert (finish.max() - busy.max()) / busy.max() == pytest.approx((p - 1) / (v * m), abs=1e-12)


def test_pp_round_lets_twenty_micro_batches_run_on_sixteen_stages(cli, example_spec):
    from teton import simulate
    from teton.workload.pipeline import in_flight_microbatches

    code, _, err = cli("run", example_spec, "--set", "job.global_batch=2560")  # 20 micro-batches, pp 16
    assert code == 2 and "job.pp_round" in err
    r = simulate(example_spec, ["job.global_batch=2560", "job.pp_round=20"])
    base = simulate(example_spec)
    assert r.micro_batches == 20 and r.step_time_s > 0
    # one round of 20: the first rank runs every forward before its first backward, so it holds
    # all m*v chunk activations ((p-1)*2 + (v-1)*N + 1 = 171, capped at 160), as the example's
    # single round of 16 holds all of its 128; rounds of 16 over 32 micro-batches hold 143
    assert in_flight_microbatches(16, 8, 20, 0, 20) == 20 * 8
    assert in_flight_microbatches(16, 8, 16, 0) == 16 * 8
    assert in_flight_microbatches(16, 8, 32, 0) == 15 * 2 + 7 * 16 + 1
    assert r.memory_breakdown["activations"] > base.memory_breakdown["activations"]
    for bad in ("job.pp_round=8", "job.pp_round=17"):  # below pp; does not divide 20
        code, _, err = cli("run", example_spec, "--set", "job.global_batch=2560", "--set", bad)
        assert code == 2 and "job.pp_round" in err and err.count("\n") == 1


def test_fsdp_gathers_and_reduces_unit_by_unit():
    """ZeRO-3 on one rank, two micro-batches, a chunk of 4 FSDP units (layers): each op waits for
    one unit's gather only; the backward's reduce-scatter of the last unit trails it. By hand:
    F0 1-11, B0 11-31 (its reduce-scatters end at 32), F1 waits for the gather of its first unit
    (32 + 1) and runs 33-43, B1 43-63, the last reduce-scatter ends at 64."""
    from teton.engine.pipeline_schedule import DP_FULL_SHARD

    one = np.ones((1, 1))
    finish, busy, dp_free = simulate_pipeline(10 * one, 20 * one, 2, None, DP_FULL_SHARD, 4 * one, 4 * one,
                                              units=4 * one)
    assert finish[0] == 63.0 and dp_free[0] == 64.0 and busy[0] == 60.0
    # one unit: the whole chunk gathered before the op, as before
    finish1, _, _ = simulate_pipeline(10 * one, 20 * one, 2, None, DP_FULL_SHARD, 4 * one, 4 * one)
    assert finish1[0] > finish[0]


def test_fsdp_hides_its_communication_when_layers_outlast_it():
    """Llama 3 8B on 8 GPUs (DP only): FSDP (ZeRO-3) costs a few percent over ZeRO-1, not the
    whole model's gather and reduce-scatter per micro-batch."""
    import teton

    base = {"cluster": "meta-ib-24k", "model": "llama3-8b",
            "job": {"gpus": 8, "dp": 8, "seq_len": 8192, "global_batch": 64, "zero": 1}}
    z1 = teton.simulate(base)
    z3 = teton.simulate(base, ["job.zero=3"])
    assert z1.step_time_s < z3.step_time_s < 1.05 * z1.step_time_s
    assert z3.dp_exposed_s < 0.01 * z3.step_time_s


# --- all-to-all overlap: merged forward-backward ops (software.ep_comm_overlap) -----------------

def _a2a(p, v, ep_f, ep_b, comp_f, comp_b):
    from teton.engine.pipeline_schedule import pair_hidden_s

    return pair_hidden_s(*(np.full((p, v), x) for x in (ep_f, ep_b, comp_f, comp_b)))


@pytest.mark.parametrize("p,v,m,n", [(1, 1, 8, None), (4, 2, 8, None), (4, 4, 16, None), (8, 3, 16, 8),
                                     (4, 2, 12, 6), (2, 2, 2, None), (4, 2, 4, None)])
def test_merged_schedule_without_all_to_all_costs_nothing(p, v, m, n):
    """With nothing to hide, merging each steady forward with the next backward (one warm-up
    forward more) keeps the step of the plain schedule: the merge itself is not a slowdown."""
    f = np.full((p, v), 1.0)
    plain, _, _ = simulate_pipeline(f, 2 * f, m, n_round=n)
    merged, busy, _ = simulate_pipeline(f, 2 * f, m, n_round=n, a2a_hidden_s=_a2a(p, v, 0, 0, 1, 2))
    assert merged.max() == pytest.approx(plain.max())
    assert busy.max() == pytest.approx(3.0 * m * v)


@pytest.mark.parametrize("p,v,m", [(1, 1, 8), (4, 2, 8), (8, 4, 16)])
def test_merged_ops_hide_each_pass_all_to_all_under_the_other(p, v, m):
    """Each pass's all-to-all hides under the other pass's compute: a forward of 1 s (0.25 of it
    all-to-all) merged with a backward of 2 s (0.5 all-to-all) saves min(0.25, 1.5) + min(0.5,
    0.75) = 0.75 s, less the SM share the all-to-all's kernels hold; warm-up and drain ops save
    nothing."""
    from teton.engine.pipeline_schedule import PipelineSchedule, schedule_orders

    f = np.full((p, v), 1.0)
    a2a = _a2a(p, v, 0.25, 0.5, 0.75, 1.5)
    _, busy, _ = simulate_pipeline(f, 2 * f, m, a2a_hidden_s=a2a, a2a_sm=0.2)
    orders = schedule_orders(p, v, m, None, True)
    merged = orders[:, :, 3].sum(axis=1)
    assert merged.min() > 0 and (merged < m * v).all()
    assert busy == pytest.approx(3.0 * m * v - 0.75 * 0.8 * merged)
    hidden = PipelineSchedule(f, 2 * f, m, a2a_hidden_s=a2a, a2a_sm=0.2).hidden_a2a_s()
    assert hidden == pytest.approx(0.75 * merged)


def test_merged_schedule_warms_up_one_forward_more():
    """The backward merged with a forward never needs that forward's own output: every rank,
    the last stage too, runs one forward more before its first backward."""
    from teton.engine.pipeline_schedule import schedule_orders
    from teton.workload.pipeline import warmup_forwards

    p, v, m = 4, 2, 8
    plain, merged = schedule_orders(p, v, m), schedule_orders(p, v, m, None, True)
    for r in range(p):
        first_bwd = int(np.argmax(merged[r, :, 0]))
        # warm-up forwards, then the steady state's first forward: the first backward comes after both
        assert first_bwd == int(np.argmax(plain[r, :, 0])) + 1 == warmup_forwards(p, v, m, r, None, 1) + 1
        for i in np.flatnonzero(merged[r, :, 3]):
            f, b = merged[r, i], merged[r, i + 1]
            assert f[0] == 0 and b[0] == 1 and (f[1], f[2]) != (b[1], b[2])


def test_merged_timeline_shares_start_and_end_and_keeps_dependencies():
    """The events of a merged op (both passes) start and end together, at the merged duration, and
    no op starts before its input exists."""
    from teton.engine.pipeline_schedule import pipeline_timeline

    p, v, m = 4, 2, 8
    f = np.full((p, v), 1.0)
    events = pipeline_timeline(f, 2 * f, m, a2a_hidden_s=_a2a(p, v, 0.25, 0.5, 0.75, 1.5), a2a_sm=0.2)
    assert len(events) == 2 * p * v * m
    end = {(e["rank"], e["pass"], e["chunk"], e["microbatch"]): e["end_s"] for e in events}
    spans = [e["end_s"] - e["start_s"] for e in events]
    assert min(spans) == pytest.approx(1.0) and max(spans) == pytest.approx(3.0 - 0.75 * 0.8)
    assert spans.count(pytest.approx(3.0 - 0.75 * 0.8)) % 2 == 0
    for e in events:
        r, c, mb = e["rank"], e["chunk"], e["microbatch"]
        if e["pass"] == "fwd" and (r, c) != (0, 0):
            src = (r - 1, "fwd", c, mb) if r > 0 else (p - 1, "fwd", c - 1, mb)
            assert e["start_s"] >= end[src] - 1e-9
        if e["pass"] == "bwd" and (r, c) != (p - 1, v - 1):
            src = (r + 1, "bwd", c, mb) if r < p - 1 else (0, "bwd", c + 1, mb)
            assert e["start_s"] >= end[src] - 1e-9
