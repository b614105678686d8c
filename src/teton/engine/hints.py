"""Warnings a step result carries: a layout choice whose cost the breakdown shows and a setting
that would take it back (``StepResult.warnings``, printed by ``teton run``)."""

from __future__ import annotations

from teton.spec.layout import hierarchical_cp_a2a
from teton.spec.schema import Spec

RING_CP_SHARE = 0.05  # exposed ring CP communication above this share of the step earns the hint


def step_warnings(spec: Spec, micro_batches: int, breakdown: dict[str, float], step_s: float) -> tuple[str, ...]:
    """:func:`pipeline_warnings` and :func:`ring_cp_warnings` of a step of ``step_s`` seconds."""
    job = spec.job
    return (*pipeline_warnings(job, micro_batches, breakdown["pipeline_bubble"] / step_s),
            *ring_cp_warnings(spec, breakdown["cp_comm"] / step_s))


def pipeline_warnings(job, micro_batches: int, bubble_fraction: float) -> tuple[str, ...]:
    """A warning when a pipelined job runs fewer micro-batches per DP rank than it has stages:
    the 1F1B bubble, (p - 1) / (v m) of the compute, then dominates the step. A spec without
    ``job.global_batch`` (or ``global_batch_tokens``) runs one micro-batch per DP rank."""
    lay = job.layout
    p, m = lay.pp, micro_batches
    if p <= 1 or m >= p:
        return ()
    unset = job.global_batch is None and job.global_batch_tokens is None
    why = (f" job.global_batch is not set, so it defaulted to dp x micro_batch = {lay.sequences_per_step} "
           "sequences (one micro-batch per DP rank);" if unset else "")
    return (f"only {m} micro-batch{'es' if m != 1 else ''} per DP rank on pp={p}: the pipeline bubble is "
            f"{bubble_fraction * 100:.0f} % of the step time.{why} set job.global_batch (or "
            f"job.global_batch_tokens) so that micro-batches per DP rank >= pp, e.g. "
            f"job.global_batch={lay.dp * lay.micro_batch * p}",)


def ring_cp_warnings(spec: Spec, cp_share: float) -> tuple[str, ...]:
    """A hint when ring CP leaves more than ``RING_CP_SHARE`` of the step exposed and hierarchical
    CP could keep its all-to-alls inside the NVLink domain (``spec.layout.hierarchical_cp_a2a``):
    a ring's hop between hosts runs over one GPU's NIC (``engine.block_timer``)."""
    job, model = spec.job, spec.model
    lay = job.layout
    if job.cp_algo != "ring" or lay.cp <= 1 or cp_share <= RING_CP_SHARE or model.sliding_window:
        return ()
    a2a = hierarchical_cp_a2a(model, lay.tp, lay.cp, spec.cluster.domain_gpus)
    if a2a is None:
        return ()
    return (f"ring CP leaves {cp_share * 100:.0f} % of the step exposed (a ring hop between hosts runs over "
            f"one NIC): job.cp_algo=a2a+p2p with job.cp_a2a={a2a} keeps the all-to-alls inside the NVLink "
            "domain and runs a ring across domains (teton search --cp-algo ring,a2a+p2p compares them)",)
