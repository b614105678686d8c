"""In-network all-reduce on InfiniBand switches (SHARP), as flows on the explicit fabric.

NCCL's CollNet with SHARP (Graham et al., "Scalable Hierarchical Aggregation Protocol", COMHPC
2016; NCCL CollNet "direct"): inside each host the k local GPUs reduce-scatter the buffer over
NVLink so that GPU j holds shard j (S/k bytes); GPU j's NIC streams its shard up a reduction tree
of switches that the Aggregation Manager builds over the fat tree; every switch sums its
children's streams and sends one stream up; the root's result streams back down and GPU j
all-gathers it to the other local GPUs. The phases are pipelined chunk by chunk, so each shard is
one flow of S/k bytes whose crossings are, per host, the NVLink hops of the direct reduce-scatter
(k-1 GPUs -> GPU j) and all-gather (GPU j -> k-1 GPUs), GPU j's PCIe and NIC links up and down,
and one stream up and one down per switch unit below the tree's root tier. Aggregation trees are
placed by the manager, not hashed, so the switch links are the routing module's balanced bundles.
A switch's up stream carries one shard however many GPUs sit below it: this is the traffic
reduction that lets SHARP beat a ring.
"""

from __future__ import annotations

import numpy as np

from teton.network.routing import Router
from teton.spec.cluster import ClusterSpec

# Switch ASICs with in-network reduction: NVIDIA Quantum-2 QM9700 (SHARPv3, NVIDIA QM9700 datasheet)
# and Quantum QM8700 (SHARPv2, NVIDIA QM8700 datasheet). Ethernet RTSW/CTSW/ATSW have none.
SHARP_SWITCHES = {"qm9700": "SHARPv3", "qm8700": "SHARPv2"}


def has_sharp(cluster: ClusterSpec) -> bool:
    return all(layer.switch in SHARP_SWITCHES for layer in cluster.layers)


def sharp_flows(router: Router, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Flows of a SHARP all-reduce of every group: (indptr, links, weight, bytes per byte of S,
    turn tier of the widest tree)."""
    f = router.fabric
    gph = f.domain_gpus
    flows: list[np.ndarray] = []
    nbytes: list[float] = []
    top = -1
    for row in groups:
        host = row // gph
        hosts = np.unique(host)
        local = [np.sort(row[host == h]) for h in hosts]
        k = min(len(m) for m in local)
        turn = int(f.turn_tier(row[:1].repeat(row.size), row).max())
        top = max(top, turn)
        for j in range(k):
            heads = np.array([m[j] for m in local])
            parts = [f.pcie_up_base + heads, f.nic_up_base + heads, f.nic_down_base + heads, f.pcie_down_base + heads]
            for i in range(max(turn, 0)):
                units = np.unique(f.leaf_of(heads) if i == 0 else heads // f.spans[i])
                parts += [router.bundle_up_base[i] + units, router.bundle_down_base[i] + units]
            for m in local:
                if len(m) > 1:
                    others = np.delete(m, j)
                    parts += [f.nvl_up_base + others, f.nvl_down_base + m[j].repeat(others.size),  # RS
                              f.nvl_up_base + m[j].repeat(others.size), f.nvl_down_base + others]  # AG
            flows.append(np.concatenate(parts))
            nbytes.append(1.0 / k)
    indptr = np.zeros(len(flows) + 1, dtype=np.int64)
    np.cumsum([x.size for x in flows], out=indptr[1:])
    links = np.concatenate(flows).astype(np.int64)
    return indptr, links, np.ones(links.size), np.asarray(nbytes), top
