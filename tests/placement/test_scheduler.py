"""The cluster scheduler simulation: FIFO, EASY backfill, topology-aware packing."""

from pathlib import Path

import numpy as np
import pytest

import teton.placement.traces as tr
from teton.errors import SpecError
from teton.placement.cost import SlowdownModel, structure_key, trace_job_shape
from teton.placement.scheduler import Allocator, simulate_schedule
from teton.placement.traces import Trace, TraceJob

DATA = Path(tr.__file__).resolve().parents[1] / "data" / "traces"


def _job(i, t, gpus, dur):
    return TraceJob(i, t, gpus, dur, model="llama3-8b", tp=8, pp=1)


def _starts(result):
    return dict(zip(result.job_ids, result.start_s.tolist(), strict=True))


def test_fifo_and_easy_backfill_by_hand(small_cluster):
    # 128 GPUs. A holds 96 until t=100; B (112) waits for it. F (32 GPUs, 50 s) fits in the gap and
    # ends before B's reservation: backfilled. E (32 GPUs, 500 s) would still run at t=100 and use
    # GPUs B needs (only 16 spare): not backfilled.
    trace = Trace((_job("A", 0, 96, 100), _job("B", 1, 112, 100), _job("E", 2, 32, 500), _job("F", 3, 32, 50)))
    fifo = _starts(simulate_schedule(trace, small_cluster, "fifo"))
    easy = _starts(simulate_schedule(trace, small_cluster, "backfill"))
    assert fifo == {"A": 0, "B": 100, "E": 200, "F": 200}
    assert easy == {"A": 0, "B": 100, "E": 200, "F": 3}
    r = simulate_schedule(trace, small_cluster, "backfill")
    assert r.finished == 4 and np.allclose(r.job_slowdown, 1.0)
    assert r.queue_delay_s["max"] == pytest.approx(198)


def test_invariants_on_a_synthetic_trace(small_cluster):
    trace = tr.synthetic_trace(300, small_cluster.gpus, seed=2, load=1.2, median_duration_s=600)
    for policy in ("fifo", "backfill", "topology-aware"):
        r = simulate_schedule(trace, small_cluster, policy)  # Allocator raises on double allocation
        arrival = np.array([j.arrival_s for j in sorted(trace.jobs, key=lambda j: (j.arrival_s, j.job_id))])
        assert r.finished == 300
        assert (r.start_s >= arrival - 1e-9).all()
        assert (r.job_slowdown >= 1.0 - 1e-9).all()
        assert 0 < r.utilisation_arrivals <= 1 and 0 < r.utilisation_mean <= 1
        assert 0 <= r.fragmentation_mean <= 1
        assert r.queue_delay_s["p50"] <= r.queue_delay_s["p90"] <= r.queue_delay_s["p99"] <= r.queue_delay_s["max"]
        series = np.array(r.utilisation_series)
        assert len(series) == 200 and (series[:, 1] <= 1 + 1e-9).all()
        if policy == "fifo":
            assert (np.diff(r.start_s) >= -1e-9).all()  # nothing overtakes in strict FIFO
        # utilisation = GPU-seconds held / (GPUs x time)
        held = float((np.array([j.gpus for j in sorted(trace.jobs, key=lambda j: (j.arrival_s, j.job_id))])
                      * (r.end_s - r.start_s)).sum())
        assert r.utilisation_mean == pytest.approx(held / (small_cluster.gpus * r.makespan_s), rel=1e-6)


def test_topology_aware_packing_beats_fifo_on_slowdown(roce):
    trace = tr.synthetic_trace(1500, roce.gpus, seed=1)
    fifo = simulate_schedule(trace, roce, "fifo")
    topo = simulate_schedule(trace, roce, "topology-aware")
    assert topo.slowdown["mean"] < fifo.slowdown["mean"]
    assert topo.slowdown["mean"] < 1.2 < fifo.slowdown["mean"]


def test_public_format_sample_is_simulated():
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    cluster = ClusterSpec(**CLUSTER_PRESETS["dgx-h100-superpod"])
    trace = tr.read_trace(DATA / "philly-format-synthetic-sample.json")
    for policy in ("fifo", "topology-aware"):
        r = simulate_schedule(trace, cluster, policy)
        assert r.finished == r.jobs == 40
    assert r.slowdown["max"] == pytest.approx(1.0)  # packing keeps every job on whole hosts


def test_tokens_jobs_and_oversized_jobs(small_cluster):
    sm = SlowdownModel(small_cluster)
    shape = trace_job_shape("llama3-8b", 16, tp=8, pp=1)
    step = sm.ideal(shape).step_s
    tokens_per_step = shape.layout.tokens_per_step
    trace = Trace((TraceJob("t", 0, 16, tokens=10 * tokens_per_step, model="llama3-8b", tp=8, pp=1),
                   TraceJob("big", 0, 256, 10.0)))
    r = simulate_schedule(trace, small_cluster, "topology-aware")
    assert r.jobs == 1 and len(r.skipped) == 1 and "exceeds" in r.skipped[0].message
    assert r.end_s[0] - r.start_s[0] == pytest.approx(10 * step)
    with pytest.raises(SpecError, match="policy"):
        simulate_schedule(trace, small_cluster, "sjf")


def test_structure_key_is_exact_for_the_cost_model(roce):
    sm = SlowdownModel(roce)
    shape = trace_job_shape("llama3-70b", 64, tp=8, pp=4)
    a = np.arange(64)
    b = np.arange(3072, 3072 + 64)  # same shape one pod over: same key, same price
    c = np.concatenate([np.arange(32), np.arange(3072, 3072 + 32)])  # straddles two pods
    assert structure_key(roce, a) == structure_key(roce, b) != structure_key(roce, c)
    assert sm.estimate(shape, a).step_s == sm.estimate(shape, b).step_s
    assert sm.hits == 1 and sm.misses == 1
    assert sm.slowdown(shape, c) >= 1.0
    frag = np.arange(0, 128, 2)  # half of every host: TP leaves NVLink
    assert sm.slowdown(shape, frag) > 1.1


def test_allocator_packing(small_cluster):
    a = Allocator(small_cluster)
    a.take(a.packed(4))
    a.take(a.packed(2))  # best fit: the same, fuller host
    assert a.host_free[0] == 2 and (a.host_free[1:] == 8).all()
    big = a.packed(32)  # four whole hosts in one pod (pods are 8 hosts)
    assert np.unique(big // 8).size == 4 and np.unique(big // 64).size == 1
    a.take(big)
    with pytest.raises(RuntimeError):
        a.take(big)


def test_alibaba_sample_is_simulated():
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

    cluster = ClusterSpec(**CLUSTER_PRESETS["dgx-a100-superpod"])
    trace = tr.read_trace(DATA / "pai_task_table-synthetic-sample.csv")
    fifo = simulate_schedule(trace, cluster, "fifo")
    topo = simulate_schedule(trace, cluster, "topology-aware")
    assert fifo.finished == topo.finished == 36
    assert topo.slowdown["mean"] <= fifo.slowdown["mean"]


def test_fidelity_is_a_parameter(small_cluster):
    trace = tr.synthetic_trace(15, small_cluster.gpus, seed=2, median_duration_s=600)
    try:
        r = simulate_schedule(trace, small_cluster, "topology-aware", fidelity="flow")
    except SpecError as err:  # a build without the flow-level model says so in one line
        assert "flow" in str(err)
    else:
        assert r.finished == 15
    with pytest.raises(SpecError, match="fidelity"):
        simulate_schedule(trace, small_cluster, "fifo", fidelity="packet")
