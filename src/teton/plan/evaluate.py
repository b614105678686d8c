"""One cluster at one GPU count: the best layouts, then the whole run on each storage size.

:func:`evaluate_count` is what an executor runs (a top-level function of picklable input). It uses
the very functions ``teton search`` and ``teton goodput`` use, with the same arguments, so a plan's
row is what those verbs print for it by hand (its ``reproduce`` entry gives the ``--set``\\ s):

* layouts: :func:`teton.sweep.search.search_layouts` on the job at this count and batch, keeping
  the ``top_layouts`` fastest that fit in memory;
* the run: :func:`teton.reliability.goodput` (the failure Monte Carlo, seeded) on the fastest, for
  each storage size: time to train, checkpoint interval, ETTR, GPU-hours, energy (with PUE), cost.

Time to train, p10 / p50 / p90, combines the Monte Carlo with the step-time band of the fidelity
work (``step_time_s_low`` .. ``step_time_s_high``, a p10-p90 interval of held-out errors): each
run's time is scaled by a step-time factor drawn from the log-normal whose 10th and 90th
percentiles are the band's ends (seeded), so a fifth of the draws fall outside the band, as a fifth
of real runs do. Wall time is taken as
proportional to the step time, a first-order approximation (failures per hour do not change).
Where the prediction has no band (burst mode), the spread is the failures' only, and the row says so.

Cost, split into GPUs, storage, energy and network: goodput's cost (GPU-hours x price per
GPU-hour, or capex and energy; :func:`teton.reliability.energy.cost_split_usd`) plus the storage the
run uses (:mod:`teton.storage.usage`): the servers it occupies on a shared system (``share``) or
every server of a system dedicated to it (``dedicated``), each at its usable TB x
``usd_per_tb_month``, for the run's mean length. Its p10 / p90 follow the days'.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from teton.engine.band import Z_90
from teton.plan.candidates import CountTask
from teton.spec.layout import dp_of

DAYS_PER_MONTH = 365.25 / 12
GOODPUT_KEYS = ("time_to_train_days", "time_to_train_percentiles", "gpu_hours", "ideal_gpu_hours", "energy_mwh",
                "cost_usd", "ettr", "goodput", "checkpoint_interval_s", "checkpoint_interval_source",
                "checkpoint_save_s", "checkpoint_blocking_s", "unexpected_interruptions", "mtbi_h",
                "spare_hosts", "lost_gpu_hours_by_kind", "power_train_mw", "warnings")
LAYOUT_KEYS = ("tp", "cp", "pp", "dp", "ep", "virtual_stages", "pp_schedule", "pp_split", "micro_batch", "recompute",
               "zero", "grad_reduce")
MOE_LAYOUT_KEYS = ("etp", "parallel_order")  # an MoE layout's expert TP and rank order (search rows of MoE models)


def step_factors(step_s: float, low_s: float, high_s: float, n: int, seed: int) -> np.ndarray:
    """``n`` draws (seeded) of real step time / predicted for a prediction ``step_s`` with the band
    ``low_s`` .. ``high_s``: a log-normal whose 10th and 90th percentiles are the band's ends (the
    band is a p10-p90 interval, so a fifth of the draws fall outside it)."""
    lo, hi = np.log(low_s / step_s), np.log(high_s / step_s)
    return np.exp(np.random.default_rng(seed).normal((lo + hi) / 2, (hi - lo) / (2 * Z_90), n))


def best_layouts(task: CountTask) -> tuple[int, int, list]:
    """``teton search`` on the task's job, layouts that fit only: (valid layouts, fitting layouts
    ranked (those a faster variant of the same degrees dominates left out),
    the ``top_layouts`` fastest as :class:`teton.sweep.search.RankedLayout`: spec and step)."""
    from teton.sweep.search import rank_layouts

    evaluated, ranked, _ = rank_layouts(task.spec, task.space, fitting_only=True)
    fitting = [c for c in ranked if c.result.fits_in_memory]
    return evaluated, len(fitting), fitting[:task.top_layouts]


def overrides(base, spec, storage: dict[str, Any], price: float) -> list[str]:
    """``--set`` items that turn the user's spec file (``base``) into this plan's ``spec``."""
    out = []
    if spec.cluster != base.cluster:
        from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec

        name = spec.cluster.name
        if name in CLUSTER_PRESETS and ClusterSpec(**CLUSTER_PRESETS[name]) == spec.cluster:
            out.append(f"cluster={name}")
        else:
            out.append("cluster=" + json.dumps(spec.cluster.model_dump(mode="json", exclude_defaults=True)))
    a, b = base.job.model_dump(mode="json"), spec.job.model_dump(mode="json")
    out += [f"job.{k}={json.dumps(v) if isinstance(v, (list, dict)) else _scalar(v)}"
            for k, v in b.items() if a.get(k) != v]
    out += [f"storage.{k}={v}" for k, v in storage.items() if (base.storage.given(k) if base.storage else None) != v]
    rel = base.reliability
    if (rel.usd_per_gpu_hour if rel is not None and "usd_per_gpu_hour" in rel.model_fields_set else None) != price:
        out.append(f"reliability.usd_per_gpu_hour={price!r}")
    return out


def _scalar(v: Any) -> str:
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _layout_of(row: dict[str, Any]) -> dict[str, Any]:
    """A search row's layout: its degrees and choices, and an MoE layout's etp and rank order."""
    return {k: row[k] for k in (*LAYOUT_KEYS, *MOE_LAYOUT_KEYS) if k in row}


def search_by_hand(task: CountTask) -> dict[str, Any] | None:
    """What ``teton search`` needs to print this task's layouts: ``set``, the overrides that put the
    user's spec at this GPU count and batch (its own layout, with dp scaled; None where that layout
    does not divide the count), and ``space``, the plan's layout space where it is not the search's
    default (parameter -> comma-separated degrees; the CLI writes them as the search's flags)."""
    from teton.sweep.search import SearchSpace

    base, job = task.base.job, task.spec.job
    dp = dp_of(task.gpus, base.layout.model_parallel)
    if dp is None:
        return None
    sets = [f"job.gpus={task.gpus}", f"job.dp={dp}", f"job.global_batch={job.global_batch}"]
    if base.global_batch_tokens:
        sets.append("job.global_batch_tokens=null")
    default, space = SearchSpace(), {}
    for name in ("tp", "cp", "pp", "virtual_stages", "ep", "etp"):
        value = getattr(task.space, name)
        if value != getattr(default, name):
            space[name] = ",".join(map(str, value))
    return {"set": sets, "space": space}


def _goodput(task: CountTask, spec, section, step) -> tuple[Any, Any, Any]:
    """(``teton goodput`` of ``spec`` on storage ``section``, the run spec, its reliability section)."""
    from teton.engine.step import simulate_step
    from teton.reliability import goodput
    from teton.spec.reliability import parse_reliability

    rel = parse_reliability(task.spec.reliability, {"usd_per_gpu_hour": task.usd_per_gpu_hour})
    run_spec = spec.model_copy(update={"storage": section, "reliability": rel})
    run = goodput(run_spec, rel, tokens=task.tokens, runs=task.runs, seed=task.seed, samples=True,
                  simulate=simulate_step)
    return run, run_spec, rel


def _use(task: CountTask, run, run_spec, system):
    """The run's :class:`teton.storage.usage.StorageUse` of ``system``: its checkpoints kept, its
    training data (the plan's tokens, one epoch), the checkpoint interval and the data loader."""
    from teton.reliability.goodput import data_loading_bytes_s
    from teton.storage.usage import storage_use

    storage = run_spec.storage
    tokens_per_s = run.run.tokens_per_step / run.run.effective_step_time_s
    return storage_use(system, run.run.hosts, run.interval.checkpoint_bytes, storage.checkpoint.keep,
                       run.checkpoint.checkpoint_interval_s, task.tokens * storage.data_loading.bytes_per_token,
                       data_loading_bytes_s(run_spec, tokens_per_s))


def _dedicated(section, servers: int, interval_s: float | None = None):
    """``section`` on a system of ``servers`` servers that serves this run alone, its checkpoint
    interval pinned to ``interval_s`` where given."""
    out = section.on(section.preset, servers=servers, other_jobs_share=0.0)
    if interval_s is not None:
        out = out.model_copy(update={"checkpoint": out.checkpoint.model_copy(update={"interval_s": interval_s})})
    return out


def run_on_storage(task: CountTask, spec, servers: int | None, step) -> dict[str, Any]:
    """``teton goodput`` of the plan's spec on its storage, and the plan's figures.

    Storage is sized to the run (:mod:`teton.storage.usage`): ``share`` pricing runs it on the
    shared system (``servers``, default the preset's) and charges the servers it uses;
    ``dedicated`` gives it a system of its own, of ``servers`` servers, or, by default, of the
    fewest that hold its checkpoints and data and sustain the interval it takes on the shared
    system (then pinned), and charges every server. ``storage_fits``: the system holds the run's
    checkpoints and data (a plan that does not is dropped)."""
    from teton.reliability.energy import cost_split_usd
    from teton.spec.storage import StorageSection

    preset = task.storage_preset
    shared = (task.spec.storage or StorageSection()).on(preset, **({"servers": servers} if servers else {}))
    if task.storage_pricing == "dedicated":
        if servers is None:  # sized to the run: its use of the shared system, in whole servers
            run, run_spec, _ = _goodput(task, spec, shared, step)
            use = _use(task, run, run_spec, shared.system())
            section = _dedicated(shared, use.dedicated_servers, run.checkpoint.checkpoint_interval_s)
        else:
            section = _dedicated(shared, servers)
    else:
        section = shared
    run, run_spec, rel = _goodput(task, spec, section, step)
    system = section.system()
    use = _use(task, run, run_spec, system)
    days = np.asarray(run.time_to_train_samples_days, dtype=float)
    band = step.step_time_s_low is not None and step.step_time_s_high is not None
    stretch = 1.0  # the band's mean factor on the run's time: GPU-hours, energy and cost scale with it
    if band:
        banded = days * step_factors(step.step_time_s, step.step_time_s_low, step.step_time_s_high, days.size, task.seed)
        stretch, days = float(np.mean(banded) / np.mean(days)), banded
    p10, p50, p90 = (float(x) for x in np.percentile(days, [10, 50, 90]))
    usable_tb = system.usable_capacity_bytes(run.run.hosts) / 1e12
    charged = use.servers_used if task.storage_pricing == "share" else (0.0 if system.kind == "local" else system.servers)
    tb_month = usable_tb / use.servers * task.usd_per_tb_month  # one server's usable TB, a month
    months = float(np.mean(days)) / DAYS_PER_MONTH
    gpu_hours, energy_mwh = run.time.gpu_hours * stretch, run.energy.energy_mwh * stretch
    run_cost = cost_split_usd(rel, gpu_hours, energy_mwh)
    split = {"gpus": run_cost["gpus"], "storage": charged * tb_month * months, "energy": run_cost["energy"],
             "network": run_cost["network"]}
    cost = sum(split.values())
    spread = np.percentile(days, [10, 90]) / float(np.mean(days)) * cost
    figures = run.to_dict()
    storage = {"preset": preset, "servers": system.servers}
    if task.storage_pricing == "dedicated":
        storage |= {"other_jobs_share": 0.0, "checkpoint.interval_s": section.checkpoint.interval_s}
    return {
        "storage_preset": preset, "storage_servers": system.servers, "storage_usable_tb": usable_tb,
        "storage_pricing": task.storage_pricing, "storage_request": servers, "storage_servers_charged": charged,
        "storage_use": use.to_dict(), "storage_fits": use.capacity_share <= 1.0,
        "days_p10": p10, "days_p50": p50, "days_p90": p90,
        "days_spread": "failures and the step-time band" if band else "failures only (no step-time band)",
        "gpu_hours": gpu_hours, "energy_mwh": energy_mwh, "step_band_stretch": stretch,
        # gpu_cost_usd: what goodput charges (GPUs, energy, network), the key plans had before the split
        "gpu_cost_usd": split["gpus"] + split["energy"] + split["network"], "storage_cost_usd": split["storage"],
        "cost_usd": cost, "cost_split_usd": split, "cost_p10_usd": float(spread[0]), "cost_p90_usd": float(spread[1]),
        "ettr": run.time.ettr, "checkpoint_interval_s": run.checkpoint.checkpoint_interval_s,
        "checkpoint_interval_source": run.checkpoint.checkpoint_interval_source,
        "goodput": {k: figures[k] for k in GOODPUT_KEYS if k in figures},
        "reproduce": {"set": overrides(task.base, run_spec, {k: v for k, v in storage.items() if v is not None},
                                       task.usd_per_gpu_hour),
                      "tokens": task.tokens, "runs": task.runs, "seed": task.seed},
    }


def evaluate_count(task: CountTask) -> dict[str, Any]:
    """The layouts and the runs of one (cluster, GPU count) task, as JSON-ready rows."""
    evaluated, fitting, ranked = best_layouts(task)
    rows = [c.row() for c in ranked]
    job = task.spec.job
    head = {"cluster": task.cluster_name, "gpu": task.spec.cluster.gpu_spec.name, "gpus": task.gpus,
            "batch_tokens": job.layout.tokens_per_step, "batch_sequences": job.layout.sequences_per_step,
            "usd_per_gpu_hour": task.usd_per_gpu_hour, "layouts_evaluated": evaluated,
            "reproduce_search": search_by_hand(task),
            "layouts_fitting": fitting,
            "layouts": [{**_layout_of(r), "step_time_s": r["step_time_s"], "mfu": r["mfu_bf16"],
                         "memory_per_gpu_bytes": r["memory_per_gpu_bytes"]} for r in rows]}
    if not ranked:
        return {**head, "plans": [], "reason": "memory: no layout fits in memory" if evaluated
                else "layout: no layout passes the job rules at this count and batch"}
    best, spec, step = rows[0], ranked[0].spec, ranked[0].result  # the fastest, as the search simulated it
    bd = step.breakdown
    comm = {k: v for k, v in bd.items() if k.endswith("_comm")}
    layout = {"layout": _layout_of(best), "micro_batches": spec.job.layout.micro_batches,
              "step_time_s": step.step_time_s, "step_time_s_low": step.step_time_s_low,
              "step_time_s_high": step.step_time_s_high, "mfu": step.mfu_bf16, "tokens_per_s": step.tokens_per_s,
              "memory_per_gpu_bytes": step.memory_per_gpu_bytes,
              "bubble_fraction": bd.get("pipeline_bubble", 0.0) / step.step_time_s,
              "comm_fraction": sum(comm.values()) / step.step_time_s,
              "top_comm": max(comm, key=comm.get) if comm else None, "breakdown": bd,
              "fabric": [{"layer": lay.name, "span_gpus": lay.span_gpus, "domains": -(-task.gpus // lay.span_gpus),
                          "oversubscription": lay.oversubscription} for lay in task.spec.cluster.layers]}
    plans = [{**head, **layout, **run_on_storage(task, spec, n, step)} for n in (task.storage_servers or (None,))]
    if not all(p["storage_fits"] for p in plans):
        small = [p["storage_servers"] for p in plans if not p["storage_fits"]]
        plans = [p for p in plans if p["storage_fits"]]
        if not plans:
            return {**head, "plans": [], "reason": f"storage: {', '.join(map(str, small))} servers cannot hold the "
                                                   "run's checkpoints and training data"}
    for p in plans:
        p.pop("layouts")
    return {**head, "plans": plans}
