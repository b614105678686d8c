"""GPU catalog: dense peak throughput per precision, HBM, NVLink, power.

Every figure is a vendor datasheet value for the SXM (or HGX) part; "dense" means without
2:4 structured sparsity (datasheets print the sparse figure first, twice as large).
Bandwidths are bytes per second; NVLink is per GPU, per direction. HBM capacity is what the
device reports (nvidia-smi ``memory.total``), not the rounded marketing figure: an "80 GB" H100
SXM5 reports 81,559 MiB (85.5e9 bytes), an "80 GB" A100 81,920 MiB, an H200 143,771 MiB.

:class:`GPU` is the one schema of a GPU: the catalog's entries and a GPU a spec or a file defines
(``cluster.gpu``, ``cluster.host.gpu``: docs/hardware.md) are the same model, checked by the same
rules. A GPU belongs to an architecture ``family``: the family keys the microbenchmark
efficiency table it takes (``teton.hardware.efficiency``) and its fitted in-situ values
(``teton.hardware.in_situ``). A GPU that declares none takes the family of the catalog GPU
nearest to it in bf16 peak and HBM bandwidth (:func:`gpu_family`).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from teton.errors import SpecError
from teton.hardware.bounds import Section
from teton.units import GB, GIB, MIB

# the architecture families with an efficiency table (teton.hardware.efficiency.EFFICIENCY)
Family = Literal["a100", "hopper", "blackwell", "blackwell-ultra"]
FAMILIES: tuple[str, ...] = ("a100", "hopper", "blackwell", "blackwell-ultra")
# precisions a GPU may list a dense peak for; every GPU lists bf16 (the reference precision)
PRECISIONS = ("tf32", "fp16", "bf16", "fp8", "fp4")
MAX_TFLOPS = 1e6  # one GPU's dense peak at most 1 EFLOP/s (the largest today: ~10 PFLOP/s fp4)


class GPU(Section):
    """One GPU model (module docstring); frozen, hashable by value."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=80, description="the GPU's name in tables")
    peak_tflops: dict[str, float] = Field(
        description="dense (no 2:4 sparsity) peak TFLOP/s per precision: tf32, fp16, bf16 (required), fp8, fp4")
    hbm_bytes: float = Field(gt=0, le=1e14, description="HBM capacity the device reports, bytes")
    hbm_bw_bytes_s: float = Field(gt=0, le=1e15, description="peak HBM bandwidth, bytes/s")
    nvlink_bw_bytes_s: float = Field(
        gt=0, le=1e14, description="scale-up link (NVLink, Infinity Fabric) bandwidth per GPU, per direction, bytes/s")
    tdp_w: float = Field(gt=0, le=1e5, description="board power at full load (TDP), W")
    idle_w: float = Field(ge=0, le=1e5, description="board power idle, W; at most tdp_w")
    sm_count: int = Field(gt=0, le=100_000, description="streaming multiprocessors (AMD: compute units): the "
                                                          "parallel units of the GEMM wave-quantisation model")
    nvls: bool = Field(default=False, description="NVLink SHARP (in-switch reduction) on its NVSwitch generation")
    flash_attention_3: bool = Field(default=False, description="FlashAttention-3 kernels run on it (Hopper's "
                                                                 "TMA / wgmma); job.attention_kernel fa3 needs it")
    fp8_any_layout: bool = Field(
        default=False, description="its fp8 GEMMs take operands in any layout, not only TN (Blackwell: cuBLASLt "
                                   "non-TN fp8 GEMMs); a per-tensor fp8 recipe then writes no transposed fp8 copy")
    family: Family | None = Field(
        default=None, description="architecture family whose microbenchmark efficiencies and in-situ prior it "
                                  "takes (a100 | hopper | blackwell | blackwell-ultra); default: the catalog GPU's nearest in bf16 "
                                  "peak and HBM bandwidth")
    usd_per_gpu_hour: float | None = Field(
        default=None, ge=0, le=1e4, description="rental price a plan charges per GPU-hour (teton plan; default: "
                                                "its table by GPU name)")
    source: str = Field(default="", max_length=2000, description="where the figures come from (datasheet, paper)")
    _hash: int = PrivateAttr(default=0)  # by value, computed once (memo keys hash a GPU per lookup)

    @field_validator("peak_tflops")
    @classmethod
    def _peaks(cls, peaks: dict[str, float]) -> dict[str, float]:
        for key, tflops in peaks.items():
            if key not in PRECISIONS:
                raise SpecError(f"peak_tflops.{key}", tflops, f"unknown precision; known: {', '.join(PRECISIONS)}")
            if isinstance(tflops, bool) or not 0 < tflops <= MAX_TFLOPS:
                raise SpecError(f"peak_tflops.{key}", tflops, f"must be TFLOP/s in (0, {MAX_TFLOPS:g}]")
        if "bf16" not in peaks:
            raise SpecError("peak_tflops", peaks, "needs a bf16 peak (the reference precision)")
        return {k: float(v) for k, v in peaks.items()}

    @model_validator(mode="after")
    def _power(self) -> GPU:
        if self.idle_w > self.tdp_w:
            raise SpecError("idle_w", self.idle_w, f"must be at most tdp_w ({self.tdp_w:g} W)")
        return self

    def model_post_init(self, context) -> None:
        self._hash = hash(tuple((k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                                for k, v in self.__dict__.items()))

    def __hash__(self) -> int:
        return self._hash

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for ``precision`` (fp8 falls back to bf16 where unsupported)."""
        if precision not in self.peak_tflops:
            precision = "bf16"
        return self.peak_tflops[precision] * 1e12


def _gpu(name: str, peaks: dict[str, float], hbm: float, hbm_bw: float, nvlink: float, tdp: float, idle: float,
         sms: int, family: str, **extra) -> GPU:
    return GPU(name=name, peak_tflops=peaks, hbm_bytes=hbm, hbm_bw_bytes_s=hbm_bw, nvlink_bw_bytes_s=nvlink,
               tdp_w=tdp, idle_w=idle, sm_count=sms, family=family, **extra)


_HOPPER = {"tf32": 494.7, "bf16": 989.4, "fp8": 1978.9}
GPUS: dict[str, GPU] = {g.name: g for g in (
    # NVIDIA A100 Tensor Core GPU datasheet (2021): TF32 156 / BF16 312 dense TFLOPS, no FP8;
    # 40 GB HBM2 1,555 GB/s; 80 GB HBM2e 2,039 GB/s; NVLink 3 600 GB/s bidirectional
    # (300 GB/s per direction); 400 W max TDP (SXM); 108 SMs (A100 whitepaper).
    _gpu("a100-40gb", {"tf32": 156, "bf16": 312}, 40960 * MIB, 1555 * GB, 300 * GB, 400, 50, 108, "a100"),
    _gpu("a100-80gb", {"tf32": 156, "bf16": 312}, 81920 * MIB, 2039 * GB, 300 * GB, 400, 50, 108, "a100"),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): TF32 494.7 / BF16 989.4 / FP8 1,978.9 dense
    # TFLOPS; 80 GB HBM3 3.35 TB/s; NVLink 4 900 GB/s bidirectional; up to 700 W; 132 SMs
    # (H100 whitepaper). Idle ~70 W: nvidia-smi idle draw commonly reported for SXM5 boards.
    _gpu("h100-sxm", _HOPPER, 81559 * MIB, 3350 * GB, 450 * GB, 700, 70, 132, "hopper", nvls=True,
         flash_attention_3=True),
    # H800 SXM: the H100 SXM5's GH100 die (same SMs, clocks, HBM3 and dense bf16 / fp8 / tf32
    # peaks) with its NVLink cut to 400 GB/s bidirectional (200 GB/s per direction) for export
    # (philisun.com, "NVIDIA H800 vs H100: a technical deep dive"; aiwiki.ai, "NVIDIA H800");
    # DeepSeek-V3's cluster ran it (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.1).
    # Power, idle draw and NVLink SHARP as H100 SXM5: ASSUMPTION (the same board and NVSwitch
    # generation; no H800 datasheet read). Hopper family: the same silicon, so the same
    # microbenchmark table (DeepGEMM's fp8 ceiling in it was measured on H800).
    _gpu("h800", _HOPPER, 81559 * MIB, 3350 * GB, 200 * GB, 700, 70, 132, "hopper", nvls=True,
         flash_attention_3=True),
    # NVIDIA GH200 Grace Hopper datasheet: the Hopper GPU with 96 GB HBM3 at 4 TB/s, same tensor
    # throughput as H100 SXM5; NVLink 900 GB/s; GPU power share of the 450-1000 W module ~700 W.
    _gpu("h100-96gb", _HOPPER, 96 * GIB, 4000 * GB, 450 * GB, 700, 70, 132, "hopper", nvls=True,
         flash_attention_3=True),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): same tensor throughput as H100 SXM5; 141 GB
    # HBM3e at 4.8 TB/s; NVLink 900 GB/s; up to 700 W.
    _gpu("h200", _HOPPER, 143771 * MIB, 4800 * GB, 450 * GB, 700, 70, 132, "hopper", nvls=True,
         flash_attention_3=True),
    # NVIDIA HGX B200 datasheet (per GPU = platform / 8): TF32 1.1 / BF16 2.25 / FP8 4.5 dense
    # PFLOPS; 180 GB HBM3e (DGX B200: 1,440 GB total) at 8 TB/s; NVLink 5 1.8 TB/s bidirectional;
    # up to 1,000 W. 148 SMs (Blackwell architecture technical brief). fp8 GEMMs in any operand
    # layout: Transformer Engine's is_non_tn_fp8_gemm_supported() is true from compute capability
    # 10.0 (transformer_engine/pytorch/utils.py), where Hopper (9.0) takes TN only.
    _gpu("b200", {"tf32": 1100, "bf16": 2250, "fp8": 4500, "fp4": 9000}, 180 * GB, 8000 * GB, 900 * GB, 1000, 100,
         148, "blackwell", nvls=True, fp8_any_layout=True),
    # The other Blackwell parts. Dense peaks, HBM and NVLink: NVIDIA's LLM benchmarking collection
    # (github.com/NVIDIA/dgxc-benchmarking README @841f546, "Peak Theoretical Throughput" and the
    # reference-architecture tables): GB200 2,450 / 4,900 / 9,800 (bf16 / fp8 / fp4), 186 GB at
    # 8 TB/s; B300 2,250 / 4,500 / 13,500, 270 GB at 7.7 TB/s, 1,100 W; GB300 2,450 / 4,900 /
    # 14,700, 279 GB at 8 TB/s, configurable up to 1,400 W; NVLink 5 1.8 TB/s bidirectional on all.
    # GB200's 1,200 W: NVIDIA's GB200 datasheet as quoted by G. Lockwood's notes (secondary).
    # ASSUMPTION: GB200 has B200's 148 SMs (the same die); B300 / GB300 (Blackwell Ultra) 160 SMs
    # (secondary reports; no stored NVIDIA page); idle 100 W as B200. Blackwell Ultra is a family of
    # its own (sm_103): the published GB300 runs go 1.05-1.27x GB200's at the same layout, release
    # and dense peaks, so it keeps its own fitted in-situ values.
    _gpu("gb200", {"bf16": 2450, "fp8": 4900, "fp4": 9800}, 186 * GB, 8000 * GB, 900 * GB, 1200, 100, 148,
         "blackwell", nvls=True, fp8_any_layout=True),
    _gpu("b300", {"bf16": 2250, "fp8": 4500, "fp4": 13500}, 270 * GB, 7700 * GB, 900 * GB, 1100, 100, 160,
         "blackwell-ultra", nvls=True, fp8_any_layout=True),
    _gpu("gb300", {"bf16": 2450, "fp8": 4900, "fp4": 14700}, 279 * GB, 8000 * GB, 900 * GB, 1400, 100, 160,
         "blackwell-ultra", nvls=True, fp8_any_layout=True),
)}


def gpu_family(gpu: GPU) -> tuple[str, str | None]:
    """(family, the catalog GPU it was taken from): the GPU's declared ``family`` (None), else the
    family of the catalog GPU nearest to it (:func:`catalog_distance`; ties: the catalog's order)."""
    if gpu.family is not None:
        return gpu.family, None
    nearest = min(GPUS.values(), key=lambda other: catalog_distance(gpu, other))
    return str(nearest.family), nearest.name


def catalog_distance(gpu: GPU, other: GPU) -> float:
    """|ln(bf16 peak ratio)| + |ln(HBM bandwidth ratio)|: how far apart two GPUs are in the two
    figures that set a step's compute and memory-bound time."""
    return (abs(math.log(gpu.peak_tflops["bf16"] / other.peak_tflops["bf16"]))
            + abs(math.log(gpu.hbm_bw_bytes_s / other.hbm_bw_bytes_s)))


def family_distances(gpu: GPU) -> dict[str, float]:
    """Each catalog family's distance to ``gpu``: its nearest member's (:func:`catalog_distance`)."""
    out: dict[str, float] = {}
    for other in GPUS.values():
        d = catalog_distance(gpu, other)
        out[str(other.family)] = min(d, out.get(str(other.family), math.inf))
    return out


def is_catalog(gpu: GPU) -> bool:
    """Whether ``gpu`` is a catalog GPU, figure for figure."""
    return GPUS.get(gpu.name) == gpu
