"""What grows with the GPU count: stragglers and the DP collectives' gradient buckets.

A weak-scaling series (the same work per GPU at more GPUs) slows by a few percent from its
smallest to its largest count. Two of the mechanisms behind it live here; the third, the latency
of a collective's ring or tree as it grows, is the network cost model's (ring steps x alpha,
trees for all-reduce: ``teton.network.analytical``).

**Stragglers.** A synchronous step ends when its slowest rank does. With each rank's step time
``T (1 + cv Z_i)``, Z_i independent standard normals drawn afresh every step, the step takes
``T (1 + cv E[max of N Z_i])``: the straggler term is ``cv T E[max_N]``, E[max_N] ~ sqrt(2 ln N),
0 for one rank (Petrini, Kerbyson & Pakin, "The case of the missing supercomputer performance",
SC'03, and Hoefler, Schneider & Lumsdaine, "Characterizing the influence of system noise on
large-scale applications by simulation", SC'10: a collective waits for the noisiest of N ranks).
E[max_N] is integrated numerically (:func:`expected_max_std_normal`), deterministic. N is every
rank of the job: they all meet in the DP collectives (and in the TP / PP exchanges without DP).
The per-step jitter (``cluster.step_jitter_cv``) is not the per-GPU speed spread
(``cluster.gpu_speed_cv``, the same slow GPU every step): it is the step-to-step noise of clocks,
thermals, the host's Python and the fabric. Its default, 1 %: ASSUMPTION, of the order of the
published variability of GPU throughput at scale - Llama 3 (Dubey et al. 2024, Sec. 3.3.4) reports
a 1-2 % throughput swing with the time of day from GPU clocks (dynamic voltage and frequency
scaling) on 16K H100s, and Sinha et al., "Not all GPUs are created equal: characterizing
variability in large-scale, accelerator-rich systems" (SC'22), measure GPU-to-GPU performance
variation of a few percent on clusters of thousands of GPUs; that this is a per-step, per-rank
independent spread of 1 % is teton's reading, to be refitted as weak-scaling measurements allow.

**Gradient buckets.** Megatron-Core's DDP reduces (and with the distributed optimizer gathers)
gradients in buckets of ``max(40M, 1M x DP)`` parameters (``megatron/core/distributed/
distributed_data_parallel.py``: ``bucket_size = max(40000000, 1000000 * dp_size)``, one bucket when
``overlap_grad_reduce`` is off); PyTorch DDP in buckets of ``bucket_cap_mb = 25`` MiB of gradients
(``torch.nn.parallel.DistributedDataParallel``); DeepSpeed ZeRO-1/2 in ``reduce_bucket_size = 5e8``
elements (DeepSpeed configuration docs). Each bucket is a collective of its own and pays the
collective's latency (:class:`BucketedCost`), and the last bucket's reduce starts after the last
backward, so it is exposed whatever the overlap: that tail is the ``dp_last_bucket`` line of the
breakdown, and it grows with DP through both the latency and Megatron's bucket size.
"""

from __future__ import annotations

import math

import numpy as np

from teton.order_stats import expected_max_std_normal  # noqa: F401 - re-exported

MEGATRON_MIN_BUCKET_PARAMS = 40_000_000  # Megatron-Core DDP: bucket_size = max(40M, 1M x DP x CP)
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
TORCH_DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb = 25 (MiB)
DEEPSPEED_BUCKET_PARAMS = 500_000_000  # DeepSpeed zero_optimization.reduce_bucket_size default 5e8

def straggler_s(step_s: float, ranks: int, cv: float) -> float:
    """Seconds a synchronous step of ``step_s`` (a rank's mean) waits for its slowest of ``ranks``
    ranks, each rank's step time jittering with coefficient of variation ``cv`` (module docstring)."""
    if cv <= 0 or ranks <= 1:
        return 0.0
    return cv * step_s * expected_max_std_normal(ranks)


def grad_bucket_params(software, dp_cp: int, overlap: bool, grad_bytes: int) -> float | None:
    """Parameters per DP gradient bucket (module docstring): the stack's ``grad_bucket_params`` if
    set, else its framework's default (PyTorch DDP: 25 MiB of ``grad_bytes``-byte gradients;
    DeepSpeed: 5e8; Megatron and others: max(40M, 1M x DP x CP)); None (one bucket per chunk)
    without overlap, where the whole reduce runs after the backward."""
    if not overlap:
        return None
    if software.grad_bucket_params is not None:
        return float(software.grad_bucket_params)
    if software.framework == "pytorch":
        return TORCH_DDP_BUCKET_BYTES / grad_bytes
    if software.framework == "megatron-deepspeed":
        return float(DEEPSPEED_BUCKET_PARAMS)
    return float(max(MEGATRON_MIN_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * dp_cp))


def dp_buckets(job, work) -> tuple[float | None, np.ndarray]:
    """(parameters per bucket or None, (p, v) buckets per chunk) of the job's DP collectives: under
    ZeRO-3, and under PyTorch FSDP at any sharding (a PyTorch stack with ZeRO >= 1), a unit is one
    layer (FSDP wraps each transformer block; the chunk's largest layer sets the bucket), else the
    framework's gradient buckets (:func:`grad_bucket_params`)."""
    lay = job.layout
    if job.zero == 3 or (job.zero >= 1 and job.software.framework == "pytorch"):
        units = np.maximum(1, work.split.layers)
        return float((np.asarray(work.chunk_params, dtype=float) / units).max()), units
    bucket = grad_bucket_params(job.software, lay.dp * lay.cp, job.overlap_dp_comm, work.grad_reduce_bytes_per_param)
    return bucket, bucket_counts(work, bucket)


def bucket_counts(work, bucket_params: float | None) -> np.ndarray:
    """(p, v) buckets of each chunk: its dense and its routed-expert parameters fill buckets of
    their own (Megatron keeps expert gradients in a separate buffer); 1 per chunk without buckets."""
    params = np.asarray(work.chunk_params, dtype=float)
    if bucket_params is None:
        return np.ones(params.shape)
    expert = np.asarray(work.expert_params, dtype=float)
    return np.maximum(1.0, np.ceil((params - expert) / bucket_params) + np.ceil(expert / bucket_params))


class BucketedCost:
    """A cost model whose collectives run in buckets of at most ``bucket_bytes``: a collective of
    S bytes is ceil(S / bucket_bytes) collectives of equal size, each paying its own latency."""

    def __init__(self, base, bucket_bytes: float | None):
        self.base, self.bucket_bytes = base, bucket_bytes
        self.fidelity = getattr(base, "fidelity", "analytical")

    def collective_time(self, op: str, groups: np.ndarray, size_bytes: float) -> float:
        if not self.bucket_bytes or size_bytes <= self.bucket_bytes:
            return self.base.collective_time(op, groups, size_bytes)
        k = math.ceil(size_bytes / self.bucket_bytes)
        return k * self.base.collective_time(op, groups, size_bytes / k)

    def __getattr__(self, name: str):
        return getattr(self.base, name)


def bucketed(cost, bucket_params: float | None, bytes_per_param: float):
    """``cost`` with its collectives in buckets of ``bucket_params`` parameters (:class:`BucketedCost`)."""
    return BucketedCost(cost, bucket_params * bytes_per_param if bucket_params else None)


def last_bucket_s(rs_s: np.ndarray, buckets: np.ndarray, exposed_dp_s: float) -> float:
    """The exposed DP time that is the last gradient bucket's reduce: one bucket's time of the
    chunk whose backward ends the step on its rank (chunk 0), the slowest rank's, at most what the
    DP communication left exposed."""
    if rs_s.size == 0 or exposed_dp_s <= 0:
        return 0.0
    return min(exposed_dp_s, float((rs_s[:, 0] / buckets[:, 0]).max()))
