"""Kernel- and collective-level efficiency constants, and the curves built on them.

Every constant here comes from a *microbenchmark* (a GEMM sweep, an attention-kernel benchmark,
a STREAM-like copy, nccl-tests), never from an end-to-end training throughput. Where a public
figure was read second-hand the comment says so; measure your own with ``teton calibrate``-style
microbenchmarks and override them in a cluster spec (``efficiency:`` mapping).

Models
------
GEMM (m x k) @ (k x n):  t = max(2mnk / (peak * e_gemm(m, n, k)), bytes / (hbm_bw * e_mem))
    e_gemm = min(e_mamf, e_max * q_wave(m, n) * k / (k + k_half(prec)))
    q_wave = tiles / (ceil(tiles / SMs) * SMs),  tiles = ceil(m/TILE_M) * ceil(n/TILE_N)
    grouped (g GEMMs in one kernel): q_wave = g m n / (ceil(tiles / SMs) * SMs * TILE_M * TILE_N),
             tiles = g ceil(m/TILE_M) ceil(n/TILE_N): the groups fill the waves together, and the
             padding of each group's edge tiles is work
    e_max is fixed so that the curve equals the published maximum achievable matmul FLOPS
    (MAMF) at the shape where that benchmark found it; being the maximum over a shape sweep,
    the MAMF also caps every other shape.
Attention (flash):  t = flops / (peak * e_attn(pass) * s_kv / (s_kv + S_HALF) / norm)
Both tensor-core terms are further scaled by ``sustained_ratio`` (sustained / burst throughput)
and, in a job, by the in-situ ``tensor_core_in_situ``; a job's collectives take ``1 /
collective_in_situ`` of their nccl-tests time (``teton.hardware.in_situ``).
Memory-bound ops:   t = bytes / (hbm_bw * e_mem)
Collectives:        busbw = link_bw * e_nccl(link kind)   (nccl-tests bus bandwidth, large messages)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from teton.hardware.gpus import FAMILIES, GPU, gpu_family, is_catalog
from teton.hardware.in_situ import PARAMETERS as IN_SITU_PARAMETERS
from teton.hardware.in_situ import UNKNOWN_STACK, fitted_catalog, gpu_in_situ_values, in_situ_values
from teton.hardware.in_situ import band as catalog_band
from teton.memo import ValueMemo, cached

TILE_M = 128  # CUTLASS/cuBLAS Hopper & Ampere default CTA tile for large bf16 GEMMs (128x256x64)
TILE_N = 256
# The k at which a bf16 GEMM's main loop reaches half its asymptotic rate (per-tile prologue and
# epilogue over the k-blocks). Measured on fp8 and taken to bf16 / fp4 by the bytes rule below:
# DeepGEMM's README (deepseek-ai/DeepGEMM, PyPI sdist deep_gemm 1.0.0) times H800 fp8 GEMMs of
# M >= 4096 at K = 512 ... 16,384 (590 TFLOPS at K 512, 1,025 at 2,048, 1,358 at 16,384: six
# normal and four grouped shapes); with the wave quantization below, ``k / (k + k_half)`` fits
# them within 3 % rms (8 % max) at k_half(fp8) = 740, where CUTLASS's nominal two k-blocks (256)
# missed K = 512 by 28 % (tests/engine/test_gemm_efficiency.py re-fits it)
K_HALF = 370.0
# A k-block is a fixed number of bytes (CUTLASS's Hopper / Blackwell tile shapes: 64 bf16, 128 fp8,
# 256 fp4 elements deep per 128-byte row), and the epilogue writes the same bf16 C tile whatever the
# operands: the same overhead spans 2 / bytes-per-element times as many k elements
OPERAND_BYTES = {"tf32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5}
ATTN_S_HALF = 256.0  # flash-attention per-tile start-up: efficiency halves at ~2 k-blocks of 128 keys
# the key length the attention figures below were read at (the FlashAttention papers' 8-16K points)
ATTN_REF_SEQ = 16384.0


def k_half(precision: str) -> float:
    """The k at which a GEMM of ``precision`` operands reaches half its asymptotic efficiency:
    ``K_HALF x 2 / OPERAND_BYTES`` (370 bf16, 740 fp8, 1,480 fp4 elements; the comment above)."""
    return K_HALF * 2.0 / OPERAND_BYTES.get(precision, 2.0)


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak for one GPU model."""

    # Maximum achievable matmul FLOPS / dense peak, by precision, and the shape (m, n, k) it was
    # found at.
    gemm_mamf: dict[str, float]
    gemm_mamf_shape: tuple[int, int, int]
    attn_fwd: float  # FlashAttention-2 forward FLOP/s / bf16 dense peak, long causal sequences
    attn_bwd: float  # FlashAttention-2 backward
    mem: float  # achieved / peak HBM bandwidth for streaming kernels
    nccl_nvlink: float  # nccl-tests busbw / NVLink per-direction bandwidth (8 GPUs, large messages)
    nccl_nvls: float  # same with NVLink SHARP (all-reduce), if available
    nccl_net: float  # nccl-tests busbw / NIC line rate, multi-node, large messages
    extra: dict[str, float] = field(default_factory=dict)
    # Hopper-specific kernels (warp-specialised, TMA/wgmma): FlashAttention-3; None where the
    # architecture has no such kernel and FlashAttention-2 figures apply.
    attn_fa3_fwd: float | None = None
    attn_fa3_bwd: float | None = None
    # Tensor-core throughput under sustained load / in a burst microbenchmark. GEMM sweeps and
    # attention benchmarks time a few products on a cool GPU; a training job holds the board at
    # its power cap for hours, and DVFS lowers the clock as the die heats (Llama 3, Sec. 3.3.4,
    # sees 1-2 % diurnal swings from it). A burst on random data is already power-capped: the
    # same 8192^3 product runs 13 % faster on zeros (894 vs 788 TFLOP/s on this workplace's
    # H200, device notes 2026-10-28), which only a power-limited clock explains, so what a
    # sustained run can add is the thermal part (leakage at a hot die). No public sustained-load
    # sweep was found, so the default is 1 (burst); benchmarks/device/calibrate_hopper.py
    # measures it.
    sustained_ratio: float = 1.0
    # In-situ parameters (``teton.hardware.in_situ``): what a real job's kernels get relative to
    # the burst figures above; 1 / 0 is the burst (pure microbenchmark) profile.
    tensor_core_in_situ: float = 1.0
    mxfp8_gemm_in_situ: float = 1.0  # MX block-scaled fp8 GEMMs / per-tensor-scaled ones
    nvfp4_gemm_in_situ: float = 1.0  # NVFP4 GEMMs / the catalog's fp4 GEMM figure (an assumption)
    attention_in_situ: float = 1.0
    cudnn_attention_in_situ: float = 1.0  # cuDNN's fused attention / the flash figures it is priced at
    collective_in_situ: float = 1.0
    kernel_gap_s: float = 0.0
    step_overhead_s: float = 0.0

    @property
    def tensor_core(self) -> float:
        """Factor on every tensor-core kernel's burst throughput: sustained / burst x in-situ."""
        return self.sustained_ratio * self.tensor_core_in_situ

    def busbw_fraction(self, link: str) -> float:
        """nccl-tests bus bandwidth / link bandwidth on ``link`` (nvlink | nvls | net): the burst
        figure the network models use (a job's collectives take ``1 / collective_in_situ`` of
        that time: ``teton.engine.prepare.in_situ_cost``)."""
        return {"nvlink": self.nccl_nvlink, "nvls": self.nccl_nvls, "net": self.nccl_net}[link]

    def attention(self, kernel: str, backward: bool) -> float:
        """Achievable fraction of the bf16 peak of the attention kernel ``fa2`` or ``fa3``; ``cudnn``
        is priced at FA3's figures where the family has them, else FA2's (no public cuDNN attention
        sweep is in the catalog: what a job's cuDNN kernels reach against them is the fitted
        ``cudnn_attention_in_situ``, applied by ``engine.compute``)."""
        if kernel in ("fa3", "cudnn") and self.attn_fa3_fwd is not None:
            return self.attn_fa3_bwd if backward else self.attn_fa3_fwd
        return self.attn_bwd if backward else self.attn_fwd

    def gemm(self, precision: str, gpu: GPU, m: int, n: int, k: int, groups: int = 1) -> float:
        """e_gemm(m, n, k): achievable fraction of the dense peak for this GEMM shape (``groups``
        such GEMMs in one grouped kernel)."""
        e = self.gemm_mamf.get(precision, self.gemm_mamf["bf16"])
        q = _wave_quantization(m, n, gpu.sm_count, groups)
        return min(e, self.gemm_max(precision, gpu) * q * k / (k + k_half(precision)))

    def gemm_max(self, precision: str, gpu: GPU) -> float:
        """Asymptotic e_max: the MAMF value divided by the curve's shape factors at its shape."""
        e = self.gemm_mamf.get(precision, self.gemm_mamf["bf16"])
        m, n, k = self.gemm_mamf_shape
        return e / (_wave_quantization(m, n, gpu.sm_count) * k / (k + k_half(precision)))


@cached(4096)
def _wave_quantization(m: int, n: int, sm_count: int, groups: int = 1) -> float:
    return wave_quantization(m, n, sm_count, groups)


def wave_quantization(m: int, n: int, sm_count: int, groups: int = 1) -> float:
    """Fraction of SM-time doing useful tiles: tiles / (waves * SMs) for one GEMM (the library's
    heuristic picks a tile that suits its shape, so edge padding is not charged).

    ``groups > 1``: a grouped GEMM (Megatron-Core's grouped experts) runs one tile shape for every
    group, and the groups fill the waves together: a grouped kernel schedules every group's tiles
    (CUTLASS's, ``torch._grouped_mm``, Transformer Engine 2.20's grouped-tensor path); Transformer
    Engine 2.9-2.16's ``GroupedLinear`` issues one cuBLAS GEMM per group on a few streams
    (``te_general_grouped_gemm``: the multi-stream cuBLAS backend), taken to fill each other's
    partial waves (ASSUMPTION, unmeasured: priced in series instead, each with its own waves, the
    MoE rows of training set 2 run 2.3 % slower on average, up to 8.8 %; docs/moe.md). Each
    group's edge tiles (rows not a multiple of the tile, the routed tokens of an expert) run at
    full cost, so the useful share is the groups' m x n outputs over ``waves x SMs`` tiles of TILE_M x TILE_N."""
    tiles = groups * math.ceil(m / TILE_M) * math.ceil(n / TILE_N)
    waves = math.ceil(tiles / sm_count)
    if groups == 1:
        return tiles / (waves * sm_count)
    return groups * m * n / (waves * sm_count * TILE_M * TILE_N)


EFFICIENCY: dict[str, Efficiency] = {
    # A100 SXM: MAMF 271.2 of 312 TFLOPS bf16 at 1024x10240x5120 (S. Bekman, "ml-engineering",
    # Maximum Achievable Matmul FLOPS finder table). FlashAttention-2 paper (Dao 2023, Fig. 4):
    # A100 causal hdim-128 forward ~ 190-200, backward ~ 150-170 TFLOPS at 8-16K keys.
    # BabelStream triad on A100-80GB ~ 1.75 of 2.04 TB/s. nccl-tests on DGX A100: all-reduce
    # busbw ~ 230 GB/s on NVLink 3 (of 300); 8x200G HDR multi-node ~ 23 GB/s per GPU (of 25).
    "a100": Efficiency({"bf16": 271.2 / 312, "tf32": 0.80}, (1024, 10240, 5120), 0.62, 0.51, 0.86,
                       0.77, 0.77, 0.92),
    # H100 SXM: MAMF 794.5 of 989 TFLOPS bf16 at 2048x2048x13312 (S. Bekman, "ml-engineering",
    # MAMF table); corroborated on this workplace's H200 (same tensor cores): 8192^3 bf16 at
    # 769-798 TFLOP/s on random data, 894 on zeros (10 products after 3 warm-ups; device notes,
    # 2026-10/11). benchmarks/device/calibrate_hopper.py measures burst vs sustained throughput.
    # fp8: the maximum achievable fp8 GEMM throughput, DeepGEMM's README (deepseek-ai/DeepGEMM, 2025):
    # "up to 1,550 TFLOPS" on H800 (the H100's SMs and clocks; its NVLink is what differs), i.e.
    # 1,550 / 1,978.9 of the dense fp8 peak, for large GEMMs with fine-grained scaling. tf32 (A100 0.80,
    # Hopper 0.78): ASSUMPTION, no sweep read here. FlashAttention-3 paper (Shah et al. 2024, Figs. 5-6)
    # reports FlashAttention-2 on H100 at ~ 350 TFLOPS forward and ~ 300 backward (causal,
    # hdim 128, 8-16K). BabelStream triad ~ 3.0 of 3.35 TB/s. nccl-tests on 8x H100 (NVLink 4):
    # all-gather / reduce-scatter busbw ~ 360 GB/s of 450; NVLS all-reduce ~ 480 GB/s; 400G
    # NDR/RoCE multi-node busbw ~ 46 GB/s per GPU of 50 (NVIDIA DGX H100 nccl-tests reports).
    # FlashAttention-3 (same paper, Figs. 5-7): ~ 620 TFLOPS forward and ~ 470 backward (causal,
    # hdim 128, 8-16K) on H100 SXM5.
    "hopper": Efficiency({"bf16": 794.5 / 989.4, "fp8": 1550 / 1978.9, "tf32": 0.78}, (2048, 2048, 13312),
                         0.35, 0.30, 0.90, 0.80, 1.07, 0.92, attn_fa3_fwd=0.63, attn_fa3_bwd=0.47),
    # B200: no public MAMF sweep read here; NVIDIA's B200 cuBLAS figures (~ 1.5-1.7 PF bf16
    # of 2.25) give ~ 0.72. Attention: FlashAttention for Blackwell (cuDNN) ~ 1.2 PF fwd bf16.
    # ASSUMPTION (no benchmark read here): fp8 0.70, fp4 0.70 (the fp8 fraction: no public NVFP4
    # GEMM sweep either; what a job's NVFP4 GEMMs get is the fitted nvfp4_gemm_in_situ), tf32
    # 0.70, attention backward 0.42, and HBM / NCCL fractions taken over from Hopper; measure them
    # (benchmarks/device) before trusting B200.
    "blackwell": Efficiency({"bf16": 0.72, "fp8": 0.70, "fp4": 0.70, "tf32": 0.70}, (4096, 4096, 8192), 0.53,
                            0.42, 0.90, 0.80, 1.07, 0.92),
}
# Blackwell Ultra (B300, GB300): B200's table, ASSUMPTION (no microbenchmark read here); its level
# against B200 (NVIDIA announces twice the attention-layer softmax throughput) is left to its own
# fitted in-situ values until a sweep is measured.
EFFICIENCY["blackwell-ultra"] = EFFICIENCY["blackwell"]

if tuple(EFFICIENCY) != FAMILIES:
    raise RuntimeError("teton.hardware.gpus.FAMILIES must list the families of EFFICIENCY, in order")


def efficiency_for(gpu: GPU) -> Efficiency:
    """The burst (microbenchmark) efficiency table of a GPU's architecture family, without the
    FlashAttention-3 figures for a GPU that cannot run FA3 (``GPU.flash_attention_3``)."""
    eff = EFFICIENCY[family_of(gpu)]
    if gpu.flash_attention_3 or eff.attn_fa3_fwd is None:
        return eff
    from dataclasses import replace

    return replace(eff, attn_fa3_fwd=None, attn_fa3_bwd=None)


# (gpu_speed_cv is an in-situ candidate too, but a cluster field: ``cluster.gpu_speed_cv``)
OVERRIDE_KEYS = ("gemm_bf16", "gemm_fp8", "gemm_fp4", "gemm_tf32", "attn_fwd", "attn_bwd", "attn_fa3_fwd",
                 "attn_fa3_bwd", "mem", "nccl_nvlink", "nccl_nvls", "nccl_net", "sustained_ratio",
                 *(k for k in IN_SITU_PARAMETERS if k != "gpu_speed_cv"))
# profile: in_situ (the default: the fitted in-situ parameters apply) | burst (microbenchmarks only)
PROFILES = ("in_situ", "burst")
# keys a fit writes into a calibrated cluster's efficiency mapping to carry its error band
BAND_KEYS = ("band_low", "band_high")
# ... and its parameters' uncertainty, which the engine carries into each job's band
# (``teton.engine.band``): ``sd_<key>``, the posterior sd of an in-situ value (log units for a
# fraction of burst, seconds for a duration), and ``corr_<key>__<key>``, the correlation of two of them
SD_PREFIX, CORR_PREFIX, CORR_SEP = "sd_", "corr_", "__"


def is_uncertainty_key(key: str) -> bool:
    return key.startswith(SD_PREFIX) or key.startswith(CORR_PREFIX)


def _check_uncertainty(key: str, value) -> None:
    from teton.errors import SpecError

    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if key.startswith(SD_PREFIX):
        name = key.removeprefix(SD_PREFIX)
        if name not in IN_SITU_PARAMETERS:
            raise SpecError(f"cluster.efficiency.{key}", value, f"sd_ names an in-situ parameter "
                            f"({', '.join(IN_SITU_PARAMETERS)})")
        if not (number and 0 <= value <= 10):
            raise SpecError(f"cluster.efficiency.{key}", value, "must be a standard deviation in [0, 10]")
        return
    pair = key.removeprefix(CORR_PREFIX).split(CORR_SEP)
    if len(pair) != 2 or any(p not in IN_SITU_PARAMETERS for p in pair) or pair[0] == pair[1]:
        raise SpecError(f"cluster.efficiency.{key}", value, f"corr_ names two in-situ parameters as "
                        f"corr_<a>{CORR_SEP}<b> ({', '.join(IN_SITU_PARAMETERS)})")
    if not (number and -1 <= value <= 1):
        raise SpecError(f"cluster.efficiency.{key}", value, "must be a correlation in [-1, 1]")


def parameter_uncertainty(overrides: dict | None) -> tuple[tuple[str, ...], list[list[float]]] | None:
    """(keys, covariance) of a calibrated cluster's in-situ values from its ``sd_`` / ``corr_``
    entries (a missing correlation is 0); None when it carries none."""
    o = overrides or {}
    sd = {k.removeprefix(SD_PREFIX): float(v) for k, v in o.items() if k.startswith(SD_PREFIX)}
    if not sd:
        return None
    keys = tuple(sd)

    def corr(a: str, b: str) -> float:
        if a == b:
            return 1.0
        return float(o.get(f"{CORR_PREFIX}{a}{CORR_SEP}{b}", o.get(f"{CORR_PREFIX}{b}{CORR_SEP}{a}", 0.0)))

    return keys, [[sd[a] * sd[b] * corr(a, b) for b in keys] for a in keys]


def microbenchmark_overrides(overrides: dict | None) -> dict:
    """A cluster's ``efficiency:`` entries that replace microbenchmark figures (not the in-situ
    values, the profile or a fit's band): what a new fit keeps of a cluster."""
    return {k: v for k, v in (overrides or {}).items()
            if k not in IN_SITU_PARAMETERS and k != "profile" and k not in BAND_KEYS and not is_uncertainty_key(k)}


def family_of(gpu: GPU) -> str:
    """The architecture family whose efficiency table (and in-situ values) ``gpu`` uses: its
    declared family, else the nearest catalog GPU's (``teton.hardware.gpus.gpu_family``)."""
    return gpu_family(gpu)[0]


def with_overrides(eff: Efficiency, overrides: dict[str, float | str] | None) -> Efficiency:
    """``eff`` with a cluster spec's ``efficiency:`` overrides applied (``gemm_<prec>`` sets the
    MAMF of that precision; the others replace the field of the same name; ``profile`` and the
    band keys are read by :func:`cluster_efficiency` and the engine). A microbenchmark figure is a
    fraction of peak in (0, 2]; an in-situ value must lie in its parameter's fit bounds
    (``teton.hardware.in_situ``), the box ``teton fit`` searches."""
    if not overrides:
        return eff
    from dataclasses import replace

    from teton.errors import SpecError

    fields: dict = {}
    mamf = dict(eff.gemm_mamf)
    for key, value in overrides.items():
        if key == "profile":
            if value not in PROFILES:
                raise SpecError("cluster.efficiency.profile", value, f"must be one of {', '.join(PROFILES)}")
            continue
        if key in BAND_KEYS:
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and -1 < value < 1):
                raise SpecError(f"cluster.efficiency.{key}", value, "must be a relative error in (-1, 1)")
            continue
        if is_uncertainty_key(key):
            _check_uncertainty(key, value)
            continue
        if key not in OVERRIDE_KEYS:
            raise SpecError(f"cluster.efficiency.{key}", value, f"unknown; known: "
                            f"{', '.join((*OVERRIDE_KEYS, 'profile', *BAND_KEYS, 'sd_<parameter>', 'corr_<a>__<b>'))}")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        param = IN_SITU_PARAMETERS.get(key)
        if param is not None:  # an in-situ value: within the box its fit searches
            lo, hi = param.bounds
            if not (number and lo <= value <= hi):
                raise SpecError(f"cluster.efficiency.{key}", value, f"must be {param.unit} in [{lo:g}, {hi:g}]")
        elif not (number and 0 < value <= 2):
            raise SpecError(f"cluster.efficiency.{key}", value, "must be a fraction of peak in (0, 2]")
        if key.startswith("gemm_"):
            mamf[key.removeprefix("gemm_")] = float(value)
        else:
            fields[key] = float(value)
    return replace(eff, gemm_mamf=mamf, **fields)


def in_situ_band(gpu: GPU, overrides: dict | None, stack: str = UNKNOWN_STACK,
                 moe: bool = False) -> tuple[float, float] | None:
    """(p10, p90) relative errors of the fit behind a cluster's in-situ values: the cluster's own
    ``band_low`` / ``band_high`` (written by ``teton fit --cluster-out``), else the catalog's band
    when its fitted values are in use unchanged: the leave-one-out band of the GPU's family for a
    stack with training runs on it, the (wider) leave-one-stack-out band otherwise; for a model with MoE
    layers (``moe``) the MoE rows' band instead (``teton.hardware.in_situ.band``); None in the
    burst profile or when in-situ values were set by hand (no fit to take a band from)."""
    o = overrides or {}
    if all(k in o for k in BAND_KEYS):
        return float(o["band_low"]), float(o["band_high"])
    if profile_of(o) != "in_situ" or any(k in IN_SITU_PARAMETERS for k in o):
        return None
    family = family_of(gpu)
    return catalog_band(in_situ_values(family, stack)[1] == "stack", moe, family)


def prediction_mode(gpu: GPU, overrides: dict | None, stack: str = UNKNOWN_STACK,
                    moe: bool = False) -> tuple[str, str | None]:
    """(mode, note): ``burst`` (microbenchmarks only), ``in_situ`` (the catalog's fitted values)
    or ``calibrated`` (in-situ values from the cluster's own ``efficiency:``, e.g. ``teton fit
    --cluster-out``); the note says when the GPU is not a catalog GPU (the figures it borrows
    from its family: :func:`assumed_note`), when the stack has no training runs on the GPU's
    family (the across-stack prior applies), when the family borrows another's prior, and for a
    model with MoE layers (``moe``) in the catalog's mode that its band is the MoE rows'."""
    mode, note = _mode(gpu, overrides, stack)
    note = assumed_note(gpu, overrides, mode) or note
    if moe and mode == "in_situ" and "moe" in fitted_catalog().get("band", {}):
        note = "; ".join(n for n in (note, MOE_BAND_NOTE) if n)
    return mode, note


MOE_BAND_NOTE = ("an MoE model: its band is the MoE rows' held-out errors (teton validate), far wider than a dense "
                 "model's; calibrate with teton fit on your own MoE runs")


# the microbenchmark figures a GPU takes from its family's table unless the cluster overrides them
MICROBENCHMARK_KEYS = ("gemm_bf16", "gemm_fp8", "gemm_fp4", "attn_fwd", "attn_bwd", "mem", "nccl_nvlink", "nccl_nvls",
                       "nccl_net")


def assumed_note(gpu: GPU, overrides: dict | None, mode: str) -> str | None:
    """For a GPU that is not a catalog GPU: which of its efficiencies are its family's, assumed
    (the microbenchmark figures the cluster's ``efficiency:`` does not set, and the in-situ prior
    unless calibrated); None for a catalog GPU."""
    if is_catalog(gpu):
        return None
    family, nearest = gpu_family(gpu)
    o = overrides or {}
    keys = [k for k in MICROBENCHMARK_KEYS if k not in o and (gpu.nvls or k != "nccl_nvls")
            and (not k.startswith("gemm_") or k.removeprefix("gemm_") in gpu.peak_tflops)]
    blended = mode == "in_situ" and nearest is not None  # teton.hardware.in_situ.gpu_in_situ_values
    taken = ([f"microbenchmark efficiencies ({', '.join(keys)})"] if keys else []) + \
        (["in-situ prior"] if mode == "in_situ" and not blended else [])
    if not taken and not blended:
        return None
    how = f"nearest catalog GPU {nearest}" if nearest else "declared family"
    said = [f"its {' and '.join(taken)} are the {family} family's ({how})"] if taken else []
    if blended:
        said.append("its in-situ prior is the catalog families' interpolated by distance in bf16 peak and HBM "
                    f"bandwidth (nearest: {family})")
    return (f"{gpu.name} is not a catalog GPU: {'; '.join(said)}, assumed, not measured; set cluster.efficiency "
            f"from your own microbenchmarks and calibrate with teton fit on your runs")


def _mode(gpu: GPU, overrides: dict | None, stack: str) -> tuple[str, str | None]:
    o = overrides or {}
    if any(k in IN_SITU_PARAMETERS or k in BAND_KEYS or is_uncertainty_key(k) for k in o):
        return "calibrated", None
    if profile_of(o) == "burst":
        return "burst", None
    family = family_of(gpu)
    source = in_situ_values(family, stack)[1]
    if source == "borrowed":
        from teton.hardware.in_situ import borrowed_from

        return "in_situ", (f"{gpu.name}: no training run on its GPU family; its in-situ values are "
                           f"{borrowed_from(family)}'s across-stack prior (calibrate with teton fit on your own runs)")
    if source == "prior":
        return "in_situ", (f"software stack {stack!r} has no training runs on {family}: its in-situ values are "
                           f"the across-stack prior, with the leave-one-stack-out band (teton fit --stack "
                           f"calibrates them from a few runs)")
    return "in_situ", None


def profile_of(overrides: dict | None) -> str:
    """The efficiency profile a cluster's overrides ask for (default ``in_situ``)."""
    return str((overrides or {}).get("profile", "in_situ"))


def cluster_efficiency(gpu: GPU, overrides: dict[str, float | str] | None = None,
                       stack: str = UNKNOWN_STACK) -> Efficiency:
    """The efficiency table of ``gpu``'s family as a job of software ``stack`` sees it: the burst
    catalog, the fitted in-situ values of the stack on that family or the across-stack prior
    (unless ``profile: burst``; ``teton.hardware.in_situ``), then the cluster's overrides.

    Memoised by value, so that every simulation of one cluster shares one table (the engine's
    identity-keyed caches then hit across calls)."""
    try:
        key = (gpu, stack, tuple(sorted((overrides or {}).items())))
        hit = _CLUSTER_EFFICIENCY.get(key)
    except TypeError:  # a value no spec allows (a list, a mapping) or a key that is not a name
        return with_overrides(efficiency_for(gpu), overrides)  # raises the SpecError naming it
    if hit is None:
        eff = efficiency_for(gpu)
        if profile_of(overrides) == "in_situ":
            eff = with_overrides(eff, gpu_in_situ_values(gpu, stack))
        hit = _CLUSTER_EFFICIENCY.put(key, with_overrides(eff, overrides))
    return hit


_CLUSTER_EFFICIENCY = ValueMemo(4096)  # (GPU, stack, sorted overrides) -> table
