"""Random command lines for every verb of ``teton``, and the check each must pass.

Shared by the CI fuzz test (``tests/cli/test_fuzz.py``, a fixed seed and a small budget) and the
long run (``benchmarks/bench_fuzz.py``, 10,000 cases). A :class:`Case` is a verb, its argv and the
files it needs; :func:`run_case` runs it in-process in a scratch directory and :func:`problems`
says what is wrong with the outcome: an exit code other than 0 or 2, a traceback, an exit-2
error that is not one ``error:`` line, ``--json`` output that is not one strict JSON document,
or exit 0 on an input known to be invalid (``Case.invalid``).

Specs start from the bundled examples (and three small inline ones), mutated: fields set to
random values, dropped, of the wrong type, out of range, unknown keys, misspelt presets; or
replaced by random text. ``fuzz_hostile`` adds numbers past every limit (50- and 5,000-digit
integers, 1e-300, -0, NaN, inf, 1e400), duplicate keys and run names, wrong containers, and
broken auxiliary files of every format (runs YAML / CSV, calibration JSON, Kineto and schedule
traces, sweep files). ``--set`` overrides take random key paths of the spec schema and random
values. Each verb's options come from its click parameters and their type label in
:data:`teton.cli.conventions.FLAGS` (INT, FLOAT, SIZE, LIST, NAME, FILE, ...), with the costly
ones capped so that a case takes well under a second (``--runs`` <= 4, ``--trials`` <= 2,
``synthetic:N`` with N <= 30, explicit small ``search`` spaces, ``--executor serial``, cheap
``--sections`` and ``--case`` only) and the ones that cannot be made cheap (``--neighbours``,
``--candidates``) or that write outside the scratch directory (``--write-catalog`` without RUNS)
left out.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import fuzz_hostile as fh
import yaml
from fuzz_hostile import HOSTILE_NUMBERS, HOSTILE_TEXT
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# frontier-131k is left out: its flow-level step takes ~8 s, and a verb that simulates it many times
# (search, sweep) would take the fuzz past its budget; tests/spec/test_examples.py runs it.
SPEC_EXAMPLES = tuple(sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".yaml", ".toml")
                             and not p.name.startswith(("sweep", "frontier"))))
SWEEP_EXAMPLES = tuple(sorted(EXAMPLES.glob("sweep*.yaml")))
KINETO_TRACES = tuple(sorted((ROOT / "tests" / "data" / "traces").glob("*.json.gz")))
FRAMEWORK_CONFIGS = tuple(sorted((ROOT / "tests" / "data" / "frameworks").iterdir()))  # teton import's CONFIGs

# Small inline specs: cheap to simulate, and one with every optional section.
SMALL_SPECS = (
    {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
     "job": {"gpus": 64, "tp": 8, "pp": 2, "seq_len": 4096, "global_batch": 64}},
    {"cluster": "meta-roce-24k", "model": "llama3-70b",
     "job": {"gpus": 256, "tp": 8, "pp": 4, "seq_len": 8192, "global_batch": 256, "pp_schedule": "interleaved",
             "virtual_stages": 2, "zero": 2},
     "storage": {"preset": "tectonic-llama3", "checkpoint": {"mode": "async"}},
     "reliability": {"tokens": 1e11, "runs": 4}, "seed": 3},
    {"cluster": "dgx-a100-superpod", "model": "mixtral-8x7b",
     "job": {"gpus": 64, "tp": 2, "pp": 2, "ep": 4, "seq_len": 4096, "global_batch": 64}},
)

# Every verb of `teton`, from the click command (a new verb is fuzzed without editing this file).
@functools.cache
def verbs() -> tuple[str, ...]:
    from teton.cli import command

    return tuple(sorted(command().commands))


# ---------------------------------------------------------------------------------------------
# building blocks

NASTY_TEXT = ("", " ", "-", "--", "=", "none", "None", "null", "~", "nan", "NaN", "inf", "-inf", ".inf", "1e309",
              "-0", "0x10", "1_000", "true", "false", "[]", "{}", "[1, 2]", "{a: 1}", "'x'", '"', "a,b", ",",
              "é", "日本", "\t", "x" * 300, "../..", "/", "a=b", "%s", "{0}", "[bold]x[/bold]", "\\")
DEEP = "[" * 3000 + "]" * 3000  # nested past the recursion limit of the parsers
DEEP_SET = "[" * 40 + "]" * 40  # past teton's limit of 32 levels, quick to parse (YAML is quadratic in depth)
# file contents that have broken parsers: deep nesting, NUL bytes, a huge field, non-printable characters
HOSTILE_BYTES = (DEEP.encode(), b'{"a": ' + DEEP.encode() + b"}", b"job: " + DEEP.encode(), b"a\x00b,c\n",
                 b"x" * 200_000, b"job: {gpus: 8}\x9e\n", b"\xef\xbb\xbfjob: {}\n", "\u2028".encode())
IDENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_0123456789.", min_size=1, max_size=12)
ANY_TEXT = st.one_of(st.sampled_from(NASTY_TEXT), IDENT,
                     st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=16))


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, by weight. (``st.one_of(a, a, a, b)`` does not weight: hypothesis
    drops repeated branches, and it prefers values it has not drawn before, which makes the few
    valid names of a ``sampled_from`` rare in a long run.) Hypothesis favours small integers, so
    the first choice is also the one it falls back on."""
    total = sum(w for w, _ in choices)

    def pick(i: int) -> st.SearchStrategy:
        for w, strategy in choices:
            if i < w:
                return strategy
            i -= w
        raise AssertionError(i)

    return st.integers(0, total - 1).flatmap(pick)


def misspelt(name: str) -> st.SearchStrategy[str]:
    """``name`` with one edit: a character dropped, doubled or changed, or the case changed."""
    if not name:
        return st.just("x")

    @st.composite
    def edit(draw):
        i = draw(st.integers(0, len(name) - 1))
        how = draw(st.sampled_from(("drop", "double", "swap", "upper", "space")))
        if how == "drop":
            return name[:i] + name[i + 1:] or "x"
        if how == "double":
            return name[:i] + name[i] + name[i:]
        if how == "swap":
            return name[:i] + draw(st.sampled_from("aeiouxz-_")) + name[i + 1:]
        if how == "upper":
            return name.upper()
        return f" {name} "

    return edit()


def names(known: tuple[str, ...]) -> st.SearchStrategy[str]:
    """A name from ``known``, mostly; else one misspelt, or random text."""
    if not known:
        return ANY_TEXT
    good = st.sampled_from(known)
    return weighted((4, good), (1, good.flatmap(misspelt)), (1, ANY_TEXT))


@functools.cache
def presets() -> dict[str, tuple[str, ...]]:
    from teton.hardware import GPUS, HOSTS, NICS
    from teton.spec.cluster import CLUSTER_PRESETS
    from teton.spec.model import MODEL_PRESETS
    from teton.spec.software import SOFTWARE_PRESETS
    from teton.spec.storage import STORAGE_PRESETS

    return {"cluster": tuple(CLUSTER_PRESETS), "model": tuple(MODEL_PRESETS), "gpu": tuple(GPUS),
            "host": tuple(HOSTS), "nic": tuple(NICS), "storage": tuple(sorted(STORAGE_PRESETS)),
            "software": tuple(SOFTWARE_PRESETS)}


INTS = st.one_of(st.integers(-2, 64), st.sampled_from((0, -1, 128, 1024, 4096, 16384, 2**31, 2**63, -(2**63))),
                 st.sampled_from(tuple(x for x in HOSTILE_NUMBERS if isinstance(x, int))))
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.floats(-2, 2), st.sampled_from((0.0, -0.0, 0.5, 1.0, 1e-9, 1e12, 1e308)),
                   st.sampled_from(tuple(x for x in HOSTILE_NUMBERS if isinstance(x, float))))


@functools.cache
def scalar_values() -> st.SearchStrategy:
    """A value for a spec field: of the right type or not."""
    p = presets()
    every_name = tuple(n for v in p.values() for n in v)
    return st.one_of(INTS, FLOATS, st.booleans(), st.none(), ANY_TEXT, names(every_name),
                     st.lists(INTS, max_size=3), st.dictionaries(IDENT, INTS, max_size=2))


@functools.cache
def set_value_text() -> st.SearchStrategy[str]:
    """The text after ``=`` in a ``--set``."""
    p = presets()
    return st.one_of(INTS.map(str), FLOATS.map(repr), st.sampled_from(NASTY_TEXT), IDENT, st.just(DEEP_SET),
                     st.sampled_from(HOSTILE_TEXT),
                     names(tuple(n for v in p.values() for n in v)),
                     st.sampled_from(("1K", "16e6", "1.5e3", "8,16", "[8, 16]", "{mode: sync}", "fp8", "bf16",
                                      "flow", "analytical", "interleaved", "1f1b", "selective", "full")))


@functools.cache
def schema_paths() -> tuple[str, ...]:
    """Key paths of the spec schema, as ``--set`` names them."""
    from teton.hardware.efficiency import BAND_KEYS, OVERRIDE_KEYS
    from teton.spec.cluster import ClusterSpec, FabricLayer
    from teton.spec.job import JobSpec
    from teton.spec.load import SPEC_SECTIONS
    from teton.spec.model import ModelSpec
    from teton.spec.network import NetworkSpec
    from teton.spec.reliability import ReliabilitySpec
    from teton.spec.software import SoftwareSpec
    from teton.spec.storage import CheckpointPolicy, StorageSystem
    from teton.storage.dataload import DATA_LOADING_KEYS

    out = list(SPEC_SECTIONS)
    out += [f"job.{k}" for k in JobSpec.model_fields] + [f"network.{k}" for k in NetworkSpec.model_fields]
    out += [f"cluster.{k}" for k in ClusterSpec.model_fields] + [f"model.{k}" for k in ModelSpec.model_fields]
    out += ["cluster.base", "model.base", "storage.preset", "storage.base", "software.base"]
    out += [f"software.{k}" for k in SoftwareSpec.model_fields]
    out += [f"cluster.layers.{i}.{k}" for i in (0, 1, 2, 7) for k in FabricLayer.model_fields]
    out += [f"cluster.efficiency.{k}" for k in (*OVERRIDE_KEYS, *BAND_KEYS, "profile")]
    out += [f"storage.{k}" for k in StorageSystem.model_fields]
    out += [f"storage.checkpoint.{k}" for k in CheckpointPolicy.model_fields]
    out += [f"storage.data_loading.{k}" for k in DATA_LOADING_KEYS] + ["storage.devx.nfs"]
    out += [f"reliability.{k}" for k in ReliabilitySpec.model_fields]
    out += ["reliability.rates_per_hour.gpu", "reliability.shares.gpu", "reliability.infant_mortality.weibull_shape"]
    return tuple(out)


# overrides a user would give (hypothesis draws the first branch of a one_of most: these come first)
SENSIBLE_SETS = ("job.seq_len=4096", "job.precision=fp8", "job.zero=3", "seed=3", "job.recompute=full",
                 "job.micro_batch=2", "network.fidelity=analytical", "storage.checkpoint.mode=sync",
                 "reliability.runs=4", "job.sequence_parallel=false", "job.tp_overlap=full", "cluster=meta-ib-24k",
                 "job.global_batch_tokens=16e6", "job.global_batch=null", "reliability.tokens=15.6e12",
                 "storage.preset=tectonic-llama3", "job.attention_kernel=fa3", "cluster.gpu=h200",
                 "software=nemo-24.07", "software.fp8_recipe=current", "software.cuda_graphs=full",
                 "software.cross_entropy=fused")
# costly: a flow-model step of a 16K-GPU job takes seconds in placement, search and report
COSTLY_SETS = ("network.fidelity=flow",)


def set_items() -> st.SearchStrategy[str]:
    """One ``--set`` argument: mostly ``key.path=value`` with a schema path (sometimes misspelt),
    sometimes malformed (no ``=``, empty key, empty value, random text)."""
    paths = schema_paths()
    path = st.one_of(st.sampled_from(paths), st.sampled_from(paths).flatmap(misspelt), IDENT,
                     st.sampled_from(("job..tp", ".job", "job.", "job.tp.x", "cluster.layers.x.name", "seed.x",
                                      "cluster.layers.-1.span_gpus", "model.layers.0")))
    good = st.tuples(path, set_value_text()).map(lambda kv: f"{kv[0]}={kv[1]}")
    malformed = st.one_of(set_value_text().map(lambda v: f"={v}"), path.map(lambda k: f"{k}="), ANY_TEXT)
    item = weighted((3, st.sampled_from(SENSIBLE_SETS)), (4, good), (1, path), (1, malformed))
    return item.filter(lambda s: not s.startswith("-") and s not in COSTLY_SETS)


# ---------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    """A verb's command line (after ``teton``) and the files (relative path -> bytes) it reads,
    written into a fresh scratch directory, the working directory of the run. The directory also
    holds ``afile`` (a plain file), ``adir`` (an empty directory) and ``ro`` (a read-only one)."""

    verb: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    invalid: bool = False  # an input it reads is invalid (fuzz_hostile): exit 0 is a problem

    def command_line(self) -> str:
        import shlex

        return "teton " + " ".join(shlex.quote(a) for a in self.argv)

    def __repr__(self) -> str:  # what hypothesis prints for a failing case
        files = {k: v[:400] for k, v in self.files.items()}
        return f"Case({self.command_line()!r}, files={files!r})"


class _Builder:
    """Collects argv and files while a strategy draws a case."""

    def __init__(self, verb: str):
        self.case = Case(verb, [verb])
        self.n = 0

    def file(self, suffix: str, content: bytes) -> str:
        self.n += 1
        name = f"f{self.n}{suffix}"
        self.case.files[name] = content
        return name

    def add(self, *args: str) -> None:
        self.case.argv.extend(args)


def _dump(data, fmt: str) -> bytes:
    if fmt == "json":
        return json.dumps(data, default=str).encode()
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def _paths_of(data, prefix=()) -> list[tuple]:
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((*prefix, k))
            out += _paths_of(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((*prefix, i))
            out += _paths_of(v, (*prefix, i))
    return out


@functools.cache
def _base_specs() -> list[dict]:
    import tomllib

    out = []
    for p in SPEC_EXAMPLES:
        out.append(tomllib.loads(p.read_text()) if p.suffix == ".toml" else yaml.safe_load(p.read_text()))
    return [*out, *SMALL_SPECS]


@st.composite
def mutated_spec(draw) -> dict:
    """An example or small spec with a few random mutations."""
    import copy

    data = copy.deepcopy(draw(st.sampled_from(_base_specs())))
    p = presets()
    for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2, 3)))):
        paths = _paths_of(data)
        how = draw(st.sampled_from(("set", "drop", "unknown", "misspell", "wrong-type", "schema", "section")))
        if how in ("set", "drop", "wrong-type") and paths:
            path = draw(st.sampled_from(paths))
            parent = data
            for k in path[:-1]:
                parent = parent[k]
            if how == "drop":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(scalar_values() if how == "set" else
                                        st.sampled_from(([], {}, "text", 3, None, [1, "a"], True)))
        elif how == "unknown":
            section = draw(st.sampled_from(("job", "network", "cluster", "storage", "reliability", "software")))
            target = data.get(section, data)
            if isinstance(target, dict):
                target[draw(IDENT)] = draw(scalar_values())
            else:
                data[draw(IDENT)] = draw(scalar_values())
        elif how == "misspell":
            key = draw(st.sampled_from(("cluster", "model", "software")))
            if isinstance(data.get(key), str):
                data[key] = draw(misspelt(data[key]))
            elif isinstance(data.get("job"), dict) and data["job"]:
                k = draw(st.sampled_from(sorted(data["job"])))
                data["job"][draw(misspelt(k))] = data["job"].pop(k)
        elif how == "schema":
            parts = draw(st.sampled_from(schema_paths())).split(".")
            node = data
            for k in parts[:-1]:
                if isinstance(node, dict):
                    node = node.setdefault(k, {}) if not isinstance(node.get(k), str) else {}
            if isinstance(node, dict):
                node[parts[-1]] = draw(scalar_values())
        else:  # a whole section replaced
            sec = draw(st.sampled_from(("cluster", "model", "job", "network", "storage", "reliability", "seed")))
            data[sec] = draw(st.one_of(scalar_values(), st.sampled_from(p["cluster"] + p["model"] + p["storage"])))
    if isinstance(data.get("network"), dict) and data["network"].get("fidelity") == "flow":  # seconds
        data["network"]["fidelity"] = "analytical"
    return data


@st.composite
def spec_arg(draw, b: _Builder) -> str:
    """A SPEC argument: an example file, a mutated spec (YAML or JSON), random text, or a path
    that is missing, a directory or not a spec file."""
    how = draw(weighted((2, st.just("example")), (3, st.just("mutated")), (2, st.just("small")),
                        (1, st.just("text")), (1, st.just("path")), (1, st.just("hostile")), (1, st.just("dup"))))
    if how == "example":
        return str(draw(st.sampled_from(SPEC_EXAMPLES)))
    if how == "hostile":  # a number past a limit, or a section of the wrong container (fuzz_hostile)
        data, invalid = draw(fh.hostile_spec(draw(st.sampled_from(_base_specs()))))
        b.case.invalid |= invalid
        fmt = draw(st.sampled_from(("yaml", "json")))
        return b.file(f".{fmt}", _dump(data, fmt) if fmt == "yaml" else fh.json_text(data))
    if how == "dup":  # a key given twice
        text = _dump(draw(st.sampled_from(_base_specs())), "yaml").decode()
        b.case.invalid = True
        return b.file(".yaml", fh.duplicate_a_key(text, draw(st.integers(0, 40))).encode())
    if how in ("mutated", "small"):
        data = draw(mutated_spec()) if how == "mutated" else draw(st.sampled_from(SMALL_SPECS))
        fmt = draw(st.sampled_from(("yaml", "yaml", "json")))
        return b.file(f".{fmt}" if fmt == "json" else draw(st.sampled_from((".yaml", ".yml"))), _dump(data, fmt))
    if how == "text":
        suffix = draw(st.sampled_from((".yaml", ".json", ".toml", ".txt", "")))
        content = draw(st.one_of(ANY_TEXT.map(str.encode), st.binary(max_size=64), st.sampled_from(HOSTILE_BYTES),
                                 st.sampled_from((b"", b"- 1\n- 2\n", b"a: [\n", b"job: {gpus: 8}\n", b"x = \n",
                                                  b"{\"job\": 1}", b"cluster: a\ncluster: b\n", b"\xff\xfe"))))
        return b.file(suffix, content)
    return draw(st.sampled_from(("missing.yaml", "adir", "afile", "nodir/spec.yaml", "afile/x.yaml", "", "-")))


OUT_SUFFIX = {"--spec-out": ".yaml", "--out": ".html", "--db": ".duckdb", "--png": ".png", "--parquet": ".parquet", "--cluster-out": ".yaml",
              "--timeline": ".json", "--slurm-topology": ".conf"}


def out_path(flag: str) -> st.SearchStrategy[str]:
    """An output FILE: mostly fine, else missing directory, a directory, under a plain file,
    read-only, an odd suffix."""
    good = f"out{OUT_SUFFIX.get(flag, '')}"
    return st.sampled_from((good, good, good, f"sub/{good}", "adir", ".", f"afile/{good}", f"ro/{good}",
                            "out.txt", "out", f"adir/{good}", "afile"))


def dir_path() -> st.SearchStrategy[str]:
    return st.sampled_from(("adir", "adir", "newdir", "afile", "ro", "nodir/deeper", "."))


def calibration_file(b: _Builder) -> st.SearchStrategy[str]:
    from teton.hardware.efficiency import BAND_KEYS, OVERRIDE_KEYS

    keys = names((*OVERRIDE_KEYS, *BAND_KEYS, "profile"))
    layer = st.fixed_dictionaries(
        {"tokens": st.sampled_from((4096, 8192, 0, 3)), "hidden": st.sampled_from((4096, 8192, 0, -1, "x")),
         "ffn": st.sampled_from((14336, 28672, 7)), "heads": st.sampled_from((32, 64, 0, 3)),
         "kv_heads": st.sampled_from((8, 0, 5)), "tp": st.sampled_from((1, 2, 8, 0, 3))},
        optional={"burst_s": FLOATS, "sustained_s": FLOATS,
                      "kernel_fusion": names(("eager", "fused"))})
    fraction = st.one_of(st.floats(0.05, 1.5), FLOATS, ANY_TEXT, INTS)
    overrides = weighted((3, st.dictionaries(st.sampled_from(OVERRIDE_KEYS[:8]), st.floats(0.05, 1.5), min_size=1,
                                             max_size=4)),
                         (1, st.dictionaries(keys, fraction, max_size=4)), (1, scalar_values()))
    doc = st.fixed_dictionaries(
        {"efficiency_overrides": overrides},
        optional={"device": st.sampled_from(("NVIDIA H100 80GB HBM3", "NVIDIA H200", "cpu", "", 3)),
                  "torch": st.sampled_from(("2.13.0", None)), "layer": st.one_of(layer, scalar_values())})
    plain = st.dictionaries(keys, st.one_of(FLOATS, INTS, ANY_TEXT), max_size=3)

    @st.composite
    def make(draw):
        how = draw(weighted((5, st.just("doc")), (1, st.just("plain")), (1, st.just("text")), (1, st.just("path")),
                            (1, st.just("nodoc")), (2, st.just("hostile"))))
        if how == "hostile":
            content, invalid = draw(fh.calibration_doc())
            b.case.invalid |= invalid
            return b.file(".json", content)
        if how == "nodoc":
            return b.file(".json", json.dumps(draw(st.dictionaries(IDENT, scalar_values(), max_size=3)),
                                              default=str).encode())
        if how == "text":
            return b.file(".json", draw(st.one_of(st.binary(max_size=32), ANY_TEXT.map(str.encode),
                                                  st.sampled_from(HOSTILE_BYTES))))
        if how == "path":
            return draw(st.sampled_from(("missing.json", "adir", "afile")))
        data = draw(doc if how == "doc" else plain)
        return b.file(".json", json.dumps(data, default=str).encode())

    return make()


# NAME options: the names each takes (a misspelling or random text is drawn too)
NAME_CHOICES = {
    "--policy": ("topology-aware", "linear", "random", "fragmented", "fifo", "backfill", "all"),
    "--fidelity": ("analytical", "flow"), "--executor": ("serial", "serial", "serial", "ray", "local"),
    "--op": ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv", "broadcast"),
    "--routing": ("ecmp", "e-ecmp", "pinned", "adaptive"),
    "--algo": ("auto", "ring", "tree", "rhd", "hierarchical", "nvls", "sharp"),
    "--format": ("auto", "ours", "philly", "alibaba"), "--node-prefix": ("node", "gpu-", "n"),
    "--mode": ("sync", "async"), "--writer-policy": ("spread", "one_replica", "every_rank"),
    "--restore": ("all_read", "broadcast", "shard_allgather"), "--block": ("layer", "embedding", "head", "all"),
    "--attention-kernel": ("flash", "math"),
    # the cheap validation cases only (llama3-405b-table4 and korthikanti-2022-table5 refit the training set)
    "--case": ("korthikanti-2022-figure1", "tectonic-llama3-storage", "llama3-405b-54-days"),
    "--framework": ("auto", "auto", "megatron", "nemo", "torchtitan", "maxtext"),
    "--gpu": ("a100-40gb", "a100-80gb", "h100-sxm", "h100-96gb", "h200", "b200"),
}
SECTIONS = ("step", "memory", "ops", "timeline", "placement", "checkpoint", "goodput")  # not search, validation
IN_SITU = ("tensor_core_in_situ", "collective_in_situ", "attention_in_situ", "kernel_gap_s", "step_overhead_s")

# Per verb: options left out (slow, or writing outside the scratch directory) and value caps.
SKIP = {"--neighbours", "--candidates", "--write-catalog", "--help"}
def mostly(valid: tuple, invalid: tuple) -> st.SearchStrategy:
    """One of ``valid`` about three times in four, else one of ``invalid``."""
    return weighted((3, st.sampled_from(valid)), (1, st.sampled_from(invalid)))


CAPS: dict[tuple[str, str], st.SearchStrategy[str]] = {
    ("goodput", "--runs"): mostly(("1", "2", "4"), ("0", "-1", "x")),
    ("report", "--runs"): mostly(("1", "2"), ("0", "-3", "x")),
    ("collective", "--trials"): mostly(("1", "2"), ("0", "-1", "x")),
    ("collective", "--gpus"): mostly(("2", "8", "16", "64", "256"), ("1", "0", "-8", "3", "99999999", "x")),
    ("collective", "--fail-links"): mostly(("0", "1", "5"), ("-1", "100000", "x")),
    ("collective", "--qps"): mostly(("1", "4", "16"), ("0", "-1", "x")),
    ("checkpoint", "--scale"): mostly(("1e-7", "1e-6"), ("0", "-1", "nan", "inf", "x", "1e-300", "2")),
    ("checkpoint", "--files"): mostly(("1", "2", "8"), ("0", "-1", "x")),
    ("checkpoint", "--writers"): mostly(("1", "2", "4", "64"), ("0", "-3", "99999999", "x")),
    ("checkpoint", "--devx-files"): mostly(("1", "2", "100"), ("0", "-1", "x")),
    ("sweep", "--workers"): mostly(("1", "2"), ("0", "-1", "x")),
    ("sweep", "--batch"): mostly(("1", "8", "64"), ("0", "-1", "x")),
    ("sweep", "--executor"): mostly(("serial",), ("local", "ray", "Serial", "", "x")),
    # teton plan searches layouts and runs the Monte Carlo per GPU count: seconds even for one count
    ("import", "--gpus"): mostly(("64", "128", "256"), ("0", "-8", "x", "", "64,128", "3")),
    ("plan", "--runs"): mostly(("1", "2"), ("0", "-1", "x")),
    ("plan", "--gpus"): mostly(("64", "256", "16384"), ("0", "-8", "x", "", "64:32", "1:2:0", "64,x")),
    ("plan", "--storage-servers"): mostly(("100", "1000"), ("0", "-1", "x", "10:5")),
    ("plan", "--workers"): mostly(("1",), ("0", "x")),
    ("plan", "--executor"): mostly(("serial",), ("ray", "x")),
    ("plan", "--tokens"): mostly(("1e10", "15.6T", "2T"), ("0", "-5", "abc", "nan", "inf", "")),
    ("search", "--tp"): mostly(("8", "4,8", "1,2", "16"), ("0", "", "x", "8;16", "-2")),
    ("search", "--pp"): mostly(("1", "16", "4,8", "2"), ("0", "", "x", "1.5")),
    ("search", "--cp"): mostly(("1", "1,2"), ("0", "", "x")),
    ("search", "--virtual-stages"): mostly(("1", "8", "1,2"), ("0", "", "x")),
}
ALWAYS = {  # options every case of the verb gets (drawn values), to keep it cheap
    "search": ("--tp", "--pp", "--cp", "--virtual-stages"),
    "goodput": ("--runs",), "report": ("--sections", "--runs"), "sweep": ("--executor",),
    "plan": ("--runs", "--executor", "--gpus", "--tokens"),
}


def int_text() -> st.SearchStrategy[str]:
    good = st.integers(1, 64).map(str)
    return weighted((4, good), (1, st.sampled_from(("0", "-1", "1.5", "1e3", "", "x", "2**4",
                                                     "99999999999999999999", " 4", "0x8"))))


def float_text() -> st.SearchStrategy[str]:
    good = st.one_of(st.floats(0.01, 100).map(repr), st.sampled_from(("0.5", "1", "3600", "54", "1e4")))
    return st.one_of(good, good, st.floats(-2, 2).map(repr), st.sampled_from((
        "0", "-1", "nan", "inf", "-inf", "1e308", "1e-308", "x", "", "1,5", "3.")))


def size_text() -> st.SearchStrategy[str]:
    good = st.sampled_from(("1", "1024", "1K", "64K", "1M", "64M", "1G", "4G", "1.5K", "1KiB", "1kb", " 2M "))
    return st.one_of(good, good, st.sampled_from(("0", "-1", "1e3", "", "K", "x", "1T", "1P", "nan", "inf",
                                                  "99999999999T", "1.5.2M")), st.integers(-5, 2**40).map(str))


def tokens_text() -> st.SearchStrategy[str]:
    return st.sampled_from(("15.6T", "15.6e12", "1e9", "2B", "500M", "1K", "0", "-5", "abc", "nan", "inf", "", "1e400",
                            "1T1", "T"))


def list_text(flag: str, verb: str) -> st.SearchStrategy[str]:
    if flag == "--sections":
        item = names((*SECTIONS, "search", "validation", "all"))
        cheap = st.lists(st.sampled_from(SECTIONS), min_size=1, max_size=3).map(",".join)
        odd = st.lists(item, max_size=2).map(",".join).filter(  # "" and "," mean the default: all
            lambda s: s.strip(" ,") and not any(x in s for x in ("search", "validation", "all")))
        return weighted((3, cheap), (1, odd))
    if flag == "--params":
        return st.one_of(st.lists(names(IN_SITU), max_size=3).map(",".join), st.sampled_from(NASTY_TEXT))
    small = st.lists(st.sampled_from((8, 1, 2, 4, 16, 0, -1, 3)), min_size=1, max_size=2).map(
        lambda xs: ",".join(map(str, xs)))
    return weighted((4, small), (1, st.sampled_from(("", "1,,2", ",", "a", "4,x", " 8 ", "1.5", "8;16"))))


def option_value(verb: str, flag: str, label: str, b: _Builder) -> st.SearchStrategy[str]:
    """A value for ``flag`` of ``verb`` from its conventional type label."""
    if (verb, flag) in CAPS:
        return CAPS[(verb, flag)]
    if label == "INT":
        return int_text()
    if label == "FLOAT":
        if flag == "--occupancy":
            return st.one_of(st.sampled_from(("0", "0.25", "0.5", "0.9", "0.99", "1", "-0.1", "nan", "x")))
        if flag == "--load":
            return st.sampled_from(("0.1", "0.9", "2", "10", "11", "0", "-1", "nan", "inf", "x"))
        return float_text()
    if label == "SIZE":
        return size_text()
    if label == "TOKENS":
        return tokens_text()
    if label == "LIST":
        return list_text(flag, verb)
    if label == "NAME":
        return names(NAME_CHOICES.get(flag, ()))
    if label == "NAME|FILE":  # --cluster
        return st.one_of(names(presets()["cluster"]), st.just("__cluster_file__"),
                         st.sampled_from(("missing.yaml", "adir", "afile")))
    if label == "FILE":
        if flag == "--trace":
            return st.one_of(st.sampled_from([str(p) for p in KINETO_TRACES]),
                             st.sampled_from(("missing.json.gz", "adir", "afile", "__garbage_json__")),
                             fh.kineto_trace().map(lambda data: b.file(".json", data)))
        if flag == "--calibration":
            return calibration_file(b)
        return out_path(flag)
    if label == "DIR":
        return dir_path()
    if label == "KEY=VALUE":
        return set_items()
    return ANY_TEXT


@functools.cache
def verb_options(verb: str) -> list[tuple[str, str, bool]]:
    """(long flag, type label, is a switch) of each option of ``verb``, from its click params."""
    from teton.cli import command
    from teton.cli.conventions import FLAGS

    out = []
    for p in command().commands[verb].params:
        if p.param_type_name != "option":
            continue
        flag = next(o for o in p.opts if o.startswith("--"))
        label = FLAGS[flag].type if flag in FLAGS else ("" if p.is_flag else "ANY")
        out.append((flag, label, bool(p.is_flag)))
    return out


@st.composite
def _cluster_file(draw, b: _Builder) -> str:
    p = presets()
    data = {"base": draw(names(p["cluster"]))}
    if draw(st.booleans()):
        data[draw(st.sampled_from(("gpu", "hosts", "backend_nic", "topology", "efficiency", "bogus")))] = \
            draw(st.one_of(names(p["gpu"]), scalar_values()))
    return b.file(".yaml", _dump(data, "yaml"))


@st.composite
def draw_options(draw, verb: str, b: _Builder) -> None:
    opts = [o for o in verb_options(verb) if o[0] not in SKIP]
    always = ALWAYS.get(verb, ())
    chosen = [o for o in opts if o[0] in always]
    rest = [o for o in opts if o[0] not in always]
    if rest:
        chosen += draw(st.lists(st.sampled_from(rest), max_size=min(4, len(rest)), unique=True))
    for flag, label, switch in chosen:
        if switch:
            b.add(flag)
            continue
        for _ in range(draw(st.integers(1, 2)) if label == "KEY=VALUE" or flag in ("--policy", "--case") else 1):
            value = draw(option_value(verb, flag, label, b))
            if value == "__cluster_file__":
                value = draw(_cluster_file(b))
            elif value == "__garbage_json__":
                value = b.file(".json", draw(st.sampled_from((b"{}", b"[]", b"{\"traceEvents\": 3}", b"x", b"",
                                                               *HOSTILE_BYTES))))
            b.add(flag, value)
    # --measure writes real files: keep them few and small (a 405B checkpoint x 1e-6 is MBs)
    if "--measure" in b.case.argv:
        argv = b.case.argv
        for flag, default in (("--scale", "1e-6"), ("--files", "4"), ("--writers", "2")):
            if flag in argv:
                i = argv.index(flag)
                argv[i + 1] = _cap_number(argv[i + 1], float(default))
            else:
                argv += [flag, default]


def _cap_number(text: str, cap: float) -> str:
    try:
        return str(min(float(text), cap)) if "." in text or "e" in text else str(min(int(text), int(cap)))
    except ValueError:
        return text


GOOD_GRID = {"job.tp": (1, 2, 4, 8), "job.pp": (1, 2), "job.seq_len": (2048, 4096), "job.precision": ("bf16", "fp8"),
             "job.recompute": ("none", "full", "selective"), "job.zero": (1, 2, 3), "job.micro_batch": (1, 2),
             "storage.checkpoint.mode": ("sync", "async"), "cluster": ("dgx-h100-superpod", "meta-roce-24k")}


@st.composite
def sweep_arg(draw, b: _Builder) -> str:
    """A SWEEP argument: a small generated sweep (a handful of points), mutated, or random text."""
    how = draw(weighted((6, st.just("small")), (1, st.just("text")), (1, st.just("path")), (2, st.just("hostile"))))
    if how == "hostile":
        content, invalid = draw(fh.sweep_text(str(SPEC_EXAMPLES[0])))
        b.case.invalid |= invalid
        return b.file(".yaml", content)
    if how == "text":
        return b.file(".yaml", draw(st.one_of(ANY_TEXT.map(str.encode), st.sampled_from(HOSTILE_BYTES),
                                              st.sampled_from((b"base: x\n", b"grid: {}\n", b"- 1\n", b"")))))
    if how == "path":
        return draw(st.sampled_from(("missing.yaml", "adir", str(SWEEP_EXAMPLES[0]) + "x")))
    base = draw(weighted((4, st.sampled_from(SMALL_SPECS)), (2, mutated_spec()), (1, st.just(str(SPEC_EXAMPLES[0]))),
                         (1, st.sampled_from(("missing.yaml", "adir"))), (1, scalar_values())))
    keys = st.one_of(st.sampled_from(tuple(GOOD_GRID)), IDENT)
    good = st.lists(st.sampled_from(tuple(GOOD_GRID)), min_size=1, max_size=2, unique=True).flatmap(
        lambda ks: st.fixed_dictionaries({k: st.lists(st.sampled_from(GOOD_GRID[k]), min_size=1, max_size=3,
                                                      unique=True) for k in ks}))
    odd = st.dictionaries(keys, st.one_of(st.lists(scalar_values(), max_size=3), scalar_values()), max_size=2)
    grid = draw(weighted((4, good), (1, odd)))
    data = {"base": base, "grid": grid}
    if draw(st.integers(0, 3)) == 3:
        data["zip"] = draw(st.one_of(st.just([{"job.seq_len": [4096, 8192], "job.global_batch": [64, 128]}]),
                                     st.just([{"job.tp": [1, 2], "job.pp": [1]}]), scalar_values()))
    if draw(st.integers(0, 3)) == 3:
        data["filter"] = draw(st.lists(st.sampled_from(("job.tp * job.pp >= 2", "job.tp <", "__import__('os')",
                                                        "job.tp > 100", "1/0", "x", "job.tp == 2 or job.pp == 1")),
                                       max_size=2))
    if draw(st.integers(0, 5)) == 5:
        data[draw(IDENT)] = draw(scalar_values())
    return b.file(".yaml", _dump(data, "yaml"))


@st.composite
def schedule_trace(draw, b: _Builder) -> str:
    how = draw(st.sampled_from(("synthetic", "synthetic", "ours", "philly", "alibaba", "odd", "hostile", "numbers")))
    if how == "numbers":  # a cell past its column's range, or a job id twice
        return b.file(".csv", draw(fh.schedule_trace_text()))
    if how == "hostile":
        return b.file(draw(st.sampled_from((".csv", ".json", "/pai_task_table.csv"))), draw(st.sampled_from(HOSTILE_BYTES)))
    if how == "synthetic":
        return "synthetic:" + draw(st.one_of(st.integers(1, 30).map(str), st.sampled_from(("0", "-1", "x", "", "1e3",
                                                                                              "2.5"))))
    if how == "odd":
        return draw(st.sampled_from(("missing.csv", "adir", "afile", "synthetic", "synthetic:99999999999999999999")))
    cell = st.one_of(st.integers(-2, 4096).map(str), st.sampled_from(("", "x", "nan", "inf", "1e3", "llama3-8b",
                                                                      "llama3-70b", "0", "-1", "8", "1e400")))
    if how == "ours":
        cols = draw(st.one_of(st.just(["job_id", "arrival_s", "gpus", "duration_s", "tokens", "model", "tp", "pp"]),
                              st.lists(st.sampled_from(("job_id", "arrival_s", "gpus", "duration_s", "tokens", "model",
                                                        "tp", "pp", "bogus")), min_size=1, max_size=5, unique=True)))
        rows = draw(st.lists(st.lists(cell, min_size=len(cols), max_size=len(cols) + draw(st.integers(0, 1))),
                             min_size=0, max_size=6))
        text = ",".join(cols) + "\n" + "".join(",".join(r) + "\n" for r in rows)
        return b.file(".csv", text.encode())
    if how == "philly":
        when = st.sampled_from(("2017-10-03 10:00:00", "2017-10-03 12:30:00", "None", "", "x", None, 3))
        attempt = st.fixed_dictionaries({"start_time": when, "end_time": when, "detail": st.one_of(
            st.just([{"ip": "a", "gpus": ["g0", "g1"]}]), scalar_values())})
        job = st.fixed_dictionaries({"jobid": IDENT, "status": st.sampled_from(("Pass", "Killed", "Failed", "x")),
                                     "submitted_time": when, "attempts": st.one_of(st.lists(attempt, max_size=2),
                                                                                   scalar_values())})
        data = draw(st.one_of(st.lists(job, max_size=4), scalar_values()))
        return b.file(".json", json.dumps(data, default=str).encode())
    rows = draw(st.lists(st.lists(cell, min_size=9, max_size=11), max_size=5))
    return b.file("/pai_task_table.csv", "".join(",".join(r) + "\n" for r in rows).encode())


@st.composite
def runs_arg(draw, b: _Builder) -> str:
    """A RUNS argument of ``teton fit``: a small YAML list of measured runs, a CSV, or junk."""
    how = draw(st.sampled_from(("yaml", "yaml", "csv", "text", "path", "hostile", "hostile")))
    if how == "path":
        return draw(st.sampled_from(("missing.yaml", "adir", "afile")))
    if how == "hostile":
        suffix, content = draw(fh.runs_file(str(SPEC_EXAMPLES[0])))
        b.case.invalid = True  # each measurement, name and container of fuzz_hostile.runs_file is invalid
        return b.file(suffix, content)
    if how == "text":
        return b.file(draw(st.sampled_from((".yaml", ".csv", ".json"))),
                      draw(st.one_of(ANY_TEXT.map(str.encode), st.binary(max_size=32), st.sampled_from(HOSTILE_BYTES))))
    example = str(SPEC_EXAMPLES[0])
    measure = st.one_of(st.floats(0.1, 60), FLOATS, ANY_TEXT)
    if how == "csv":
        header = draw(st.sampled_from(("spec,step_time_s,name", "spec,tflops_per_gpu", "spec,step_time_s,job.pp",
                                       "name,step_time_s", "spec,bogus")))
        rows = draw(st.lists(st.tuples(st.sampled_from((example, "missing.yaml", "")), measure), max_size=3))
        extra = "," + "x" if header.count(",") == 2 else ""
        return b.file(".csv", (header + "\n" + "".join(f"{s},{m}{extra}\n" for s, m in rows)).encode())
    run = st.fixed_dictionaries(
        {"spec": st.one_of(st.just(example), mutated_spec(), st.just("missing.yaml"))},
        optional={"name": IDENT, "step_time_s": measure, "tflops_per_gpu": measure,
                  "set": st.lists(set_items(), max_size=2), "bogus": scalar_values()})
    data = draw(st.one_of(st.fixed_dictionaries({"runs": st.lists(run, max_size=3)}), st.lists(run, max_size=2),
                          scalar_values()))
    return b.file(".yaml", _dump(data, "yaml"))


@st.composite
def config_arg(draw, b: _Builder) -> str:
    """A CONFIG of ``teton import``: a framework config from tests/data/frameworks, as it is or with
    a line dropped, a value replaced or a line of junk added; random text; or a bad path."""
    how = draw(weighted((2, st.just("as-is")), (4, st.just("mutated")), (1, st.just("text")), (1, st.just("path"))))
    if how == "path":
        return draw(st.sampled_from(("missing.sh", "adir", "afile", "")))
    if how == "text":
        return b.file(draw(st.sampled_from((".sh", ".yaml", ".toml", ".txt", ""))),
                      draw(st.one_of(ANY_TEXT.map(str.encode), st.binary(max_size=64), st.sampled_from(HOSTILE_BYTES))))
    source = draw(st.sampled_from(FRAMEWORK_CONFIGS))
    if how == "as-is":
        return str(source)
    lines = source.read_text().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(("drop", "value", "junk")))
        if edit == "drop":
            lines.pop(i)
        elif edit == "value":
            head = lines[i].rsplit(" ", 1)[0] if " " in lines[i].strip() else lines[i]
            lines[i] = f"{head} {draw(st.sampled_from(('0', '-1', '3', 'x', 'true', '[]', '1e9', '', '$X', '{a: 1}')))}"
        else:
            lines.insert(i, draw(st.sampled_from(("--bogus-flag 3", "bogus: 1", "bogus = 1", "[bogus]", "\\", "(",
                                                  "X=(", "  - 1", "'"))))
        if not lines:
            lines = [""]
    return b.file(source.suffix, ("\n".join(lines) + "\n").encode())


@functools.cache
def verb_arguments(verb: str) -> list[tuple[str, bool]]:
    """(name, required) of each positional argument of ``verb``, from its click params."""
    from teton.cli import command

    return [(p.name, bool(p.required)) for p in command().commands[verb].params if p.param_type_name == "argument"]


@st.composite
def cases(draw, verb: str) -> Case:
    """One random command line of ``verb``: its arguments by their conventional names
    (:data:`teton.cli.conventions.ARGUMENTS`), then random options."""
    b = _Builder(verb)
    runs = None
    for name, required in verb_arguments(verb):
        if not required and not draw(st.integers(0, 4 if name == "spec" else 1)):
            continue
        if name in ("spec", "spec_a", "spec_b"):
            b.add(draw(spec_arg(b)))
        elif name == "sweep_file":
            b.add(draw(sweep_arg(b)))
        elif name == "trace":
            b.add(draw(schedule_trace(b)))
        elif name == "calibration":
            b.add(draw(calibration_file(b)))
        elif name == "config":
            b.add(draw(config_arg(b)))
        elif name == "runs":
            runs = draw(runs_arg(b))
            b.add(runs)
            if draw(st.integers(0, 9)) == 9:
                b.add("--write-catalog")  # with RUNS: an error, never a write into the package
        else:  # an argument this module does not know yet
            b.add(draw(st.one_of(spec_arg(b), ANY_TEXT)))
    if verb == "sweep" and draw(st.integers(0, 9)) != 9:  # --db is required: now and then left out
        b.add("--db", draw(out_path("--db")))
    if verb == "fit" and (runs is None or draw(st.integers(0, 4)) == 4):
        b.add("--trace", draw(option_value("fit", "--trace", "FILE", b)))
    if verb == "validate":
        b.add("--case", draw(names(NAME_CHOICES["--case"])))
    if verb == "compare" and len(b.case.argv) < 3 and draw(st.integers(0, 5)) != 5:  # else SPEC_B is missing
        b.add("--b", draw(set_items()))
    draw(draw_options(verb, b))
    # command-line noise: an unknown option, a stray argument, a flag missing its value, --help
    noise = draw(st.integers(0, 19))  # hypothesis favours 0: no noise
    if noise == 17:
        b.add(draw(st.sampled_from(("--bogus", "--jsn", "-x", "--set", "--json=1", "--", "extra", "--help"))))
    elif noise == 18 and len(b.case.argv) > 2:
        b.case.argv.insert(draw(st.integers(1, len(b.case.argv) - 1)), draw(st.sampled_from(("--json", "-", "x"))))
    elif noise == 19 and len(b.case.argv) > 1:
        if b.case.argv.pop(draw(st.integers(1, len(b.case.argv) - 1))) in b.case.files:
            b.case.invalid = False  # the invalid file may be the one no longer read
    if verb == "fit" and "--trace" not in b.case.argv and (runs is None or b.case.argv[1:2] != [runs]):
        b.add("--trace", str(KINETO_TRACES[0]))  # never the bundled training-set fit (seconds)
    return _bounded(b.case)


def _bounded(case: Case) -> Case:
    """Whatever noise did, keep the costly paths out: the bundled fit, every validation case."""
    argv = case.argv
    if case.verb == "validate" and "--case" not in argv:
        argv += ["--case", NAME_CHOICES["--case"][0]]
    if case.verb == "search":
        for flag in ALWAYS["search"]:
            if flag not in argv:
                argv += [flag, "8"]
    if case.verb == "report" and "--sections" not in argv:
        argv += ["--sections", "step"]
    if case.verb == "collective" and "--placement-study" in argv and "--trials" not in argv:
        argv += ["--trials", "1"]  # 24 placements by default: seconds
    if case.verb == "goodput" and "--runs" not in argv:
        argv += ["--runs", "2"]
    if case.verb == "plan":
        for flag, value in (("--runs", "1"), ("--executor", "serial"), ("--gpus", "64")):
            if flag not in argv:
                argv += [flag, value]
    if case.verb == "fit":
        while "--candidates" in argv:
            argv.remove("--candidates")
    return case


# ---------------------------------------------------------------------------------------------
# running and checking


@dataclass
class Outcome:
    code: int | None  # None: an exception escaped teton.cli.main
    out: str
    err: str
    exception: str | None = None  # its traceback
    wall_s: float = 0.0


def prepare(case: Case, tmp: Path) -> None:
    """The scratch directory of a case: its files, and the fixtures every case may name."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "afile").write_text("just a file\n")
    (tmp / "adir").mkdir(exist_ok=True)
    ro = tmp / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o500)
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def cleanup(tmp: Path) -> None:
    import shutil

    with contextlib.suppress(OSError):
        (tmp / "ro").chmod(0o700)
    shutil.rmtree(tmp, ignore_errors=True)


def run_case(case: Case, tmp: Path) -> Outcome:
    """Run ``teton ARGV`` in-process with ``tmp`` as the working directory."""
    import time

    from teton.cli import main

    prepare(case, tmp)
    out, err = io.StringIO(), io.StringIO()
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = ["teton", *case.argv]
    code: int | None = 0
    exc = None
    t0 = time.perf_counter()
    try:
        os.chdir(tmp)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 - an escaped exception is the failure we look for
                code, exc = None, traceback.format_exc()
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
    return Outcome(code, out.getvalue(), err.getvalue(), exc, time.perf_counter() - t0)


def _strict_json(text: str):
    def reject(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=reject)


def _asks_json(case: Case) -> bool:
    """``--json`` is on the command line as the switch, not as the value of an option before it
    (``--timeline --json`` names a file ``--json``)."""
    takes_value = {flag for flag, _, switch in verb_options(case.verb) if not switch} if case.verb in verbs() else set()
    argv = case.argv
    return any(a == "--json" and not (i > 0 and argv[i - 1] in takes_value) for i, a in enumerate(argv))


def problems(case: Case, o: Outcome) -> list[str]:
    """What is wrong with the outcome of ``case`` (nothing: an empty list)."""
    bad = []
    if o.exception is not None:
        return [f"exception escaped main():\n{o.exception}"]
    if "Traceback" in o.err or "Traceback" in o.out:
        bad.append("a traceback was printed")
    if o.code not in (0, 2):
        bad.append(f"exit code {o.code} (expected 0 or 2)")
    if o.code == 2:
        lines = [ln for ln in o.err.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        if not lines or not lines[-1].startswith("error:") or len(errors) != 1:
            bad.append("exit 2 without exactly one `error:` line, last on stderr")
    if o.code == 0 and case.invalid and "--help" not in case.argv and "--" not in case.argv:
        bad.append("invalid input accepted (exit 0)")
    if o.code == 0 and _asks_json(case) and "--help" not in case.argv and "--" not in case.argv:
        try:
            _strict_json(o.out)
        except ValueError as e:
            bad.append(f"--json output is not one JSON document ({e})")
    return bad


def describe(case: Case, o: Outcome, bad: list[str]) -> str:
    return (f"{case!r}\nexit {o.code}; " + "; ".join(bad) + f"\n--- stderr ---\n{o.err[-3000:]}"
            f"\n--- stdout ---\n{o.out[:1500]}")
