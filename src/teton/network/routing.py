"""Closed-form routing on the regular fabrics of ``teton.topology.graph``.

A path from GPU a to GPU b on different hosts climbs from a's leaf to the lowest tier t whose
domain holds both, then descends; in the folded Clos with planes the descent is fixed by the
choices made on the way up (``j_1 .. j_t``), so a route is t small integers per flow:

* ``ecmp``   -- each switch hashes the flow's 5-tuple (src, dst, UDP source port of the
  connection); every QP of one connection has the same 5-tuple, so they share one path. The hash is
  splitmix64 with a per-tier salt derived from ``seed``: collisions are random but reproducible.
* ``e-ecmp`` -- Meta's enhanced ECMP (SIGCOMM'24 §5.2, "E-ECMP + QP scaling"): the switches also
  hash the RoCE destination QP, so each of the N QPs of a connection is routed on its own.
* ``pinned`` -- path pinning (SIGCOMM'24 §5.1): the uplink is fixed by the destination "slice",
  the index of the destination's downlink on its leaf (and at higher tiers by the destination
  leaf), independent of the source. Balanced when racks are fully used by one job; collides when
  the flows leaving a rack aim at the same slices of different racks.
* ``adaptive`` -- InfiniBand adaptive routing / packet spraying taken as *ideal* spreading: every
  flow splits evenly over all equal-cost uplinks. Even spreading loads all uplinks of a tier in a
  domain equally, so they are solved as one bundle link per leaf (uplinks / downlinks) and per
  layer-i domain, with the capacity of the links that are alive -- exact for ideal spreading.

Link failures: ``failed_links`` cables (both directions) are removed, chosen uniformly among the
switch-to-switch cables with a seeded generator; hop-by-hop ECMP then hashes only over next hops
whose uplink (at the source side) and matching downlink (at the destination side) are alive.
A switch that loses *every* such next hop falls back to its alive uplinks (a routing black hole
is out of scope).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from teton.errors import SpecError, closest
from teton.topology.graph import Fabric

ROUTINGS = ("ecmp", "e-ecmp", "pinned", "adaptive")
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (Steele, Lea, Flood 2014) on uint64 arrays: a fast, well-mixed hash."""
    z = np.asarray(x, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def flow_key(src: np.ndarray, dst: np.ndarray, conn: np.ndarray) -> np.ndarray:
    """64-bit flow identity from source, destination GPU and connection (channel/QP) number."""
    s = np.asarray(src, dtype=np.uint64)
    d = np.asarray(dst, dtype=np.uint64)
    c = np.asarray(conn, dtype=np.uint64)
    return splitmix64(splitmix64(splitmix64(s) ^ d) ^ c)


@dataclass(frozen=True)
class Router:
    """Routes (src, dst, key) hops to link-id paths on ``fabric`` for one routing mode."""

    fabric: Fabric
    routing: str = "e-ecmp"
    seed: int = 0
    failed_links: int = 0
    alive: tuple[np.ndarray, ...] = field(init=False, repr=False)
    bundle_up_base: tuple[int, ...] = field(init=False, repr=False)
    bundle_down_base: tuple[int, ...] = field(init=False, repr=False)
    capacity_bytes_s: np.ndarray = field(init=False, repr=False)
    link_layer: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if self.routing not in ROUTINGS:
            raise SpecError("routing", self.routing, closest(self.routing, ROUTINGS))
        f = self.fabric
        sizes = [f.switches[i] * f.planes[i] for i in range(f.tiers - 1)]
        total = int(sum(sizes))
        if self.failed_links < 0 or self.failed_links > total:
            raise SpecError("fail_links", self.failed_links, f"must be between 0 and {total} switch cables")
        flat = np.ones(total, dtype=bool)
        if self.failed_links:
            rng = np.random.default_rng([self.seed, 0xFA11])
            flat[rng.choice(total, self.failed_links, replace=False)] = False
        alive, off = [], 0
        for i, s in enumerate(sizes):
            alive.append(flat[off:off + s].reshape(f.switches[i], f.planes[i]))
            off += s
        object.__setattr__(self, "alive", tuple(alive))
        # bundles for adaptive routing: tier 0 per leaf, tier i >= 1 per layer-i domain
        caps, layers, ups, downs = [f.link_capacity_bytes_s], [f.link_layer], [], []
        count = f.n_links
        for i in range(f.tiers - 1):
            cap = f.link_capacity_bytes_s[f.up_base[i]:f.up_base[i] + sizes[i]].reshape(alive[i].shape)
            groups = f.switches[i] if i == 0 else -(-f.n_gpus // f.spans[i])
            per = (cap * alive[i]).reshape(groups, -1).sum(axis=1)
            ups.append(count)
            downs.append(count + groups)
            count += 2 * groups
            caps += [per, per]
            layers += [np.full(2 * groups, 3 + i, dtype=np.int8)]
        object.__setattr__(self, "bundle_up_base", tuple(ups))
        object.__setattr__(self, "bundle_down_base", tuple(downs))
        object.__setattr__(self, "capacity_bytes_s", np.concatenate(caps))
        object.__setattr__(self, "link_layer", np.concatenate(layers))

    # -- one hop's choices ------------------------------------------------------------------
    def _choose(self, tier: int, src_sw: np.ndarray, dst_sw: np.ndarray, h: np.ndarray) -> np.ndarray:
        p = self.fabric.planes[tier]
        if not self.failed_links:
            return (h % np.uint64(p)).astype(np.int64)
        a = self.alive[tier]
        mask = a[src_sw] & a[dst_sw]
        dead = ~mask.any(axis=1)
        if dead.any():
            mask[dead] = a[src_sw[dead]]
        # resilient hashing (as switches do it): a flow whose next hop is alive keeps it; only the
        # flows of a failed one are rehashed over the live ones (rehashing every flow over the
        # survivors had let 32 failed links speed a 512-GPU ECMP all-reduce up by 29 %)
        first = (h % np.uint64(p)).astype(np.int64)
        keep = mask[np.arange(mask.shape[0]), first]
        count = mask.sum(axis=1)
        k = (h % np.maximum(count, 1).astype(np.uint64)).astype(np.int64)  # pinned keys are slots: spread them
        return np.where(keep, first, np.argmax(np.cumsum(mask, axis=1) > k[:, None], axis=1))

    def _selector(self, tier: int, a: np.ndarray, b: np.ndarray, key: np.ndarray) -> np.ndarray:
        f = self.fabric
        if self.routing == "pinned":
            if tier == 0:
                slot = b % f.spans[0]
                return (slot // f.gpus_per_host if f.rail else slot).astype(np.uint64)
            return splitmix64(f.leaf_of(b).astype(np.uint64) ^ np.uint64(tier))
        salt = splitmix64(np.uint64(self.seed) * np.uint64(1000003) + np.uint64(tier))
        return splitmix64(key ^ salt)

    def _paths(self, a: np.ndarray, b: np.ndarray, key: np.ndarray, t: int) -> np.ndarray:
        """(n, 4 + 2t) link ids of fabric paths turning at tier t >= 0."""
        f = self.fabric
        n = a.size
        out = np.empty((n, 4 + 2 * t), dtype=np.int64)
        out[:, 0] = f.pcie_up_base + a
        out[:, 1] = f.nic_up_base + a
        out[:, -2] = f.nic_down_base + b
        out[:, -1] = f.pcie_down_base + b
        la, lb = f.leaf_of(a), f.leaf_of(b)
        if self.routing == "adaptive":
            for i in range(t):
                ga, gb = (la, lb) if i == 0 else (a // f.spans[i], b // f.spans[i])
                out[:, 2 + i] = self.bundle_up_base[i] + ga
                out[:, 2 + 2 * t - 1 - i] = self.bundle_down_base[i] + gb
            return out
        c = np.zeros(n, dtype=np.int64)
        sa, sb = la, lb  # tier-i switch index on the source / destination side
        for i in range(t):
            j = self._choose(i, sa, sb, self._selector(i, a, b, key))
            p = f.planes[i]
            out[:, 2 + i] = f.up_base[i] + sa * p + j
            out[:, 2 + 2 * t - 1 - i] = f.down_base[i] + sb * p + j
            c = c * p + j
            w = f.width(i + 1)
            sa = (a // f.spans[i + 1]) * w + c
            sb = (b // f.spans[i + 1]) * w + c
        return out

    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Paths of hops src[i] -> dst[i] as CSR: (indptr (n+1,), link ids, turn tier (n,))."""
        f = self.fabric
        a = np.asarray(src, dtype=np.int64)
        b = np.asarray(dst, dtype=np.int64)
        key = np.asarray(key, dtype=np.uint64)
        tier = f.turn_tier(a, b)
        lengths = np.where(tier < 0, 2, 4 + 2 * tier)
        indptr = np.zeros(a.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        links = np.empty(int(indptr[-1]), dtype=np.int64)
        for t in np.unique(tier):
            sel = np.flatnonzero(tier == t)
            if t < 0:
                paths = np.stack([f.nvl_up_base + a[sel], f.nvl_down_base + b[sel]], axis=1)
            else:
                paths = self._paths(a[sel], b[sel], key[sel], int(t))
            pos = indptr[sel][:, None] + np.arange(paths.shape[1])
            links[pos.ravel()] = paths.ravel()
        return indptr, links, tier
