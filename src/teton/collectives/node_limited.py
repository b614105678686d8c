"""The node-limited, hierarchical all-to-all of an MoE layer's token dispatch and combine
(DeepSeek-V3's routing with DeepEP's kernels).

DeepSeek-V3 (arXiv 2412.19437, Sec. 2.1.2 "Node-Limited Routing" and Sec. 3.2.2): the router
first picks at most ``M`` nodes per token (those with the highest sums of their best experts'
affinities; M = 4 of 8 EP nodes), then its ``top_k`` experts among those nodes' experts. The
dispatch kernel (DeepEP's normal kernels, github.com/deepseek-ai/DeepEP) sends each token **once
per destination node** over InfiniBand, to the GPU of the same local index there, which forwards
it over NVLink to the GPUs of that node holding its experts; the IB and NVLink transfers run
concurrently ("communications via IB and NVLink are fully overlapped"). The combine is the
mirror: partial sums reduced over NVLink inside a node, sent back once per node. Megatron-Core
runs the same routing (``moe_router_num_groups`` / ``moe_router_group_topk`` with one group per
node) through its DeepEP ("flex") dispatcher.

So an all-to-all of nccl-tests size ``S`` (a rank's ``top_k`` copies per token) over an EP group
of ``H`` NVLink domains with ``k`` members each is two all-to-alls at once:

* **inter-node** among the ``k`` rails of the group (the ``H`` same-local-index members, one per
  domain) of size ``S x D / top_k``: ``D`` node-copies per token instead of ``top_k`` expert
  copies, where ``D = m (1 - (1 - 1/m)^top_k)`` is the expected number of distinct nodes the
  token's ``top_k`` copies land on when they fall uniformly on its ``m = min(M, H)`` chosen nodes
  (3.60 for M = 4, top_k = 8); a share ``(H - 1) / H`` of them leaves the node, as in any
  all-to-all;
* **intra-node** among the ``k`` members of each domain, of size ``S``: every copy reaches its
  expert's GPU over NVLink from the relay GPU (or from the sender, for its own node).

Its time is the slower of the two (overlapped). ASSUMPTION: the copies fall uniformly on the
chosen nodes (the expectation, not DeepEP's worst case of ``M`` per token); the EP group has the
same number of members on every domain it spans (else the flat all-to-all is charged).
"""

from __future__ import annotations

import numpy as np


def expected_nodes(top_k: int, max_nodes: int, hosts: int) -> float:
    """Expected distinct NVLink domains one token's ``top_k`` copies reach when the router limits
    it to ``max_nodes`` of the EP group's ``hosts`` domains (module docstring)."""
    m = min(max_nodes, hosts)
    return m * (1.0 - (1.0 - 1.0 / m) ** top_k)


def rail_and_node_groups(groups: np.ndarray, domain_gpus: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(rails, nodes) of ``groups`` (an (n_groups, n) array of GPU ids): ``rails`` one row per
    (group, local index) with the group's member of that index on each domain, ``nodes`` one row
    per (group, domain) with its members there. None when a group spans one domain or has unequal
    members per domain."""
    g = np.sort(np.atleast_2d(np.asarray(groups)), axis=1)
    rows, n = g.shape
    dom = g // domain_gpus
    hosts = 1 + int((np.diff(dom[0]) != 0).sum())
    if hosts <= 1 or n % hosts:
        return None
    k = n // hosts
    by_dom = dom.reshape(rows, hosts, k)
    if (by_dom != by_dom[:, :, :1]).any() or (np.diff(by_dom[:, :, 0], axis=1) == 0).any():
        return None
    cube = g.reshape(rows, hosts, k)
    return cube.transpose(0, 2, 1).reshape(rows * k, hosts), cube.reshape(rows * hosts, k)


def node_limited_all_to_all_s(cost, groups: np.ndarray, domain_gpus: int, size_bytes: float,
                              top_k: int, max_nodes: int) -> float:
    """Seconds of a node-limited hierarchical all-to-all of ``size_bytes`` (nccl-tests S) on
    ``groups``, priced by ``cost`` (any network cost model's ``collective_time``): the slower of its
    inter-node part on the rails and its intra-node part on NVLink (module docstring)."""
    split = rail_and_node_groups(groups, domain_gpus)
    if split is None:
        return cost.collective_time("all_to_all", groups, size_bytes)
    rails, nodes = split
    hosts = rails.shape[1]
    net_bytes = size_bytes * expected_nodes(top_k, max_nodes, hosts) / top_k
    return max(cost.collective_time("all_to_all", rails, net_bytes),
               cost.collective_time("all_to_all", nodes, size_bytes))
