"""A layer's dense MLP on one GPU for one micro-batch, and the TP collectives around it.

Megatron-LM's ``ParallelMLP`` / Megatron-Core's ``MLP`` (Shoeybi et al. 2019): the up projection
(gate and up under SwiGLU) column-parallel over TP, the activation on this rank's columns, the down
projection row-parallel. With sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2) an
all-gather of the sequence-sharded input before the up projection and a reduce-scatter after the
down projection; without it an all-reduce after the down projection (in backward: after the up
projection's data gradient). A dense layer's MLP and an MoE layer's shared experts
(``workload.moe``, Megatron-Core's ``SharedExpertMLP``, an ``MLP`` of the shared width) are both
this sub-block.
"""

from __future__ import annotations

from collections.abc import Sequence

from teton.spec.layout import Layout
from teton.workload.items import Collective, ComputeOp, Item, memory_op

Casts = Sequence[tuple[list[Item], list[Item]]]  # (forward, backward) fp8 casts of the up and down GEMMs


def tp_gather(lay: Layout, name: str, nbytes: float) -> list[Item]:
    """TP with SP (Korthikanti et al. 2022, Sec. 4.2.2): the all-gather before the QKV and MLP-up
    GEMMs; in backward the transpose of a reduce-scatter, and the re-all-gather of a sharded input
    for the weight gradients (Megatron keeps only the shard). None without SP."""
    return [Collective(name, "all_gather", "tp", nbytes)] if lay.sequence_parallel else []


def tp_scatter(lay: Layout, name: str, nbytes: float) -> list[Item]:
    """The reduce-scatter after the attention-output and MLP-down GEMMs under SP (in backward: the
    transpose of an all-gather); without SP one all-reduce after each row-parallel GEMM forward,
    one per column-parallel GEMM backward. None for TP = 1."""
    if lay.tp == 1:
        return []
    return [Collective(name, "reduce_scatter" if lay.sequence_parallel else "all_reduce", "tp", nbytes)]


def mlp_items(lay: Layout, act_in: float, up: tuple[ComputeOp, ...], down: tuple[ComputeOp, ...], casts: Casts,
              act_bytes: tuple[float, float], act_name: str = "mlp_act",
              grad_sum: Sequence[Item] = (), gathered: tuple[float, float] | None = None
              ) -> tuple[list[Item], list[Item]]:
    """(forward, backward) items of one TP-sharded MLP after its norm, in the order the GPU runs
    them: ``up`` and ``down`` GEMM triples (forward, data gradient, weight gradient), ``casts``
    their fp8 casts (``workload.fp8.fp8_casts``), ``act_bytes`` the activation's (forward,
    backward) bytes, ``act_in`` one full hidden-state tensor (the TP collectives' size),
    ``grad_sum`` what eager code adds between the up projection's two backward GEMMs and
    ``gathered`` the bytes of the all-gathers of the up projection's input and of the down
    projection's output gradient where they differ from ``act_in`` (quantised: ``workload.fp8
    .gather_bytes``)."""
    ag_in, ag_grad = gathered or (act_in, act_in)
    fwd: list[Item] = [*tp_gather(lay, "tp.ag_mlp", ag_in), *casts[0][0], up[0], memory_op(act_name, act_bytes[0]),
                       *casts[1][0], down[0], *tp_scatter(lay, "tp.rs_mlp", act_in)]
    bwd: list[Item] = [*tp_gather(lay, "tp.ag_mlp_grad", ag_grad), *casts[1][1], down[1], down[2],
                       memory_op(act_name + ".bwd", act_bytes[1], True), *tp_gather(lay, "tp.ag_mlp_input", ag_in),
                       *casts[0][1], up[1], *grad_sum, up[2], *tp_scatter(lay, "tp.rs_mlp_grad", act_in)]
    return fwd, bwd
