"""teton fit on the bundled training set, and the Kineto trace reader on the bundled test traces.

Run: python benchmarks/bench_fit.py
Target (issue 11): the fit, with its leave-one-out and leave-pair-out refits, "in seconds".
"""

from __future__ import annotations

import time
from pathlib import Path

TRACES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"


def main() -> None:
    from teton.validation.fit import fit_runs
    from teton.validation.kineto import read_kineto
    from teton.validation.trace import calibrate_from_trace
    from teton.validation.training import ratio_pairs, training_runs

    t0 = time.perf_counter()
    runs = training_runs()
    t1 = time.perf_counter()
    result = fit_runs(runs, pairs=tuple((a, b) for _, a, b, _ in ratio_pairs()))
    t2 = time.perf_counter()
    print(f"training set: {len(runs)} runs loaded in {t1 - t0:.2f} s; fit + {len(runs)} leave-one-out + "
          f"{len(result.pair_loo_s)} leave-pair-out refits in {t2 - t1:.2f} s")
    for path in sorted(TRACES.glob("*.json.gz")):
        t = time.perf_counter()
        cal = calibrate_from_trace(read_kineto(path))
        kernels = sum(c["kernels"] for k, c in cal.classes.items() if k != "total")
        print(f"{path.name}: {kernels:,} kernels read and calibrated in {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
