"""The CLI's one vocabulary: every flag of every verb, what it means, the type ``--help`` shows
and its default. A flag spelled the same means the same thing, takes the same type and has the
same default in every verb that has it; ``tests/cli/test_conventions.py`` checks each verb
against this table and ``docs/cli.md`` prints it.

Type labels (what ``--help`` shows after a flag):

=============  ===========================================================================
(none)         a switch: present or absent, takes no value
``INT``        an integer
``FLOAT``      a number
``SIZE``       bytes, nccl-tests style: ``1024``, ``64K``, ``1M``, ``4G`` (binary multiples)
``TOKENS``     a token count: ``15.6e12`` or ``15.6T``
``COUNTS``     counts: one (``8``), a list (``8192,16384``), ``lo:hi:step``, or ``lo:hi`` (five, geometric)
``LIST``       comma-separated values: ``4,8``
``NAME``       one name from the list the help gives (a preset, a policy, a mode)
``NAME|FILE``  a preset name or a spec file of that section
``NAME|TOKENS`` a rule's name or a token count
``FILE``       a file path (read or written, as the meaning says)
``DIR``        a directory
``KEY=VALUE``  a spec override ``key.path=value`` (repeatable)
=============  ===========================================================================

Output files are named by what they hold: ``--out``/``-o`` is always an offline HTML page;
``--db`` a DuckDB results store; ``--png`` one figure; ``--png-dir`` a folder of figures;
``--parquet`` a Parquet export; ``--cluster-out`` a cluster spec (YAML); ``--spec-out`` a teton spec
(YAML); ``--timeline`` a Chrome / Perfetto trace; ``--slurm-topology`` a Slurm ``topology.conf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SWITCH = ""


@dataclass(frozen=True)
class Flag:
    """One flag: its type label, meaning and default (``per_verb`` only where a verb's default
    must differ, with the reason in ``meaning``)."""

    type: str
    meaning: str
    default: Any = None
    per_verb: tuple[tuple[str, Any], ...] = ()
    short: str | None = None

    def default_for(self, verb: str) -> Any:
        return dict(self.per_verb).get(verb, self.default)


F = Flag
FLAGS: dict[str, Flag] = {
    # shared by most verbs
    "--set": F("KEY=VALUE", "override one spec field (repeatable); an error it causes names the --set"),
    "--json": F(SWITCH, "print one JSON document on stdout, nothing else (report: with --frontier only)", False),
    "--seed": F("INT", "random seed (placement, ECMP hashing, failures, synthetic traces); default: "
                       "the spec's seed, or 0 for verbs without a spec"),
    "--cluster": F("NAME|FILE", "cluster preset or cluster file (calibrate and fit --trace: a preset, the "
                                "base of the file they write); default: the spec's, or meta-roce-24k for "
                                "verbs without a spec"),
    "--policy": F("NAME", "placement policy: topology-aware | linear | random | fragmented (schedule: "
                          "fifo | backfill | topology-aware); repeatable or comma-separated; default: all "
                          "the verb compares; collective times one placement, topology-aware by default",
                  None, (("collective", "topology-aware"),)),
    "--fidelity": F("NAME", "network model: analytical (alpha-beta, no contention) | flow (max-min fair "
                            "flows on the fabric: ECMP collisions, oversubscription); placement: default the "
                            "spec's network.fidelity", "analytical", (("placement", None),)),
    "--occupancy": F("FLOAT", "fraction of the cluster other jobs hold, in [0, 1)", 0.0),
    "--neighbours": F(SWITCH, "the other jobs on the busy GPUs all-reduce on the same fabric (flow model; slow)",
                      False),
    "--runs": F("INT", "Monte Carlo runs (per checkpoint interval in an interval sweep); default: the spec's "
                       "reliability.runs; report: 32, to stay quick", None, (("report", 32),)),
    "--top": F("INT", "rows to print", 10),
    # output files, named by what they hold
    "--out": F("FILE", "write an offline, self-contained HTML page here", None, (("report", "report.html"),),
               short="-o"),
    "--db": F("FILE", "DuckDB results store (created; re-run to resume)"),
    "--png": F("FILE", "write the figure as a PNG here"),
    "--png-dir": F("DIR", "also write every chart as a PNG in this directory"),
    "--parquet": F("FILE", "also export the rows as Parquet"),
    "--cluster-out": F("FILE", "write the calibrated cluster spec (YAML) here"),
    "--timeline": F("FILE", "write the pipeline schedule as a Chrome / Perfetto trace (JSON)"),
    "--slurm-topology": F("FILE", "write the cluster's Slurm topology.conf (tree plugin) here"),
    # input files
    "--trace": F("FILE", "a PyTorch profiler (Kineto) trace of one rank to calibrate from"),
    "--calibration": F("FILE", "measured efficiencies (JSON from calibrate_hopper.py or teton calibrate)"),
    # search
    "--tp": F("LIST", "TP degrees to try"),
    "--cp": F("LIST", "CP degrees to try"),
    "--pp": F("LIST", "PP degrees to try"),
    "--ep": F("LIST", "EP degrees to try (MoE models)"),
    "--etp": F("LIST", "expert-TP degrees to try (MoE models)"),
    "--cp-algo": F("LIST", "CP algorithms to try at cp > 1: all_gather, ring, a2a, a2a+p2p (its all-to-alls in the "
                           "NVLink domain; default: the job's own)"),
    "--exhaustive": F(SWITCH, "every layout simulated: dominated ones (more recompute or ZeRO than a layout of the "
                      "same degrees that fits, or misses the HBM by no more) and, on MoE models, every expert-TP degree and rank order, not a staged "
                      "search", False),
    "--virtual-stages": F("LIST", "virtual pipeline stages to try"),
    # compare
    "--a": F("KEY=VALUE", "override for variant A (repeatable)"),
    "--b": F("KEY=VALUE", "override for variant B (repeatable)"),
    # sweep
    "--executor": F("NAME", "local (process pool) | ray | serial", "local"),
    "--workers": F("INT", "parallel workers; default: the CPU count"),
    "--batch": F("INT", "points per task (default: about 4 tasks per worker, at most 64)", 64),
    # collective
    "--op": F("NAME", "the collective: all_gather | reduce_scatter | all_reduce | all_to_all | send_recv | "
                      "broadcast", "all_reduce"),
    "--gpus": F("COUNTS", "GPU counts: collective, the ranks of its one communicator; plan, the candidates "
                          "(default: 0.5x ... 2x the spec's); import, the job's one count where the config leaves "
                          "it to the launcher; report --frontier, the scales (default: 16384,65536,131072,350000)",
                None, (("collective", "8"),)),
    "--min-bytes": F("SIZE", "smallest message size", "1M", short="-b"),
    "--max-bytes": F("SIZE", "largest message size", "1G", short="-e"),
    "--step-factor": F("INT", "size multiplier per row", 2, short="-f"),
    "--routing": F("NAME", "ecmp | e-ecmp | pinned | adaptive (flow fidelity); default: the cluster's (cluster.routing)"),
    "--qps": F("INT", "QPs per connection; default: 16 for e-ecmp, else 1"),
    "--algo": F("NAME", "auto | ring | tree | rhd | hierarchical | nvls | sharp", "auto"),
    "--fail-links": F("INT", "switch cables removed (seeded)", 0),
    "--leaf-uplink-ratio": F("FLOAT", "leaf (RTSW) uplink / downlink capacity; default: the cluster's"),
    "--placement-study": F(SWITCH, "run the AllGather placement study instead of a sweep", False),
    "--pinning-study": F(SWITCH, "compare path pinning and E-ECMP on full and half-filled racks", False),
    "--trials": F("INT", "placements in --placement-study", 24),
    # schedule
    "--format": F("NAME", "format of the file read or written: schedule's trace, auto | ours | philly | alibaba; "
                  "presets --show, yaml | json (a preset is written, not read: no auto)", "auto",
                  (("presets", "yaml"),)),
    "--show": F("NAME", "write this preset (GPU, host, NIC, cluster, model, software, storage) as an editable "
                "file on stdout"),
    "--strict": F(SWITCH, "reject the trace on a malformed line", False),
    "--load": F("FLOAT", "offered load of synthetic:N traces", 0.9),
    "--per-job": F(SWITCH, "with --json: one row per job", False),
    # placement
    "--node-prefix": F("NAME", "node name prefix in topology.conf", "node"),
    # goodput
    "--days": F("FLOAT", "run length in days"),
    "--tokens": F("TOKENS", "token budget"),
    "--step-time": F("FLOAT", "step time in seconds; default: simulated"),
    "--interval": F("FLOAT", "checkpoint interval in seconds; default: the optimum"),
    "--interval-sweep": F(SWITCH, "table of checkpoint interval vs ETTR", False),
    # checkpoint
    "--mode": F("NAME", "sync | async"),
    "--writer-policy": F("NAME", "spread | one_replica | every_rank"),
    "--writers": F("INT", "spread the checkpoint over N writers (--measure: N writer threads)"),
    "--restore": F("NAME", "all_read | broadcast | shard_allgather"),
    "--tokens-per-s": F("FLOAT", "job throughput for data loading; default: simulated"),
    "--scaling": F(SWITCH, "writer-scaling study, 8 ... 16,384 writers", False),
    "--measure": F("DIR", "write and read real, scaled checkpoint files under DIR"),
    "--scale": F("FLOAT", "--measure: size scale factor", 1e-4),
    "--files": F("INT", "--measure: at most this many shard files", 256),
    "--devx-files": F("INT", "job-start files every host reads", 1),
    "--devx-file-bytes": F("SIZE", "size of each job-start file", "1M"),
    "--devx-read-bytes": F("SIZE", "read request size", "4K"),
    # report, ops, flops
    "--sections": F("LIST", "report sections; default: all but search and validation"),
    "--frontier": F(SWITCH, "report: the frontier study instead of a spec (what breaks first at 16K ... 350K GPUs, "
                            "H100 vs GB200; docs/frontier.md)", False),
    "--systems": F("LIST", "report --frontier: the systems compared, from h100, gb200; default: both"),
    "--block": F("NAME", "layer | embedding | head | all", "layer"),
    "--attention-kernel": F("NAME", "flash | math", "flash"),
    # validate, fit
    "--case": F("NAME", "only these validation cases (repeatable)"),
    "--params": F("LIST", "in-situ parameters to fit; default: the kept ones"),
    "--candidates": F(SWITCH, "fit every candidate parameter set and compare (slow)", False),
    "--fit-all": F(SWITCH, "fit every parameter, also those the runs do not identify (default: hold them at "
                           "the prior and say why)", False),
    "--gpu": F("NAME", "the trace's GPU; default: from the trace"),
    "--write-catalog": F(SWITCH, "regenerate the catalog's in-situ defaults from the bundled training sets", False),
    "--stack": F("NAME", "the software stack the runs are, fitted against the catalog's across-stack prior; "
                         "default: each run's own"),
    "--by": F("NAME", "stack: the few-shot protocol per software stack"),
    # plan
    "--deadline-days": F("FLOAT", "pick the cheapest plan that finishes by then at p90"),
    "--budget-usd": F("FLOAT", "pick the fastest plan that costs at most this"),
    "--storage-servers": F("COUNTS", "storage sizes in servers (a sweep, only when asked); default: the preset's "
                                     "(share), sized to the run (dedicated)"),
    "--storage-pricing": F("NAME", "share (the share of a shared system the run uses) | dedicated (a system sized "
                                   "to the run, paid in full); default: plan.storage_pricing, share"),
    "--prefer": F("NAME", "what breaks a tie between plans within the best's band: fewer_gpus | cheaper | faster; "
                          "default: plan.prefer, fewer_gpus"),
    "--global-batch": F("NAME|TOKENS", "the batch at every GPU count: fixed (the spec's) | per_gpu | a token "
                                       "count like 16M; default: fixed"),
    # import
    "--framework": F("NAME", "the config's framework: auto | megatron | nemo | torchtitan | maxtext", "auto"),
    "--spec-out": F("FILE", "write the imported teton spec (YAML) here; default: print it"),
    # every verb
    "--help": F(SWITCH, "show the verb's help and exit", False),
}

# Positional arguments: the metavar --help and the usage line show.
ARGUMENTS: dict[str, str] = {
    "spec": "SPEC", "spec_a": "SPEC", "spec_b": "SPEC_B", "sweep_file": "SWEEP", "trace": "TRACE", "runs": "RUNS",
    "calibration": "CALIBRATION", "config": "CONFIG",
}

# The Python types a type label accepts (``list`` for repeatable options).
TYPES: dict[str, tuple[str, ...]] = {
    SWITCH: ("bool",), "INT": ("int",), "FLOAT": ("float",), "SIZE": ("str",), "TOKENS": ("str",),
    "LIST": ("str",), "NAME": ("str", "list[str]"), "NAME|FILE": ("str",), "FILE": ("Path",), "DIR": ("Path",),
    "KEY=VALUE": ("list[str]",), "COUNTS": ("str",), "NAME|TOKENS": ("str",),
}


def apply(command) -> None:
    """Give every option of every verb of the click ``command`` its conventional type label."""
    for verb in getattr(command, "commands", {}).values():
        for param in verb.params:
            if param.param_type_name == "argument":
                param.metavar = ARGUMENTS.get(param.name, param.metavar)
                continue
            flag = FLAGS.get(next((o for o in param.opts if o.startswith("--")), ""))
            if flag is not None:
                param.metavar = flag.type or None


def markdown_table() -> str:
    """The conventions as the Markdown table of ``docs/cli.md``."""
    rows = ["| flag | type | default | meaning |", "|---|---|---|---|"]
    for name, f in FLAGS.items():
        flag = f"`{name}`" + (f", `{f.short}`" if f.short else "")
        default = "" if f.default is None else f"`{f.default}`"
        default += "".join(f"; {v}: `{d}`" for v, d in f.per_verb)
        cells = (flag, f.type or "switch", default, f.meaning)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)
