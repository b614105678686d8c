"""Where a block's time goes, op by op: the rows behind ``teton ops``.

For one micro-batch on one GPU of the spec's layout, every item of the transformer layer, the
embedding and the output head, forward and backward, with what the step model charges for it:

* compute ops: FLOPs, bytes, GEMM shape, the achieved fraction of the dense peak, whether the
  roofline puts it on the FLOP or the byte side, and seconds;
* collectives: axis, bytes (nccl-tests S), group size, seconds alone and seconds exposed (less
  when it runs alongside a GEMM, ``job.tp_overlap``);
* host copies (CPU activation offload): bytes, seconds alone and what the pass's compute does
  not hide;
* ``cpu.launch``, one row per eager pass the CPU's kernel launches outlast (``software.cuda_graphs``).

The same timer as :func:`teton.engine.step.simulate_step` prices them, so a block's rows add up
to what the step model uses per micro-batch.
"""

from __future__ import annotations

from dataclasses import replace

from teton.engine.block_timer import BlockTimer
from teton.engine.compute import ComputeModel
from teton.engine.prepare import default_placement, make_cost_model
from teton.spec.schema import Spec
from teton.workload.items import Collective, ComputeOp, HostCopy
from teton.workload.step_work import step_work


def op_rows(spec: Spec) -> list[dict]:
    """One row per item of the layer, embedding and head blocks, forward then backward; every kind
    of layer the job runs (``workload.layer_kinds``: block ``layer``, ``checkpointed_layer``,
    ``bf16_layer``, ``offloaded_layer`` and their combinations)."""
    model, job, cluster = spec.model, spec.job, spec.cluster
    compute = ComputeModel.for_gpu(cluster.gpu_spec, job.precision, job.layout.seq_len, cluster.efficiency,
                                   job.attention_kernel, job.software.name, job.software.fp8_recipe)
    placement = default_placement(spec)
    timer = BlockTimer(compute, make_cost_model(spec), placement, cluster)
    work = step_work(model, job)
    gpu = cluster.gpu_spec
    rows = []
    layers = [replace(block, name=kind.label) for kind, block, _ in work.kinds] or [work.layer]
    for block in (work.embedding, *layers, work.head):
        for pass_, items in (("fwd", block.fwd), ("bwd", block.bwd)):
            for it in items:
                category, exposed = timer.item_s(it, items)
                row = {"block": block.name, "pass": pass_, "name": it.name, "category": category}
                if isinstance(it, ComputeOp):
                    row.update(_compute_row(it, exposed, compute, gpu))
                elif isinstance(it, HostCopy):
                    row.update(_host_copy_row(it, exposed, timer))
                else:
                    row.update(_collective_row(it, exposed, timer, placement))
                rows.append(row)
            launch = 0.0 if block.graphed else timer.items_s(items, graphed=False)["launch"]
            if launch:
                rows.append({"block": block.name, "pass": pass_, "name": "cpu.launch", "category": "launch",
                             "kind": "launch", "flops": 0.0, "bytes": 0.0, "shape": f"{timer.launches(items)} launches",
                             "fraction_of_peak": 0.0, "bound": "cpu", "time_s": launch, "exposed_s": launch})
    return rows


def _compute_row(op: ComputeOp, seconds: float, compute: ComputeModel, gpu) -> dict:
    if op.kind == "attention":
        prec = compute.attention_precision(op)
    else:
        prec = compute.op_precision(op) if op.kind == "gemm" else "bf16"
    peak = gpu.peak_flops(prec) if op.flops else 0.0
    moved = compute.moved_bytes(op)
    memory_s = moved / (gpu.hbm_bw_bytes_s * compute.eff.mem)
    return {
        "kind": op.kind, "flops": op.flops, "bytes": moved,
        "shape": f"{op.m}x{op.n}x{op.k}" if op.kind == "gemm" else "",
        "fraction_of_peak": op.flops / (seconds * peak) if op.flops and seconds else 0.0,
        "bound": "memory" if op.kind == "memory" or memory_s >= seconds * (1 - 1e-12) else "compute",
        "time_s": seconds, "exposed_s": seconds,
    }


def _collective_row(c: Collective, exposed_s: float, timer: BlockTimer, placement) -> dict:
    return {
        "kind": c.op, "flops": 0.0, "bytes": c.bytes, "shape": f"{c.axis}={placement.degrees.get(c.axis, 1)}",
        "fraction_of_peak": 0.0, "bound": f"alongside {c.overlap}" if c.overlap else "exposed",
        "time_s": timer.collective_s(c), "exposed_s": exposed_s,
    }


def _host_copy_row(c: HostCopy, exposed_s: float, timer: BlockTimer) -> dict:
    return {
        "kind": c.direction, "flops": 0.0, "bytes": c.bytes, "shape": "pcie", "fraction_of_peak": 0.0,
        "bound": "alongside the pass", "time_s": timer.host_copy_s((c,)), "exposed_s": exposed_s,
    }


def block_totals(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Exposed seconds per (block.pass) and category."""
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        key = f"{r['block']}.{r['pass']}"
        cats = out.setdefault(key, {})
        cats[r["category"]] = cats.get(r["category"], 0.0) + r["exposed_s"]
    return out
