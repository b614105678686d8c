"""Analytical step evaluations per second for the Llama 3 405B / 16K-GPU spec (one core).

Run: python benchmarks/bench_step.py [--seconds 5]
Target (issue 2): >= 1,000 evaluations per second on one core of the reference 2-core machine.
Three figures: distinct layouts of the 405B job (every valid TP/CP/PP/v/micro-batch/recompute/
ZeRO layout, each simulated once, so no per-spec memo helps: the honest figure), re-simulating
one validated Spec, and the whole path from a spec mapping (validation included).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from teton.engine.step import simulate_step  # noqa: E402
from teton.spec import load_spec, read_file  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama3-405b-16k.yaml"


def rate(fn, seconds: float) -> float:
    fn()  # warm: numba compile / cache load, placement and bandwidth memo
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    from teton.sweep.search import candidate_jobs

    spec = load_spec(EXAMPLE)
    data = read_file(EXAMPLE)
    layouts = list(candidate_jobs(spec))
    simulate_step(layouts[0])
    t0 = time.perf_counter()
    for cand in layouts:
        simulate_step(cand)
    r0 = len(layouts) / (time.perf_counter() - t0)
    r1 = rate(lambda: simulate_step(spec), args.seconds)
    r2 = rate(lambda: simulate_step(load_spec(data)), args.seconds)
    print(f"{len(layouts)} distinct layouts     : {r0:8.0f} evaluations/s ({1e3 / r0:.2f} ms each)")
    print(f"simulate_step(same Spec)     : {r1:8.0f} evaluations/s ({1e3 / r1:.2f} ms each)")
    print(f"load_spec + simulate_step    : {r2:8.0f} evaluations/s ({1e3 / r2:.2f} ms each)")
    print("target: >= 1,000 evaluations/s on one core")


if __name__ == "__main__":
    main()
