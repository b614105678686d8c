"""What a plan chooses between: clusters, GPU counts, the batch at each count, storage sizes, prices.

A :class:`PlanRequest` is the resolved question (the spec's ``plan:`` section with the command's
options on top); :func:`count_tasks` turns it into one :class:`CountTask` per (cluster, GPU count),
the unit of work an executor runs.

Batch. Scaling the GPU count must not silently change the optimisation problem, so the global
batch follows a rule the user states (``plan.global_batch``): ``fixed`` keeps the spec's tokens per
step at every size (the default: the same training recipe), ``per_gpu`` scales it with the GPU
count (the same work per GPU, a bigger batch), and a token count fixes it (``16M``). The batch
used at each size is printed with its plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from teton.errors import SpecError, unknown_field
from teton.spec.cluster import ClusterSpec
from teton.spec.load import load_cluster
from teton.spec.plan import PlanSpec, parse_counts
from teton.spec.reliability import check_runs_seed
from teton.spec.schema import Spec
from teton.spec.storage import storage_system
from teton.sweep.search import SearchSpace
from teton.units import parse_count

# Assumption: the order of 2025 on-demand cloud prices per GPU-hour, in the ratio the GPUs rent at
# (H100 at the reliability section's $2.00 default; H800 at the $2 per GPU-hour the DeepSeek-V3
# technical report, Table 1, assumes). Set your own in plan.usd_per_gpu_hour.
USD_PER_GPU_HOUR = {"a100-40gb": 1.2, "a100-80gb": 1.4, "h100-sxm": 2.0, "h100-96gb": 2.2, "h200": 2.6, "h800": 2.0,
                    "b200": 4.0, "b300": 5.0, "gb200": 5.0, "gb300": 6.0}
DEFAULT_SPREAD = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0)  # default GPU counts: these multiples of the spec's


@dataclass(frozen=True)
class PlanRequest:
    """The resolved question: train ``spec.model`` on ``tokens`` tokens, on one of ``clusters``."""

    spec: Spec
    tokens: float
    clusters: tuple[ClusterSpec, ...]
    gpus: tuple[int, ...] | None  # None: around the spec's GPU count, per cluster
    storage_preset: str
    storage_servers: tuple[int, ...] | None  # None: the preset's (share), sized to the run (dedicated)
    storage_assumed: bool = False  # nothing named a storage: FALLBACK_STORAGE
    deadline_days: float | None = None
    budget_usd: float | None = None
    global_batch: str = "fixed"
    usd_per_gpu_hour: dict[str, float] = field(default_factory=dict)
    usd_per_tb_month: float = 20.0
    storage_pricing: str = "share"
    prefer: str = "fewer_gpus"
    top_layouts: int = 3
    runs: int = 1000
    seed: int = 0
    space: SearchSpace = SearchSpace()


@dataclass(frozen=True)
class CountTask:
    """One cluster at one GPU count: the spec to search (its job carries the count and batch) and
    ``base``, the user's spec, that the plan's ``--set`` list turns into it."""

    spec: Spec
    base: Spec
    cluster_name: str
    gpus: int
    tokens: float
    storage_preset: str
    storage_servers: tuple[int, ...] | None
    usd_per_gpu_hour: float
    usd_per_tb_month: float
    storage_pricing: str
    top_layouts: int
    runs: int
    seed: int
    space: SearchSpace


# what plan_request takes: the plan section's fields, and the Monte Carlo runs and seed, the search space
OPTION_KEYS = (*PlanSpec.model_fields, "runs", "seed", "space")
DEFAULT_RUNS = 1000  # Monte Carlo runs per plan, where neither the options nor the spec's reliability say


def plan_request(spec: Spec, options: dict[str, Any]) -> PlanRequest:
    """The spec's ``plan:`` section with the command-line ``options`` (non-None values) on top;
    ``spec`` a Spec, a spec file's path or a mapping (``teton.spec.as_spec``)."""
    import math

    from teton.spec import as_spec

    spec = as_spec(spec)
    if not isinstance(options, dict):
        raise SpecError("options", type(options).__name__, f"a mapping of plan options ({', '.join(OPTION_KEYS)})")

    from teton.spec.load import _build

    for name in ("deadline_days", "budget_usd"):
        v = options.get(name)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise SpecError(name, v, "must be a positive number")
    if unknown := sorted(set(options) - set(OPTION_KEYS)):  # a typo (gpu for gpus) would plan the default spread
        raise SpecError(unknown[0], options[unknown[0]], unknown_field(unknown[0], OPTION_KEYS))
    check_runs_seed(options.get("runs"), options.get("seed"))
    for name, check in (("gpus", parse_counts), ("storage_servers", parse_counts), ("tokens", parse_count)):
        if options.get(name) is not None:  # an option's bad value named as the option (the CLI's --gpus)
            check(options[name], name)
    base = spec.plan or PlanSpec()
    given = {k: v for k, v in options.items() if v is not None and k in PlanSpec.model_fields}
    plan = _build(PlanSpec, "plan", {**base.model_dump(exclude_defaults=True), **given}, None)
    if plan.tokens is None:
        raise SpecError("tokens", None, "how many tokens to train on, e.g. 15.6T (or plan.tokens)")
    tokens = parse_count(plan.tokens, "tokens")
    clusters = tuple(load_cluster(c, "plan.clusters") for c in plan.clusters) or (spec.cluster,)
    gpus = None if plan.gpus is None else parse_counts(plan.gpus, "gpus", spec.cluster.gpus_per_host)
    storage = (plan.storage or (spec.storage.preset if spec.storage is not None else None) or spec.cluster.storage
               or FALLBACK_STORAGE)
    servers = None if plan.storage_servers is None else parse_counts(plan.storage_servers, "storage_servers")
    storage_system({"preset": storage})  # a bad preset is the plan's one-line error before any task runs
    runs = options.get("runs") or (spec.reliability.runs if spec.reliability is not None else None) or DEFAULT_RUNS
    return PlanRequest(spec=spec, tokens=tokens, clusters=clusters, gpus=gpus, storage_preset=storage,
                       storage_assumed=storage == FALLBACK_STORAGE and not (plan.storage or spec.cluster.storage
                                                                             or spec.storage is not None),
                       storage_servers=servers, deadline_days=plan.deadline_days, budget_usd=plan.budget_usd,
                       global_batch=plan.global_batch, usd_per_gpu_hour=dict(plan.usd_per_gpu_hour),
                       usd_per_tb_month=plan.usd_per_tb_month, storage_pricing=plan.storage_pricing, prefer=plan.prefer,
                       top_layouts=plan.top_layouts, runs=int(runs),
                       seed=spec.seed if options.get("seed") is None else options["seed"],
                       space=options.get("space") or SearchSpace())


def gpu_counts(req: PlanRequest, cluster: ClusterSpec) -> tuple[tuple[int, ...], list[str]]:
    """The GPU counts to plan on ``cluster`` and a note for every count it cannot hold."""
    per_host = cluster.gpus_per_host
    wanted = req.gpus or tuple(sorted({max(per_host, round(req.spec.job.gpus * f / per_host) * per_host)
                                       for f in DEFAULT_SPREAD}))
    keep = tuple(n for n in wanted if n <= cluster.gpus and n % per_host == 0)
    notes = [f"{cluster.name}: {n:,} GPUs skipped ({'more than its ' + format(cluster.gpus, ',') if n > cluster.gpus else 'not whole hosts of ' + str(per_host)})"
             for n in wanted if n not in keep]
    return keep, notes


def batch_tokens(req: PlanRequest, gpus: int) -> int:
    """Tokens per step at ``gpus`` GPUs under the plan's batch rule (whole sequences)."""
    job = req.spec.job
    if req.global_batch == "fixed":
        return job.layout.tokens_per_step
    if req.global_batch == "per_gpu":
        seqs = max(1, round(job.layout.sequences_per_step * gpus / job.gpus))
        return seqs * job.layout.seq_len
    return max(1, int(req.global_batch) // job.layout.seq_len) * job.layout.seq_len


def gpu_price(req: PlanRequest, cluster: ClusterSpec) -> float:
    """USD per GPU-hour: plan.usd_per_gpu_hour, the spec's reliability price, the GPU's own
    ``usd_per_gpu_hour``, or the table above."""
    name = cluster.gpu_spec.name
    if name in req.usd_per_gpu_hour:
        return float(req.usd_per_gpu_hour[name])
    rel = req.spec.reliability
    if rel is not None and "usd_per_gpu_hour" in rel.model_fields_set:
        return float(rel.usd_per_gpu_hour)
    own = cluster.gpu_spec.usd_per_gpu_hour  # a GPU of the spec's own may carry its price
    if own is not None:
        return float(own)
    return USD_PER_GPU_HOUR.get(name, USD_PER_GPU_HOUR["h100-sxm"])


# the storage a plan sizes checkpoints on when neither the plan, the spec nor its cluster names one
FALLBACK_STORAGE = "tectonic-llama3"


def count_tasks(req: PlanRequest) -> tuple[list[CountTask], list[str]]:
    """One task per (cluster, GPU count), and the notes on counts left out and on the storage
    assumed where nothing names one."""
    tasks, notes = [], []
    if req.storage_assumed:
        notes.append(f"no storage named by the plan, the spec or its cluster: checkpoints are sized on "
                     f"{FALLBACK_STORAGE} (Meta's Tectonic, 7,500 servers, shared with other jobs); give "
                     "plan.storage or --storage to plan on yours")
    for cluster in req.clusters:
        counts, skipped = gpu_counts(req, cluster)
        notes += skipped
        for n in counts:
            tokens = batch_tokens(req, n)
            job = req.spec.job.model_copy(update={"gpus": n, "global_batch": tokens // req.spec.job.layout.seq_len,
                                                  "global_batch_tokens": None})
            spec = req.spec.model_copy(update={"cluster": cluster, "job": job, "plan": None})
            tasks.append(CountTask(spec=spec, base=req.spec, cluster_name=cluster.name, gpus=n, tokens=req.tokens,
                                   storage_preset=req.storage_preset, storage_servers=req.storage_servers,
                                   usd_per_gpu_hour=gpu_price(req, cluster), usd_per_tb_month=req.usd_per_tb_month,
                                   storage_pricing=req.storage_pricing,
                                   top_layouts=req.top_layouts, runs=req.runs, seed=req.seed, space=req.space))
    if not tasks:
        raise SpecError("gpus", ",".join(map(str, req.gpus or ())) or None,
                        "no GPU count fits any candidate cluster: " + "; ".join(notes))
    return tasks, notes

