"""What a simulated training step returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# what each ``StepResult.prediction_mode`` means, in words (``teton run``, the report)
PREDICTION_MODES = {
    "in_situ": "in-situ (kernels as fitted on the training set)",
    "burst": "burst (microbenchmarks only: the best case)",
    "calibrated": "calibrated (the cluster's own in-situ values)",
}


@dataclass(frozen=True)
class StepResult:
    """One training step of a job on a cluster. Seconds, bytes, fractions.

    ``breakdown`` sums to ``step_time_s``: compute, exposed tp/cp/ep/pp/dp communication, the
    pipeline bubble, the SMs DP collectives took from compute (``sm_contention``), the optimizer
    step, the fixed ``step_overhead``, the host copies of CPU activation offload the compute did
    not hide (``cpu_offload``), the time eager passes lose to issuing kernels one by one (the GPU's
    gap after each, or the CPU's launches where they are slower: ``launch_overhead``), as seen by the busiest pipeline rank, and what grows with the GPU count
    (``teton.engine.scale``): the exposed DP communication splits into the last gradient bucket's
    reduce (``dp_last_bucket``) and the rest (``dp_comm``; both: :attr:`dp_exposed_s`), and the
    wait for the slowest rank (``stragglers``).

    Two peaks: ``mfu`` and ``hfu`` are against the dense peak of the job's ``precision`` (the
    fp8 peak for an fp8 job, the fp4 peak under the NVFP4 recipe, whose GEMMs run there; JSON
    keeps these keys); ``mfu_bf16`` and
    ``hfu_bf16`` against the bf16 dense peak whatever the precision, the one peak every table's
    "MFU" / "HFU" shows, so runs of different precisions compare (an fp8 run that is faster has
    the higher MFU). Tables label the precision-peak figures "MFU (fp8 peak)".
    """

    step_time_s: float
    mfu: float
    tflops_per_gpu: float
    tokens_per_s: float
    memory_per_gpu_bytes: float
    fits_in_memory: bool
    breakdown: dict[str, float]
    memory_breakdown: dict[str, float]
    hbm_bytes: float
    largest_memory_term: str
    model_flops_per_step: float
    tokens_per_step: int
    gpus: int
    layout: dict[str, int]
    micro_batches: int
    fidelity: str
    placement: str
    comm_times_s: dict[str, float] = field(default_factory=dict)
    # hardware FLOPs utilisation (Korthikanti et al. 2022): the hardware FLOPs
    # (the model FLOPs plus the recomputed ones, ``engine.block_timer``) over the same peak as ``mfu``
    hfu: float = 0.0
    hardware_flops_per_step: float = 0.0
    # MFU against the dense bf16 peak whatever the precision: ``mfu`` of an fp8 job is against
    # the fp8 peak (twice bf16's on Hopper), so this is the figure to compare fp8 and bf16 runs by
    mfu_bf16: float = 0.0
    hfu_bf16: float = 0.0
    precision: str = "bf16"  # whose dense peak ``mfu`` and ``hfu`` are against (fp4 for an NVFP4 job)
    notes: tuple[str, ...] = ()
    # what the user must hear (a pipeline mostly idle for want of micro-batches): `teton run` prints
    # these before its tables, --json lists them
    warnings: tuple[str, ...] = ()
    # the step time's p10-p90 band (None: burst profile, or in-situ values with no fit behind
    # them): from the fit's leave-one-out errors for a stack seen in training, its
    # leave-one-stack-out errors for an unseen one, a calibrated cluster's own; a run predicted
    # with error e in [p10, p90] measured step_time_s / (1 + e)
    step_time_s_low: float | None = None
    step_time_s_high: float | None = None
    # burst (microbenchmarks only) | in_situ (the catalog's fitted in-situ values) | calibrated
    prediction_mode: str = "in_situ"
    software: str = "unknown"  # the software stack whose in-situ values (and band) the prediction used
    # HBM left for the job's allocations (capacity less ``memory_reserved``: CUDA context, NCCL
    # buffers, fragmentation, the spec's reserve; ``teton.workload.headroom``), and what is left of
    # it after ``memory_per_gpu_bytes`` (negative: does not fit). fits_in_memory: headroom_bytes >= 0
    usable_hbm_bytes: float = 0.0
    headroom_bytes: float = 0.0
    # fits | tight (short of usable by no more than the fragmentation allowance) | does not fit
    memory_verdict: str = "fits"
    memory_reserved: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dp_exposed_s(self) -> float:
        """The DP communication the overlap did not hide: ``dp_comm`` plus ``dp_last_bucket``."""
        return self.breakdown.get("dp_comm", 0.0) + self.breakdown.get("dp_last_bucket", 0.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        d["notes"] = list(self.notes)
        d["warnings"] = list(self.warnings)
        d.update(extra)
        return d

    def with_extra(self, **items: Any) -> StepResult:
        from dataclasses import replace

        return replace(self, extra={**self.extra, **items})

