"""teton plan end to end: Llama 3 405B for 15.6T tokens, every valid layout at each GPU count, five
storage sizes, 1,000 Monte Carlo runs per kept plan, on a local pool of 2 workers; the batch
scales with the GPU count (16M tokens at 16,384 GPUs).

Run: python benchmarks/bench_plan.py [--workers 2] [--only 24k|131k]

Targets (issue 14): 10 GPU counts x every valid layout x 5 storage sizes under 60 s on 2 cores
(``meta-roce-24k``, 6,144 ... 24,576 GPUs); the same on 16,384 ... 131,072 GPUs (a 131,072-GPU
RoCE fabric: the 24K cluster's racks and pods, 43 pods, one spine layer above) under 5 minutes.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from teton.plan import make_plan, plan_request  # noqa: E402
from teton.spec import load_spec  # noqa: E402

SPEC = "examples/llama3-405b-16k.yaml"
BIG_FABRIC = {"base": "meta-roce-24k", "name": "roce-131k", "hosts": 16384, "layers": [
    {"name": "rack", "switch": "rtsw", "span_gpus": 16, "oversubscription": 1.0, "hop_latency_us": 1.0},
    {"name": "pod", "switch": "ctsw", "span_gpus": 3072, "oversubscription": 7.0, "hop_latency_us": 4.0},
    {"name": "cluster", "switch": "atsw", "span_gpus": 132096, "oversubscription": 1.0, "hop_latency_us": 4.0}]}
CASES = {
    "24k": ("meta-roce-24k", "6144:24576:2048"),
    "131k": (BIG_FABRIC, "16384,24576,32768,40960,49152,65536,81920,98304,114688,131072"),
}


def run(name: str, workers: int) -> None:
    cluster, gpus = CASES[name]
    spec = load_spec(SPEC, ["plan.clusters=" + _json([cluster])])
    # per_gpu: 16M tokens a step at 16,384 GPUs, in proportion elsewhere, so that every count has
    # layouts (at a fixed 2,048-sequence batch only power-of-two counts divide into DP ranks)
    req = plan_request(spec, {"tokens": "15.6T", "gpus": gpus, "storage_servers": "60:7500", "runs": 1000,
                              "global_batch": "per_gpu"})
    t = time.perf_counter()
    d = make_plan(req, executor="local", workers=workers)
    wall = time.perf_counter() - t
    layouts = sum(c["layouts_evaluated"] for c in d["counts"])
    chosen = next(p for p in d["plans"] if p["chosen"])
    print(f"{name}: {len(d['counts'])} GPU counts, {layouts:,} valid layouts, {len(d['plans'])} kept plans "
          f"x {req.runs:,} Monte Carlo runs, {workers} workers: {wall:.1f} s")
    print(f"  chosen: {chosen['gpus']:,} GPUs, {chosen['days_p50']:.1f} days p50, {chosen['gpu_hours'] / 1e6:.2f}M "
          f"GPU-hours, ${chosen['cost_usd'] / 1e6:.1f}M")


def _json(obj) -> str:
    import json

    return json.dumps(obj)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=sorted(CASES))
    args = ap.parse_args()
    for name in [args.only] if args.only else list(CASES):
        run(name, args.workers)


if __name__ == "__main__":
    main()
