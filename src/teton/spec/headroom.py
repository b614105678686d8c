"""The HBM a job cannot allocate (``job.headroom``): what `fits` keeps free on every GPU.

Usable HBM = capacity - CUDA context - NCCL buffers of the rank's communicators - allocator
fragmentation - a reserve of the user's (``teton.workload.headroom`` computes it). A job fits when
the bytes it allocates (``memory_per_gpu``: what ``torch.cuda.max_memory_allocated`` reports)
are at most the usable HBM.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from teton.spec.fields import Section

# ASSUMPTION: a CUDA 12 context with lazy module loading (CUDA_MODULE_LOADING=LAZY, the default
# since CUDA 12.2) holds 300-500 MB of device memory on a data-centre GPU, the loaded kernels of
# the CUDA libraries included (what nvidia-smi shows for a process that has only initialised CUDA
# and PyTorch, less torch.cuda.memory_reserved); the upper end is taken. Not measured here.
CUDA_CONTEXT_GIB = 0.5
# NCCL's Simple-protocol buffer per channel and connection: NCCL_BUFFSIZE, default 4194304 bytes
# (NCCL User Guide, Environment Variables, NCCL_BUFFSIZE).
NCCL_BUFFSIZE_MIB = 4.0
# ASSUMPTION: the share of the caching allocator's pool that fragmentation leaves unusable at the
# peak (1 - allocated / reserved). PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=
# expandable_segments:True, PyTorch >= 2.1) map pages into one growing segment and leave little;
# the default caching allocator averages 15 % (up to 33 %) on LLM training with recompute and ZeRO
# (Guo et al., GMLake, ASPLOS 2024, A100 80 GB): set fragmentation: 0.15 for a job without them.
FRAGMENTATION = 0.03


class HeadroomSpec(Section):
    """HBM kept free on every GPU: the CUDA context, NCCL's buffers, allocator fragmentation and a
    reserve of your own. A job fits when its allocated bytes are at most what is left."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # device memory the CUDA context takes before anything is allocated (GiB)
    cuda_context_gib: float = Field(default=CUDA_CONTEXT_GIB, ge=0, le=1024)
    # NCCL_BUFFSIZE: the Simple protocol's buffer per channel and connection of every communicator
    # (MiB); the LL and LL128 buffers come on top (teton.workload.headroom)
    nccl_buffsize_mib: float = Field(default=NCCL_BUFFSIZE_MIB, ge=0, le=1024)
    # share of the allocator's pool (HBM less context and NCCL) fragmentation leaves unusable at the
    # peak, 1 - allocated / reserved (fraction, 0 <= f < 1)
    fragmentation: float = Field(default=FRAGMENTATION, ge=0, lt=1)
    # further HBM to keep free: torch.compile's or a profiler's buffers, a safety margin (GiB)
    reserve_gib: float = Field(default=0.0, ge=0, le=1024)
