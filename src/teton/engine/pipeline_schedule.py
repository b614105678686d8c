"""Pipeline schedules simulated as schedules: 1F1B and interleaved 1F1B (Megatron-LM).

Each pipeline rank runs its ordered list of (forward|backward, chunk, micro-batch) ops; an op
starts when the rank is free and its input has arrived: the previous virtual stage's forward
output (or the next one's backward gradient) plus the point-to-point transfer time. The data-
parallel collectives of each rank run on a separate stream in program order (parameter
all-gathers before the ops that need them, gradient reduce-scatters after the backward that
produces them), so their exposure falls out of the timeline too.

Op order (Narayanan et al. 2021, Sec. 2.2; Megatron-LM ``forward_backward_pipelining_with_
interleaving``): rank r runs ``w = min((p-r-1)*2 + (v-1)*p, m*v)`` warm-up forwards (for v = 1,
``min(p-r-1, m)``), then alternates one forward and one backward, then drains the backwards.
The k-th forward of a rank is chunk ``(k // p) % v`` of micro-batch ``(k // (p*v))*p + k % p``;
backwards visit chunks in reverse. Virtual stage of (rank r, chunk c) is ``c*p + r``.

For uniform stages and zero transfer time the idle time this produces is the textbook bubble,
(p-1)/(v*m) of the busy time; tests check it.

All-to-all overlap (``software.ep_comm_overlap``; Megatron-Core's ``combined_1f1b``, after
DeepSeek-V3's DualPipe): every rank warms up with one forward more, and each steady-state
forward runs as one op with the backward after it. The op waits for both inputs and takes both
passes' time less the all-to-all each pass hides under the other's compute (:func:`pair_hidden_s`),
whose kernels hold their share of the SMs meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from teton.memo import cached
from teton.workload.pipeline import chunk_orders, warmup_forwards

# DP-stream behaviour codes (see ``simulate_pipeline``)
DP_NONE, DP_ONCE, DP_PER_MICROBATCH, DP_FULL_SHARD = 0, 1, 2, 3


def schedule_orders(p: int, v: int, m: int, n_round: int | None = None, merged: bool = False) -> np.ndarray:
    """(p, 2*m*v, 4) op order (is_backward, chunk, micro-batch, merged) of every rank, memoised.

    Rank r runs its warm-up forwards (``workload.pipeline.warmup_forwards``), then alternates one
    forward and one backward, then drains the backwards; forwards and backwards follow
    ``workload.pipeline.chunk_orders`` (rounds of ``n_round`` micro-batches, default p). With
    ``merged`` (all-to-all overlap, ``workload.pipeline.ep_overlap_warmup``) every rank warms up
    with one forward more and each steady-state forward is flagged ``merged``: it runs as one op
    with the backward after it.
    """
    return _orders(p, v, m, n_round or p, int(merged))


@cached(256)
def _orders(p: int, v: int, m: int, n: int, extra: int) -> np.ndarray:
    fwd, bwd = chunk_orders(v, m, n)
    total = m * v
    orders = np.zeros((p, 2 * total, 4), dtype=np.int64)
    for r in range(p):
        w = warmup_forwards(p, v, m, r, n, extra)
        idx = np.empty(2 * total, dtype=np.int64)  # position in fwd (>= 0) or ~position in bwd
        steady = total - w
        idx[:w] = np.arange(w)
        idx[w:w + 2 * steady:2] = np.arange(w, total)
        idx[w + 1:w + 2 * steady:2] = ~np.arange(steady)
        idx[w + 2 * steady:] = ~np.arange(steady, total)
        is_bwd = idx < 0
        pos = np.where(is_bwd, ~idx, idx)
        pairs = np.where(is_bwd[:, None], bwd[pos], fwd[pos])
        orders[r, :, 0] = is_bwd
        orders[r, :, 1:3] = pairs
        if extra:
            orders[r, w:w + 2 * steady:2, 3] = 1
    return orders


def pair_hidden_s(ep_fwd_s: np.ndarray, ep_bwd_s: np.ndarray, compute_fwd_s: np.ndarray,
                  compute_bwd_s: np.ndarray) -> np.ndarray:
    """(p, v, v) all-to-all seconds a merged op of rank ``r`` hides when it runs the forward of
    chunk ``cf`` with the backward of chunk ``cb``: each pass's exposed all-to-all under the other
    pass's compute, ``min(ep_fwd[cf], compute_bwd[cb]) + min(ep_bwd[cb], compute_fwd[cf])``
    (Megatron-Core's ``combined_1f1b`` puts one pass's dispatch and combine beside the other's
    attention and experts). Inputs: (p, v) seconds per micro-batch of each chunk."""
    return (np.minimum(ep_fwd_s[:, :, None], compute_bwd_s[:, None, :])
            + np.minimum(ep_bwd_s[:, None, :], compute_fwd_s[:, :, None]))


def merged_hidden_s(orders: np.ndarray, hidden_s: np.ndarray) -> np.ndarray:
    """(p,) all-to-all seconds each rank's merged ops hide in one step: ``hidden_s`` (:func:`pair_hidden_s`)
    summed over the (forward chunk, backward chunk) of every op ``orders`` flags merged."""
    out = np.zeros(orders.shape[0])
    for r in range(orders.shape[0]):
        at = np.flatnonzero(orders[r, :, 3])
        out[r] = float(hidden_s[r, orders[r, at, 1], orders[r, at + 1, 1]].sum())
    return out


@njit(cache=True)
def _param_gathers_at_start(p, v, dp_mode, ag_s, overlap_ag):
    """(ready time per chunk, rank free time, DP-stream free time) at step start.

    ZeRO-1/2 (``DP_ONCE``, ``DP_PER_MICROBATCH``) gathers each chunk's parameters once per step,
    the chunks one after the other on the DP stream; without ``overlap_ag`` the rank waits for
    all of them before its first op.
    """
    ag_ready = np.zeros((p, v))
    rank_free = np.zeros(p)
    dp_free = np.zeros(p)
    if dp_mode == DP_ONCE or dp_mode == DP_PER_MICROBATCH:
        for r in range(p):
            t = 0.0
            for c in range(v):
                t += ag_s[r, c]
                ag_ready[r, c] = t
            if overlap_ag:
                dp_free[r] = t
            else:
                rank_free[r] = t
                dp_free[r] = t
                for c in range(v):
                    ag_ready[r, c] = t
    return ag_ready, rank_free, dp_free


@njit(cache=True)
def _gathered_forward(start, dur, ready, ag, n_units, bucketed):
    """(start, end) of a chunk's first forward under ZeRO-1/2: its parameters arrive on the DP
    stream unit by unit (``ready``: when the last has; a unit is a layer, ``n_units`` of them) and
    each unit computes once gathered (Megatron-Core's ``overlap_param_gather``: the forward
    pre-hook of each bucket waits for its all-gather); without ``bucketed`` the op waits for all."""
    if not bucketed or n_units <= 1:
        start = max(start, ready)
        return start, start + dur
    start = max(start, ready - ag + ag / n_units)
    return start, max(start + dur, ready + dur / n_units)


@njit(cache=True)
def _bucketed_reduce(start, dur, dp_free, rs, n_units, bucketed):
    """DP-stream free time after reducing a backward's gradients: each unit's (layer's) gradients
    are ready as the backward passes it, at ``start + dur (u + 1) / n``, and its reduce-scatter
    (``rs / n``) starts then or when the stream is free (Megatron-Core's ``overlap_grad_reduce``,
    PyTorch DDP's buckets); without ``bucketed`` the whole reduce starts after the backward."""
    if not bucketed or n_units <= 1:
        return max(dp_free, start + dur) + rs
    n = int(n_units)
    t = dp_free
    for u in range(n):
        t = max(t, start + dur * (u + 1) / n) + rs / n
    return t


@njit(cache=True)
def _full_shard_op(ready, dur, is_bwd, ag, rs, n_units, dp_free, last_start):
    """(start, end, DP-stream free time) of an op under ZeRO-3 / FSDP (``DP_FULL_SHARD``).

    The op's parameters (``ag`` seconds) are gathered unit by unit (a unit is a layer, ``n_units``
    of them), prefetched once the previous op started; the op starts on its first unit and each
    unit computes once gathered, so the last one after the whole gather. In backward each unit's
    gradients (``rs`` seconds in all) are reduce-scattered after its compute, interleaved with the
    gathers on the DP stream.
    """
    ag_start = max(dp_free, last_start)
    start = max(ready, ag_start + ag / n_units)
    end = start + dur
    ag_end = ag_start + ag
    if is_bwd == 0:
        return start, max(end, ag_end + dur / n_units), ag_end
    end = max(end, ag_end + rs * (n_units - 1) / n_units + dur / n_units)
    return start, end, max(ag_end + rs, end + rs / n_units)


@njit(cache=True)
def _input_ready(fwd_done, bwd_done, p2p_s, p, v, r, is_bwd, c, mb):
    """When the input of rank ``r``'s op (pass, chunk, micro-batch) arrives, or -1 if it has not
    been produced yet: the previous virtual stage's activation (rank r-1, or the last rank's
    previous chunk), the next one's gradient (rank r+1, or the first rank's next chunk), plus the
    p2p transfer. A merged op's backward looks its input up here; every other op's lookup stays
    inline in :func:`_simulate`."""
    if is_bwd == 0:
        if r > 0:
            d, hop = fwd_done[r - 1, c, mb], p2p_s[r - 1]
        elif c > 0:
            d, hop = fwd_done[p - 1, c - 1, mb], p2p_s[p - 1]
        else:
            return 0.0
    elif r == p - 1 and c == v - 1:
        d, hop = fwd_done[r, c, mb], 0.0
    elif r < p - 1:
        d, hop = bwd_done[r + 1, c, mb], p2p_s[r]
    else:
        d, hop = bwd_done[0, c + 1, mb], p2p_s[p - 1]
    return -1.0 if d < 0 else d + hop


@njit(cache=True)
def _place_op(dp_mode, ready, dur, first_forward, has_bwd, last_mb, ag_ready, ag, ag_f, rs, units_f, units_b,
              dp_free, last_start, overlap_ag):
    """(start, end, DP-stream free time) of an op of ``dur`` seconds whose inputs are ready at
    ``ready``: under ZeRO-3 around its parameter gathers (:func:`_full_shard_op`; ``ag`` the op's
    whole gather), a chunk's first forward under ZeRO-1/2 after its gathered units
    (:func:`_gathered_forward`), and an op with a backward followed by its gradients' reduce, after
    every backward or after the last micro-batch's (DP_NONE: the all-reduce of ``rs`` when there is one)."""
    if dp_mode == DP_FULL_SHARD:
        return _full_shard_op(ready, dur, 1 if has_bwd else 0, ag, rs, units_b, dp_free, last_start)
    start, end = ready, ready + dur
    if first_forward and (dp_mode == DP_ONCE or dp_mode == DP_PER_MICROBATCH):
        start, end = _gathered_forward(start, dur, ag_ready, ag_f, units_f, overlap_ag)
    last = last_mb and (dp_mode == DP_ONCE or (dp_mode == DP_NONE and rs > 0))
    if has_bwd and (dp_mode == DP_PER_MICROBATCH or last):
        dp_free = _bucketed_reduce(start, dur, dp_free, rs, units_b, True)
    return start, end, dp_free


@njit(cache=True)
def _simulate(p, v, m, orders, fwd_s, bwd_s, p2p_s, dp_mode, ag_s, rs_s, overlap_ag, units, hidden_s, a2a_sm):
    """Run every rank's ``orders`` (:func:`simulate_pipeline`; a merged op: the module docstring);
    returns (per-rank finish, busy, DP-stream free, op starts, orders, completed), completed False
    on a deadlock. The input lookup stays inline: a helper taking the ``*_done`` arrays
    (:func:`_input_ready`, merged ops only) pays their reference counting per op (2.5x the loop)."""
    n_ops = 2 * m * v
    fwd_done = np.full((p, v, m), -1.0)
    bwd_done = np.full((p, v, m), -1.0)
    ptr = np.zeros(p, dtype=np.int64)
    starts = np.zeros((p, n_ops))
    busy = np.zeros(p)
    last_start = np.zeros(p)
    ag_ready, rank_free, dp_free = _param_gathers_at_start(p, v, dp_mode, ag_s, overlap_ag)
    remaining = p * n_ops
    while remaining > 0:
        progress = False
        for r in range(p):
            while ptr[r] < n_ops:
                merged = orders[r, ptr[r], 3]
                is_bwd, c, mb = orders[r, ptr[r], 0], orders[r, ptr[r], 1], orders[r, ptr[r], 2]
                if is_bwd == 0:
                    if r == 0 and c == 0:
                        dep = 0.0
                    elif r > 0:
                        d = fwd_done[r - 1, c, mb]
                        if d < 0:
                            break
                        dep = d + p2p_s[r - 1]
                    else:
                        d = fwd_done[p - 1, c - 1, mb]
                        if d < 0:
                            break
                        dep = d + p2p_s[p - 1]
                else:
                    if r == p - 1 and c == v - 1:
                        dep = fwd_done[r, c, mb]
                    elif r < p - 1:
                        d = bwd_done[r + 1, c, mb]
                        if d < 0:
                            break
                        dep = d + p2p_s[r]
                    else:
                        d = bwd_done[0, c + 1, mb]
                        if d < 0:
                            break
                        dep = d + p2p_s[p - 1]
                cb, mbb = orders[r, ptr[r] + merged, 1], orders[r, ptr[r] + merged, 2]  # the backward's
                dur, ag = (fwd_s[r, c] if is_bwd == 0 else bwd_s[r, c]), ag_s[r, c]
                if merged:  # the backward's input too; both passes less what each hides of the other's a2a
                    d = _input_ready(fwd_done, bwd_done, p2p_s, p, v, r, 1, cb, mbb)
                    if d < 0:
                        break
                    dep = max(dep, d)
                    dur = fwd_s[r, c] + bwd_s[r, cb] - (1.0 - a2a_sm) * hidden_s[r, c, cb]
                    ag = ag_s[r, c] + ag_s[r, cb]
                has_bwd = is_bwd == 1 or merged == 1
                start = max(rank_free[r], dep)
                end = start + dur
                if dp_mode == DP_FULL_SHARD or (is_bwd == 0 and mb == 0) or (
                        has_bwd and (mbb == m - 1 or dp_mode == DP_PER_MICROBATCH)):  # ops the DP stream can move
                    start, end, dp_free[r] = _place_op(
                        dp_mode, start, dur, is_bwd == 0 and mb == 0, has_bwd, mbb == m - 1, ag_ready[r, c], ag,
                        ag_s[r, c], rs_s[r, cb], units[r, c], units[r, cb], dp_free[r], last_start[r], overlap_ag)
                starts[r, ptr[r]:ptr[r] + 1 + merged] = start
                last_start[r] = start
                rank_free[r] = end
                busy[r] += dur
                if is_bwd == 0:
                    fwd_done[r, c, mb] = end
                if has_bwd:
                    bwd_done[r, cb, mbb] = end
                ptr[r] += 1 + merged
                remaining -= 1 + merged
                progress = True
        if not progress:
            return rank_free, busy, dp_free, starts, orders, False
    return rank_free, busy, dp_free, starts, orders, True


def _run(fwd_s, bwd_s, m, p2p_s, dp_mode, ag_s, rs_s, overlap_param_gather, n_round=None, units=None,
         a2a_hidden_s=None, a2a_sm=0.0):
    """Normalise the inputs and run the compiled schedule; returns all of its outputs."""
    fwd_s = np.ascontiguousarray(fwd_s, dtype=np.float64)
    bwd_s = np.ascontiguousarray(bwd_s, dtype=np.float64)
    p, v = fwd_s.shape
    zeros = np.zeros((p, v))
    out = _simulate(p, v, int(m), schedule_orders(p, v, int(m), n_round, a2a_hidden_s is not None), fwd_s, bwd_s,
                    np.ascontiguousarray(np.zeros(p) if p2p_s is None else p2p_s, dtype=np.float64), int(dp_mode),
                    zeros if ag_s is None else np.ascontiguousarray(ag_s, dtype=np.float64),
                    zeros if rs_s is None else np.ascontiguousarray(rs_s, dtype=np.float64),
                    bool(overlap_param_gather),
                    np.ones((p, v)) if units is None else np.maximum(1.0, np.asarray(units, dtype=np.float64)),
                    np.zeros((p, v, v)) if a2a_hidden_s is None else np.ascontiguousarray(a2a_hidden_s, dtype=np.float64),
                    float(a2a_sm))
    if not out[-1]:  # pragma: no cover - the job checks only admit orders that cannot deadlock
        raise RuntimeError("pipeline schedule deadlocked")
    return fwd_s, bwd_s, out


def simulate_pipeline(fwd_s: np.ndarray, bwd_s: np.ndarray, m: int, p2p_s: np.ndarray | None = None,
                      dp_mode: int = DP_NONE, ag_s: np.ndarray | None = None, rs_s: np.ndarray | None = None,
                      overlap_param_gather: bool = True, n_round: int | None = None,
                      units: np.ndarray | None = None, a2a_hidden_s: np.ndarray | None = None,
                      a2a_sm: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the schedule; returns per-rank (compute finish time, busy time, DP-stream finish time).

    ``fwd_s``/``bwd_s``: (p, v) seconds per micro-batch for chunk c on rank r (exposed TP/CP/EP
    communication included). ``p2p_s``: (p,) transfer time from rank r to r+1 (index p-1: the
    wrap-around from the last rank to the first, used by the interleaved schedule).
    ``dp_mode``: DP_NONE (no DP comm, or an all-reduce of ``rs_s`` after each chunk's last
    backward), DP_ONCE (reduce-scatter once per step per chunk; parameter all-gather ``ag_s``
    chained at step start), DP_PER_MICROBATCH (reduce-scatter after every backward),
    DP_FULL_SHARD (ZeRO-3 / FSDP: every op gathers its chunk's parameters and every backward
    reduce-scatters its gradients, ``units`` (p, v) at a time, the FSDP units (layers) of the
    chunk: a unit computes once gathered and the next unit's gather overlaps it, so an op waits
    for one unit's gather, and for the rest only where communication outlasts compute).
    ``n_round``: the interleaved schedule's consecutive micro-batches per chunk (default p).
    ``a2a_hidden_s``: (p, v, v) all-to-all seconds a merged op hides (:func:`pair_hidden_s`), given
    when the schedule overlaps the MoE all-to-all (merged forward-backward ops,
    :func:`schedule_orders`); ``a2a_sm``: the SM share the all-to-all's kernels hold meanwhile.
    """
    _, _, (finish, busy, dp_free, _starts, _orders, _ok) = _run(fwd_s, bwd_s, m, p2p_s, dp_mode, ag_s, rs_s,
                                                                overlap_param_gather, n_round, units, a2a_hidden_s, a2a_sm)
    return finish, busy, dp_free


def pipeline_timeline(fwd_s: np.ndarray, bwd_s: np.ndarray, m: int, p2p_s: np.ndarray | None = None,
                      dp_mode: int = DP_NONE, ag_s: np.ndarray | None = None, rs_s: np.ndarray | None = None,
                      overlap_param_gather: bool = True, n_round: int | None = None,
                      units: np.ndarray | None = None, a2a_hidden_s: np.ndarray | None = None,
                      a2a_sm: float = 0.0) -> list[dict]:
    """The schedule as events: one dict per op with rank, pass, chunk, micro-batch, start and end
    (the two passes of a merged op share its start and end)."""
    fwd_s, bwd_s, (_, _, _, starts, orders, _) = _run(fwd_s, bwd_s, m, p2p_s, dp_mode, ag_s, rs_s,
                                                      overlap_param_gather, n_round, units, a2a_hidden_s, a2a_sm)
    events = []
    for r in range(fwd_s.shape[0]):
        for i in range(orders.shape[1]):
            is_bwd, c, mb = (int(x) for x in orders[r, i, :3])
            dur = bwd_s[r, c] if is_bwd else fwd_s[r, c]
            pair = orders[r, i, 3] or (i and orders[r, i - 1, 3])
            if pair:  # a merged op: both passes less what the all-to-all overlap hides
                j = i if orders[r, i, 3] else i - 1
                cf, cb = int(orders[r, j, 1]), int(orders[r, j + 1, 1])
                dur = fwd_s[r, cf] + bwd_s[r, cb] - (1.0 - a2a_sm) * a2a_hidden_s[r, cf, cb]
            events.append({"rank": r, "pass": "bwd" if is_bwd else "fwd", "chunk": c, "microbatch": mb,
                           "start_s": float(starts[r, i]), "end_s": float(starts[r, i] + dur)})
    return events


@dataclass(frozen=True, eq=False)
class PipelineSchedule:
    """What one run of the schedule takes (:func:`simulate_pipeline`'s arguments): (p, v) seconds
    per micro-batch of every chunk's forward and backward, ``m`` micro-batches, the (p,) p2p
    transfer times, the DP-stream mode with its (p, v) all-gather and reduce seconds, whether
    parameter gathers overlap, the interleaved round size, the FSDP units per chunk and, under
    all-to-all overlap, what a merged op hides (:func:`pair_hidden_s`) with the SM share of the
    all-to-all's kernels."""

    fwd_s: np.ndarray
    bwd_s: np.ndarray
    m: int
    p2p_s: np.ndarray | None = None
    dp_mode: int = DP_NONE
    ag_s: np.ndarray | None = None
    rs_s: np.ndarray | None = None
    overlap_param_gather: bool = True
    n_round: int | None = None
    units: np.ndarray | None = None
    a2a_hidden_s: np.ndarray | None = None
    a2a_sm: float = 0.0

    @property
    def chunk_micro_batches(self) -> int:
        """Micro-batches each chunk runs in a step."""
        return self.m

    def _args(self) -> tuple:
        return (self.fwd_s, self.bwd_s, self.m, self.p2p_s, self.dp_mode, self.ag_s, self.rs_s,
                self.overlap_param_gather, self.n_round, self.units, self.a2a_hidden_s, self.a2a_sm)

    def run(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-rank (compute finish time, busy time, DP-stream finish time): :func:`simulate_pipeline`."""
        return simulate_pipeline(*self._args())

    def timeline(self) -> list[dict]:
        """Every op as an event: :func:`pipeline_timeline`."""
        return pipeline_timeline(*self._args())

    def hidden_a2a_s(self) -> np.ndarray:
        """(p,) all-to-all seconds each rank's merged ops hide in one step (zeros without overlap)."""
        p, v = self.fwd_s.shape
        if self.a2a_hidden_s is None:
            return np.zeros(p)
        return merged_hidden_s(schedule_orders(p, v, self.m, self.n_round, True), self.a2a_hidden_s)

    def compute_only(self, fwd_s: np.ndarray, bwd_s: np.ndarray, p2p_s: np.ndarray | None = None) -> PipelineSchedule:
        """The same pipeline (micro-batches, round size, all-to-all overlap) with these op times and
        p2p and no DP streams."""
        return replace(self, fwd_s=fwd_s, bwd_s=bwd_s, p2p_s=p2p_s, dp_mode=DP_NONE, ag_s=None, rs_s=None,
                       overlap_param_gather=True, units=None)
