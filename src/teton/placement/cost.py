"""A cheap step-time model for placement comparisons and the cluster scheduler.

Simulating a full step of every job of a 10,000-job trace is far too slow, so the scheduler
prices a placement with this model, built on the same network cost model the step simulator uses
(``AnalyticalCostModel(cluster).collective_time`` or the flow model when ``fidelity='flow'``):

    step_s = compute_s * (1 + bubble) + C_tp + C_cp + C_pp + C_ep + max(0, C_dp - window_s)

compute_s: model FLOPs of one rank for the step (6 N_matmul tokens, plus causal attention
  6 b s^2 q_width per layer; Kaplan et al. 2020 / Narayanan et al. 2021 eq. 3 without
  recompute) at the GPU's dense bf16 peak times its maximum achievable matmul efficiency
  (``hardware.efficiency`` MAMF: an optimistic compute time, so communication weighs at least as
  much as in a real step).
bubble: (pp - 1) / (v m) (Narayanan et al. 2021, interleaved schedule).
C_tp: sequence parallelism (Korthikanti et al. 2022): per layer and micro-batch 2 all-gathers
  and 2 reduce-scatters of the b s h activation forward, the same backward (without it, 2
  all-reduces each way); an MoE layer without shared experts half of that under SP (its router
  takes the sequence shard: ``workload.moe``).
C_cp: all-gather of K and V forward, reduce-scatter of their gradients backward (Llama 3 CP).
C_pp: one activation send forward and one gradient send backward per micro-batch and virtual
  stage (b s h / tp with the scatter-gather optimisation).
C_ep: dispatch and combine all-to-alls forward and backward per MoE layer (each rank's tokens / tp
  x top_k copies: ``workload.moe``, balanced), and with expert TP (etp > 1) an all-gather and a
  reduce-scatter of its group's copies each way.
C_dp: ZeRO-1: reduce-scatter of fp32 gradients and all-gather of bf16 parameters, once a step,
  overlapped with the backward pass of the last micro-batch (``window_s``), the rest exposed.
TP/CP/PP/EP collectives are taken as exposed (on the critical path).

The *slowdown* of a placement is ``step_s(placement) / step_s(ideal)``, with the ideal the
topology-aware placement on an empty cluster. It depends on the placement only through
``collective_time``, which (for the analytical model) depends only on which ranks share a host
and a domain of each fabric layer: ``structure_key`` captures exactly that, so results are
cached per (job shape, structure) and identical structures are priced once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from teton.errors import SpecError, closest
from teton.hardware import cluster_efficiency
from teton.memo import cached
from teton.network.cost_model import cost_model
from teton.placement.mapping import Placement, place
from teton.spec.cluster import ClusterSpec
from teton.spec.job import JobSpec
from teton.spec.layout import Layout
from teton.spec.model import MODEL_PRESETS, ModelSpec
from teton.spec.model_flops import model_flops_per_token, plain_attention
from teton.units import BF16_BYTES, FP32_BYTES

AXES_PRICED = ("tp", "cp", "pp", "ep", "dp")


@dataclass(frozen=True)
class JobShape:
    """What the cheap model needs to know about a job: its model's name and its parallel layout
    (``teton.spec.layout``: degrees, axis order, batch, sequence parallelism; nothing of its own)."""

    model: str
    layout: Layout

    @property
    def gpus(self) -> int:
        return self.layout.gpus


# A trace gives no batch: micro-batches per DP rank enough to keep a pipeline of pp stages busy
# (the 1F1B bubble (pp - 1) / m under a quarter, and at least 8)
TRACE_MICRO_BATCHES_PER_STAGE, TRACE_MICRO_BATCHES_MIN = 2, 8


@cached(4096)
def trace_job_shape(model: str, gpus: int, tp: int = 1, pp: int = 1) -> JobShape:
    """The shape of a trace job, which names at most its model, GPUs, tp and pp: a ``JobSpec``'s
    layout with the job defaults for everything else (sequence, micro-batch, sequence
    parallelism, axis order) and ``max(2 pp, 8)`` micro-batches per DP rank."""
    lay = JobSpec(gpus=gpus, tp=tp, pp=pp).layout
    m = max(TRACE_MICRO_BATCHES_PER_STAGE * lay.pp, TRACE_MICRO_BATCHES_MIN)
    return JobShape(model=model, layout=replace(lay, sequences_per_step=lay.dp * lay.micro_batch * m))


def default_layout(model: str, gpus: int, gpus_per_host: int = 8) -> JobShape:
    """A plausible layout for a trace job that names none: TP inside one host, PP for the large
    models (Llama 3 used pp 16 for 405B, 4 or 8 for 70B), DP over the rest."""
    tp = math.gcd(gpus, gpus_per_host)
    pp = 1
    spec = get_model(model)
    params = spec.total_params()
    want_pp = 16 if params > 2e11 else 4 if params > 3e10 else 1
    while want_pp > 1 and (gpus % (tp * want_pp) or spec.layers < want_pp):
        want_pp //= 2
    pp = want_pp
    return trace_job_shape(model, gpus, tp, pp)


@cached(64)
def get_model(name: str) -> ModelSpec:
    if name not in MODEL_PRESETS:
        raise SpecError("model", name, closest(name, MODEL_PRESETS))
    return ModelSpec(**MODEL_PRESETS[name])


def structure_key(cluster: ClusterSpec, gpu_of_rank: np.ndarray) -> bytes:
    """Which ranks share a host, and a domain of each fabric layer: relabelled so that two
    placements with the same sharing pattern get the same key (all the analytical model sees)."""
    levels = sorted({cluster.gpus_per_host, cluster.domain_gpus}) + [layer.span_gpus for layer in cluster.layers]
    parts = []
    for span in levels:
        _, inv = np.unique(gpu_of_rank // span, return_inverse=True)
        parts.append(inv.astype(np.int32))
    return np.concatenate(parts).tobytes()


@dataclass(frozen=True)
class StepEstimate:
    step_s: float
    compute_s: float
    bubble_s: float
    comm_s: dict[str, float]  # seconds per step by axis (before overlap)
    exposed_s: dict[str, float]  # seconds on the critical path by axis


def step_estimate(cluster: ClusterSpec, shape: JobShape, placement: Placement, cost_model) -> StepEstimate:
    """The cheap step-time model of the module docstring for one placement."""
    model, lay = get_model(shape.model), shape.layout
    gpu = cluster.gpu_spec
    e = cluster_efficiency(gpu, cluster.efficiency)
    b, s, h = lay.micro_batch, lay.seq_len, model.hidden
    layers_stage = math.ceil(model.layers / lay.pp)
    m, v = lay.micro_batches, lay.virtual_stages
    attention = 6 * b * s * s * model.q_width * model.layers  # causal: half PaLM's 12 L s q_width per token
    if not plain_attention(model):  # half of the other mixers' FLOPs
        attention = b * s * (model_flops_per_token(model, s) - 6.0 * model.matmul_params()) / 2
    flops_mb = (6 * model.matmul_params() * b * s + attention) / (
        lay.tp * lay.pp * lay.cp)
    compute_mb = flops_mb / (gpu.peak_flops("bf16") * e.gemm_mamf["bf16"])
    compute_s = m * compute_mb
    bubble_s = compute_s * (lay.pp - 1) / (v * m)
    ct = cost_model.collective_time
    comm = dict.fromkeys(AXES_PRICED, 0.0)
    act = b * s * h * BF16_BYTES / lay.cp
    # an MoE layer without shared experts runs no TP collectives around its MLP (workload.moe)
    moe_stage = (math.ceil(sum(n for k, n in model.layer_type_counts().items() if k.ffn == "moe") / lay.pp)
                 if model.experts > 1 else 0)
    tp_pairs = 4 * layers_stage - (2 * moe_stage if lay.sequence_parallel and not model.shared_experts else 0)
    if lay.tp > 1:  # sequence parallelism: 2 all-gathers and 2 reduce-scatters, else 2 all-reduces, each way
        g = placement.groups("tp")
        comm["tp"] = m * tp_pairs * ((ct("all_gather", g, act) + ct("reduce_scatter", g, act))
                                     if lay.sequence_parallel else ct("all_reduce", g, act))
    if lay.cp > 1:
        g = placement.groups("cp")
        kv = 2 * b * s * model.kv_width * BF16_BYTES / lay.tp
        comm["cp"] = m * layers_stage * (ct("all_gather", g, kv) + ct("reduce_scatter", g, kv))
    if lay.pp > 1:
        pairs = placement.pp_neighbours()
        comm["pp"] = m * v * 2 * ct("send_recv", pairs, act / lay.tp)
    if model.experts > 1:
        copies = act * model.top_k / lay.tp  # this rank's routed copies (its SP shard's tokens x top_k)
        if lay.ep > 1:
            comm["ep"] = m * moe_stage * 4 * ct("all_to_all", placement.groups("ep"), copies)
        if lay.etp > 1:
            g = placement.groups("tp" if lay.etp == lay.tp else "etp")  # as workload.moe.expert_tp_axis
            comm["ep"] += m * moe_stage * 2 * (ct("all_gather", g, lay.etp * copies)
                                               + ct("reduce_scatter", g, lay.etp * copies))
    if lay.dp > 1:
        g = placement.groups("dp")
        per_rank = model.total_params() / (lay.tp * lay.pp)
        comm["dp"] = ct("reduce_scatter", g, per_rank * FP32_BYTES) + ct("all_gather", g, per_rank * BF16_BYTES)
    window_s = compute_mb * 2 / 3  # backward of the last micro-batch
    exposed = dict(comm)
    exposed["dp"] = max(0.0, comm["dp"] - window_s)
    step_s = compute_s + bubble_s + sum(exposed.values())
    return StepEstimate(step_s, compute_s, bubble_s, comm, exposed)


class SlowdownModel:
    """Slowdown of a job on a placement vs its ideal placement, cached per (shape, structure)."""

    def __init__(self, cluster: ClusterSpec, fidelity: str = "analytical"):
        self.cluster = cluster
        self.cost_model = cost_model(cluster, fidelity)
        self._ideal: dict[JobShape, StepEstimate] = {}
        self._cache: dict[tuple[JobShape, bytes], StepEstimate] = {}
        self.hits = 0
        self.misses = 0

    def placement_of(self, shape: JobShape, gpus: np.ndarray) -> Placement:
        return Placement(gpu_of_rank=np.asarray(gpus, dtype=np.int64), degrees=shape.layout.degrees,
                         order=shape.layout.order)

    def estimate(self, shape: JobShape, gpus: np.ndarray) -> StepEstimate:
        if shape.gpus == 1:
            key = (shape, b"")
        else:
            key = (shape, structure_key(self.cluster, np.asarray(gpus)))
        hit = self._cache.get(key)
        if hit is None:
            self.misses += 1
            hit = self._cache[key] = step_estimate(self.cluster, shape, self.placement_of(shape, gpus),
                                                   self.cost_model)
        else:
            self.hits += 1
        return hit

    def ideal(self, shape: JobShape) -> StepEstimate:
        if shape not in self._ideal:
            p = place(self.cluster, shape.layout.degrees, shape.layout.order, "topology-aware")
            self._ideal[shape] = self.estimate(shape, p.gpu_of_rank)
        return self._ideal[shape]

    def slowdown(self, shape: JobShape, gpus: np.ndarray) -> float:
        return self.estimate(shape, gpus).step_s / self.ideal(shape).step_s
