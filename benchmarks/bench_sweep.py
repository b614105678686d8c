"""Sweep throughput: points per second for a 2,304-point grid, serial vs a local pool of 2 workers.

Run: python benchmarks/bench_sweep.py [--batch 64] [--workers 2]
Each figure is end to end: points enumerated and hashed, evaluated (load_spec + simulate_step),
every batch committed to a fresh DuckDB file. The pool figure includes starting the pool
(forked workers), which a sweep pays once.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from teton.sweep.grid import parse_sweep  # noqa: E402
from teton.sweep.run import _rows_for, evaluate_batch, point_types, run_sweep  # noqa: E402
from teton.sweep.store import ResultStore  # noqa: E402

SWEEP = {
    "base": {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
             "job": {"gpus": 64, "seq_len": 8192, "global_batch": 256}},
    "grid": {"job.tp": [1, 2, 4, 8], "job.pp": [1, 2, 4, 8], "job.precision": ["bf16", "fp8"],
             "job.recompute": ["none", "selective", "full"], "job.zero": [1, 2, 3],
             "job.micro_batch": [1, 2], "cluster": ["dgx-h100-superpod", "meta-roce-24k"],
             "model": ["llama3-8b", "llama2-7b"]},
}


def cpu_s() -> tuple[float, float]:
    """(this process's CPU seconds, reaped children's CPU seconds)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def measure(executor: str, workers: int, batch: int, tmp: Path) -> tuple[int, float, float, float]:
    """(points, wall seconds, driver CPU seconds, workers' CPU seconds)."""
    sweep = parse_sweep(SWEEP)
    with ResultStore(tmp / f"{executor}.duckdb") as store:
        c0, k0 = cpu_s()
        t0 = time.perf_counter()
        summary = run_sweep(sweep, store, executor=executor, workers=workers, batch=batch)
        elapsed = time.perf_counter() - t0
        c1, k1 = cpu_s()
    assert summary.failed == 0 and summary.evaluated + summary.already_stored == summary.points
    return summary.points, elapsed, c1 - c0, k1 - k0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sweep = parse_sweep(SWEEP)
    points, _ = sweep.points()
    evaluate_batch([(p.key, p.spec) for p in points[:8]])  # warm: imports, numba, placement caches
    items = [(p.key, p.spec) for p in points]
    t0 = time.perf_counter()
    rows = evaluate_batch(items)
    t_eval = time.perf_counter() - t0
    print(f"evaluation only   : {len(items)} points in {t_eval:6.2f} s = {len(items) / t_eval:7.0f} points/s "
          f"(load_spec + simulate_step, no store)")
    with tempfile.TemporaryDirectory() as d:
        by_key = {p.key: p for p in points}
        with ResultStore(Path(d) / "w.duckdb") as store:
            t0 = time.perf_counter()
            for i in range(0, len(rows), args.batch):
                chunk = rows[i:i + args.batch]
                store.write(_rows_for([by_key[r["key"]] for r in chunk], chunk), point_types(sweep))
            t_store = time.perf_counter() - t0
        print(f"store only        : {len(rows)} rows in {t_store:6.2f} s = {len(rows) / t_store:7.0f} rows/s "
              f"(one transaction per batch of {args.batch})")
        n, t_serial, cpu, _ = measure("serial", 1, args.batch, Path(d))
        print(f"serial            : {n} points in {t_serial:6.2f} s = {n / t_serial:7.0f} points/s "
              f"({cpu:.2f} CPU s)")
        n, t_pool, cpu, kids = measure("local", args.workers, args.batch, Path(d))
        print(f"local, {args.workers} workers : {n} points in {t_pool:6.2f} s = {n / t_pool:7.0f} points/s "
              f"(x{t_serial / t_pool:.2f}; pool start-up included; CPU s: driver {cpu:.2f}, workers {kids:.2f})")
        n, t_resume, _, _ = measure("local", args.workers, args.batch, Path(d))  # same file: everything stored
        print(f"resume, all stored: {n} points in {t_resume:6.2f} s (nothing re-evaluated)")
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} (other processes compete for the cores)")


if __name__ == "__main__":
    main()
