"""Simulate one training step: (StepWork, Placement, compute model, cost model) -> StepResult.

1. Per block (layer, embedding, head) and pass, the GPU's ops are timed by the compute model and
   its TP / CP collectives by the network cost model on the job's actual groups; within a block
   they run back to back, except the TP collectives ``job.tp_overlap`` runs alongside an
   independent GEMM (charged what the GEMM does not hide, SMs held by NCCL included).
2. Chunk times (layers of a virtual stage - under ``job.recompute = selective_layer`` its plain
   and its checkpointed layers, each at its own block's time - plus embedding / head) feed
   the pipeline schedule (``engine.schedule``), with point-to-point transfer times on the
   dependency edges and the DP collectives (ZeRO stage semantics) on a separate stream.
3. The schedule is run three times - ideal (no p2p, no DP), with p2p, with everything - so the
   idle time splits into the pipeline bubble, exposed PP and exposed DP communication.
   DP collectives that ran under compute held SMs from it (one CTA per NCCL channel): to first
   order the step grows by that SM fraction of the overlapped DP time (``sm_contention``).
4. Then the optimizer step (memory-bound Adam over this GPU's shard).

MFU (DESIGN.md): model FLOPs per step / (step time x GPUs x dense peak of the job's precision);
``mfu_bf16`` (and ``hfu_bf16``) over the bf16 dense peak whatever the precision, the figure tables
show as "MFU" so that fp8 and bf16 runs compare against one peak.
Model FLOPs per token = 6 N + 12 L s d_attn, the definition that introduced MFU (Chowdhery et
al. 2022, PaLM, Appendix B; also Narayanan et al. 2021's Megatron formula and torchtitan): N the
matmul parameters a token touches (the input-embedding lookup is not a matmul) and the attention
QK^T and PV matmuls, forward and backward, over the full s x s score matrix. A causal kernel
executes about half of that attention term; the compute model times what kernels execute, this
count only sets the MFU / TFLOPs-per-GPU scale. Recompute is not counted.
"""

from __future__ import annotations

import numpy as np

from teton.engine.block_timer import BlockTimer, hardware_flops_per_step, sm_fraction
from teton.engine.compute import ComputeModel
from teton.engine.prepare import default_placement, in_situ_cost, make_cost_model, pp_transfer_times
from teton.engine.result import StepResult
from teton.engine.schedule import (
    DP_FULL_SHARD,
    DP_NONE,
    DP_ONCE,
    DP_PER_MICROBATCH,
    pipeline_timeline,
    simulate_pipeline,
)
from teton.hardware.efficiency import in_situ_band, prediction_mode
from teton.placement import Placement
from teton.spec.schema import Spec
from teton.workload.memory import ADAM_STATE_BYTES, memory_per_gpu
from teton.workload.ops import ACT_BYTES, FP32, Collective
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
    """6 N (matmul params) + 12 L s d_attn (PaLM, Appendix B)."""
    m = spec.model
    return 6.0 * m.matmul_params() + 12.0 * m.layers * spec.job.seq_len * m.q_width


def slowest_gpu_factor(gpus: int, cv: float) -> float:
    """Compute-time factor of a synchronous job paced by its slowest GPU.

    With per-GPU sustained throughput ~ N(mu, (cv mu)^2), every pipeline stage waits for its
    slowest TP rank, the pipeline for its slowest stage and the step for its slowest DP replica,
    so the job runs at about the expected minimum speed of ``gpus`` draws: a compute-time factor
    ``1 / (1 - cv z_n)``, z_n = E[max of n standard normals] ~ Phi^-1((n - 0.375)/(n + 0.25))
    (Blom 1958). Llama 3 (Sec. 3.3.4) reports stragglers and 1-2 % diurnal swings from DVFS.
    """
    if cv <= 0 or gpus <= 1:
        return 1.0
    from statistics import NormalDist

    z = NormalDist().inv_cdf((gpus - 0.375) / (gpus + 0.25))
    return 1.0 / max(1e-3, 1.0 - cv * z)


def _dp_collective_s(cost, placement: Placement, job, work, op: str, bytes_per_param: float) -> np.ndarray:
    """(p, v) seconds of one DP collective of each chunk's parameters (``bytes_per_param`` each).

    Dense parameters go over the ranks that hold the same weights, DP x CP; with expert parallelism
    the routed experts' over their expert-data-parallel group (dp / ep ranks that hold the same
    experts, x CP), one after the other on the DP stream. Chunks with the same parameter counts
    share one network query.
    """
    params = work.chunk_params
    dp_groups = placement.groups("dp_cp")
    if not (job.ep > 1 and "ep" in placement.order and work.expert_params.any()):
        flat = params.ravel().tolist()  # a few dozen chunks: a dict beats np.unique here
        times = {n: cost.collective_time(op, dp_groups, n * bytes_per_param) for n in dict.fromkeys(flat)}
        return np.array([times[n] for n in flat]).reshape(params.shape)
    expert = work.expert_params
    edp_groups = placement.groups("edp_cp") if job.dp_degree // job.ep * job.cp > 1 else None  # None: nothing to reduce
    values, inverse = np.unique(np.stack([(params - expert).ravel(), expert.ravel()], axis=1), axis=0,
                                return_inverse=True)
    out = np.array([cost.collective_time(op, dp_groups, d * bytes_per_param)
                    + (cost.collective_time(op, edp_groups, e * bytes_per_param) if edp_groups is not None else 0.0)
                    for d, e in values])
    return out[np.asarray(inverse).ravel()].reshape(params.shape)


def pipeline_warnings(job, micro_batches: int, bubble_fraction: float) -> tuple[str, ...]:
    """A warning when a pipelined job runs fewer micro-batches per DP rank than it has stages:
    the 1F1B bubble, (p - 1) / (v m) of the compute, then dominates the step. A spec without
    ``job.global_batch`` (or ``global_batch_tokens``) runs one micro-batch per DP rank."""
    p, m = job.pp, micro_batches
    if p <= 1 or m >= p:
        return ()
    unset = job.global_batch is None and job.global_batch_tokens is None
    why = (f" job.global_batch is not set, so it defaulted to dp x micro_batch = {job.sequences_per_step} "
           "sequences (one micro-batch per DP rank);" if unset else "")
    return (f"only {m} micro-batch{'es' if m != 1 else ''} per DP rank on pp={p}: the pipeline bubble is "
            f"{bubble_fraction * 100:.0f} % of the step time.{why} set job.global_batch (or "
            f"job.global_batch_tokens) so that micro-batches per DP rank >= pp, e.g. "
            f"job.global_batch={job.dp_degree * job.micro_batch * p}",)


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


def simulate_step(spec: Spec, placement: Placement | None = None, cost_model=None,
                  timeline: bool = False) -> StepResult:
    """Simulate one training step of ``spec`` (see module docstring for the model).

    ``timeline=True`` adds ``result.extra["timeline"]``: every pipeline op of the step as an
    event (rank, fwd/bwd, chunk, micro-batch, start_s, end_s).
    """
    model, job, cluster = spec.model, spec.job, spec.cluster
    if placement is None:
        placement = default_placement(spec)
    compute = ComputeModel.for_gpu(cluster.gpu_spec, job.precision, job.seq_len, cluster.efficiency,
                                   job.attention_kernel)
    cost = in_situ_cost(cost_model, compute.eff.collective_in_situ) if cost_model is not None else make_cost_model(spec)
    timer = BlockTimer(compute, cost, placement, cluster)
    work = step_work(model, job)
    split = work.split
    p, v, m = split.p, split.v, work.micro_batches

    ef, eb = timer.block(work.embedding)
    hf, hb = timer.block(work.head)
    cats = ("compute", "tp", "cp", "ep")
    # each chunk's layers at their block's time (selective_layer: its plain and checkpointed ones)
    mix = [(timer.block(block), n.astype(float)) for block, n in work.layer_mix()]
    fwd_parts = {k: sum(n * f[k] for (f, _), n in mix) for k in cats}
    bwd_parts = {k: sum(n * b[k] for (_, b), n in mix) for k in cats}
    for k in cats:
        fwd_parts[k][0, 0] += ef[k]
        bwd_parts[k][0, 0] += eb[k]
        fwd_parts[k][p - 1, v - 1] += hf[k]
        bwd_parts[k][p - 1, v - 1] += hb[k]
    pace = slowest_gpu_factor(job.gpus, cluster.gpu_speed_cv)
    if pace != 1.0:
        fwd_parts["compute"] = fwd_parts["compute"] * pace
        bwd_parts["compute"] = bwd_parts["compute"] * pace
    fwd_s = sum(fwd_parts.values())
    bwd_s = sum(bwd_parts.values())

    # point-to-point between consecutive pipeline ranks (and the interleaved wrap-around)
    p2p_s = pp_transfer_times(placement, cost, work.p2p_bytes, v) if p > 1 else np.zeros(p)
    if p > 1 and work.p2p_gather_bytes:  # the scattered message is all-gathered over TP on arrival
        p2p_s = p2p_s + np.where(p2p_s > 0, timer.collective_s(
            Collective("pp.gather", "all_gather", "tp", work.p2p_gather_bytes)), 0.0)
    fwd_run_s, bwd_run_s, edge_s = fwd_s, bwd_s, p2p_s
    if p > 1 and job.pp_p2p == "blocking":  # each op holds its rank until its output has been sent
        fwd_run_s, bwd_run_s = blocking_p2p(fwd_s, bwd_s, p2p_s)
        edge_s = np.zeros(p)

    # data-parallel collectives per chunk (ZeRO semantics)
    dp = job.dp_degree
    replicas = dp * job.cp  # ranks holding the same weights: gradients are reduced over them
    chunk_params = work.chunk_params
    grad_bytes = work.grad_reduce_bytes_per_param
    ag_s = np.zeros((p, v))
    rs_s = np.zeros((p, v))
    dp_mode = DP_NONE
    if replicas > 1:
        rs_op = "all_reduce" if job.zero == 0 else "reduce_scatter"
        rs_s = _dp_collective_s(cost, placement, job, work, rs_op, grad_bytes)
        if job.zero:
            ag_s = _dp_collective_s(cost, placement, job, work, "all_gather", work.param_gather_bytes_per_param)
        if job.zero == 3:
            dp_mode = DP_FULL_SHARD
        elif job.grad_reduce_mode == "per_microbatch":
            dp_mode = DP_PER_MICROBATCH
        else:
            dp_mode = DP_ONCE if job.zero else DP_NONE

    n_round = job.pp_round_size
    fsdp_units = np.maximum(1, split.layers)  # FSDP wraps each transformer layer as a unit
    ideal_finish, busy, _ = simulate_pipeline(fwd_s, bwd_s, m, n_round=n_round)
    p2p_finish, _, _ = (simulate_pipeline(fwd_run_s, bwd_run_s, m, edge_s, n_round=n_round) if p > 1
                        else (ideal_finish, None, None))
    sm_contention_s = 0.0
    if replicas > 1:
        per_mb = m if job.grad_reduce_mode == "per_microbatch" else 1
        dp_total = (rs_s.sum(axis=1) * per_mb + ag_s.sum(axis=1) * (1 if job.zero in (1, 2) else 0)
                    + (ag_s.sum(axis=1) * 2 * m if job.zero == 3 else 0))  # (p,) DP seconds per rank
        if job.overlap_dp_comm:
            finish, _, dp_free = simulate_pipeline(fwd_run_s, bwd_run_s, m, edge_s, dp_mode, ag_s, rs_s,
                                                   job.overlap_param_gather, n_round, fsdp_units)
            full = float(np.maximum(finish, dp_free).max())
            # what ran under compute held SMs from it (one CTA per NCCL channel): first order, the
            # critical path slows by that fraction of the overlapped DP time
            overlapped = max(0.0, float(dp_total.max()) - (full - float(p2p_finish.max())))
            sm_contention_s = sm_fraction(placement, "dp_cp", cluster) * overlapped
        else:  # every DP collective after the last backward, nothing overlapped
            full = float((p2p_finish + dp_total).max())
    else:
        full = float(p2p_finish.max())
    ideal = float(ideal_finish.max())
    with_p2p = float(p2p_finish.max())
    full += sm_contention_s

    # optimizer: Adam over this GPU's shard (ZeRO >= 1 shards it over DP)
    # (the routed experts' state is sharded over their dp / ep expert-data-parallel group)
    rank_params = chunk_params.sum(axis=1)
    if job.zero >= 1:
        rank_params = dp_shard(rank_params, work.expert_params.sum(axis=1), dp, job.ep, job.cp)
    opt_params = float(rank_params.max())
    optimizer_s = opt_params * OPTIMIZER_BYTES_PER_PARAM / (cluster.gpu_spec.hbm_bw_bytes_s * compute.eff.mem)
    overhead_s = compute.eff.step_overhead_s  # per-step framework work (an in-situ candidate, 0 by default)
    step = full + optimizer_s + overhead_s

    crit = int(np.argmax(busy))
    comp = {k: float((fwd_parts[k][crit] + bwd_parts[k][crit]).sum() * m) for k in cats}
    breakdown = {
        "compute": comp["compute"],
        "tp_comm": comp["tp"],
        "cp_comm": comp["cp"],
        "ep_comm": comp["ep"],
        "pipeline_bubble": max(0.0, ideal - float(busy[crit])),
        "pp_comm": max(0.0, with_p2p - ideal),
        "dp_comm": max(0.0, full - sm_contention_s - with_p2p),
        "sm_contention": sm_contention_s,
        "optimizer": optimizer_s,
        "step_overhead": overhead_s,
    }
    band = in_situ_band(cluster.gpu_spec, cluster.efficiency)
    mode, mode_note = prediction_mode(cluster.gpu_spec, cluster.efficiency)
    hw_flops = hardware_flops_per_step(work, job)
    mem, _rank = memory_per_gpu(model, job)
    gpu = cluster.gpu_spec
    tokens = job.tokens_per_step
    flops = model_flops_per_token(spec) * tokens
    comm_times = {f"{op}.{axis}.{int(nbytes)}": t for (op, axis, nbytes), t in timer.comm.items()}
    if p > 1:
        comm_times["send_recv.pp"] = float(p2p_s.max())
    if replicas > 1:
        comm_times["dp.reduce_per_chunk_max"] = float(rs_s.max())
        comm_times["dp.all_gather_per_chunk_max"] = float(ag_s.max())
    result = StepResult(
        step_time_s=step,
        mfu=flops / (step * job.gpus * gpu.peak_flops(job.precision)),
        tflops_per_gpu=flops / (step * job.gpus) / 1e12,
        tokens_per_s=tokens / step,
        memory_per_gpu_bytes=mem.total,
        fits_in_memory=mem.total <= gpu.hbm_bytes,
        breakdown=breakdown,
        memory_breakdown=mem.as_dict(),
        hbm_bytes=gpu.hbm_bytes,
        largest_memory_term=mem.largest(),
        model_flops_per_step=flops,
        tokens_per_step=tokens,
        gpus=job.gpus,
        layout={"tp": job.tp, "cp": job.cp, "pp": job.pp, "dp": dp, "ep": job.ep, "virtual_stages": v},
        micro_batches=m,
        fidelity=getattr(cost, "fidelity", "analytical"),
        placement=placement.policy,
        comm_times_s=comm_times,
        notes=(*spec.notes, mode_note) if mode_note else spec.notes,
        hfu=hw_flops / (step * job.gpus * gpu.peak_flops(job.precision)),
        mfu_bf16=flops / (step * job.gpus * gpu.peak_flops("bf16")),
        hfu_bf16=hw_flops / (step * job.gpus * gpu.peak_flops("bf16")),
        precision=job.precision,
        warnings=pipeline_warnings(job, m, breakdown["pipeline_bubble"] / step),
        hardware_flops_per_step=hw_flops,
        step_time_s_low=step / (1 + band[1]) if band else None,
        step_time_s_high=step / (1 + band[0]) if band else None,
        prediction_mode=mode,
    )
    if timeline:
        events = pipeline_timeline(fwd_run_s, bwd_run_s, m, edge_s, dp_mode, ag_s, rs_s, job.overlap_param_gather, n_round,
                                   fsdp_units)
        result = result.with_extra(timeline=events)
    return result
