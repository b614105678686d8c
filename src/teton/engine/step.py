"""Simulate one training step: (StepWork, Placement, compute model, cost model) -> StepResult.

1. Per block (layer, embedding, head) and pass, the GPU's ops are timed by the compute model and
   its TP / CP collectives by the network cost model on the job's actual groups; within a block
   they run back to back, except the TP collectives ``job.tp_overlap`` runs alongside an
   independent GEMM (charged what the GEMM does not hide, SMs held by NCCL included); CPU
   activation offload's host copies are charged what the pass's compute does not hide
   (``cpu_offload``), and a pass the CPU launches kernel by kernel (``software.cuda_graphs``)
   pays the GPU's idle gap after each kernel, or its launches' CPU time where that is longer
   (``launch_overhead``; ``engine.block_timer``).
2. Chunk times (layers of a virtual stage - each kind of layer at its own block's time:
   ``selective_layer``'s checkpointed layers, an fp8 job's bf16 layers, CPU-offloaded layers,
   ``workload.layer_kinds`` - plus embedding / head) feed
   the pipeline schedule (``engine.pipeline_schedule``), with point-to-point transfer times on the
   dependency edges and the DP collectives (ZeRO stage semantics) on a separate stream, slowed
   where an expert all-to-all that leaves the NVLink domain holds the same NICs
   (``engine.nic_share``).
3. The schedule is run three times - ideal (no p2p, no DP), with p2p, with everything - so the
   idle time splits into the pipeline bubble, exposed PP and exposed DP communication.
   DP collectives that ran under compute held SMs from it (one CTA per NCCL channel): to first
   order the step grows by that SM fraction of the overlapped DP time (``sm_contention``).
4. Then the gradient sum of an embedding copy on the last stage (a tied head or multi-token
   prediction: ``engine.shared_embedding``, in ``dp_comm``) and the optimizer step (memory-bound
   Adam over this GPU's shard).

MFU: model FLOPs per step / (step time x GPUs x dense peak of the job's precision);
``mfu_bf16`` (and ``hfu_bf16``) over the bf16 dense peak whatever the precision, the figure tables
show as "MFU" so that fp8 and bf16 runs compare against one peak.
Model FLOPs per token = 6 N + 12 L s d_attn, the definition that introduced MFU (Chowdhery et
al. 2022, PaLM, Appendix B; also Narayanan et al. 2021's Megatron formula and torchtitan): N the
matmul parameters a token touches (the input-embedding lookup is not a matmul) and the attention
QK^T and PV matmuls, forward and backward, over the full s x s score matrix. A causal kernel
executes about half of that attention term; the compute model times what kernels execute, this
count only sets the MFU / TFLOPs-per-GPU scale. Recompute is not counted; HFU adds it
(``engine.block_timer.hardware_flops_per_step``).
"""

from __future__ import annotations

import numpy as np

from teton.engine.block_timer import BlockTimer, hardware_flops_per_step, sm_fraction
from teton.engine.compute import ComputeModel, gemm_precision
from teton.engine.dualpipe import DualPipeSchedule, dualpipe_inputs
from teton.engine.hints import step_warnings
from teton.engine.nic_share import shared_dp_streams
from teton.engine.pipeline_schedule import (
    DP_FULL_SHARD,
    DP_NONE,
    DP_ONCE,
    DP_PER_MICROBATCH,
    PipelineSchedule,
    pair_hidden_s,
)
from teton.engine.prepare import default_placement, in_situ_cost, make_cost_model, pp_transfer_times
from teton.engine.result import StepResult
from teton.engine.scale import bucketed, dp_buckets, expected_max_std_normal, last_bucket_s, straggler_s
from teton.engine.shared_embedding import embedding_sum_s
from teton.hardware.efficiency import in_situ_band, prediction_mode
from teton.placement import Placement
from teton.spec.layout import Layout
from teton.spec.model_flops import model_flops_per_token as layer_model_flops_per_token
from teton.spec.schema import Spec
from teton.workload.headroom import memory_headroom
from teton.workload.items import ACT_BYTES, FP32, Collective
from teton.workload.memory import ADAM_STATE_BYTES, adam_state_bytes, memory_per_gpu
from teton.workload.pipeline import ep_overlap_warmup
from teton.workload.step_work import dp_shard, step_work

__all__ = ["simulate_step", "model_flops_per_token", "slowest_gpu_factor", "BlockTimer", "default_placement",
           "make_cost_model"]

# Adam over the shard: read and write the 12-byte fp32 state (master, m, v), read the fp32 gradient
# and clear it for the next step's accumulation, write the bf16 weights
ADAM_BYTES_PER_PARAM = 2 * ADAM_STATE_BYTES + 2 * FP32 + ACT_BYTES
# Gradient-norm clipping before it (max norm 1.0 in Megatron-LM's defaults, torchtitan and the Llama
# recipes): read every fp32 gradient for the norm, then read and write it scaled
# (torch.nn.utils.clip_grad_norm_: a foreach norm and an unconditional foreach mul)
GRAD_CLIP_BYTES_PER_PARAM = 3 * FP32
OPTIMIZER_BYTES_PER_PARAM = ADAM_BYTES_PER_PARAM + GRAD_CLIP_BYTES_PER_PARAM


def model_flops_per_token(spec: Spec) -> float:
    """6 N (matmul params) + 12 L s d_attn (PaLM, Appendix B), per layer type, with MLA's head
    dims, windows, Mamba-2's scan and multi-token prediction (``spec.model_flops``)."""
    return layer_model_flops_per_token(spec.model, spec.job.layout.seq_len)


def slowest_gpu_factor(gpus: int, cv: float) -> float:
    """Compute-time factor of a synchronous job paced by its slowest GPU.

    With per-GPU sustained throughput ~ N(mu, (cv mu)^2), every pipeline stage waits for its
    slowest TP rank, the pipeline for its slowest stage and the step for its slowest DP replica,
    so the job runs at about the expected minimum speed of ``gpus`` draws: a compute-time factor
    ``1 / (1 - cv z_n)``, z_n = E[max of n standard normals] (``engine.scale``). Llama 3 (Sec.
    3.3.4) reports stragglers and 1-2 % diurnal swings from DVFS.
    """
    if cv <= 0 or gpus <= 1:
        return 1.0
    return 1.0 / max(1e-3, 1.0 - cv * expected_max_std_normal(gpus))


def _dp_collective_s(cost, placement: Placement, lay: Layout, work, op: str, bytes_per_param: float) -> np.ndarray:
    """(p, v) seconds of one DP collective of each chunk's parameters (``bytes_per_param`` each).

    Dense parameters go over the ranks that hold the same weights, DP x CP; with expert parallelism
    or expert TP the routed experts' over their expert-data-parallel group (the ``lay.edp`` ranks
    that hold the same experts: Megatron-Core's expert_data_parallel_group), one after the other
    on the DP stream. Chunks with the same parameter counts
    share one network query.
    """
    params = work.chunk_params
    dp_groups = placement.groups("dp_cp")
    if not ((lay.ep > 1 or lay.etp != lay.tp) and "ep" in placement.order and work.expert_params.any()):
        flat = params.ravel().tolist()  # a few dozen chunks: a dict beats np.unique here
        times = {n: cost.collective_time(op, dp_groups, n * bytes_per_param) for n in dict.fromkeys(flat)}
        return np.array([times[n] for n in flat]).reshape(params.shape)
    expert = work.expert_params
    edp_groups = placement.groups("edp_cp") if lay.edp > 1 else None  # None: nothing to reduce
    pairs = list(zip((params - expert).ravel().tolist(), expert.ravel().tolist(), strict=True))
    times = {(d, e): cost.collective_time(op, dp_groups, d * bytes_per_param)
             + (cost.collective_time(op, edp_groups, e * bytes_per_param) if edp_groups is not None else 0.0)
             for d, e in dict.fromkeys(pairs)}
    return np.array([times[de] for de in pairs]).reshape(params.shape)


def blocking_p2p(fwd_s: np.ndarray, bwd_s: np.ndarray, p2p_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, v) forward and backward op times with their blocking sends added (``job.pp_p2p:
    blocking``).

    Megatron-LM's p2p exchange of 2021-22 (``p2p_communication._communicate``) waits on every
    isend / irecv of a batch and then on ``torch.cuda.synchronize()`` before the next op, so a
    transfer is not hidden under other work: each forward of chunk (r, c) holds rank r for the
    send across boundary r (the last rank's across the wrap-around to chunk c+1, none for the
    last virtual stage), each backward for the send across boundary r-1 (the first rank's across
    the wrap-around, none for the first virtual stage). ``p2p_s``: (p,) seconds per boundary.
    """
    p, v = fwd_s.shape
    send_fwd = np.repeat(p2p_s[:, None], v, axis=1)
    send_fwd[p - 1, v - 1] = 0.0
    send_bwd = np.repeat(np.roll(p2p_s, 1)[:, None], v, axis=1)
    send_bwd[0, 0] = 0.0
    return fwd_s + send_fwd, bwd_s + send_bwd


# a chunk's time: compute, each axis's exposed collectives, exposed host copies (CPU offload) and
# CPU-bound kernel launches (engine.block_timer)
CATEGORIES = ("compute", "tp", "cp", "ep", "offload", "launch")


def chunk_times_s(timer: BlockTimer, work, pace: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(forward, backward) (p, v) seconds per micro-batch of every chunk, by category.

    Each chunk's layers at their block's time (one per kind of layer: ``StepWork.layer_mix``),
    the embedding on the first chunk, the head on the last; the compute
    times ``pace``, the slowest-GPU factor (:func:`slowest_gpu_factor`).
    """
    p, v = work.split.p, work.split.v
    ef, eb = timer.block(work.embedding)
    hf, hb = timer.block(work.head)
    mix = [(timer.block(block), n.astype(float)) for block, n in work.layer_mix()]
    fwd_parts = {k: sum(n * f[k] for (f, _), n in mix) for k in CATEGORIES}
    bwd_parts = {k: sum(n * b[k] for (_, b), n in mix) for k in CATEGORIES}
    for k in CATEGORIES:
        fwd_parts[k][0, 0] += ef[k]
        bwd_parts[k][0, 0] += eb[k]
        fwd_parts[k][p - 1, v - 1] += hf[k]
        bwd_parts[k][p - 1, v - 1] += hb[k]
    if pace != 1.0:
        fwd_parts["compute"] = fwd_parts["compute"] * pace
        bwd_parts["compute"] = bwd_parts["compute"] * pace
    return fwd_parts, bwd_parts


def p2p_times_s(timer: BlockTimer, placement: Placement, cost, work) -> np.ndarray:
    """(p,) seconds of the point-to-point send across each pipeline boundary (the last: the
    interleaved wrap-around); a message scattered over TP (``job.pp_scatter_gather``) is
    all-gathered over TP on arrival."""
    p = work.split.p
    if p <= 1:
        return np.zeros(p)
    p2p_s = pp_transfer_times(placement, cost, work.p2p_bytes, work.split.v)
    if work.p2p_gather_bytes:
        p2p_s = p2p_s + np.where(p2p_s > 0, timer.collective_s(
            Collective("pp.gather", "all_gather", "tp", work.p2p_gather_bytes)), 0.0)
    return p2p_s


def dp_streams_s(cost, placement: Placement, job, lay: Layout, work,
                 bucket_params: float | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """(all-gather, reduce) (p, v) seconds of each chunk's DP collectives and the schedule's DP mode.

    ZeRO semantics over the ranks holding the same weights (DP x CP): gradients all-reduced
    (ZeRO-0) or reduce-scattered, parameters all-gathered from ZeRO-1 on; ZeRO-3 (FSDP) gathers
    and reduces around every op (``DP_FULL_SHARD``), ``grad_reduce: per_microbatch`` reduces
    after every backward, otherwise once per step. Zeros and ``DP_NONE`` without DP replicas
    (DP x CP = 1). Each bucket of ``bucket_params`` is a collective of its own (``engine.scale``).
    """
    ag_s = np.zeros((work.split.p, work.split.v))
    rs_s = np.zeros((work.split.p, work.split.v))
    if lay.dp * lay.cp <= 1:
        return ag_s, rs_s, DP_NONE
    rs_op = "all_reduce" if job.zero == 0 else "reduce_scatter"
    rs_bytes, ag_bytes = work.grad_reduce_bytes_per_param, work.param_gather_bytes_per_param
    rs_s = _dp_collective_s(bucketed(cost, bucket_params, rs_bytes), placement, lay, work, rs_op, rs_bytes)
    if job.zero:
        ag_s = _dp_collective_s(bucketed(cost, bucket_params, ag_bytes), placement, lay, work, "all_gather", ag_bytes)
    if job.zero == 3:
        return ag_s, rs_s, DP_FULL_SHARD
    if job.grad_reduce_mode == "per_microbatch":
        return ag_s, rs_s, DP_PER_MICROBATCH
    return ag_s, rs_s, DP_ONCE if job.zero else DP_NONE


def pipeline_times_s(fwd_s: np.ndarray, bwd_s: np.ndarray, schedule: PipelineSchedule, job, replicas: int,
                     dp_sm_fraction: float) -> tuple[float, float, float, float, np.ndarray]:
    """(ideal, with p2p, full, SM contention seconds, per-rank busy seconds) of the pipeline.

    ``schedule``: the pipeline with everything (p2p on the edges or blocking, the DP streams). It
    runs ideal (``fwd_s``, ``bwd_s``, no p2p, no DP), with p2p, and with everything, so the idle
    time splits into the pipeline bubble, exposed PP and exposed DP communication. Without ``job.overlap_dp_comm`` every DP collective runs after the
    last backward. Overlapped DP collectives held ``dp_sm_fraction`` of the SMs from the compute
    they ran under: to first order the critical path slows by that fraction of the overlapped DP
    time, which ``full`` includes.
    """
    m, ag_s, rs_s = schedule.m, schedule.ag_s, schedule.rs_s
    ideal_finish, busy, _ = schedule.compute_only(fwd_s, bwd_s).run()
    p2p_finish, _, _ = (schedule.compute_only(schedule.fwd_s, schedule.bwd_s, schedule.p2p_s).run()
                        if fwd_s.shape[0] > 1 else (ideal_finish, None, None))
    with_p2p = float(p2p_finish.max())
    sm_contention_s = 0.0
    if replicas > 1:
        per_mb = schedule.chunk_micro_batches if job.grad_reduce_mode == "per_microbatch" else 1
        dp_total = (rs_s.sum(axis=1) * per_mb + ag_s.sum(axis=1) * (1 if job.zero in (1, 2) else 0)
                    + (ag_s.sum(axis=1) * 2 * m if job.zero == 3 else 0))  # (p,) DP seconds per rank
        if job.overlap_dp_comm:
            finish, _, dp_free = schedule.run()
            full = float(np.maximum(finish, dp_free).max())
            overlapped = max(0.0, float(dp_total.max()) - (full - float(p2p_finish.max())))
            sm_contention_s = dp_sm_fraction * overlapped
        else:
            full = float((p2p_finish + dp_total).max())
    else:
        full = float(p2p_finish.max())
    return float(ideal_finish.max()), with_p2p, full + sm_contention_s, sm_contention_s, busy


def a2a_overlap(job, placement: Placement, cluster, fwd_parts: dict, bwd_parts: dict) -> tuple:
    """(what a merged forward-backward op hides, (p, v, v) seconds: ``pair_hidden_s``; the SM share
    of the all-to-all's kernels) when the schedule runs merged ops on an MoE job (the all-to-all
    overlap, DualPipe's ``F&B``), else (None, 0)."""
    if not (ep_overlap_warmup(job) or (job.pp_schedule == "dualpipe" and job.layout.ep > 1)):
        return None, 0.0
    return (pair_hidden_s(fwd_parts["ep"], bwd_parts["ep"], fwd_parts["compute"], bwd_parts["compute"]),
            sm_fraction(placement, "ep", cluster))


def optimizer_s(job, lay: Layout, work, gpu, mem_efficiency: float) -> float:
    """Seconds of the memory-bound Adam step (with gradient clipping) over the most loaded pipeline
    rank's shard: ``t = N_shard * OPTIMIZER_BYTES_PER_PARAM / (HBM bandwidth * e_mem)``, 46 bytes per
    parameter (module constants; 38 with Adam's moments in bf16, ``job.adam_moments``). ZeRO >= 1
    shards it over DP, the routed experts' state over their expert-data-parallel group
    (``lay.edp``)."""
    rank_params = work.split.held(work.chunk_params)
    if job.zero >= 1:
        rank_params = dp_shard(rank_params, work.split.held(work.expert_params), lay)
    opt_params = float(rank_params.max())
    state_saved = 2 * (ADAM_STATE_BYTES - adam_state_bytes(job))  # read and written: bf16 moments
    return opt_params * (OPTIMIZER_BYTES_PER_PARAM - state_saved) / (gpu.hbm_bw_bytes_s * mem_efficiency)


def simulate_step(spec: Spec, placement: Placement | None = None, cost_model=None,
                  timeline: bool = False) -> StepResult:
    """Simulate one training step of ``spec`` (see module docstring for the model).

    ``timeline=True`` adds ``result.extra["timeline"]``: every pipeline op of the step as an
    event (rank, fwd/bwd, chunk, micro-batch, start_s, end_s).
    """
    model, job, cluster = spec.model, spec.job, spec.cluster
    if placement is None:
        placement = default_placement(spec)
    compute = ComputeModel.for_gpu(cluster.gpu_spec, job.precision, job.layout.seq_len, cluster.efficiency,
                                   job.attention_kernel, job.software.name, job.software.fp8_recipe)
    cost = in_situ_cost(cost_model, compute.eff.collective_in_situ) if cost_model is not None else make_cost_model(spec)
    timer = BlockTimer(compute, cost, placement, cluster)
    work = step_work(model, job)
    lay = job.layout
    p, m = work.split.p, work.micro_batches

    pace = slowest_gpu_factor(job.gpus, cluster.gpu_speed_cv)
    fwd_parts, bwd_parts = chunk_times_s(timer, work, pace)
    bucket_params, dp_units = dp_buckets(job, work)  # FSDP: a layer a unit; ZeRO-0-2 the framework's buckets
    ag_s, rs_s, dp_mode = dp_streams_s(cost, placement, job, lay, work, bucket_params)
    if lay.ep > 1 and "ep" in placement.order:  # the NICs a cross-domain all-to-all leaves the DP stream
        ag_s, rs_s = shared_dp_streams(ag_s, rs_s, fwd_parts, bwd_parts, placement, cluster.domain_gpus, lay.edp > 1)
    dual, w_s = job.pp_schedule == "dualpipe", None  # DualPipe: two mirrored stages per rank (engine.dualpipe)
    if dual:
        fwd_parts, bwd_parts, w_s, ag_s, rs_s, dp_units = dualpipe_inputs(
            timer, cost, placement, job, work, pace, fwd_parts, bwd_parts, ag_s, rs_s, dp_units)
    fwd_s = sum(fwd_parts.values())
    bwd_s = sum(bwd_parts.values())
    p2p_s = p2p_times_s(timer, placement, cost, work)
    fwd_run_s, bwd_run_s, edge_s = fwd_s, bwd_s, p2p_s
    if p > 1 and job.pp_p2p == "blocking":  # each op holds its rank until its output has been sent
        (fwd_run_s, bwd_run_s), edge_s = blocking_p2p(fwd_s, bwd_s, p2p_s), np.zeros(p)
    # ranks holding the same weights, gradients reduced over them (DualPipe: each stage twice)
    replicas = lay.dp * lay.cp * (2 if dual else 1)
    args = (fwd_run_s, bwd_run_s, m, edge_s, dp_mode, ag_s, rs_s, job.overlap_param_gather,
            job.layout.pp_round_size, dp_units, *a2a_overlap(job, placement, cluster, fwd_parts, bwd_parts))
    schedule = DualPipeSchedule(*args, w_s=w_s) if dual else PipelineSchedule(*args)
    dp_sm = sm_fraction(placement, "dp_cp", cluster) if replicas > 1 and job.overlap_dp_comm else 0.0
    ideal, with_p2p, full, sm_contention_s, busy = pipeline_times_s(fwd_s, bwd_s, schedule, job, replicas, dp_sm)
    opt_s = optimizer_s(job, lay, work, cluster.gpu_spec, compute.eff.mem)
    overhead_s = compute.eff.step_overhead_s  # per-step framework work (an in-situ candidate, 0 by default)
    embedding_s = embedding_sum_s(cost, placement, model, job, work)  # after the backward, exposed
    stragglers = straggler_s(full + embedding_s + opt_s + overhead_s, job.gpus, cluster.step_jitter_cv)
    step = full + embedding_s + opt_s + overhead_s + stragglers
    dp_exposed = max(0.0, full - sm_contention_s - with_p2p) + embedding_s
    dp_last = last_bucket_s(rs_s, dp_units, dp_exposed - embedding_s) if job.overlap_dp_comm else 0.0

    crit = int(np.argmax(busy))
    comp = {k: float((fwd_parts[k][crit] + bwd_parts[k][crit]).sum() * schedule.chunk_micro_batches)
            for k in CATEGORIES}
    hidden_a2a = float(schedule.hidden_a2a_s()[crit])  # the all-to-all merged ops hide, while holding SMs
    comp["ep"] -= hidden_a2a
    breakdown = {
        "compute": comp["compute"],
        "tp_comm": comp["tp"],
        "cp_comm": comp["cp"],
        "ep_comm": comp["ep"],
        "pipeline_bubble": max(0.0, ideal - float(busy[crit])),
        "pp_comm": max(0.0, with_p2p - ideal),
        "dp_comm": dp_exposed - dp_last,
        "dp_last_bucket": dp_last,  # the last gradient bucket's reduce, after the last backward
        "sm_contention": sm_contention_s + schedule.a2a_sm * hidden_a2a,
        "optimizer": opt_s,
        "step_overhead": overhead_s,
        "cpu_offload": comp["offload"],  # host copies of offloaded activations the compute did not hide
        "launch_overhead": comp["launch"],  # eager passes: the gap after each kernel, or CPU-bound launches
        "stragglers": stragglers,  # the slowest of the job's ranks (engine.scale)
    }
    comm_times = _comm_times(timer, p2p_s if p > 1 else None, embedding_s, (rs_s, ag_s) if replicas > 1 else None)
    result = step_result(spec, lay, work, step, breakdown, comm_times, getattr(cost, "fidelity", "analytical"),
                         placement.policy)
    if result.step_time_s_low is not None:  # a calibrated cluster's parameter uncertainty, for this job
        result = _with_parameter_band(result, spec, placement, cost_model)
    if timeline:
        result = result.with_extra(timeline=schedule.timeline())
    return result


def _comm_times(timer: BlockTimer, p2p_s: np.ndarray | None, embedding_s: float,
                dp_s: tuple[np.ndarray, np.ndarray] | None) -> dict[str, float]:
    """The result's ``comm_times_s``: every priced collective of the blocks, the slowest pipeline
    transfer, the embedding group's sum and the slowest chunk's DP reduce and gather."""
    out = {f"{op}.{axis}.{int(nbytes)}": t for (op, axis, nbytes), t in timer.comm.items()}
    if p2p_s is not None:
        out["send_recv.pp"] = float(p2p_s.max())
    if embedding_s:
        out["embedding_group.all_reduce"] = embedding_s
    if dp_s is not None:
        out["dp.reduce_per_chunk_max"] = float(dp_s[0].max())
        out["dp.all_gather_per_chunk_max"] = float(dp_s[1].max())
    return out


def _with_parameter_band(result: StepResult, spec: Spec, placement: Placement, cost_model) -> StepResult:
    """``result`` with its band widened by the cluster's parameter uncertainty (``engine.band``),
    when the cluster carries one (a ``teton fit --cluster-out`` file)."""
    from dataclasses import replace

    from teton.engine.band import parameter_sd, widened

    step = result.step_time_s
    sd = parameter_sd(spec, step, lambda s: simulate_step(s, placement, cost_model).step_time_s)
    if sd is None:
        return result
    low, high = widened(step, result.step_time_s_low, result.step_time_s_high, sd)
    note = f"the band includes the calibration's parameter uncertainty: {sd * 100:.1f} % (1 sd) on this job's step"
    return replace(result, step_time_s_low=low, step_time_s_high=high,
                   notes=(*result.notes, note)).with_extra(band_parameter_sd=sd)


def step_result(spec: Spec, lay: Layout, work, step: float, breakdown: dict[str, float], comm_times: dict[str, float],
                fidelity: str, placement_policy: str) -> StepResult:
    """The StepResult of a step of ``step`` seconds: throughput, MFU and HFU (module docstring),
    memory per GPU, the in-situ band and the pipeline warning."""
    model, job, cluster = spec.model, spec.job, spec.cluster
    band = in_situ_band(cluster.gpu_spec, cluster.efficiency, job.software.name, model.has_moe)
    mode, mode_note = prediction_mode(cluster.gpu_spec, cluster.efficiency, job.software.name, model.has_moe)
    mem, _rank = memory_per_gpu(model, job)
    room = memory_headroom(job, cluster)
    gpu = cluster.gpu_spec
    tokens = job.layout.tokens_per_step
    flops = model_flops_per_token(spec) * tokens
    hw_flops = hardware_flops_per_step(work, lay, flops)
    prec = gemm_precision(job.precision, job.software.fp8_recipe)  # fp4 under NVFP4
    return StepResult(
        step_time_s=step,
        mfu=flops / (step * job.gpus * gpu.peak_flops(prec)),
        tflops_per_gpu=flops / (step * job.gpus) / 1e12,
        tokens_per_s=tokens / step,
        memory_per_gpu_bytes=mem.total,
        fits_in_memory=room.fits(mem.total),
        memory_verdict=room.verdict(mem.total),
        breakdown=breakdown,
        memory_breakdown=mem.as_dict(),
        hbm_bytes=gpu.hbm_bytes,
        largest_memory_term=mem.largest(),
        model_flops_per_step=flops,
        tokens_per_step=tokens,
        gpus=job.gpus,
        layout={"tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep,
                **({"etp": lay.etp, "edp": lay.edp} if "ep" in lay.order else {}), "virtual_stages": work.split.v,
                **({"pp_schedule": "dualpipe"} if work.split.mirrored else {})},
        micro_batches=work.micro_batches,
        fidelity=fidelity,
        placement=placement_policy,
        comm_times_s=comm_times,
        notes=(*spec.notes, mode_note) if mode_note else spec.notes,
        hfu=hw_flops / (step * job.gpus * gpu.peak_flops(prec)),
        mfu_bf16=flops / (step * job.gpus * gpu.peak_flops("bf16")),
        hfu_bf16=hw_flops / (step * job.gpus * gpu.peak_flops("bf16")),
        precision=prec,
        warnings=step_warnings(spec, work.micro_batches, breakdown, step),
        hardware_flops_per_step=hw_flops,
        step_time_s_low=step / (1 + band[1]) if band else None,
        step_time_s_high=step / (1 + band[0]) if band else None,
        prediction_mode=mode,
        software=job.software.name,
        usable_hbm_bytes=room.usable_bytes,
        headroom_bytes=room.usable_bytes - mem.total,
        memory_reserved=room.reserved(),
    )
