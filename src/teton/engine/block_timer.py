"""Price a block's items on one GPU: compute by the compute model, collectives by the network
cost model on the job's groups, minus what runs alongside an independent GEMM (``job.tp_overlap``,
ring attention), with the SMs NCCL's kernels hold charged to the compute they run under.

Blocks are shared by every layout with the same block fields (``workload.step_work.blocks``), so
their priced times are memoised per block, placement, network and compute model.
"""

from __future__ import annotations

from teton.collectives.algorithms import nccl_channels
from teton.engine.compute import ComputeModel
from teton.placement import Placement
from teton.workload.ops import Block, Collective, ComputeOp, overlapped_exposed_s, ring_exposed_s

_COMPUTE_S: dict[tuple, tuple[object, object, float]] = {}
_BLOCK_FLOPS: dict[int, tuple[object, float]] = {}


def block_flops(block: Block) -> float:
    """FLOPs one GPU executes for ``block`` per micro-batch, forward and backward (recompute
    included), memoised per block."""
    hit = _BLOCK_FLOPS.get(id(block))
    if hit is not None and hit[0] is block:
        return hit[1]
    total = sum(i.flops for i in (*block.fwd, *block.bwd) if isinstance(i, ComputeOp))
    if len(_BLOCK_FLOPS) > 4096:
        _BLOCK_FLOPS.clear()
    _BLOCK_FLOPS[id(block)] = (block, total)
    return total


def hardware_flops_per_step(work, job) -> float:
    """FLOPs all GPUs execute in one step: every pipeline rank's layers, embedding and head, per
    micro-batch, times the micro-batches and the tp x cp x dp GPUs of each pipeline rank."""
    per_pipeline = (float(work.split.layers.sum()) * block_flops(work.layer) + block_flops(work.embedding)
                    + block_flops(work.head))
    return per_pipeline * work.micro_batches * job.gpus / job.pp


def sm_fraction(placement: Placement, axis: str, cluster) -> float:
    """Fraction of the SMs NCCL's kernel holds for a collective on ``axis`` (one CTA per channel),
    memoised per placement and axis."""
    if placement.degrees.get(axis, 1) <= 1:
        return 0.0
    key = (id(placement), axis, id(cluster))
    hit = _SM_FRACTION.get(key)
    if hit is not None and hit[0] is placement and hit[1] is cluster:
        return hit[2]
    channels = nccl_channels(placement.groups(axis), cluster.gpus_per_host, cluster.host_spec.backend_nics)
    f = min(1.0, channels / cluster.gpu_spec.sm_count)
    if len(_SM_FRACTION) > 4096:
        _SM_FRACTION.clear()
    _SM_FRACTION[key] = (placement, cluster, f)
    return f


_SM_FRACTION: dict[tuple, tuple] = {}


class BlockTimer:
    """Times blocks' items; remembers collective times per (op, axis, bytes)."""

    def __init__(self, compute: ComputeModel, cost, placement: Placement, cluster):
        self.compute, self.cost, self.placement, self.cluster = compute, cost, placement, cluster
        self.comm: dict[tuple[str, str, float], float] = {}

    def collective_s(self, c: Collective) -> float:
        key = (c.op, c.axis, c.bytes)
        t = self.comm.get(key)
        if t is None:
            degree = self.placement.degrees.get(c.axis, 1)
            t = 0.0 if degree <= 1 else self.cost.collective_time(c.op, self.placement.groups(c.axis), c.bytes)
            self.comm[key] = t
        return t

    def items_s(self, items) -> dict[str, float]:
        """Seconds of ``items`` by category: compute, and each axis's *exposed* collective time."""
        out = {"compute": self.compute_s(items), "tp": 0.0, "cp": 0.0, "ep": 0.0}
        for it in items:
            if isinstance(it, Collective):
                axis, t = self.item_s(it, items)
                out[axis] = out.get(axis, 0.0) + t
        return out

    def item_s(self, it, items) -> tuple[str, float]:
        """(category, exposed seconds) of one item of ``items``: a collective run alongside a GEMM
        of the same pass is charged only what that GEMM does not hide."""
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
        key = (id(items), id(c.eff), c.gpu.name, c.precision, c.seq_len, c.attention_kernel)
        hit = _COMPUTE_S.get(key)
        if hit is not None and hit[0] is items and hit[1] is c.eff:
            return hit[2]
        total = sum(c.time_s(it) for it in items if not isinstance(it, Collective))
        if len(_COMPUTE_S) > 4096:
            _COMPUTE_S.clear()
        _COMPUTE_S[key] = (items, c.eff, total)
        return total

    def block(self, block: Block) -> tuple[dict[str, float], dict[str, float]]:
        """(forward, backward) seconds by category, memoised per block, placement, network and
        compute model: layouts that share all four (they differ in ZeRO, v or the batch) share this."""
        c = self.compute
        key = (id(block), id(self.placement), id(self.cost), id(c.eff), c.gpu.name, c.precision, c.seq_len,
               c.attention_kernel)
        hit = _BLOCK_S.get(key)
        if hit is not None and hit[0] is block and hit[1] is self.placement and hit[2] is self.cost:
            self.comm.update(hit[4])
            return hit[3]
        out = self.items_s(block.fwd), self.items_s(block.bwd)
        used = {(i.op, i.axis, i.bytes) for i in (*block.fwd, *block.bwd) if isinstance(i, Collective)}
        if len(_BLOCK_S) > 4096:
            _BLOCK_S.clear()
        _BLOCK_S[key] = (block, self.placement, self.cost, out, {k: self.comm[k] for k in used})
        return out


_BLOCK_S: dict[tuple, tuple] = {}
