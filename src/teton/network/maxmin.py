"""Max-min fair rates of flows on capacitated links, and flow completion over time.

A *flow* here is a set of link traversals moving at one common rate: a single point-to-point
connection, or a whole NCCL ring channel whose hops are coupled by the pipeline (each hop forwards
what the previous delivered, so the ring moves at its slowest hop). A crossing has a weight: the
fraction of the flow's rate it carries -- a connection striped over N QPs (NCCL round-robins its
data over them) crosses each QP's path with weight 1/N. A flow may cross a link more than once;
each crossing consumes weight x rate.

Max-min fairness by progressive filling (Bertsekas & Gallager, *Data Networks*, §6.5.2): raise all
unfrozen rates together; the first link to saturate fixes the rate of every unfrozen flow on it
at its fair share ``remaining capacity / unfrozen crossing weight``; repeat. The kernel keeps a heap of
link fair shares whose keys are lower bounds (shares only grow as flows freeze at the minimum
share, so a popped entry whose share has grown is simply re-queued), so a solve costs O(E + L log L) for E flow-link crossings -- compiled with numba (``cache=True``).

Completion (``complete``): solve, advance to the next completion, drop finished flows, re-solve.
Flows finishing within ``rtol`` of the earliest completion are retired in the same event (with
their own exact finish times) -- the flows of one collective phase have equal sizes, so events
are few (one per distinct bottleneck level). Each event re-solves all remaining flows: max-min
allocations can shift anywhere in the network when a flow leaves, so a local (incremental)
update is not exact; the batching keeps the number of re-solves small instead.
"""

from __future__ import annotations

import heapq

import numba as nb
import numpy as np


@nb.njit(cache=True)
def link_index(indptr, links, n_links):
    """Reverse (link -> flows) CSR of the flow -> links CSR."""
    n_flows = indptr.size - 1
    lptr = np.zeros(n_links + 1, dtype=np.int64)
    for e in range(links.size):
        lptr[links[e] + 1] += 1
    for i in range(n_links):
        lptr[i + 1] += lptr[i]
    fill = lptr[:-1].copy()
    flows = np.empty(links.size, dtype=np.int64)
    for f in range(n_flows):
        for e in range(indptr[f], indptr[f + 1]):
            lk = links[e]
            flows[fill[lk]] = f
            fill[lk] += 1
    return lptr, flows


@nb.njit(cache=True)
def merge_crossings(indptr, links, weight, n_links):
    """The same flows with each flow's crossings of one link merged into one crossing of their
    summed weight (its first, in order): a flow that crosses a link twice consumes the sum of the
    two weights x its rate either way, so the rates are the same, and the solve touches each
    (flow, link) pair once. A ring channel's QP-striped hops cross their host's NIC and leaf links
    many times: on the 131K-GPU DP ring this takes 25.5M crossings to 6.7M."""
    n_flows = indptr.size - 1
    slot = np.full(n_links, -1, dtype=np.int64)  # where this flow's crossing of the link sits
    owner = np.full(n_links, -1, dtype=np.int64)  # the flow that set slot
    out_ptr = np.zeros(n_flows + 1, dtype=np.int64)
    out_links = np.empty(links.size, dtype=np.int64)
    out_weight = np.empty(links.size)
    n = 0
    for f in range(n_flows):
        for e in range(indptr[f], indptr[f + 1]):
            lk = links[e]
            if owner[lk] == f:
                out_weight[slot[lk]] += weight[e]
            else:
                owner[lk] = f
                slot[lk] = n
                out_links[n] = lk
                out_weight[n] = weight[e]
                n += 1
        out_ptr[f + 1] = n
    return out_ptr, out_links[:n].copy(), out_weight[:n].copy()


@nb.njit(cache=True)
def _maxmin(indptr, links, weight, lptr, lflows, cap, active):
    n_flows = indptr.size - 1
    n_links = cap.size
    rem = cap.copy()
    cnt = np.zeros(n_links, dtype=np.int64)  # unfrozen crossings (emptiness test)
    wsum = np.zeros(n_links)  # their weights: a link's fair share is rem / wsum
    for f in range(n_flows):
        if active[f]:
            for e in range(indptr[f], indptr[f + 1]):
                cnt[links[e]] += 1
                wsum[links[e]] += weight[e]
    heap = [(0.0, np.int64(0))]
    heap.pop()
    for lk in range(n_links):
        if cnt[lk] > 0:
            heap.append((rem[lk] / wsum[lk], np.int64(lk)))
    heapq.heapify(heap)
    rate = np.zeros(n_flows)
    frozen = ~active
    unfrozen = int(active.sum())
    done = np.zeros(n_links, dtype=np.bool_)
    while len(heap) > 0 and unfrozen > 0:  # the links left once every flow is frozen set no rate
        s, lk = heapq.heappop(heap)
        if done[lk] or cnt[lk] <= 0:
            continue
        share = max(rem[lk], 0.0) / max(wsum[lk], 1e-300)
        if share > s * (1.0 + 1e-12):  # stale lower bound (shares only grow): re-queue it
            heapq.heappush(heap, (share, lk))
            continue
        done[lk] = True
        for k in range(lptr[lk], lptr[lk + 1]):
            f = lflows[k]
            if frozen[f]:
                continue
            frozen[f] = True
            unfrozen -= 1
            rate[f] = share
            for e in range(indptr[f], indptr[f + 1]):
                l2 = links[e]
                rem[l2] -= share * weight[e]
                wsum[l2] -= weight[e]
                cnt[l2] -= 1
    return rate


@nb.njit(cache=True)
def _complete(indptr, links, weight, lptr, lflows, cap, size, rtol, max_events):
    n = size.size
    remaining = size.copy()
    active = size > 0
    finish = np.zeros(n)
    t = 0.0
    events = 0
    while active.any():
        rate = _maxmin(indptr, links, weight, lptr, lflows, cap, active)
        events += 1
        dt = np.inf
        for f in range(n):
            if active[f]:
                tf = remaining[f] / rate[f] if rate[f] > 0 else np.inf
                if tf < dt:
                    dt = tf
        if not np.isfinite(dt):
            for f in range(n):
                if active[f]:
                    finish[f] = np.inf
            break
        last = events >= max_events
        for f in range(n):
            if active[f]:
                tf = remaining[f] / rate[f] if rate[f] > 0 else np.inf
                if last or tf <= dt * (1.0 + rtol):
                    finish[f] = t + tf
                    active[f] = False
                else:
                    remaining[f] -= rate[f] * dt
        t += dt
    return finish, events


def _prep(indptr, links, capacity, weight):
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    links = np.ascontiguousarray(links, dtype=np.int64)
    capacity = np.ascontiguousarray(capacity, dtype=np.float64)
    weight = np.ones(links.size) if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
    indptr, links, weight = merge_crossings(indptr, links, weight, capacity.size)
    lptr, lflows = link_index(indptr, links, capacity.size)
    return indptr, links, weight, lptr, lflows, capacity


def maxmin_rates(indptr: np.ndarray, links: np.ndarray, capacity: np.ndarray,
                 active: np.ndarray | None = None, weight: np.ndarray | None = None) -> np.ndarray:
    """Max-min fair rate of every flow: flow f crosses ``links[indptr[f]:indptr[f+1]]``, each
    crossing consuming ``weight`` x its rate (default 1)."""
    args = _prep(indptr, links, capacity, weight)
    if active is None:
        active = np.ones(args[0].size - 1, dtype=np.bool_)
    return _maxmin(*args, np.ascontiguousarray(active, dtype=np.bool_))


def complete(indptr: np.ndarray, links: np.ndarray, capacity: np.ndarray, size_bytes: np.ndarray,
             rtol: float = 0.02, max_events: int = 32, weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Finish time (s) of every flow of ``size_bytes`` starting together, with re-solves as flows
    finish; returns (finish times, solver events). After ``max_events`` re-solves the remaining
    flows finish at their current rates."""
    args = _prep(indptr, links, capacity, weight)
    finish, events = _complete(*args, np.ascontiguousarray(size_bytes, dtype=np.float64), float(rtol),
                               int(max_events))
    return finish, int(events)


def maxmin_reference(paths: list[list[int]], capacity: list[float],
                     weights: list[list[float]] | None = None) -> list[float]:
    """Pure-python progressive filling (water level raised until a link saturates), for tests."""
    n = len(paths)
    weights = weights or [[1.0] * len(p) for p in paths]
    rate = [0.0] * n
    frozen = [False] * n
    while not all(frozen):
        best = None
        for link, c in enumerate(capacity):
            w_free = sum(w for f in range(n) if not frozen[f] for x, w in zip(paths[f], weights[f], strict=True) if x == link)
            if w_free <= 0:
                continue
            used = sum(rate[f] * w for f in range(n) if frozen[f] for x, w in zip(paths[f], weights[f], strict=True) if x == link)
            level = (c - used) / w_free
            if best is None or level < best[0]:
                best = (level, link)
        if best is None:
            break
        for f in range(n):
            if not frozen[f] and best[1] in paths[f]:
                frozen[f] = True
                rate[f] = best[0]
    return rate
