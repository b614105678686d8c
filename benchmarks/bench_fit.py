"""`teton validate` end to end (both training sets: surrogates, the fit, every held-out refit, every
other case), the few-shot study, and the Kineto trace reader on the bundled test traces.

Run: python benchmarks/bench_fit.py
Target (issue 20): the whole validation with its refits in under 60 s on the 2-core machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "tests" / "data" / "traces"


def _timed(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "teton", *args], check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    from teton.validation.cases import all_training_runs
    from teton.validation.kineto import read_kineto
    from teton.validation.trace import calibrate_from_trace

    runs = all_training_runs()
    full = _timed(["validate", "--json"])
    few = _timed(["validate", "--by", "stack", "--case", "training-set-2", "--json"])
    fit = _timed(["fit", "--json"])
    print(f"teton validate (every case; {len(runs)} training runs, fit + held-out refits): {full:.1f} s")
    print(f"teton validate --by stack --case training-set-2 (with the few-shot refits): {few:.1f} s")
    print(f"teton fit (bundled): {fit:.1f} s")
    for path in sorted(TRACES.glob("*.json.gz")):
        t = time.perf_counter()
        cal = calibrate_from_trace(read_kineto(path))
        kernels = sum(c["kernels"] for k, c in cal.classes.items() if k != "total")
        print(f"{path.name}: {kernels:,} kernels read and calibrated in {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
