"""``teton plan``: how many GPUs, which layout, how much storage, how long and at what cost, to
train a model on N tokens.

:func:`make_plan` resolves the question (:mod:`teton.plan.candidates`), runs one task per
(cluster, GPU count) through a sweep executor (:mod:`teton.plan.evaluate`: the layout search, then
the failure Monte Carlo on each storage size) and answers it (:mod:`teton.plan.answer`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from teton.errors import SpecError
from teton.plan.answer import pareto_front, recommend, unplanned_counts, why
from teton.plan.candidates import PlanRequest, count_tasks, plan_request
from teton.plan.evaluate import evaluate_count

__all__ = ["PlanRequest", "make_plan", "plan_request", "evaluate_count", "pareto_front"]


def run_tasks(tasks: list, executor: str, workers: int | None,
              progress: Callable[[int, int], None] | None = None,
              evaluate: Callable[[Any], dict[str, Any]] = evaluate_count) -> list[dict[str, Any]]:
    """``evaluate`` (:func:`evaluate_count`) of every task, in task order, on a sweep executor; a
    worker that dies (killed, out of memory) is a one-line error."""
    from concurrent.futures import BrokenExecutor, as_completed

    from teton.sweep.run import check_executor, make_executor, worker_died

    check_executor(executor, workers)  # also where one task would run in-process anyway
    if executor == "serial" or len(tasks) == 1:
        out = []
        for i, t in enumerate(tasks):
            out.append(evaluate(t))
            if progress:
                progress(i + 1, len(tasks))
        return out
    results: dict[int, dict[str, Any]] = {}
    ex = make_executor(executor, min(workers or len(tasks), len(tasks)) if executor == "local" else workers)
    try:
        futures = {ex.submit(evaluate, t): i for i, t in enumerate(tasks)}
        for f in as_completed(futures):
            try:
                results[futures[f]] = f.result()
            except BrokenExecutor as err:
                raise worker_died(executor, err, f"{len(results)} of {len(tasks)} GPU counts were evaluated, "
                                  "none kept: run the same command again") from None
            if progress:
                progress(len(results), len(tasks))
    except BaseException:  # Ctrl-C or a failed task: don't wait for the rest
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    # all done: wait for the pool to wind down (left running, its exit hook can print a traceback
    # at interpreter exit)
    ex.shutdown(wait=True)
    return [results[i] for i in range(len(tasks))]


def batch_advice(batch_tokens: int, seq_len: int) -> str:
    """Why a token batch fits no layout, and the power-of-two batch nearest to it (data parallelism,
    micro-batches and an interleaved pipeline's rounds all divide the sequences of a step)."""
    from teton.units import format_count

    seqs = max(1, batch_tokens // seq_len)
    near = 2 ** max(0, round(math.log2(seqs)))
    return (f"{seqs:,} sequences of {seq_len:,} tokens: no layout at any GPU count divides them; a power of two "
            f"such as {near:,} sequences ({format_count(near * seq_len)} tokens) divides most")


def make_plan(req: PlanRequest, executor: str = "local", workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """The whole plan: every candidate's rows, the Pareto front, the chosen plan and why."""
    tasks, notes = count_tasks(req)
    counts = run_tasks(tasks, executor, workers, progress)
    plans = [p for c in counts for p in c["plans"]]
    if not plans:  # say why, count by count: memory, or a batch no layout divides
        clusters = dict.fromkeys(c["cluster"] for c in counts)
        reasons = "; ".join(r for cluster in clusters for r in unplanned_counts(counts, cluster))
        if req.global_batch not in ("fixed", "per_gpu") and all(c["reason"].startswith("layout") for c in counts):
            raise SpecError("global_batch", req.global_batch, batch_advice(int(req.global_batch),
                                                                          req.spec.job.layout.seq_len) + f" ({reasons})")
        raise SpecError("gpus", ",".join(map(str, sorted({c["gpus"] for c in counts}))),
                        "no candidate has a plan: " + reasons)
    chosen, rule = recommend(plans, req.deadline_days, req.budget_usd, req.prefer)
    front = pareto_front(plans)
    for i, p in enumerate(plans):
        p["id"] = i
        p["on_front"] = any(p is f for f in front)
        p["chosen"] = p is chosen
    return {
        "model": req.spec.model.name, "tokens": req.tokens, "seq_len": req.spec.job.layout.seq_len,
        "global_batch_rule": req.global_batch, "deadline_days": req.deadline_days, "budget_usd": req.budget_usd,
        "runs": req.runs, "seed": req.seed, "storage_preset": req.storage_preset,
        "storage_pricing": req.storage_pricing, "prefer": req.prefer,
        "counts": [{k: v for k, v in c.items() if k != "plans"} for c in counts],
        "plans": plans, "front": [p["id"] for p in front], "chosen": chosen["id"], "rule": rule,
        "why": why(chosen, rule, plans, counts, req.deadline_days, req.budget_usd) + own_layout_text(req, chosen),
        "notes": notes,
    }


def own_layout_text(req: PlanRequest, chosen: dict[str, Any]) -> str:
    """How the chosen layout compares with the spec's own, where the plan chose the spec's cluster,
    GPU count and batch (the layout the user brought): a sentence, else ""."""
    from teton.engine.step import simulate_step

    job = req.spec.job
    if (chosen["cluster"], chosen["gpus"], chosen["batch_tokens"]) != (req.spec.cluster.name, job.gpus,
                                                                      job.layout.tokens_per_step):
        return ""
    own = simulate_step(req.spec)
    lay = job.layout
    text = (f" Layout: the fastest of {chosen['layouts_evaluated']:,} searched that fits ({chosen['step_time_s']:.3f} s "
            f"a step); the spec's own (tp{lay.tp} cp{lay.cp} pp{lay.pp} dp{lay.dp}"
            + (f" ep{lay.ep}" if lay.ep > 1 else "") + f") steps in {own.step_time_s:.3f} s "
            f"({own.step_time_s / chosen['step_time_s'] - 1:+.1%})")
    return text + ("" if own.fits_in_memory else ", and does not fit in memory") + "."
