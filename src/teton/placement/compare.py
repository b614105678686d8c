"""The cost of a placement for one job: every policy against the ideal, on a (partly) busy cluster.

``compare_policies`` places the job with each policy on the same cluster state (GPUs other jobs
hold: ``occupancy_busy``), prices each placement with a step simulator (``simulate(spec,
placement=..., cost_model=...)``, e.g. ``teton.simulate``; ``cost_model`` None is the spec's
own network; without a simulator, the cheap model of ``cost``), and
compares it with the ideal: topology-aware placement on an empty cluster. The axis that pays is
the ``<axis>_comm`` entry of the breakdown that grew most against the ideal. Each row carries
``notes`` (``add_notes``): a capped occupancy, a job that takes every free GPU (the policies then
differ only in rank order), and why a policy beats the ideal when one does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from teton.errors import SpecError
from teton.network.cost_model import cost_model
from teton.placement.cost import JobShape, step_estimate
from teton.placement.mapping import POLICIES, Placement, place
from teton.spec.cluster import ClusterSpec

COMM_AXES = ("tp", "cp", "pp", "ep", "dp")


def occupancy_busy(cluster: ClusterSpec, fraction: float, seed: int = 0, keep_free: int = 0) -> np.ndarray:
    """GPU ids other jobs hold on a cluster ``fraction`` occupied, as small jobs leave it.

    Busy capacity is drawn in half-host units (GPUs 0..g/2-1 or g/2..g-1 of a host; 1-4 GPU jobs
    on an 8-GPU host), chosen uniformly at random (seeded), so free space is scattered over hosts,
    racks and pods. At most ``cluster.gpus - keep_free`` GPUs are made busy (room for the job).
    """
    if not 0.0 <= fraction < 1.0:
        raise SpecError("occupancy", fraction, "must be in [0, 1)")
    g = cluster.gpus_per_host
    half = max(1, g // 2)
    units = cluster.gpus // half
    want = min(int(round(fraction * cluster.gpus)), cluster.gpus - keep_free) // half
    if want <= 0:
        return np.empty(0, dtype=np.int64)
    chosen = np.sort(np.random.default_rng(seed).choice(units, size=want, replace=False))
    return (chosen[:, None] * half + np.arange(half)).ravel().astype(np.int64)


def occupancy_capped(cluster: ClusterSpec, fraction: float, keep_free: int) -> bool:
    """Does ``occupancy_busy`` cap ``fraction`` to keep ``keep_free`` GPUs free?"""
    return int(round(fraction * cluster.gpus)) > cluster.gpus - keep_free


def span(cluster: ClusterSpec, gpu_ids: np.ndarray) -> dict[str, int]:
    """Hosts and domains of each fabric layer a set of GPUs touches."""
    out = {"hosts": int(np.unique(gpu_ids // cluster.gpus_per_host).size)}
    for layer in cluster.layers:
        out[plural(layer.name)] = int(np.unique(gpu_ids // layer.span_gpus).size)
    return out


def plural(name: str) -> str:
    """English plural of a fabric layer's name: leaf -> leaves, switch -> switches, rack -> racks."""
    if name.endswith("f"):
        return name[:-1] + "ves"
    if name.endswith(("s", "x", "ch", "sh")):
        return name + "es"
    return name + "s"


def _estimate_row(spec, placement: Placement) -> dict[str, Any]:
    shape = JobShape(model=spec.model.name, layout=spec.job.layout)
    est = step_estimate(spec.cluster, shape, placement, cost_model(spec.cluster, spec.network.fidelity))
    breakdown = {"compute": est.compute_s, "pipeline_bubble": est.bubble_s}
    breakdown.update({f"{a}_comm": est.exposed_s[a] for a in COMM_AXES})
    return {"step_time_s": est.step_s, "breakdown": breakdown}


def axis_that_pays(breakdown: dict[str, float], ideal: dict[str, float], rel_tol: float = 1e-3) -> str | None:
    """The axis whose exposed communication grew most against the ideal (None if none grew)."""
    step = sum(ideal.values()) or 1.0
    deltas = {k[: -len("_comm")]: breakdown.get(k, 0.0) - ideal.get(k, 0.0)
              for k in breakdown if k.endswith("_comm")}
    if not deltas:
        return None
    axis, d = max(deltas.items(), key=lambda kv: kv[1])
    return axis if d > rel_tol * step else None


NEIGHBOUR_JOB_GPUS = 128  # --neighbours: the busy GPUs form jobs of this size


def neighbour_groups(busy: np.ndarray, unit_gpus: int, seed: int = 0, job_gpus: int = NEIGHBOUR_JOB_GPUS,
                     compact: bool = False) -> np.ndarray:
    """(jobs, job_gpus) GPU groups of the other jobs on a busy cluster: the busy GPUs, in the
    whole units they were taken in (hosts, half hosts), cut into jobs in topology order
    (``compact``: a topology-aware scheduler placed them too) or shuffled (seeded: they landed
    wherever capacity was free); a short remainder stays idle."""
    units = np.sort(np.asarray(busy, dtype=np.int64)).reshape(-1, unit_gpus)
    if not compact:
        units = units[np.random.default_rng(seed + 1).permutation(len(units))]
    per = max(1, job_gpus // unit_gpus)
    n = (len(units) // per) * per
    return np.sort(units[:n].reshape(-1, per * unit_gpus), axis=1)


def compare_policies(spec, occupancy: float = 0.0, seed: int = 0, policies: tuple[str, ...] = POLICIES,
                     simulate: Callable[..., Any] | None = None,
                     progress: Callable[[int, int], None] | None = None, neighbours: bool = False) -> list[dict[str, Any]]:
    """One row per policy: step time, breakdown, slowdown and deltas vs the ideal, the axis that
    pays, and the hosts / racks / pods the job spans. ``spec``: a resolved ``teton.Spec``.

    ``neighbours``: the other jobs on the busy GPUs (:func:`neighbour_groups`, scattered as a
    busy cluster leaves them) all-reduce all the time on the same fabric (flow model with
    background traffic; needs ``simulate``). ``progress(done, total)``: policies priced so far."""
    cluster: ClusterSpec = spec.cluster
    job = spec.job
    degrees, order = job.layout.degrees, job.layout.order
    busy = occupancy_busy(cluster, occupancy, seed, keep_free=job.gpus)
    crowded = None
    if neighbours:
        if simulate is None or busy.size < NEIGHBOUR_JOB_GPUS:
            raise SpecError("neighbours", True, f"needs the step simulator and --occupancy leaving at least "
                            f"{NEIGHBOUR_JOB_GPUS} busy GPUs")
        from teton.network.flow_model import FlowCostModel

        net = spec.network
        crowded = FlowCostModel(cluster, routing=spec.routing, qps=net.qps_per_connection, seed=spec.seed, pat=spec.job.software.nccl_pat,
                                background=(("all_reduce", neighbour_groups(busy, max(1, cluster.gpus_per_host // 2),
                                                                             seed)),))
        empty = FlowCostModel(cluster, routing=spec.routing, qps=net.qps_per_connection, seed=spec.seed, pat=spec.job.software.nccl_pat)

    def price(p: Placement, cost_model=None) -> dict[str, Any]:
        if simulate is None:
            return _estimate_row(spec, p)
        r = simulate(spec, placement=p, cost_model=cost_model)
        return {"step_time_s": float(r.step_time_s), "breakdown": {k: float(v) for k, v in r.breakdown.items()}}

    ideal_p = place(cluster, degrees, order, "topology-aware", seed)
    ideal = price(ideal_p, empty if neighbours else None)
    rows = []
    for i, policy in enumerate(policies):
        if progress is not None:
            progress(i, len(policies))
        p = place(cluster, degrees, order, policy, seed, busy)
        row = price(p, crowded)
        bd = row["breakdown"]
        rows.append({
            "policy": policy,
            "step_time_s": row["step_time_s"],
            "slowdown": row["step_time_s"] / ideal["step_time_s"],
            "axis_pays": axis_that_pays(bd, ideal["breakdown"]),
            "breakdown": bd,
            "delta_vs_ideal_s": {k: bd.get(k, 0.0) - ideal["breakdown"].get(k, 0.0) for k in bd},
            "span": span(cluster, p.gpu_of_rank),
            "occupancy": float(busy.size / cluster.gpus),
            "occupancy_requested": float(occupancy),
            "occupancy_capped": occupancy_capped(cluster, occupancy, job.gpus),
            "ranks_per_host": ranks_per_host(cluster, p),
            "priced_by": "estimate" if simulate is None else "simulate",
            "neighbours": neighbours,
        })
    if progress is not None:
        progress(len(policies), len(policies))
    add_notes(spec, rows, ranks_per_host(cluster, ideal_p), free_gpus=cluster.gpus - busy.size)
    return rows


def ranks_per_host(cluster: ClusterSpec, p: Placement) -> dict[str, int]:
    """Members on one host of each axis' groups (the fewest over groups and hosts): how many ranks
    of a group NVLink joins before its collective reaches the NICs. ``dp``: the gradient group
    (dp x cp, as the step simulator reduces it)."""
    out = {}
    for axis, groups in (("tp", "tp"), ("cp", "cp"), ("pp", "pp"), ("dp", "dp_cp")):
        g = p.groups(groups)
        if g.shape[1] > 1:
            hosts = np.sort(g // cluster.domain_gpus, axis=1)
            distinct = 1 + (np.diff(hosts, axis=1) != 0).sum(axis=1)
            out[axis] = int((g.shape[1] // distinct).min())
    return out


def add_notes(spec, rows: list[dict[str, Any]], ideal_per_host: dict[str, int], free_gpus: int) -> None:
    """Attach to each row (``row["notes"]``) what a reader needs to trust it: a capped occupancy;
    a job that takes every free GPU (the policies then only reorder ranks); a policy faster than
    the ideal and why (a rank order that puts more ranks of a group on a host, whose collective
    NVLink pre-reduces: a genuine effect, not a cost-model error); random no slower than
    topology-aware on a non-blocking fabric priced by the analytical model."""
    cluster, job = spec.cluster, spec.job
    common = []
    if rows and rows[0]["occupancy_capped"]:
        common.append(f"occupancy capped: {rows[0]['occupancy_requested']:.3f} requested, "
                      f"{rows[0]['occupancy']:.3f} used, so that the job's {job.gpus} GPUs stay free")
    if job.gpus == free_gpus:
        common.append(f"the job takes every free GPU ({job.gpus} of {cluster.gpus}): every policy uses the "
                      "same GPUs, so they differ only in rank order")
    for r in rows:
        r["notes"] = list(common)
        note = _faster_note(r, ideal_per_host, tuple(job.layout.order))
        if note:
            r["notes"].append(note)
        if (r["policy"] == "random" and abs(r["slowdown"] - 1.0) < 1e-3 and spec.network.fidelity == "analytical"
                and all(layer.oversubscription <= 1.0 for layer in cluster.layers)):
            r["notes"].append("random is as fast as topology-aware: it shuffles whole hosts, and on this "
                              "non-blocking fabric (1:1 at every layer) the analytical model charges host order "
                              "only switch-hop latency; network.fidelity=flow prices path collisions under "
                              f"the fabric's routing ({spec.routing})")


def _faster_note(r: dict[str, Any], ideal_per_host: dict[str, int], order: tuple[str, ...]) -> str | None:
    """Why a policy beats the ideal: the axis whose communication fell most, with its ranks per host."""
    if r["slowdown"] >= 1.0 - 1e-3:
        return None
    deltas = {k[: -len("_comm")]: d for k, d in r["delta_vs_ideal_s"].items() if k.endswith("_comm")}
    gain, d_gain = min(deltas.items(), key=lambda kv: kv[1])
    lose, d_lose = max(deltas.items(), key=lambda kv: kv[1])
    text = f"{r['policy']} is {(1 - r['slowdown']) * 100:.1f} % faster than topology-aware: {gain}_comm {d_gain:+.3f} s"
    if d_lose > 5e-4:
        text += f", {lose}_comm {d_lose:+.3f} s"
    k, k0 = r["ranks_per_host"].get(gain, 0), ideal_per_host.get(gain, 0)
    if k > k0:
        text += (f". Its rank order puts {k} ranks of each {gain} group on a host (topology-aware: {k0}), "
                 "which reduce over NVLink before the NICs: a real effect of the rank order, not a cost-model "
                 f"error. Topology-aware placement follows job.parallel_order {list(order)}")
        if gain == "dp" and "pp" in order and order.index("dp") > order.index("pp"):
            inner = [a for a in order if a != "dp"]
            inner.insert(inner.index("pp"), "dp")
            text += f"; with {inner} it gets the same"
    return text
