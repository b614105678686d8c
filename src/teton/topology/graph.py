"""The explicit fabric graph: GPUs, NICs, NVSwitches and switch tiers, joined by directed links.

One graph type for every topology. ``build_fabric(cluster)`` turns a layered ``ClusterSpec``
into a folded Clos with *planes* (the standard construction of Clos / fat-tree fabrics):

* per NVLink domain an NVSwitch node (a host's NVSwitch, or a rack's NVLink switch trays: GB200
  NVL72's 72 GPUs, ``ClusterSpec.domain_gpus``); every GPU has one link up to it and one down
  (NVLink per-direction bandwidth, the NVSwitch being non-blocking), one PCIe link to its NIC and
  back, and the NIC a link up to its leaf switch and back (one backend NIC per GPU, Grand Teton /
  DGX / GB200 trays). Rails follow the host: GPU *r* of a host is on rail *r*.
* tier 0 (leaf): ``clos`` / ``fat-tree``: one leaf per ``layers[0]`` domain (Meta RTSW: one per
  rack of 16 GPUs; Quantum-2 leaf: 32 GPUs = half of 64 ports). ``rail-optimized``: one leaf per
  (domain, rail) -- GPU *r* of every host of a scalable unit sits on leaf *r* (DGX SuperPOD RA).
* tier i >= 1: every layer-i domain holds ``W_i = P_1 * ... * P_i`` switches; a tier-(i-1) switch
  has ``P_i`` uplinks, one to each tier-i switch of its *plane* (``c_i = c_{i-1} * P_i + j``) in
  its domain. ``P_i = round(downlinks / oversubscription)`` of the tier below (RTSW: 16 NICs at
  1:1 -> 16 CTSW planes per pod; CTSW: 192 RTSWs at 1:7 -> 27 ATSW uplinks; Quantum-2 64-port:
  32 down / 32 up). Uplink capacity = the switch's down capacity / oversubscription / P_i, so
  the ratio is exact whatever P_i rounds to.

Link ids are closed-form, so routing never searches: the uplink ``j`` of tier-i switch ``u`` is
``up_base[i] + u * P_{i+1} + j``, and the reverse (down) link has the same offset from
``down_base[i]``. ``gpu_node[g]`` is GPU g's node id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from teton.spec.cluster import ClusterSpec, path_latency_s

# Node kinds (node_kind); switch tier t has kind SWITCH + t.
GPU_NODE, NIC_NODE, NVSWITCH_NODE, SWITCH = 0, 1, 2, 3
# Link layers (link_layer); fabric uplink tier i -> i+1 has layer FABRIC + i (both directions).
NVLINK, PCIE, NIC_LINK, FABRIC = 0, 1, 2, 3

# Leaf/NIC cables (DAC / short optics) add ~ 5 ns/m; negligible next to switch hops, so a link's
# latency is the port-to-port latency of the switch it enters (the cluster layer's hop latency).
NVLINK_HOP_LATENCY_S = 0.5e-6  # NVSwitch port-to-port ~ 0.5 us (NVIDIA NVLink Switch brief, order)


@dataclass(frozen=True)
class Fabric:
    """A cluster's backend fabric as numpy arrays (nodes, directed links) plus its regular shape."""

    name: str
    topology: str
    n_gpus: int
    gpus_per_host: int  # a host's GPUs: its NICs' rails
    domain_gpus: int  # an NVLink domain's GPUs: a path inside one stays on NVLink
    node_kind: np.ndarray  # (nodes,) int8: GPU_NODE, NIC_NODE, NVSWITCH_NODE, SWITCH + tier
    link_src: np.ndarray  # (links,) int32 node ids
    link_dst: np.ndarray  # (links,) int32
    link_capacity_bytes_s: np.ndarray  # (links,) float64
    link_latency_s: np.ndarray  # (links,) float64
    link_layer: np.ndarray  # (links,) int8: NVLINK, PCIE, NIC_LINK, FABRIC + tier
    gpu_node: np.ndarray  # (gpus,) int32: node id of each GPU
    # the regular shape, for closed-form routing
    spans: tuple[int, ...]  # GPUs per domain of each layer (tier i switches serve layer-i domains)
    planes: tuple[int, ...]  # planes[i] = uplinks per tier-i switch (i = 0 .. tiers-2)
    switches: tuple[int, ...]  # switches per tier
    rail: bool  # rail-optimised leaves
    up_base: tuple[int, ...]  # first link id of tier-i uplinks
    down_base: tuple[int, ...]  # first link id of the reverse (down) links
    nvl_up_base: int
    nvl_down_base: int
    pcie_up_base: int
    pcie_down_base: int
    nic_up_base: int
    nic_down_base: int
    hop_latency_s: tuple[float, ...]  # per switch tier: its switch's latency and the cables' into it
    turn_latency_s: tuple[float, ...]  # per switch tier: a path turning there, NIC excluded
    nic_latency_s: float

    @property
    def tiers(self) -> int:
        return len(self.spans)

    @property
    def n_nodes(self) -> int:
        return int(self.node_kind.size)

    @property
    def n_links(self) -> int:
        return int(self.link_src.size)

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f).nbytes for f in ("node_kind", "link_src", "link_dst", "link_capacity_bytes_s",
                                                     "link_latency_s", "link_layer", "gpu_node"))

    def width(self, tier: int) -> int:
        """Switches of tier ``tier`` (>= 1) in one domain of that layer: P_1 * ... * P_tier."""
        return int(np.prod(self.planes[:tier], dtype=np.int64)) if tier else 1

    def leaf_of(self, gpu: np.ndarray) -> np.ndarray:
        """Leaf switch index (within tier 0) of each GPU."""
        gpu = np.asarray(gpu, dtype=np.int64)
        if self.rail:
            return (gpu // self.spans[0]) * self.gpus_per_host + gpu % self.gpus_per_host
        return gpu // self.spans[0]

    def turn_tier(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Lowest switch tier where the path a -> b turns around (-1: same NVLink domain)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        t = np.full(a.shape, self.tiers - 1, dtype=np.int64)
        for i in range(self.tiers - 1, 0, -1):
            t = np.where(a // self.spans[i] == b // self.spans[i], i, t)
        t = np.where(self.leaf_of(a) == self.leaf_of(b), 0, t)
        return np.where(a // self.domain_gpus == b // self.domain_gpus, -1, t)

    def path_latency_s(self, tier: np.ndarray) -> np.ndarray:
        """One-way latency of a path turning at ``tier``: NIC plus
        ``teton.spec.cluster.path_latency_s`` of that tier (the analytical model's alpha)."""
        tier = np.asarray(tier)
        fab = self.nic_latency_s + np.asarray(self.turn_latency_s)[np.maximum(tier, 0)]
        return np.where(tier < 0, NVLINK_HOP_LATENCY_S, fab)


class TierShape(NamedTuple):
    """The regular shape of a folded Clos's switch tiers (module docstring)."""

    switches: list[int]  # switches per tier
    planes: list[int]  # planes[i] = P_{i+1}, uplinks per tier-i switch (i = 0 .. tiers-2)
    uplink_bytes_s: list[float]  # capacity of each tier-i uplink
    domains: list[int]  # domains of each layer


def tier_shape(cluster: ClusterSpec, leaf_uplink_ratio: float | None = None) -> TierShape:
    """Switches per tier, planes and uplink capacity (module docstring): ``P_i = round(downlinks x
    ratio)`` of the tier below, ratio = 1 / oversubscription (``leaf_uplink_ratio`` for the
    leaves when given), and uplink capacity = the switch's down capacity x ratio / P_i."""
    g = cluster.gpus_per_host
    rail = cluster.topology == "rail-optimized"
    layers = cluster.layers
    spans = [layer.span_gpus for layer in layers]
    n_leaves = -(-cluster.gpus // spans[0]) * (g if rail else 1)
    nics_per_leaf = spans[0] // g if rail else spans[0]
    domains = [-(-cluster.gpus // s) for s in spans]
    planes: list[int] = []
    up_cap: list[float] = []
    switches = [n_leaves]
    down_links, down_cap = nics_per_leaf, nics_per_leaf * cluster.nic_bytes_s_per_gpu  # per switch of this tier
    for i in range(len(spans) - 1):
        over = layers[i].oversubscription
        ratio = leaf_uplink_ratio if (i == 0 and leaf_uplink_ratio) else 1.0 / over
        p = max(1, round(down_links * ratio))
        planes.append(p)
        up_cap.append(down_cap * ratio / p)
        switches.append(domains[i + 1] * int(np.prod(planes)))
        children = (spans[i + 1] // spans[0]) * (g if rail else 1) if i == 0 else spans[i + 1] // spans[i]
        down_links, down_cap = children, children * up_cap[-1]
    return TierShape(switches, planes, up_cap, domains)


def _node_kinds(n_gpus: int, domains: int, switches: list[int]) -> tuple[np.ndarray, list[int]]:
    """The kind of every node id, in id order: GPUs, NICs (one per GPU), NVSwitches (one per
    NVLink domain), then the switch tiers; and the first node id of each tier."""
    sw_base = [2 * n_gpus + domains]
    for s in switches[:-1]:
        sw_base.append(sw_base[-1] + s)
    node_kind = np.empty(sw_base[-1] + switches[-1], dtype=np.int8)
    node_kind[:n_gpus] = GPU_NODE
    node_kind[n_gpus:2 * n_gpus] = NIC_NODE
    node_kind[2 * n_gpus:sw_base[0]] = NVSWITCH_NODE
    for t in range(len(switches)):
        node_kind[sw_base[t]:sw_base[t] + switches[t]] = SWITCH + t
    return node_kind, sw_base


# a group of directed links: (source nodes, destination nodes, capacity B/s, latency s, link layer)
LinkGroup = tuple[np.ndarray, np.ndarray, float, float, int]


def _host_link_groups(cluster: ClusterSpec, leaf_base: int, hop_latency_s: tuple[float, ...],
                      nic_latency_s: float) -> dict[str, LinkGroup]:
    """Each GPU's links, one per GPU in each group (module docstring): up to its NVLink domain's
    NVSwitch and back (NVLink), to its NIC and back (the host's PCIe link, hardware.hosts), and
    the NIC's to its leaf switch (node ids from ``leaf_base``) and back."""
    g, n_gpus, spans0 = cluster.gpus_per_host, cluster.gpus, cluster.layers[0].span_gpus
    gids = np.arange(n_gpus, dtype=np.int32)
    nvsw = (2 * n_gpus + gids // cluster.domain_gpus).astype(np.int32)
    nic = (n_gpus + gids).astype(np.int32)
    rail = cluster.topology == "rail-optimized"
    leaf = (leaf_base + (((gids // spans0) * g + gids % g) if rail else gids // spans0)).astype(np.int32)
    nvl_bw, pcie_bw, nic_bw = (cluster.gpu_spec.nvlink_bw_bytes_s, cluster.host_spec.pcie_x16_bytes_s,
                               cluster.nic_bytes_s_per_gpu)
    return {
        "nvl_up": (gids, nvsw, nvl_bw, NVLINK_HOP_LATENCY_S, NVLINK),
        "nvl_down": (nvsw, gids, nvl_bw, 0.0, NVLINK),
        "pcie_up": (gids, nic, pcie_bw, 0.0, PCIE),
        "pcie_down": (nic, gids, pcie_bw, nic_latency_s, PCIE),
        "nic_up": (nic, leaf, nic_bw, hop_latency_s[0], NIC_LINK),
        "nic_down": (leaf, nic, nic_bw, 0.0, NIC_LINK),
    }


def _switch_link_groups(cluster: ClusterSpec, shape: TierShape, sw_base: list[int],
                        hop_latency_s: tuple[float, ...]) -> list[LinkGroup]:
    """The uplinks of every tier-i switch and their reverse (down) links, (up, down) per tier:
    uplink j of switch u goes to tier-(i+1) switch ``c * P + j`` of its plane ``c`` in its domain
    (module docstring); a link's latency is that of the switch it enters."""
    g, spans = cluster.gpus_per_host, [layer.span_gpus for layer in cluster.layers]
    rail = cluster.topology == "rail-optimized"
    switches, planes, domains = shape.switches, shape.planes, shape.domains
    groups: list[LinkGroup] = []
    for i in range(len(spans) - 1):
        p = planes[i]
        u = np.arange(switches[i], dtype=np.int64)
        if i == 0:
            first_gpu = (u // g) * spans[0] if rail else u * spans[0]
            d_next, c = first_gpu // spans[1], np.zeros_like(u)
        else:
            w = switches[i] // domains[i]
            d_next, c = (u // w) * spans[i] // spans[i + 1], u % w
        w_next = switches[i + 1] // domains[i + 1]
        j = np.arange(p, dtype=np.int64)
        lo = np.repeat(sw_base[i] + u, p)
        hi = (sw_base[i + 1] + d_next[:, None] * w_next + c[:, None] * p + j[None, :]).ravel()
        groups += [(lo, hi, shape.uplink_bytes_s[i], hop_latency_s[i + 1], FABRIC + i),
                   (hi, lo, shape.uplink_bytes_s[i], hop_latency_s[i], FABRIC + i)]
    return groups


def _concat_links(groups: list[LinkGroup]) -> tuple[list[int], tuple[np.ndarray, ...]]:
    """The first link id of each group (links numbered in group order) and the link arrays:
    source, destination (int32), capacity, latency (float64), layer (int8)."""
    bases, count = [], 0
    src, dst, cap, lat, lay = [], [], [], [], []
    for s, d, c, la, layer in groups:
        bases.append(count)
        src.append(np.asarray(s, dtype=np.int32))
        dst.append(np.asarray(d, dtype=np.int32))
        cap.append(np.full(len(src[-1]), c, dtype=np.float64))
        lat.append(np.full(len(src[-1]), la, dtype=np.float64))
        lay.append(np.full(len(src[-1]), layer, dtype=np.int8))
        count += len(src[-1])
    return bases, tuple(np.concatenate(x) for x in (src, dst, cap, lat, lay))


def build_fabric(cluster: ClusterSpec, leaf_uplink_ratio: float | None = None) -> Fabric:
    """The explicit graph of ``cluster``'s backend fabric (see the module docstring).

    ``leaf_uplink_ratio`` = leaf uplink capacity / downlink capacity; default 1 / oversubscription
    of ``layers[0]``. Meta's SIGCOMM'24 paper reports RTSW uplinks of 1:1, then 2:1 to mask ECMP
    collisions, then 1.125:1 -- pass 2.0 or 1.125 to study them.
    """
    shape = tier_shape(cluster, leaf_uplink_ratio)
    node_kind, sw_base = _node_kinds(cluster.gpus, cluster.gpus // cluster.domain_gpus, shape.switches)
    hop = tuple((layer.hop_latency_us + layer.link_latency_us) * 1e-6 for layer in cluster.layers)
    nic_lat = cluster.nic.latency_us * 1e-6
    host = _host_link_groups(cluster, sw_base[0], hop, nic_lat)
    bases, (src, dst, cap, lat, lay) = _concat_links(
        list(host.values()) + _switch_link_groups(cluster, shape, sw_base, hop))
    base = dict(zip(host, bases, strict=False))  # the host groups come first
    fabric_bases = bases[len(host):]
    return Fabric(
        name=cluster.name, topology=cluster.topology, n_gpus=cluster.gpus, gpus_per_host=cluster.gpus_per_host,
        domain_gpus=cluster.domain_gpus,
        node_kind=node_kind, link_src=src, link_dst=dst, link_capacity_bytes_s=cap, link_latency_s=lat,
        link_layer=lay, gpu_node=np.arange(cluster.gpus, dtype=np.int32),
        spans=tuple(layer.span_gpus for layer in cluster.layers), planes=tuple(shape.planes),
        switches=tuple(shape.switches), rail=cluster.topology == "rail-optimized",
        up_base=tuple(fabric_bases[0::2]), down_base=tuple(fabric_bases[1::2]),
        nvl_up_base=base["nvl_up"], nvl_down_base=base["nvl_down"], pcie_up_base=base["pcie_up"],
        pcie_down_base=base["pcie_down"], nic_up_base=base["nic_up"], nic_down_base=base["nic_down"],
        hop_latency_s=hop, nic_latency_s=nic_lat,
        turn_latency_s=tuple(path_latency_s(cluster.layers, t) for t in range(len(cluster.layers))),
    )
