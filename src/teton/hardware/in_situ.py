"""In-situ parameters: what a real training job's kernels get, relative to the burst figures.

The rest of the hardware catalog holds *microbenchmark* constants: a GEMM sweep's maximum, an
attention kernel's benchmark, nccl-tests bus bandwidth. A real job does not run there: its GPUs
sit at their power cap for hours, its collectives start when the last rank arrives and share the
GPU with compute, and eager frameworks leave the GPU idle between kernels. Each parameter below
names one such mechanism, with its physical meaning, a plausible range (the fit's bounds) and its
scope: one value per GPU family, or one for every family.

Their values are **not typed in**: they are the output of ``teton fit`` on the bundled training
sets (``teton.validation.training`` and ``training_set2``), one set per (software stack, GPU
family) with an across-stack prior, written to ``in_situ_fitted.json`` next to this file by
``teton fit --write-catalog``; a test re-fits and compares. ``cluster.efficiency.profile: burst``
turns them all off (every kernel at its microbenchmark figure); a cluster's ``efficiency:``
mapping overrides any of them (``teton fit RUNS --out`` writes such a file).

All candidates are defined here; the fit keeps those in ``teton.validation.fit.KEPT`` (the
others stay at their burst value), chosen on the training set's evidence: ``teton fit
--candidates`` fits each candidate set and shows its leave-one-out errors and residual trends.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from teton.memo import cached


@dataclass(frozen=True)
class InSituParameter:
    """One in-situ mechanism: its override key, scope, bounds and the value that means "burst"."""

    key: str
    scope: Literal["family", "global"]
    bounds: tuple[float, float]
    burst: float  # the value under which the mechanism is absent (the microbenchmark figure)
    unit: str
    meaning: str


PARAMETERS: dict[str, InSituParameter] = {p.key: p for p in (
    InSituParameter(
        "tensor_core_in_situ", "family", (0.5, 1.0), 1.0, "fraction of burst",
        "tensor-core throughput of GEMMs and attention kernels inside a training job, as a fraction "
        "of the burst microbenchmark (a short sweep on a cool GPU): sustained clocks at the power cap, "
        "real data, the cuBLAS heuristic's tile choice over the sweep's best"),
    InSituParameter(
        "collective_in_situ", "global", (0.3, 1.0), 1.0, "fraction of nccl-tests busbw",
        "bus bandwidth NCCL collectives reach inside a training job, as a fraction of nccl-tests: "
        "ranks arrive skewed, the kernels share SMs and HBM with compute, messages are cut into the "
        "job's buckets and layers"),
    InSituParameter(
        "mxfp8_gemm_in_situ", "global", (0.5, 1.0), 1.0, "fraction of per-tensor fp8",
        "throughput of MX block-scaled fp8 GEMMs (``software.fp8_recipe: mxfp8``) inside a job, as a "
        "fraction of the same GEMM with one scale per tensor: the 32-element E8M0 scale factors each "
        "main loop loads into tensor memory beside its operands, the scale-swizzle kernels before each "
        "GEMM; no public block-scaled GEMM sweep is in the catalog to set it as a microbenchmark"),
    InSituParameter(
        "nvfp4_gemm_in_situ", "family", (0.4, 1.0), 1.0, "fraction of the fp4 GEMM figure",
        "throughput of NVFP4 GEMMs (``software.fp8_recipe: nvfp4``) inside a job, as a fraction of the "
        "catalog's fp4 GEMM figure (itself an ASSUMPTION: no public NVFP4 GEMM sweep is in the "
        "catalog): the 16-element E4M3 scale factors each main loop loads beside its half-byte "
        "operands, the scale-swizzle kernels, a main loop three or four times as fast as bf16's "
        "against the same epilogue"),
    InSituParameter(
        "attention_in_situ", "family", (0.3, 1.0), 1.0, "fraction of burst",
        "attention kernels' throughput inside a job relative to the tensor-core factor above (flash "
        "attention's benchmark, or the unfused batched GEMMs of Megatron's core attention)"),
    InSituParameter(
        "cudnn_attention_in_situ", "family", (0.3, 1.0), 1.0, "fraction of the flash figures",
        "throughput of cuDNN's fused attention (Transformer Engine's FusedAttention, ``software.attention: "
        "cudnn``) inside a job, as a fraction of the flash-attention figures the catalog prices it at "
        "(FlashAttention-3's on Hopper, the Blackwell cuDNN figure, else FlashAttention-2's): a different "
        "kernel from the benchmarked one, for which no public cuDNN attention sweep is in the catalog"),
    InSituParameter(
        "kernel_gap_s", "global", (0.0, 100e-6), 0.0, "seconds per kernel",
        "idle GPU time per kernel beyond the measured eager gap (``hardware.kernels.EAGER_KERNEL_GAP_S``, "
        "charged to eager passes): cross-stream event waits, the tail of one kernel before the next fills "
        "the SMs, which back-to-back microbenchmarks never see"),
    InSituParameter(
        "step_overhead_s", "global", (0.0, 2.0), 0.0, "seconds per step",
        "per-step framework work outside the modelled kernels: data loader, logging, gradient-norm and "
        "loss-scale checks, Python between steps"),
    InSituParameter(
        "gpu_speed_cv", "global", (0.0, 0.05), 0.0, "coefficient of variation",
        "spread of sustained speed between GPUs (chip, cooling, power); a synchronous job is paced by "
        "its slowest of N (``cluster.gpu_speed_cv``)"),
)}

FITTED_FILE = "in_situ_fitted.json"
UNKNOWN_STACK = "unknown"


@cached(1)
def fitted_catalog() -> dict:
    """The catalog's fitted values as ``teton fit --write-catalog`` wrote them: ``stacks`` (software
    stack -> GPU family -> key -> value), ``prior`` (family -> key -> the across-stack centre, what
    a stack without training runs on that family uses), ``spread`` (the across-stack spread of each
    key and the per-run scatter, log units), ``band`` (``seen`` / ``unseen``: p10 and p90 relative
    errors, leave-one-out and leave-one-stack-out), ``borrow`` (family without training runs -> the
    family whose prior it takes), ``parameters`` and ``training_set``."""
    return json.loads(resources.files("teton.hardware").joinpath(FITTED_FILE).read_text())


def _prior(family: str) -> tuple[dict[str, float], str | None]:
    """(the family's across-stack prior values, the family it borrows them from or None)."""
    cat = fitted_catalog()
    prior = cat.get("prior", {})
    if family in prior:
        return dict(prior[family]), None
    lender = cat.get("borrow", {}).get(family)
    return dict(prior.get(lender, {})), lender


def in_situ_values(family: str, stack: str = UNKNOWN_STACK) -> tuple[dict[str, float], str]:
    """(values, source) of the in-situ parameters for a job of software ``stack`` on GPU ``family``.

    ``source``: ``stack`` when the stack has training runs on that family (its own fitted values),
    ``prior`` otherwise (the across-stack prior of the family: ``unknown``, a custom stack, or a
    stack seen only on other GPUs), ``borrowed`` when the family has no runs of any stack and takes
    the prior of the family the catalog's ``borrow`` map names."""
    own = fitted_catalog().get("stacks", {}).get(stack, {}).get(family)
    if own is not None:
        return dict(own), "stack"
    values, lender = _prior(family)
    return values, "borrowed" if lender else "prior"


def gpu_in_situ_values(gpu, stack: str = UNKNOWN_STACK) -> dict[str, float]:
    """The in-situ values of a job of ``stack`` on ``gpu``: its family's
    (:func:`teton.hardware.in_situ.in_situ_values`) for a catalog GPU or one that declares its
    family; else every catalog family's, weighted by the inverse square of its distance to the GPU
    (Shepard's interpolation over ``teton.hardware.gpus.catalog_distance``: a GPU on a catalog
    GPU's figures gets that family's values, and the values move continuously in between, where
    the nearest family's alone jumped by up to 20 % of the step at a boundary)."""
    from teton.hardware.gpus import family_distances, gpu_family, is_catalog

    family = gpu_family(gpu)[0]
    if gpu.family is not None or is_catalog(gpu):
        return in_situ_values(family, stack)[0]
    distances = family_distances(gpu)
    exact = [f for f, d in distances.items() if d == 0.0]
    if exact:
        return in_situ_values(exact[0], stack)[0]
    weights = {f: d ** -2 for f, d in distances.items()}
    tables = {f: in_situ_values(f, stack)[0] for f in weights}
    nearest = tables[family]
    total = sum(weights.values())
    return {k: sum(w * tables[f].get(k, v) for f, w in weights.items()) / total for k, v in nearest.items()}


def fitted_values(family: str, stack: str = UNKNOWN_STACK) -> dict[str, float]:
    """The in-situ values for ``stack`` on ``family`` (:func:`in_situ_values`)."""
    return in_situ_values(family, stack)[0]


def catalog_value(key: str, family: str, stack: str = UNKNOWN_STACK) -> float | None:
    """The catalog's value of one parameter for ``stack`` on ``family``; None if it has none."""
    return fitted_values(family, stack).get(key)


def borrowed_from(family: str) -> str | None:
    """The family whose prior ``family`` uses, when it has no training runs of its own."""
    return _prior(family)[1]


def band(seen: bool, moe: bool = False, family: str | None = None) -> tuple[float, float] | None:
    """(p10, p90) relative errors of the catalog's predictions: ``seen`` for a stack with training
    runs on the GPU family (leave-one-out errors: the ``family``'s own where the catalog has them,
    as the families' held-out errors scatter differently), else for an unseen one
    (leave-one-stack-out errors, every family together, widened to the ``family``'s own where
    its stacks scatter further: ``teton.validation.bands.widened_band``);
    ``moe`` for a model with MoE layers (the MoE rows' out-of-sample errors,
    ``teton.validation.moe_band``; for an unseen stack :func:`widened_for_unseen`); None if the
    catalog has none."""
    bands = fitted_catalog().get("band", {})
    by_family = bands.get("seen_by_family" if seen else "unseen_by_family", {})
    if not moe and family in by_family:
        lo, hi = by_family[family]
        return float(lo), float(hi)
    b = bands.get("seen" if seen else "unseen")
    if b is None:
        return None
    if moe and "moe" in bands:
        if seen:
            return float(bands["moe"][0]), float(bands["moe"][1])
        return widened_for_unseen(tuple(bands["moe"]), tuple(bands["seen"]), tuple(b))
    return float(b[0]), float(b[1])


def widened_for_unseen(band_: tuple[float, float], seen: tuple[float, float],
                       unseen: tuple[float, float]) -> tuple[float, float]:
    """``band_`` (p10, p90) of a seen stack carried to an unseen one as the dense bands differ: in log
    space its centre moves by the unseen band's centre minus the seen one's, and its half-width
    grows in quadrature by the unseen band's extra half-width over the seen band's."""
    def centre_half(b):
        a, c = math.log1p(b[0]), math.log1p(b[1])
        return (a + c) / 2, (c - a) / 2

    (cb, hb), (cs, hs), (cu, hu) = centre_half(band_), centre_half(seen), centre_half(unseen)
    centre, half = cb + (cu - cs), math.sqrt(hb ** 2 + max(0.0, hu ** 2 - hs ** 2))
    return math.expm1(centre - half), math.expm1(centre + half)
