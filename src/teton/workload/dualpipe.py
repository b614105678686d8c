"""DualPipe (DeepSeek-V3, arXiv 2412.19437 Sec. 3.2.1; github.com/deepseek-ai/DualPipe): a
bidirectional pipeline schedule.

The model is split into ``p`` stages (``p`` even) and every pipeline rank holds two of them: stage
``r`` of the "down" direction (chunk 0, fed at rank 0) and stage ``p-1-r`` of the "up" direction
(chunk 1, fed at rank ``p-1``). Half of the micro-batches flow down, half up, so both ends of the
pipeline start at once. Each rank holds two copies' worth of parameters (``2x`` in the DualPipe
README's table), whose gradients are summed over the mirrored pair of ranks.

In the steady state each op runs the forward of one direction together with the backward of the
other (``F&B``, whose communication each pass hides under the other's compute), and some
backwards split into an input-gradient pass ``B`` and a deferred weight-gradient pass ``W``
(zero-bubble pipelining, Qi et al. 2023) that fills what would be idle. The README gives the
bubble as ``(p/2 - 1)(F&B + B - 3W)`` against 1F1B's ``(p - 1)(F + B)``, activations as
``p + 1`` micro-batches' worth of a stage.

:func:`dualpipe_orders` writes out each rank's op order as the reference implementation's
``DualPipe.step`` runs it (its eight phases); the engine simulates it (``engine.dualpipe``).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from teton.memo import cached

# op kinds of a DualPipe order: forward, whole backward, input-gradient backward (its weight
# gradient deferred), deferred weight gradient
FWD, BWD, BWD_INPUT, BWD_WEIGHT = 0, 1, 2, 3
NO_OP = -1  # pads a rank's order to the longest one's length


def mirrored(per_stage: np.ndarray) -> np.ndarray:
    """(p, 2) DualPipe chunks from a (p, 1) per-stage array: rank ``r`` holds stage ``r`` (chunk 0)
    and stage ``p-1-r`` (chunk 1)."""
    a = np.asarray(per_stage)
    return np.stack([a[:, 0], a[::-1, 0]], axis=1)


def held_per_rank(per_stage: np.ndarray) -> np.ndarray:
    """(p,) what each rank holds of a (p, 1) per-stage quantity under DualPipe: both its stages."""
    return mirrored(per_stage).sum(axis=1)


def dualpipe_orders(p: int, m: int) -> np.ndarray:
    """(p, n_ops, 4) op order (kind, chunk, micro-batch of the chunk's half, merged) of every rank,
    memoised; ``merged``: this forward runs as one op with the backward after it (``F&B``). Ranks
    run different numbers of deferred weight-gradient ops; shorter orders end in ``NO_OP`` rows.

    ``m`` micro-batches per DP rank, ``m/2`` each way; DualPipe needs ``p`` even and
    ``m >= 2p`` even (its ``step`` asserts both; ``teton.spec.layout`` checks them).
    """
    return _orders(p, m)


@cached(256)
def _orders(p: int, m: int) -> np.ndarray:
    rows = [_rank_order(p, m, r) for r in range(p)]
    out = np.full((p, max(len(r) for r in rows), 4), NO_OP, dtype=np.int64)  # ranks differ in their W ops
    for r, ops in enumerate(rows):
        out[r, :len(ops)] = ops
    out.flags.writeable = False
    return out


def _rank_order(p: int, m: int, rank: int) -> list[list[int]]:
    """One rank's ops, phase by phase as ``DualPipe.step`` (reference implementation, dualpipe.py).

    ``phase`` is the direction as the rank sees it: 0 the one whose input enters at its own half's
    end of the pipeline (chunk 0 on the first half of the ranks, chunk 1 on the second)."""
    halves, half_mb = p // 2, m // 2
    h = min(rank, p - 1 - rank)
    flip = int(rank >= halves)
    middle = h == halves - 1
    ops: list[list[int]] = []
    done = {FWD: [0, 0], BWD: [0, 0]}
    weights: deque[tuple[int, int]] = deque()

    def f(phase: int, merged: bool = False) -> None:
        c = phase ^ flip
        ops.append([FWD, c, done[FWD][c], int(merged)])
        done[FWD][c] += 1

    def b(phase: int, zero_bubble: bool = False) -> None:
        c = phase ^ flip
        ops.append([BWD_INPUT if zero_bubble else BWD, c, done[BWD][c], 0])
        if zero_bubble:
            weights.append((c, done[BWD][c]))
        done[BWD][c] += 1

    def w() -> None:
        c, mb = weights.popleft()
        ops.append([BWD_WEIGHT, c, mb, 0])

    for _ in range((halves - h - 1) * 2):  # 1: nF0
        f(0)
    for _ in range(h + 1):  # 2: nF0F1
        f(0)
        f(1)
    for _ in range(halves - h - 1):  # 3: nB1W1F1 (zero bubble)
        b(1, True)
        w()
        f(1)
    for i in range(half_mb - p + h + 1):  # 4 (main): nF0B1F1B0
        if i == 0 and middle:  # the middle ranks run these two apart, to shrink the bubble
            f(0)
            b(1)
        else:
            f(0, True)
            b(1)
        f(1, True)
        b(0)
    for _ in range(halves - h - 1):  # 5: nB1F1B0
        b(1)
        f(1, True)
        b(0)
    n6, zb = h + 1, False  # 6: nB1B0, the second half with zero bubble
    for i in range(n6):
        if i == n6 // 2 and h % 2 == 1:
            zb = True
        b(1, zb)
        if i == n6 // 2 and h % 2 == 0:
            zb = True
        b(0, zb)
    for _ in range(halves - h - 1):  # 7: nWB0 (zero bubble)
        w()
        b(0, True)
    for _ in range(h + 1):  # 8: nW
        w()
    return ops


def activation_states(p: int, m: int) -> list[np.ndarray]:
    """Per rank, the (n, 2) distinct counts of micro-batches whose activations each chunk holds
    over the rank's order: a forward adds one, a whole backward frees it, an input-gradient
    backward keeps it for its deferred weight gradient (the inputs of the weight-gradient GEMMs),
    which frees it. A rank's peak activation bytes are the largest ``states @ bytes per chunk``."""
    return _states(p, m)


@cached(256)
def _states(p: int, m: int) -> list[np.ndarray]:
    out = []
    for order in dualpipe_orders(p, m):
        kind, chunk = order[:, 0], order[:, 1]
        delta = np.where(kind == FWD, 1, np.where((kind == BWD) | (kind == BWD_WEIGHT), -1, 0))
        # each chunk's count after every op; the states are the counts just after each forward
        held = np.stack([np.cumsum(np.where(chunk == c, delta, 0)) for c in (0, 1)], axis=1)
        states = np.unique(held[kind == FWD], axis=0).astype(np.int64)
        states.flags.writeable = False
        out.append(states)
    return out


def peak_activation_bytes(p: int, m: int, per_chunk: np.ndarray) -> np.ndarray:
    """(p,) peak activation bytes of each rank: ``per_chunk`` (p, 2) bytes of one micro-batch of
    each of its chunks, at the fullest point of its order (:func:`activation_states`)."""
    return np.array([float((s @ per_chunk[r]).max()) for r, s in enumerate(activation_states(p, m))])
