"""Storage model speed: checkpoint model, fluid solver, writer scaling. Prints its figures.

    .venv/bin/python benchmarks/bench_storage.py
"""

from __future__ import annotations

import time

import numpy as np

from teton.spec import load_spec
from teton.spec.storage import spec_storage
from teton.storage import simulate_checkpoint
from teton.storage.scaling import writer_scaling
from teton.storage.transfer import fair_share_fluid

SPEC = {"cluster": "meta-roce-24k", "model": "llama3-405b",
        "job": {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048, "zero": 1,
                "pp_schedule": "interleaved", "virtual_stages": 8, "pp_embedding_slots": True}}


def best_of(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    spec = load_spec(SPEC)
    simulate_checkpoint(spec)  # warm caches
    t_ckpt = best_of(lambda: simulate_checkpoint(spec))
    rng = np.random.default_rng(0)
    b, u = rng.uniform(3e8, 3.5e8, 16384), rng.lognormal(0, 0.2, 16384) * 6e8
    t_fluid = best_of(lambda: fair_share_fluid(b, u, 6.5e12))
    total = simulate_checkpoint(spec).state.total_bytes
    t_scal = best_of(lambda: writer_scaling(spec_storage(spec), spec.cluster, total), 3)
    print(f"simulate_checkpoint (405B, 16,384 GPUs; save + 3 restores): {t_ckpt * 1e3:.1f} ms")
    print(f"fair_share_fluid (16,384 writers):                           {t_fluid * 1e3:.2f} ms")
    print(f"writer_scaling (23 points, 8..16,384 writers):               {t_scal * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
