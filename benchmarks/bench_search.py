"""`teton search` on 16,384 GPUs: a dense model against an MoE model, one core.

Run: python benchmarks/bench_search.py [--only dense|moe] [--exhaustive]

Target (issue 25): an MoE layout search at 16K GPUs within 2x the dense search's time. The dense
search is the Llama 3 405B example (every valid TP/CP/PP/v/micro-batch/recompute/ZeRO layout); the
MoE one is DeepSeek-V3 (256 routed experts, so nine EP degrees, two expert-TP degrees and three rank
orders beside those) on the same 16,384-GPU cluster and batch, searched as `teton search` does:
staged (expert TP and order refined on the best layouts of a first pass), or `--exhaustive`.
Prints candidates, layouts simulated and seconds for each, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

from teton.spec import load_spec  # noqa: E402
from teton.sweep.search import SearchSpace, search_layouts  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama3-405b-16k.yaml"
MOE_SETS = ["model=deepseek-v3", "job.ep=64", "job.tp=1", "job.pp=16", "job.dp=1024", "job.virtual_stages=1",
            "job.pp_schedule=1f1b", "job.seq_len=4096", "job.global_batch=4096", "job.precision=bf16"]


def run(name: str, exhaustive: bool) -> float:
    spec = load_spec(EXAMPLE, MOE_SETS if name == "moe" else [])
    search_layouts(spec, SearchSpace(tp=(8,), cp=(1,), pp=(16,), virtual_stages=(1,), micro_batch=(1,),
                                     recompute=("none",), zero=(1,), ep=(1,) if name == "dense" else (64,)))  # warm
    t0 = time.perf_counter()
    d = search_layouts(spec, SearchSpace(refine_top=None) if exhaustive else SearchSpace())
    s = time.perf_counter() - t0
    print(f"{name}: {spec.model.name} on {spec.job.gpus:,} GPUs: {d['evaluated']:,} layouts, "
          f"{len(d['rows']):,} distinct simulated, {s:.1f} s"
          + (f" (staged, best {d['refined_top']} refined)" if d.get("refined_top") else ""))
    return s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=("dense", "moe"))
    ap.add_argument("--exhaustive", action="store_true")
    a = ap.parse_args()
    times = {n: run(n, a.exhaustive) for n in (("dense", "moe") if a.only is None else (a.only,))}
    if len(times) == 2:
        print(f"MoE / dense: {times['moe'] / times['dense']:.1f}x (target <= 2x)")


if __name__ == "__main__":
    main()
