"""Price a block's items on one GPU: compute by the compute model, collectives by the network
cost model on the job's groups, minus what runs alongside an independent GEMM (``job.tp_overlap``,
ring attention), with the SMs NCCL's kernels hold charged to the compute they run under.

Blocks are shared by every layout with the same block fields (``workload.step_work.blocks``), so
their priced times are memoised per block, placement, network and compute model.
"""

from __future__ import annotations

from teton.collectives.algorithms import nccl_channels
from teton.engine.compute import ComputeModel
from teton.engine.overlap import overlapped_exposed_s, ring_exposed_s
from teton.memo import IdentityMemo
from teton.placement import Placement
from teton.workload.items import Block, Collective, ComputeOp

_COMPUTE_S = IdentityMemo()
_BLOCK_FLOPS = IdentityMemo()
_SM_FRACTION = IdentityMemo()
_BLOCK_S = IdentityMemo()


def block_flops(block: Block) -> float:
    """FLOPs one GPU executes for ``block`` per micro-batch, forward and backward (recompute
    included), memoised per block."""
    return _BLOCK_FLOPS.get((block,), (), lambda: sum(
        i.flops for i in (*block.fwd, *block.bwd) if isinstance(i, ComputeOp)))


def hardware_flops_per_step(work, job) -> float:
    """FLOPs all GPUs execute in one step: every pipeline rank's layers (selective_layer: its plain
    and its checkpointed ones), embedding and head, per micro-batch, times the micro-batches and
    the tp x cp x dp GPUs of each pipeline rank. Recomputed forward ops count (HFU)."""
    per_pipeline = (sum(float(n.sum()) * block_flops(block) for block, n in work.layer_mix())
                    + block_flops(work.embedding) + block_flops(work.head))
    return per_pipeline * work.micro_batches * job.gpus / job.pp


def sm_fraction(placement: Placement, axis: str, cluster) -> float:
    """Fraction of the SMs NCCL's kernel holds for a collective on ``axis`` (one CTA per channel),
    memoised per placement and axis."""
    if placement.groups(axis).shape[1] <= 1:  # a group of one rank runs no collective
        return 0.0
    return _SM_FRACTION.get((placement, cluster), (axis,), lambda: min(1.0, nccl_channels(
        placement.groups(axis), cluster.gpus_per_host, cluster.host_spec.backend_nics) / cluster.gpu_spec.sm_count))


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
            t = 0.0 if degree <= 1 else (self.cost.collective_time(c.op, self.placement.groups(c.axis), c.bytes)
                                         + self.compute.eff.kernel_gap_s)
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
        return _COMPUTE_S.get((items, c.eff), (c.gpu.name, c.precision, c.seq_len, c.attention_kernel),
                              lambda: sum(c.time_s(it) for it in items if not isinstance(it, Collective)))

    def block(self, block: Block) -> tuple[dict[str, float], dict[str, float]]:
        """(forward, backward) seconds by category, memoised per block, placement, network and
        compute model: layouts that share all four (they differ in ZeRO, v or the batch) share this."""
        c = self.compute

        def price() -> tuple:
            out = self.items_s(block.fwd), self.items_s(block.bwd)
            used = {(i.op, i.axis, i.bytes) for i in (*block.fwd, *block.bwd) if isinstance(i, Collective)}
            return out, {k: self.comm[k] for k in used}

        out, comm = _BLOCK_S.get((block, self.placement, self.cost, c.eff),
                                 (c.gpu.name, c.precision, c.seq_len, c.attention_kernel), price)
        self.comm.update(comm)  # the collective times a memoised block used, for the result's report
        return out
