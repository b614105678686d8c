"""One cluster at one GPU count: the best layouts, then the whole run on each storage size.

:func:`evaluate_count` is what an executor runs (a top-level function of picklable input). It uses
the very functions ``teton search`` and ``teton goodput`` use, with the same arguments, so a plan's
row is what those verbs print for it by hand (its ``reproduce`` entry gives the ``--set``\\ s):

* layouts: :func:`teton.sweep.search.search_layouts` on the job at this count and batch, keeping
  the ``top_layouts`` fastest that fit in memory;
* the run: :func:`teton.reliability.goodput` (the failure Monte Carlo, seeded) on the fastest, for
  each storage size: time to train, checkpoint interval, ETTR, GPU-hours, energy (with PUE), cost.

Time to train, p10 / p50 / p90, combines the Monte Carlo with the step-time band of the fidelity
work (``step_time_s_low`` .. ``step_time_s_high``, the whole-set leave-one-out range): each run's
time is scaled by a step-time factor drawn uniformly from the band (seeded). Wall time is taken as
proportional to the step time, a first-order approximation (failures per hour do not change).
Where the prediction has no band (burst mode), the spread is the failures' only, and the row says so.

Cost = GPU-hours x price per GPU-hour (goodput's ``cost_usd``) + storage held for the run:
usable TB x ``usd_per_tb_month`` x months.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from teton.plan.candidates import CountTask
from teton.spec.layout import dp_of

DAYS_PER_MONTH = 365.25 / 12
GOODPUT_KEYS = ("time_to_train_days", "time_to_train_percentiles", "gpu_hours", "ideal_gpu_hours", "energy_mwh",
                "cost_usd", "ettr", "goodput", "checkpoint_interval_s", "checkpoint_interval_source",
                "checkpoint_save_s", "checkpoint_blocking_s", "unexpected_interruptions", "mtbi_h",
                "spare_hosts", "lost_gpu_hours_by_kind", "power_train_mw", "warnings")
LAYOUT_KEYS = ("tp", "cp", "pp", "dp", "ep", "virtual_stages", "micro_batch", "recompute", "zero", "grad_reduce")


def best_layouts(task: CountTask) -> tuple[int, int, list]:
    """``teton search`` on the task's job, layouts that fit only: (valid layouts, fitting layouts,
    the ``top_layouts`` fastest as :class:`teton.sweep.search.RankedLayout`: spec and step)."""
    from teton.sweep.search import rank_layouts

    evaluated, ranked = rank_layouts(task.spec, task.space, fitting_only=True)
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
    for name in ("tp", "cp", "pp", "virtual_stages", "ep"):
        value = getattr(task.space, name)
        if value != getattr(default, name):
            space[name] = ",".join(map(str, value))
    return {"set": sets, "space": space}


def run_on_storage(task: CountTask, spec, servers: int, step) -> dict[str, Any]:
    """``teton goodput`` of the plan's spec on ``servers`` storage servers, and the plan's figures."""
    from teton.engine.step import simulate_step
    from teton.reliability import goodput
    from teton.spec.reliability import parse_reliability
    from teton.spec.storage import StorageSection

    storage = {"preset": task.storage_preset, "servers": servers}  # what the plan sets over the spec's section
    section = (task.spec.storage or StorageSection()).on(task.storage_preset, servers=servers)
    rel = parse_reliability(task.spec.reliability, {"usd_per_gpu_hour": task.usd_per_gpu_hour})
    run_spec = spec.model_copy(update={"storage": section, "reliability": rel})
    run = goodput(run_spec, rel, tokens=task.tokens, runs=task.runs, seed=task.seed, samples=True,
                  simulate=simulate_step)
    days = np.asarray(run.time_to_train_samples_days, dtype=float)
    figures = run.to_dict()
    band = step.step_time_s_low is not None and step.step_time_s_high is not None
    if band:
        rng = np.random.default_rng(task.seed)
        days = days * rng.uniform(step.step_time_s_low, step.step_time_s_high, days.size) / step.step_time_s
    p10, p50, p90 = (float(x) for x in np.percentile(days, [10, 50, 90]))
    usable_tb = section.system().usable_capacity_bytes() / 1e12
    storage_usd = usable_tb * task.usd_per_tb_month * float(np.mean(days)) / DAYS_PER_MONTH
    return {
        "storage_preset": task.storage_preset, "storage_servers": servers, "storage_usable_tb": usable_tb,
        "days_p10": p10, "days_p50": p50, "days_p90": p90,
        "days_spread": "failures and the step-time band" if band else "failures only (no step-time band)",
        "gpu_hours": run.time.gpu_hours, "energy_mwh": run.energy.energy_mwh, "gpu_cost_usd": run.energy.cost_usd,
        "storage_cost_usd": storage_usd, "cost_usd": run.energy.cost_usd + storage_usd,
        "ettr": run.time.ettr, "checkpoint_interval_s": run.checkpoint.checkpoint_interval_s,
        "checkpoint_interval_source": run.checkpoint.checkpoint_interval_source,
        "goodput": {k: figures[k] for k in GOODPUT_KEYS if k in figures},
        "reproduce": {"set": overrides(task.base, run_spec, storage, task.usd_per_gpu_hour),
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
            "layouts": [{**{k: r[k] for k in LAYOUT_KEYS}, "step_time_s": r["step_time_s"], "mfu": r["mfu_bf16"],
                         "memory_per_gpu_bytes": r["memory_per_gpu_bytes"]} for r in rows]}
    if not ranked:
        return {**head, "plans": [], "reason": "memory: no layout fits in memory" if evaluated
                else "layout: no layout passes the job rules at this count and batch"}
    best, spec, step = rows[0], ranked[0].spec, ranked[0].result  # the fastest, as the search simulated it
    bd = step.breakdown
    comm = {k: v for k, v in bd.items() if k.endswith("_comm")}
    layout = {"layout": {k: best[k] for k in LAYOUT_KEYS}, "micro_batches": spec.job.layout.micro_batches,
              "step_time_s": step.step_time_s, "step_time_s_low": step.step_time_s_low,
              "step_time_s_high": step.step_time_s_high, "mfu": step.mfu_bf16, "tokens_per_s": step.tokens_per_s,
              "memory_per_gpu_bytes": step.memory_per_gpu_bytes,
              "bubble_fraction": bd.get("pipeline_bubble", 0.0) / step.step_time_s,
              "comm_fraction": sum(comm.values()) / step.step_time_s,
              "top_comm": max(comm, key=comm.get) if comm else None, "breakdown": bd,
              "fabric": [{"layer": lay.name, "span_gpus": lay.span_gpus, "domains": -(-task.gpus // lay.span_gpus),
                          "oversubscription": lay.oversubscription} for lay in task.spec.cluster.layers]}
    plans = [{**head, **layout, **run_on_storage(task, spec, n, step)} for n in task.storage_servers]
    for p in plans:
        p.pop("layouts")
    return {**head, "plans": plans}
