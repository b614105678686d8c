"""Fuzz benchmark: 10,000 random command lines over every verb of ``teton``, run in-process.

The cases come from the strategies of ``tests/cli/fuzz_cases.py`` (the CI fuzz test runs the same
ones with a fixed seed and a small budget): mutated example specs, random ``--set`` overrides and
random values for every option of every verb. Each case must exit 0 or 2, print no traceback,
end an exit-2 run with one ``error:`` line, and print one JSON document under ``--json``.

    .venv/bin/python benchmarks/bench_fuzz.py [--cases 10000] [--seed 0] [--verbs run,ops] [--failures F]

Prints progress on stderr, then per verb: cases, exit codes, problems and time per case; the
target is 0 problems (tracebacks, other exit codes, bad error lines, invalid JSON, a known-invalid
input accepted with exit 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
# A verb's share of the cases: a valid `teton plan` searches layouts and runs the Monte Carlo for
# each GPU count (about a second a case, 20 times the others), so it gets a quarter share.
WEIGHT = {"plan": 0.25}
sys.path.insert(0, str(ROOT / "tests" / "cli"))

import fuzz_cases as fz  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10_000, help="total cases, split evenly over the verbs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbs", default=None, help="comma-separated verbs (default: every verb)")
    ap.add_argument("--failures", type=Path, default=None, help="write every failing case here (JSON lines)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    verbs = tuple(args.verbs.split(",")) if args.verbs else fz.verbs()
    weights = {v: WEIGHT.get(v, 1.0) for v in verbs}
    quota = {v: math.ceil(args.cases * w / sum(weights.values())) for v, w in weights.items()}
    stats = {v: {"cases": 0, "codes": collections.Counter(), "problems": collections.Counter(), "wall": 0.0,
                 "max": 0.0, "repeats": 0} for v in verbs}
    failures: list[dict] = []
    seen: set = set()
    slowest: list[tuple[float, str]] = []
    total, done, t0 = args.cases, [0], time.perf_counter()
    tmp_root = Path(tempfile.mkdtemp(prefix="teton-fuzz-"))
    print(f"fuzzing {total:,} cases over {len(verbs)} verbs (seed {args.seed}): {', '.join(verbs)}", file=sys.stderr)

    def record(verb: str, case: fz.Case, o: fz.Outcome) -> None:
        s = stats[verb]
        bad = fz.problems(case, o)
        s["cases"] += 1
        s["codes"]["exception" if o.code is None else o.code] += 1
        s["wall"] += o.wall_s
        s["max"] = max(s["max"], o.wall_s)
        slowest.append((o.wall_s, case.command_line()))
        slowest.sort(reverse=True)
        del slowest[5:]
        for b in bad:
            kind = ("traceback" if o.exception is not None or "traceback" in b else
                    "exit code" if b.startswith("exit code") else "accepted" if b.startswith("invalid input") else
                    "error line" if "error:" in b else "json")
            s["problems"][kind] += 1
        if bad:
            failures.append({"verb": verb, "argv": case.argv, "files": {k: v.decode("utf-8", "replace")
                                                                       for k, v in case.files.items()},
                             "code": o.code, "problems": bad, "stderr": o.err[-2000:]})
            print(f"\nPROBLEM {fz.describe(case, o, bad)[:3000]}\n", file=sys.stderr)
        done[0] += 1
        if done[0] % 100 == 0 or done[0] == total:
            el = time.perf_counter() - t0
            eta = el / done[0] * (total - done[0])
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
            print(f"  {done[0]:>6,} / {total:,} cases  {el:7.0f} s elapsed  ETA {eta:6.0f} s  "
                  f"problems {len(failures)}  max RSS {rss:.1f} GiB  ({verb})", file=sys.stderr, flush=True)

    def fuzz(verb: str, n: int, seed_: int) -> None:
        @seed(seed_)
        @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(case=fz.cases(verb))
        def body(case):
            key = (tuple(case.argv), tuple(sorted(case.files.items())))
            if key in seen or stats[verb]["cases"] >= quota[verb] or done[0] >= total:  # each distinct case once
                stats[verb]["repeats"] += 1
                return
            seen.add(key)
            tmp = tmp_root / f"{verb}-{stats[verb]['cases']}"
            try:
                record(verb, case, fz.run_case(case, tmp))
            finally:
                fz.cleanup(tmp)

        body()

    # Each verb runs its quota; hypothesis repeats itself, so a verb runs rounds with new seeds until
    # it has, or until a round brings no new case (its space is exhausted: presets has few); the
    # cases it cannot give go to the verbs that can.
    rounds: collections.Counter = collections.Counter()
    exhausted: set[str] = set()
    while done[0] < total:
        live = [v for v in verbs if v not in exhausted]
        if not live:
            break
        pending = [v for v in live if stats[v]["cases"] < quota[v]]
        if not pending:
            short, w = total - done[0], sum(weights[v] for v in live)
            for v in live:
                quota[v] += math.ceil(short * weights[v] / w)
            continue
        for verb in pending:
            before = stats[verb]["cases"]
            fuzz(verb, max(20, quota[verb] - before), args.seed * 100_000 + verbs.index(verb) * 1000 + rounds[verb])
            rounds[verb] += 1
            if stats[verb]["cases"] == before or rounds[verb] >= 1000:
                exhausted.add(verb)
    wall = time.perf_counter() - t0
    fz.cleanup(tmp_root)

    head = (f"{'verb':<11}{'cases':>7}{'exit 0':>8}{'exit 2':>8}{'other':>7}{'tracebacks':>12}{'bad error':>11}"
            f"{'bad JSON':>10}{'invalid ok':>12}{'ms/case':>9}{'max s':>7}")
    print(head)
    print("-" * len(head))
    tot = collections.Counter()
    for verb, s in stats.items():
        other = sum(n for c, n in s["codes"].items() if c not in (0, 2))
        p = s["problems"]
        row = (s["cases"], s["codes"][0], s["codes"][2], other, p["traceback"], p["error line"], p["json"],
               p["accepted"])
        tot.update(dict(zip(("cases", "ok", "err", "other", "tb", "line", "json", "accepted"), row, strict=True)))
        print(f"{verb:<11}{row[0]:>7,}{row[1]:>8,}{row[2]:>8,}{row[3]:>7}{row[4]:>12}{row[5]:>11}{row[6]:>10}"
              f"{row[7]:>12}{s['wall'] / max(1, s['cases']) * 1e3:>9.0f}{s['max']:>7.2f}")
    print("-" * len(head))
    print(f"{'total':<11}{tot['cases']:>7,}{tot['ok']:>8,}{tot['err']:>8,}{tot['other']:>7}{tot['tb']:>12}"
          f"{tot['line']:>11}{tot['json']:>10}{tot['accepted']:>12}")
    print(f"\n{tot['cases']:,} cases in {wall:.0f} s ({wall / 60:.1f} min, {tot['cases'] / wall:.1f} cases/s); "
          f"tracebacks: {tot['tb']} (target 0); all problems: {len(failures)}")
    print(f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.1f} GiB; distinct cases run; {sum(s['repeats'] for s in stats.values()):,} repeats hypothesis drew were skipped")
    print("slowest cases:")
    for wall_s, line in slowest:
        print(f"  {wall_s:6.2f} s  {line[:160]}")
    if args.failures is not None:
        args.failures.write_text("".join(json.dumps(f) + "\n" for f in failures))
        print(f"failing cases written to {args.failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
