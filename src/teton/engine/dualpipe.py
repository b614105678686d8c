"""DualPipe simulated as a schedule (``job.pp_schedule: dualpipe``; ``workload.dualpipe`` has the
model and the op orders).

Every rank runs its order; an op starts when the rank is free and its input has arrived:
- a forward of chunk 0 (the down direction) waits for rank ``r-1``'s forward of that micro-batch,
  one of chunk 1 (up) for rank ``r+1``'s; the first stage of each direction (rank 0's chunk 0,
  rank ``p-1``'s chunk 1) for nothing;
- a backward (whole or input-gradient only) waits for the next stage's backward of that direction
  (rank ``r+1`` down, ``r-1`` up), the last stage of each direction for its own forward;
- a deferred weight gradient for nothing more than its rank (it follows its backward in order);
each plus the point-to-point transfer across the boundary it crosses.

A merged ``F&B`` op waits for both inputs and takes both passes' time less the all-to-all each
hides under the other's compute (``engine.pipeline_schedule.pair_hidden_s``), whose kernels hold
their SM share meanwhile, as the 1F1B all-to-all overlap. A whole backward takes ``bwd_s``; an
input-gradient one ``bwd_s - w_s`` and its weight gradient ``w_s``, the backward's weight-gradient
GEMMs. Data-parallel streams as in ``engine.pipeline_schedule``: each chunk's parameters gathered
before its first forward, its gradients reduced after the op that completes its last
micro-batch's (a whole backward or a weight gradient), the mirrored copies' sum included
(:func:`mirror_sum_s`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from teton.engine.pipeline_schedule import (
    DP_PER_MICROBATCH,
    PipelineSchedule,
    _param_gathers_at_start,
    _place_op,
)
from teton.workload.dualpipe import BWD, BWD_INPUT, BWD_WEIGHT, FWD, NO_OP, dualpipe_orders, mirrored
from teton.workload.step_work import dp_shard


@njit(cache=True)
def _input_ready(fwd_done, bwd_done, p2p_s, p, r, kind, c, mb):
    """When the input of rank ``r``'s op arrives (module docstring), or -1 if not yet produced."""
    if kind == BWD_WEIGHT:
        return 0.0
    if kind == FWD:
        src = r - 1 if c == 0 else r + 1
        if src < 0 or src >= p:
            return 0.0
        d = fwd_done[src, c, mb]
        return -1.0 if d < 0 else d + p2p_s[min(r, src)]
    src = r + 1 if c == 0 else r - 1
    if src < 0 or src >= p:
        return fwd_done[r, c, mb]
    d = bwd_done[src, c, mb]
    return -1.0 if d < 0 else d + p2p_s[min(r, src)]


@njit(cache=True)
def _op_s(kind, r, c, fwd_s, bwd_s, w_s):
    if kind == FWD:
        return fwd_s[r, c]
    if kind == BWD:
        return bwd_s[r, c]
    if kind == BWD_INPUT:
        return bwd_s[r, c] - w_s[r, c]
    return w_s[r, c]


@njit(cache=True)
def _simulate(p, half, orders, fwd_s, bwd_s, w_s, p2p_s, dp_mode, ag_s, rs_s, overlap_ag, units, hidden_s, a2a_sm):
    """Run every rank's DualPipe order; returns (per-rank finish, busy, DP-stream free, op starts,
    completed), completed False on a deadlock."""
    n_ops = orders.shape[1]
    count = np.zeros(p, dtype=np.int64)
    for r in range(p):
        while count[r] < n_ops and orders[r, count[r], 0] != NO_OP:
            count[r] += 1
    fwd_done = np.full((p, 2, half), -1.0)
    bwd_done = np.full((p, 2, half), -1.0)
    ptr = np.zeros(p, dtype=np.int64)
    starts = np.zeros((p, n_ops))
    busy = np.zeros(p)
    last_start = np.zeros(p)
    ag_ready, rank_free, dp_free = _param_gathers_at_start(p, 2, dp_mode, ag_s, overlap_ag)
    remaining = count.sum()
    while remaining > 0:
        progress = False
        for r in range(p):
            while ptr[r] < count[r]:
                i = ptr[r]
                kind, c, mb, merged = orders[r, i, 0], orders[r, i, 1], orders[r, i, 2], orders[r, i, 3]
                dep = _input_ready(fwd_done, bwd_done, p2p_s, p, r, kind, c, mb)
                if dep < 0:
                    break
                dur = _op_s(kind, r, c, fwd_s, bwd_s, w_s)
                gkind, gc, gmb = kind, c, mb  # the op's gradient-producing pass
                if merged:
                    gkind, gc, gmb = orders[r, i + 1, 0], orders[r, i + 1, 1], orders[r, i + 1, 2]
                    d = _input_ready(fwd_done, bwd_done, p2p_s, p, r, gkind, gc, gmb)
                    if d < 0:
                        break
                    dep = max(dep, d)
                    dur = dur + _op_s(gkind, r, gc, fwd_s, bwd_s, w_s) - (1.0 - a2a_sm) * hidden_s[r, c, gc]
                grads = gkind == BWD or gkind == BWD_WEIGHT
                first_fwd = kind == FWD and mb == 0
                start = max(rank_free[r], dep)
                end = start + dur
                if first_fwd or (grads and (gmb == half - 1 or dp_mode == DP_PER_MICROBATCH)):  # ops the DP stream can move
                    start, end, dp_free[r] = _place_op(
                        dp_mode, start, dur, first_fwd, grads, gmb == half - 1, ag_ready[r, c], ag_s[r, c],
                        ag_s[r, c], rs_s[r, gc], units[r, c], units[r, gc], dp_free[r], last_start[r], overlap_ag)
                starts[r, i:i + 1 + merged] = start
                last_start[r] = start
                rank_free[r] = end
                busy[r] += dur
                if kind == FWD:
                    fwd_done[r, c, mb] = end
                if gkind == BWD or gkind == BWD_INPUT:
                    bwd_done[r, gc, gmb] = end
                ptr[r] += 1 + merged
                remaining -= 1 + merged
                progress = True
        if not progress:
            return rank_free, busy, dp_free, starts, False
    return rank_free, busy, dp_free, starts, True


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class DualPipeSchedule(PipelineSchedule):
    """A :class:`PipelineSchedule` of (p, 2) chunks run as DualPipe; ``w_s``: (p, 2) seconds of
    each chunk's weight-gradient pass, the part of ``bwd_s`` a zero-bubble backward defers."""

    w_s: np.ndarray | None = None

    @property
    def chunk_micro_batches(self) -> int:
        """Micro-batches each chunk runs in a step: half of them flow each way."""
        return self.m // 2

    def _out(self):
        """Run the compiled schedule on normalised inputs; all of :func:`_simulate`'s outputs."""
        p = self.fwd_s.shape[0]
        f = _f64
        zeros = np.zeros((p, 2))
        hidden = np.zeros((p, 2, 2)) if self.a2a_hidden_s is None else self.a2a_hidden_s
        out = _simulate(p, self.m // 2, dualpipe_orders(p, self.m), f(self.fwd_s), f(self.bwd_s),
                        f(zeros if self.w_s is None else self.w_s),
                        f(np.zeros(p) if self.p2p_s is None else self.p2p_s), int(self.dp_mode),
                        f(zeros if self.ag_s is None else self.ag_s), f(zeros if self.rs_s is None else self.rs_s),
                        bool(self.overlap_param_gather),
                        np.ones((p, 2)) if self.units is None else np.maximum(1.0, f(self.units)), f(hidden),
                        float(self.a2a_sm))
        if not out[-1]:  # pragma: no cover - DualPipe's order cannot deadlock for the m the job checks admit
            raise RuntimeError("DualPipe schedule deadlocked")
        return out

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-rank (compute finish time, busy time, DP-stream finish time), as
        :meth:`PipelineSchedule.run`."""
        finish, busy, dp_free, _, _ = self._out()
        return finish, busy, dp_free

    def timeline(self) -> list[dict]:
        """Every op as an event; a merged op's two passes share its start and end; pass ``bwd`` a
        whole backward, ``bwd_input`` / ``bwd_weight`` a zero-bubble backward's two halves."""
        _, _, _, starts, _ = self._out()
        orders = dualpipe_orders(self.fwd_s.shape[0], self.m)
        names = {FWD: "fwd", BWD: "bwd", BWD_INPUT: "bwd_input", BWD_WEIGHT: "bwd_weight"}
        w_s = np.zeros_like(self.fwd_s) if self.w_s is None else self.w_s
        events = []
        for r in range(orders.shape[0]):
            for i in range(orders.shape[1]):
                kind, c, mb, merged = (int(x) for x in orders[r, i])
                if kind == NO_OP:
                    break
                dur = _op_s(kind, r, c, self.fwd_s, self.bwd_s, w_s)
                if merged or (i and orders[r, i - 1, 3]):
                    j = i if merged else i - 1
                    cf, cb = int(orders[r, j, 1]), int(orders[r, j + 1, 1])
                    hidden = 0.0 if self.a2a_hidden_s is None else self.a2a_hidden_s[r, cf, cb]
                    dur = self.fwd_s[r, cf] + self.bwd_s[r, cb] - (1.0 - self.a2a_sm) * hidden
                events.append({"rank": r, "pass": names[kind], "chunk": c, "microbatch": mb,
                               "start_s": float(starts[r, i]), "end_s": float(starts[r, i] + dur)})
        return events

    def hidden_a2a_s(self) -> np.ndarray:
        """(p,) all-to-all seconds each rank's ``F&B`` ops hide in one step."""
        p = self.fwd_s.shape[0]
        if self.a2a_hidden_s is None:
            return np.zeros(p)
        orders = dualpipe_orders(p, self.m)
        out = np.zeros(p)
        for r in range(p):
            at = np.flatnonzero(orders[r, :, 3] == 1)
            out[r] = float(self.a2a_hidden_s[r, orders[r, at, 1], orders[r, at + 1, 1]].sum())
        return out


def mirror_sum_s(cost, placement, job, work, grad_bytes_per_param: float) -> np.ndarray:
    """(p, 1) seconds of summing each stage's gradients over its two copies: an all-reduce between
    rank ``r`` and rank ``p-1-r`` of every pipeline group, of the gradient shard each holds after
    the DP reduce (ZeRO >= 1; ZeRO-0 the whole gradient)."""
    lay = job.layout
    params, expert = work.chunk_params[:, :1], work.expert_params[:, :1]
    shard = dp_shard(params, expert, lay) if job.zero >= 1 else params
    groups = placement.groups("pp")
    p = groups.shape[1]
    out = np.zeros((p, 1))
    for r in range(p):
        pairs = np.stack([groups[:, r], groups[:, p - 1 - r]], axis=1)
        out[r, 0] = cost.collective_time("all_reduce", pairs, float(shard[r, 0]) * grad_bytes_per_param)
    return out


def chunk_wgrad_s(timer, work, pace: float) -> np.ndarray:
    """(p, 1) seconds per micro-batch of each stage's weight-gradient GEMMs (``BlockTimer.wgrad_s``):
    its layers', the embedding's on the first stage, the head's on the last; times ``pace``."""
    out = sum(n * timer.wgrad_s(block) for block, n in work.layer_mix()).astype(float)
    out[0, 0] += timer.wgrad_s(work.embedding)
    out[-1, 0] += timer.wgrad_s(work.head)
    return out * pace


def dualpipe_inputs(timer, cost, placement, job, work, pace: float, fwd_parts: dict, bwd_parts: dict,
                    ag_s: np.ndarray, rs_s: np.ndarray, units: np.ndarray) -> tuple:
    """The per-stage (p, 1) inputs of a step as DualPipe's (p, 2) chunks (``workload.dualpipe.
    mirrored``): forward and backward seconds by category, the weight-gradient seconds, the DP
    all-gather and reduce seconds (the mirrored copies' gradient sum added, :func:`mirror_sum_s`)
    and the DP units."""
    rs_s = rs_s + mirror_sum_s(cost, placement, job, work, work.grad_reduce_bytes_per_param)
    fwd = {k: mirrored(a) for k, a in fwd_parts.items()}
    bwd = {k: mirrored(a) for k, a in bwd_parts.items()}
    return fwd, bwd, mirrored(chunk_wgrad_s(timer, work, pace)), mirrored(ag_s), mirrored(rs_s), mirrored(units)
