"""Fabric graph benchmark: build time and peak memory of the explicit graph at 24,576 GPUs
(targets: < 2 s and < 1 GB), for every cluster preset.

    .venv/bin/python benchmarks/bench_fabric.py
"""

from __future__ import annotations

import time
import tracemalloc

from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
from teton.topology.graph import build_fabric


def main() -> None:
    build_fabric(ClusterSpec(**CLUSTER_PRESETS["dgx-h100-superpod"]))  # warm imports
    print(f"{'preset':<20s} {'GPUs':>7s} {'nodes':>8s} {'links':>8s} {'build s':>8s} {'peak MB':>8s} {'graph MB':>8s}")
    for name, fields in CLUSTER_PRESETS.items():
        c = ClusterSpec(**fields)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            f = build_fabric(c)
            best = min(best, time.perf_counter() - t)
        tracemalloc.start()
        f = build_fabric(c)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{name:<20s} {c.gpus:>7,d} {f.n_nodes:>8,d} {f.n_links:>8,d} {best:>8.3f} {peak / 1e6:>8.1f} "
              f"{f.nbytes / 1e6:>8.1f}")
        if c.gpus == 24576:
            assert best < 2.0 and peak < 1e9, (name, best, peak)


if __name__ == "__main__":
    main()
