"""Flow solver benchmark on the 24,576-GPU RoCE fabric: one max-min solve and a full completion
run (re-solving as flows finish) for 10k and 100k random point-to-point flows (ECMP routed), and
the Llama 3 405B 16K-GPU call pattern of the flow cost model (TP 2048x8, DP 128x128, PP pairs).

    .venv/bin/python benchmarks/bench_flow_solver.py
"""

from __future__ import annotations

import time

import numpy as np

from teton.network.analytical import AnalyticalCostModel
from teton.network.flow_model import FlowCostModel
from teton.network.maxmin import complete, maxmin_rates
from teton.network.routing import Router, flow_key
from teton.placement.mapping import place
from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.topology.graph import build_fabric


def timed(fn, repeat: int = 3):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    cluster = ClusterSpec(**CLUSTER_PRESETS["meta-roce-24k"])
    fabric = build_fabric(cluster)
    router = Router(fabric, "ecmp", seed=0)
    rng = np.random.default_rng(0)
    maxmin_rates(np.array([0, 1]), np.array([0]), np.array([1.0]))  # compile / load the numba cache
    complete(np.array([0, 1]), np.array([0]), np.array([1.0]), np.array([1.0]))
    print(f"{'flows':>8s} {'crossings':>10s} {'route s':>8s} {'solve s':>8s} {'complete s':>10s} {'events':>7s}")
    for n in (10_000, 100_000):
        a = rng.integers(0, fabric.n_gpus, n)
        b = (a + rng.integers(8, fabric.n_gpus - 8, n)) % fabric.n_gpus
        t_route, (ptr, links, _) = timed(lambda a=a, b=b: router.route(a, b, flow_key(a, b, np.zeros_like(a))))
        t_solve, _ = timed(lambda ptr=ptr, links=links: maxmin_rates(ptr, links, router.capacity_bytes_s))
        size = np.full(n, 1e9)
        t_done, (_, events) = timed(lambda ptr=ptr, links=links, size=size:
                                    complete(ptr, links, router.capacity_bytes_s, size), repeat=1)
        print(f"{n:>8,d} {links.size:>10,d} {t_route:>8.3f} {t_solve:>8.3f} {t_done:>10.3f} {events:>7d}")

    pl = place(cluster, {"tp": 8, "cp": 1, "pp": 16, "dp": 128})
    calls = [("all_gather", pl.groups("tp"), 2**27), ("reduce_scatter", pl.groups("tp"), 2**27),
             ("all_reduce", pl.groups("tp"), 2**26), ("reduce_scatter", pl.groups("dp"), 2**31),
             ("all_gather", pl.groups("dp"), 2**31), ("all_reduce", pl.groups("dp"), 2**30),
             ("send_recv", pl.pp_neighbours(), 2**26)]
    ana = AnalyticalCostModel(cluster)
    total = time.perf_counter()
    model = FlowCostModel(cluster)  # e-ecmp, 16 QPs
    print("\nLlama 3 405B on 16,384 GPUs (TP 8, PP 16, DP 128), flow fidelity, e-ecmp 16 QPs:")
    for op, groups, size in calls:
        t = time.perf_counter()
        flow = model.collective_time(op, groups, size)
        dt = time.perf_counter() - t
        a = ana.collective_time(op, groups, size)
        print(f"  {op:<15s} {str(groups.shape):<12s} {size / 2**20:>7.0f} MiB  flow {flow * 1e3:8.2f} ms  "
              f"analytical {a * 1e3:8.2f} ms  ({flow / a:4.2f}x)  solved in {dt:5.2f} s")
    print(f"  total {time.perf_counter() - total:.2f} s (numba kernels already loaded)")


if __name__ == "__main__":
    main()
