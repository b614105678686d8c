"""The CLI outputs the golden test pins: every number that the main verbs print for the bundled
examples, as JSON and as text.

A case is (name, arguments). ``{tmp}`` in an argument becomes a fresh temporary directory, so that a
sweep always starts from an empty store. Regenerate the pinned files after an intended change with::

    TETON_GOLDEN_UPDATE=1 pytest tests/golden
"""

EX = "examples/"
L405 = EX + "llama3-405b-16k.yaml"
L70 = EX + "llama3-70b-ib-2k.toml"
GPT3 = EX + "gpt3-175b-a100.yaml"
FP8 = EX + "llama3-405b-megatron-fp8.yaml"
CUSTOM = EX + "custom-cluster.yaml"

CASES: list[tuple[str, list[str]]] = [
    *[(f"run-{p.split('/')[-1].split('.')[0]}", ["run", p]) for p in (L405, L70, GPT3, FP8, CUSTOM)],
    ("run-405b-flow", ["run", L405, "--set", "network.fidelity=flow"]),
    ("run-405b-1f1b-recompute", ["run", L405, "--set", "job.pp_schedule=1f1b",
                                 "--set", "job.virtual_stages=1", "--set", "job.recompute=full"]),
    ("compare-405b-fp8", ["compare", L405, "--b", "job.precision=fp8"]),
    ("compare-405b-ib", ["compare", L405, "--b", "cluster=meta-ib-24k"]),
    ("search-70b", ["search", L70, "--tp", "4,8", "--pp", "2,4"]),
    ("search-405b", ["search", L405, "--top", "5"]),
    ("sweep-405b", ["sweep", EX + "sweep-405b.yaml", "--db", "{tmp}/a.duckdb", "--executor", "serial"]),
    ("sweep-storage", ["sweep", EX + "sweep-storage.yaml", "--db", "{tmp}/b.duckdb",
                       "--executor", "serial"]),
    ("ops-405b-all", ["ops", L405, "--block", "all"]),
    ("ops-gpt3", ["ops", GPT3]),
    ("placement-405b", ["placement", L405]),
    ("placement-405b-busy", ["placement", L405, "--occupancy", "0.3", "--seed", "3"]),
    ("checkpoint-405b", ["checkpoint", L405]),
    ("checkpoint-405b-async", ["checkpoint", L405, "--mode", "async", "--restore", "broadcast"]),
    ("checkpoint-405b-scaling", ["checkpoint", L405, "--scaling"]),
    ("goodput-405b", ["goodput", L405]),
    ("goodput-405b-sweep", ["goodput", L405, "--interval-sweep"]),
    ("goodput-70b", ["goodput", L70, "--tokens", "2T", "--runs", "8"]),
]

# Keys and text lines that are not model outputs: wall-clock times, rates and temporary paths.
VOLATILE_KEYS = {"elapsed_s", "points_per_s", "out", "db"}
VOLATILE_LINE = r"evaluated in|already in|\.duckdb|elapsed"
