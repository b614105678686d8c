"""Scale benchmark (issue 21): a frontier cluster on one machine.

* ``teton run examples/frontier-131k.yaml``: Llama 3 405B on 131,072 H100s across four buildings,
  ``network.fidelity: flow``, as a whole command (Python start-up and imports included), wall time
  and peak RSS (targets < 10 s, < 2 GB);
* a 350,000-GPU cluster (``meta-h100-campus-131k``'s design grown to 11 buildings, the last one
  partly built): the fabric graph (< 5 s), one analytical step of a 405B job on all 350,000 GPUs
  (< 2 s), and 1,000 Monte Carlo runs of its 54-day failure process (< 10 s).

    .venv/bin/python benchmarks/bench_scale.py
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from bench_flow_solver import timed  # best of 3 wall times

from teton.spec.cluster import CLUSTER_PRESETS

ROOT = Path(__file__).resolve().parents[1]
CAMPUS = CLUSTER_PRESETS["meta-h100-campus-131k"]
BUILDING = CAMPUS["layers"][2]["span_gpus"]  # 32,768
# the campus's tiers, its spine grown to 11 buildings; 43,750 hosts = 350,000 GPUs (the 11th partly built)
CLUSTER_350K = {"base": "meta-h100-campus-131k", "name": "meta-h100-campus-350k", "hosts": 43750,
                "layers": [*CAMPUS["layers"][:3], {**CAMPUS["layers"][3], "span_gpus": 11 * BUILDING}]}
# 350,000 = tp 8 x pp 14 x dp 3,125: the 405B example's TP, 9 layers a stage, 16 sequences a DP rank in
# one round of 16 (Llama 3's N = 16 >= pp, pp_round)
JOB_350K = {"gpus": 350000, "tp": 8, "pp": 14, "dp": 3125, "seq_len": 8192, "micro_batch": 1,
            "global_batch": 50000, "pp_schedule": "interleaved", "virtual_stages": 9, "pp_round": 16, "zero": 2,
            "placement": "topology-aware"}


def frontier_command() -> None:
    cmd = [sys.executable, "-m", "teton", "run", str(ROOT / "examples" / "frontier-131k.yaml"), "--json"]
    walls, rss = [], 0
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
        walls.append(time.perf_counter() - t)
        rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
    print(f"teton run examples/frontier-131k.yaml (131,072 GPUs, flow): best {min(walls):.1f} s, "
          f"peak RSS {rss / 1e9:.2f} GB (targets < 10 s, < 2 GB)")


def cluster_350k() -> None:
    import teton
    from teton.reliability import goodput
    from teton.spec import load_spec
    from teton.spec.cluster import ClusterSpec
    from teton.topology.graph import build_fabric

    spec = load_spec({"cluster": CLUSTER_350K, "model": "llama3-405b", "software": "meta-llama3-2024",
                      "job": JOB_350K})
    cluster: ClusterSpec = spec.cluster
    build_s, fabric = timed(lambda: build_fabric(cluster))
    tracemalloc.start()
    build_fabric(cluster)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"350,000-GPU fabric graph: {fabric.n_nodes:,} nodes, {fabric.n_links:,} links, best {build_s:.2f} s, "
          f"peak {peak / 1e9:.2f} GB (target < 5 s)")
    cold = time.perf_counter()
    result = teton.simulate(spec)
    cold = time.perf_counter() - cold
    print(f"analytical step on 350,000 GPUs: {result.step_time_s:.2f} s a step, MFU {result.mfu:.1%}; "
          f"simulated in {cold:.2f} s, placement and groups included (target < 2 s)")
    mc_s, out = timed(lambda: goodput(spec, step_time_s=result.step_time_s, days=54, runs=1000, seed=0).to_dict())
    print(f"failure Monte Carlo, 1,000 runs x 54 days on 350,000 GPUs: best {mc_s:.2f} s (target < 10 s); "
          f"ETTR {out['ettr']:.1%}, unexpected interruptions {out['unexpected_interruptions']:.0f}")


def main() -> None:
    frontier_command()
    cluster_350k()


if __name__ == "__main__":
    main()
