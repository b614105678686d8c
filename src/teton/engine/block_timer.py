"""Price a block's items on one GPU: compute by the compute model, collectives by the network
cost model on the job's groups, minus what runs alongside an independent GEMM (``job.tp_overlap``,
ring attention), with the SMs NCCL's kernels hold charged to the compute they run under.

Two more things a pass can wait for besides its kernels:

* **host copies** (CPU activation offload, :class:`~teton.workload.items.HostCopy`): a copy
  stream moves the layer's saved activations over the GPU's PCIe link
  (``hardware.kernels.host_copy_bytes_s``: the host's x16 link at cudaMemcpy efficiency, shared
  by the GPUs behind one switch) while the pass computes; the pass waits for what its compute
  does not hide, ``max(0, copy_s - compute_s)`` (category ``offload``).
* **kernel launches** (``software.cuda_graphs``): an eager pass's kernels are issued by the CPU
  one by one while the GPU runs the ones already issued, and the GPU idles a moment after each
  before the next starts, so the pass takes ``max(GPU time + launches x EAGER_KERNEL_GAP_S,
  launches x EAGER_LAUNCH_S)`` (``hardware.kernels``, both measured from PyTorch profiler
  traces); the excess over the GPU time is category ``launch``. A launch is one
  :class:`~teton.workload.items.ComputeOp` kernel (``ComputeOp.kernels`` of them), a collective
  or a host copy. A pass replayed from a CUDA graph (``Block.graphed``) costs no CPU issue time.
  A host sync (``ComputeOp.host_sync``: the CPU waits for a value the GPU computes) ends the
  CPU's run-ahead, so such a pass is timed segment by segment, each ``max(GPU time + launches x gap, launches x
  EAGER_LAUNCH_S)`` between syncs: one segment's CPU-bound excess is not hidden under another's
  GPU work. ASSUMPTION: no run-ahead across blocks: a CPU-bound pass after a GPU-bound one gains nothing
  from the launches queued during the earlier one (exact when every pass is CPU-bound, an upper
  bound otherwise).

Blocks are shared by every layout with the same block fields (``workload.step_work.blocks``), so
their priced times are memoised per block, placement, network and compute model.
"""

from __future__ import annotations

import numpy as np

from teton.collectives.algorithms import nccl_channels
from teton.collectives.node_limited import node_limited_all_to_all_s
from teton.engine.compute import ComputeModel
from teton.engine.overlap import overlapped_exposed_s, ring_exposed_s
from teton.hardware.kernels import EAGER_KERNEL_GAP_S, EAGER_LAUNCH_S, host_copy_bytes_s
from teton.memo import IdentityMemo
from teton.placement import Placement
from teton.workload.items import Block, Collective, ComputeOp, HostCopy

_COMPUTE_S = IdentityMemo()
_RECOMPUTE_FLOPS = IdentityMemo()
_SM_FRACTION = IdentityMemo()
_BLOCK_S = IdentityMemo()


def recompute_flops(block: Block) -> float:
    """FLOPs one GPU executes again for ``block`` per micro-batch: the forward ops its backward
    re-runs (``recompute.*``, activation recomputation), memoised per block."""
    return _RECOMPUTE_FLOPS.get((block,), (), lambda: sum(
        i.flops for i in block.bwd if isinstance(i, ComputeOp) and i.name.startswith("recompute.")))


def hardware_flops_per_step(work, lay, model_flops_per_step: float) -> float:
    """FLOPs the GPUs execute in one step, as PaLM (Chowdhery et al. 2022, Appendix B) and
    Korthikanti et al. 2022 count them for HFU: the model FLOPs plus the rematerialised ones.

    The two counts share one convention (the model count's: attention over the full ``s x s``
    matrix), so ``hfu >= mfu`` always and ``hfu == mfu`` without recompute; summing the kernels'
    own FLOPs instead would count attention causally in one and not the other (HFU below MFU).
    Rematerialised: every pipeline rank's layers' recomputed forward ops (selective_layer: its
    checkpointed layers only), per micro-batch, times the micro-batches and the tp x cp x dp GPUs
    of each pipeline rank."""
    per_pipeline = sum(float(n.sum()) * recompute_flops(block) for block, n in work.layer_mix())
    return model_flops_per_step + per_pipeline * work.micro_batches * lay.gpus / lay.pp


def sm_fraction(placement: Placement, axis: str, cluster) -> float:
    """Fraction of the SMs NCCL's kernel holds for a collective on ``axis`` (one CTA per channel),
    memoised per placement and axis."""
    if placement.groups(axis).shape[1] <= 1:  # a group of one rank runs no collective
        return 0.0
    return _SM_FRACTION.get((placement, cluster), (axis,), lambda: min(1.0, nccl_channels(
        placement.groups(axis), cluster.domain_gpus, cluster.nics_per_domain) / cluster.gpu_spec.sm_count))


def comm_key(c: Collective) -> tuple[str, str, float]:
    """(op, axis, bytes) a collective's time is remembered and reported under; a node-limited
    all-to-all's op is ``node_limited_all_to_all``, a ring of n exchange steps ``ring_n``."""
    op = "node_limited_all_to_all" if c.max_nodes else f"ring_{c.ring_steps}" if c.ring_steps else c.op
    return op, c.axis, c.bytes


def _ring_hops(groups: np.ndarray) -> np.ndarray:
    """(pairs, 2) GPU ids of every ring hop of ``groups`` (each member to the next, the last to the first)."""
    return np.stack([groups.ravel(), np.roll(groups, -1, axis=1).ravel()], axis=1)


class BlockTimer:
    """Times blocks' items; remembers collective times per (op, axis, bytes)."""

    def __init__(self, compute: ComputeModel, cost, placement: Placement, cluster):
        self.compute, self.cost, self.placement, self.cluster = compute, cost, placement, cluster
        self.comm: dict[tuple[str, str, float], float] = {}

    def collective_s(self, c: Collective) -> float:
        key = comm_key(c)
        t = self.comm.get(key)
        if t is None:
            degree = self.placement.degrees.get(c.axis, 1)
            t = 0.0 if degree <= 1 else self._network_s(c) + self.compute.eff.kernel_gap_s
            self.comm[key] = t
        return t

    def _network_s(self, c: Collective) -> float:
        """Network seconds of ``c`` on its axis's groups: a node-limited all-to-all as DeepEP's
        hierarchical one (``collectives.node_limited``); a ring (``ring_steps``: ring attention) as
        that many point-to-point exchanges, each rank sending its block of ``bytes / group size``
        to the next while it receives the previous one's (Transformer Engine 2.9
        ``AttnFuncWithCPAndKVP2P``: ``batch_isend_irecv`` to ``send_dst`` / from ``recv_src`` every
        step), each step as long as its slowest hop: a hop between hosts runs over one GPU's NIC,
        where an all-gather's channels spread the bytes over every NIC of the host; any other by
        the cost model."""
        groups = self.placement.groups(c.axis)
        if c.ring_steps:
            hops = _ring_hops(groups)
            return c.ring_steps * self.cost.collective_time("send_recv", hops, c.bytes / groups.shape[1])
        if c.max_nodes:
            return node_limited_all_to_all_s(self.cost, groups, self.cluster.domain_gpus, c.bytes, c.top_k, c.max_nodes)
        return self.cost.collective_time(c.op, groups, c.bytes)

    def items_s(self, items, graphed: bool = True) -> dict[str, float]:
        """Seconds of ``items`` (one pass) by category: compute, each axis's *exposed* collective
        time (an MoE layer's expert-TP collectives, axis ``etp``, under ``ep``), the host copies' exposed time (``offload``) and, unless ``graphed``, the CPU-bound
        time of launching them one by one (``launch``; module docstring)."""
        out = {"compute": self.compute_s(items), "tp": 0.0, "cp": 0.0, "ep": 0.0, "offload": 0.0, "launch": 0.0}
        for it in items:
            if isinstance(it, Collective):
                axis, t = self.item_s(it, items)
                # expert-TP collectives are the experts' communication; a2a+p2p's two levels, CP's
                axis = {"etp": "ep", "cp_a2a": "cp", "cp_p2p": "cp"}.get(axis, axis)
                out[axis] = out.get(axis, 0.0) + t
        out["offload"] = max(0.0, self.host_copy_s(items) - out["compute"])
        if not graphed:
            out["launch"] = self.launch_s(items, sum(out.values()))
        return out

    @staticmethod
    def launches(items) -> int:
        """CPU launches of ``items``: each kernel of a compute op, each collective and host copy."""
        return sum(it.kernels if isinstance(it, ComputeOp) else 1 for it in items)

    @staticmethod
    def eager_s(launches: int, gpu_s: float) -> float:
        """What issuing ``launches`` kernels one by one adds to ``gpu_s`` of GPU work: the GPU's idle
        gap after each (``EAGER_KERNEL_GAP_S``) or, where the CPU is slower, its launch time
        (``EAGER_LAUNCH_S``): ``max(launches x gap, launches x EAGER_LAUNCH_S - gpu_s)``."""
        return max(launches * EAGER_KERNEL_GAP_S, launches * EAGER_LAUNCH_S - gpu_s)

    def launch_s(self, items, gpu_s: float) -> float:
        """Seconds an eager pass of ``items`` that keeps the GPU busy ``gpu_s`` loses to issuing its
        kernels one by one (:meth:`eager_s`). With host syncs, the sum of that over the segments
        they end (module docstring), a segment's GPU time being its kernels' and its collectives'
        exposed time (host copies run on their own stream: ``gpu_s``'s offload is pass-wide)."""
        if not any(isinstance(it, ComputeOp) and it.host_sync for it in items):
            return self.eager_s(self.launches(items), gpu_s)
        excess, segment = 0.0, []
        for i, it in enumerate(items):
            segment.append(it)
            if i == len(items) - 1 or isinstance(it, ComputeOp) and it.host_sync:
                gpu = sum(self.compute.time_s(x) if isinstance(x, ComputeOp) else self.item_s(x, items)[1]
                          for x in segment if not isinstance(x, HostCopy))
                excess += self.eager_s(self.launches(segment), gpu)
                segment = []
        return excess

    def host_copy_s(self, items) -> float:
        """Seconds of the pass's copies to or from host memory, back to back on their stream."""
        nbytes = sum(it.bytes for it in items if isinstance(it, HostCopy))
        return nbytes / host_copy_bytes_s(self.cluster.host_spec) if nbytes else 0.0

    def item_s(self, it, items) -> tuple[str, float]:
        """(category, exposed seconds) of one item of ``items``: a collective run alongside a GEMM
        of the same pass is charged only what that GEMM does not hide; a host copy its share of
        what the pass's compute does not hide."""
        if isinstance(it, HostCopy):
            total = self.host_copy_s(items)
            return "offload", max(0.0, total - self.compute_s(items)) * (it.bytes / sum(
                i.bytes for i in items if isinstance(i, HostCopy)))
        if not isinstance(it, Collective):
            return "compute", self.compute.time_s(it)
        t = self.collective_s(it)
        if it.overlap:
            under = self.compute.time_s(next(i for i in items if isinstance(i, ComputeOp) and i.name == it.overlap))
            if it.ring_steps:
                t = ring_exposed_s(t, under, it.ring_steps)
            else:
                t = overlapped_exposed_s(t, under, it.chunks, self.sm_fraction(it.axis))
        return it.axis, t

    def sm_fraction(self, axis: str) -> float:
        """Fraction of the GPU's SMs an NCCL collective on ``axis`` holds while it runs."""
        return sm_fraction(self.placement, axis, self.cluster)

    def compute_s(self, items) -> float:
        """Compute seconds of ``items``, memoised per item list and compute model (layouts that
        share their blocks share this)."""
        c = self.compute
        return _COMPUTE_S.get((items, c.eff), (c.gpu, c.precision, c.seq_len, c.attention_kernel),
                              lambda: sum(c.time_s(it) for it in items if isinstance(it, ComputeOp)))

    def wgrad_s(self, block: Block) -> float:
        """Compute seconds of the block's weight-gradient GEMMs (``*.wgrad``), the part of its
        backward a zero-bubble schedule defers (``workload.dualpipe``)."""
        return self.compute_s(tuple(it for it in block.bwd if isinstance(it, ComputeOp) and it.name.endswith(".wgrad")))

    def block(self, block: Block) -> tuple[dict[str, float], dict[str, float]]:
        """(forward, backward) seconds by category, memoised per block, placement, network, compute
        model and host link: layouts that share all of them (they differ in ZeRO, v or the batch)
        share this."""
        c = self.compute
        host = self.cluster.host_spec

        def price() -> tuple:
            out = self.items_s(block.fwd, block.graphed), self.items_s(block.bwd, block.graphed)
            used = {comm_key(i) for i in (*block.fwd, *block.bwd) if isinstance(i, Collective)}
            return out, {k: self.comm[k] for k in used}

        out, comm = _BLOCK_S.get((block, self.placement, self.cost, c.eff),
                                 (c.gpu, c.precision, c.seq_len, c.attention_kernel, host.cpu_copy_link_bytes_s,
                                  host.gpus_per_pcie_link), price)
        self.comm.update(comm)  # the collective times a memoised block used, for the result's report
        return out
