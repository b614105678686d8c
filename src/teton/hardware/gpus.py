"""GPU catalog: dense peak throughput per precision, HBM, NVLink, power.

Every figure is a vendor datasheet value for the SXM (or HGX) part; "dense" means without
2:4 structured sparsity (datasheets print the sparse figure first, twice as large).
Bandwidths are bytes per second; NVLink is per GPU, per direction. HBM capacity is what the
device reports (nvidia-smi ``memory.total``), not the rounded marketing figure: an "80 GB" H100
SXM5 reports 81,559 MiB (85.5e9 bytes), an "80 GB" A100 81,920 MiB, an H200 143,771 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from teton.units import GB, GIB, MIB


@dataclass(frozen=True)
class GPU:
    name: str
    peak_tflops: dict[str, float]  # dense peak by precision: tf32, bf16, fp8
    hbm_bytes: float
    hbm_bw_bytes_s: float
    nvlink_bw_bytes_s: float  # per GPU, per direction
    tdp_w: float
    idle_w: float
    sm_count: int
    nvls: bool = False  # NVLink SHARP (in-switch reduction) on the NVSwitch generation it ships with

    def peak_flops(self, precision: str) -> float:
        """Dense peak FLOP/s for ``precision`` (fp8 falls back to bf16 where unsupported)."""
        if precision not in self.peak_tflops:
            precision = "bf16"
        return self.peak_tflops[precision] * 1e12


GPUS: dict[str, GPU] = {
    # NVIDIA A100 Tensor Core GPU datasheet (2021): TF32 156 / BF16 312 dense TFLOPS, no FP8;
    # 40 GB HBM2 1,555 GB/s; 80 GB HBM2e 2,039 GB/s; NVLink 3 600 GB/s bidirectional
    # (300 GB/s per direction); 400 W max TDP (SXM); 108 SMs (A100 whitepaper).
    "a100-40gb": GPU("a100-40gb", {"tf32": 156, "bf16": 312}, 40960 * MIB, 1555 * GB, 300 * GB, 400, 50, 108),
    "a100-80gb": GPU("a100-80gb", {"tf32": 156, "bf16": 312}, 81920 * MIB, 2039 * GB, 300 * GB, 400, 50, 108),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): TF32 494.7 / BF16 989.4 / FP8 1,978.9 dense
    # TFLOPS; 80 GB HBM3 3.35 TB/s; NVLink 4 900 GB/s bidirectional; up to 700 W; 132 SMs
    # (H100 whitepaper). Idle ~70 W: nvidia-smi idle draw commonly reported for SXM5 boards.
    "h100-sxm": GPU("h100-sxm", {"tf32": 494.7, "bf16": 989.4, "fp8": 1978.9}, 81559 * MIB, 3350 * GB,
                    450 * GB, 700, 70, 132, nvls=True),
    # NVIDIA GH200 Grace Hopper datasheet: the Hopper GPU with 96 GB HBM3 at 4 TB/s, same tensor
    # throughput as H100 SXM5; NVLink 900 GB/s; GPU power share of the 450-1000 W module ~700 W.
    "h100-96gb": GPU("h100-96gb", {"tf32": 494.7, "bf16": 989.4, "fp8": 1978.9}, 96 * GIB, 4000 * GB,
                     450 * GB, 700, 70, 132, nvls=True),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): same tensor throughput as H100 SXM5; 141 GB
    # HBM3e at 4.8 TB/s; NVLink 900 GB/s; up to 700 W.
    "h200": GPU("h200", {"tf32": 494.7, "bf16": 989.4, "fp8": 1978.9}, 143771 * MIB, 4800 * GB,
                450 * GB, 700, 70, 132, nvls=True),
    # NVIDIA HGX B200 datasheet (per GPU = platform / 8): TF32 1.1 / BF16 2.25 / FP8 4.5 dense
    # PFLOPS; 180 GB HBM3e (DGX B200: 1,440 GB total) at 8 TB/s; NVLink 5 1.8 TB/s bidirectional;
    # up to 1,000 W. 148 SMs (Blackwell architecture technical brief).
    "b200": GPU("b200", {"tf32": 1100, "bf16": 2250, "fp8": 4500}, 180 * GB, 8000 * GB, 900 * GB,
                1000, 100, 148, nvls=True),
}
