"""Benchmark: a 10,000-job synthetic trace on the 24,576-GPU meta-roce-24k cluster, per policy,
and the placement comparison of Llama 3 405B on 16K GPUs.

Target (issue 4): each policy's simulation of the 10,000-job trace in < 60 s on the 2-core dev
machine. Run: ``.venv/bin/python benchmarks/bench_schedule.py [--jobs N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import time

from teton.placement.scheduler import SCHEDULER_POLICIES, simulate_schedule
from teton.placement.traces import synthetic_trace
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

TARGET_S = 60.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cluster", default="meta-roce-24k")
    args = ap.parse_args()
    cluster = ClusterSpec(**CLUSTER_PRESETS[args.cluster])
    t0 = time.perf_counter()
    trace = synthetic_trace(args.jobs, cluster.gpus, seed=args.seed)
    print(f"trace: {args.jobs} synthetic jobs (seed {args.seed}, load 0.9) generated in "
          f"{time.perf_counter() - t0:.2f} s; cluster {cluster.name}, {cluster.gpus} GPUs")
    results = []
    for policy in SCHEDULER_POLICIES:
        t = time.perf_counter()
        r = simulate_schedule(trace, cluster, policy)
        wall = time.perf_counter() - t
        results.append((r, wall))
    head = f"{'metric':<44}" + "".join(f"{r.policy:>16}" for r, _ in results)
    print(head)
    print("-" * len(head))
    rows = [
        ("wall time (s)", lambda r, w: f"{w:.1f}"),
        ("within target (< 60 s)", lambda r, w: "yes" if w < TARGET_S else "NO"),
        ("jobs finished", lambda r, w: f"{r.finished}"),
        ("mean slowdown vs ideal placement (multi-GPU)", lambda r, w: f"{r.slowdown['mean']:.3f}"),
        ("p90 slowdown", lambda r, w: f"{r.slowdown['p90']:.3f}"),
        ("queue delay mean (h)", lambda r, w: f"{r.queue_delay_s['mean'] / 3600:.2f}"),
        ("queue delay p99 (h)", lambda r, w: f"{r.queue_delay_s['p99'] / 3600:.2f}"),
        ("GPU utilisation, arrival window", lambda r, w: f"{r.utilisation_arrivals * 100:.1f} %"),
        ("makespan (h)", lambda r, w: f"{r.makespan_s / 3600:.1f}"),
        ("fragmentation", lambda r, w: f"{r.fragmentation_mean * 100:.1f} %"),
        ("slowdown-model cache hits / misses", lambda r, w: f"{r.cache['hits']}/{r.cache['misses']}"),
    ]
    for name, fn in rows:
        print(f"{name:<44}" + "".join(f"{fn(r, w):>16}" for r, w in results))

    import teton
    from teton.placement.compare import compare_policies

    spec = teton.load_spec({"cluster": "meta-roce-24k", "model": "llama3-405b",
                            "job": {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048,
                                    "zero": 1, "pp_schedule": "interleaved", "virtual_stages": 8,
                                    "pp_embedding_slots": True}})
    sim = getattr(teton, "simulate", None)
    t = time.perf_counter()
    rows = compare_policies(spec, simulate=sim)
    print(f"\nLlama 3 405B, 16,384 GPUs of meta-roce-24k, empty cluster "
          f"(priced by {'teton.simulate' if sim else 'the cheap estimate'}, {time.perf_counter() - t:.2f} s):")
    for r in rows:
        print(f"  {r['policy']:<16} step {r['step_time_s']:.3f} s  slowdown {r['slowdown']:.3f}  "
              f"axis that pays: {r['axis_pays'] or '-'}")


if __name__ == "__main__":
    main()
