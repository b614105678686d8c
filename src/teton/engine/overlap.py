"""Exposed time of a collective that runs alongside compute it does not depend on.

The work side (``workload.ops``) marks which collective runs under which GEMM or attention op
(``Collective.overlap``, ``chunks``, ``ring_steps``); this module turns the two priced times into
the seconds the collective adds to its pass:

* Concurrent or decomposed with a GEMM (:func:`overlapped_exposed_s`): NCCL's kernel holds a
  fraction ``f`` of the SMs (one CTA per channel) while it runs, so the GEMM advances at
  ``1 - f`` and the pair takes ``max(t_comm, t_gemm + f t_comm)``. Megatron's async TP in
  backward (Korthikanti et al. 2022, Sec. 4.2.2) runs the pair concurrently; collective matmul
  (Wang et al., ASPLOS 2023; TransformerEngine's userbuffers; PyTorch async-TP) decomposes it
  into chunks, of which one cannot hide.
* A ring exchange under equal compute blocks (:func:`ring_exposed_s`): ring attention (Liu et al.
  2023; TransformerEngine / Megatron-Core context parallelism with p2p).
"""

from __future__ import annotations


def overlapped_exposed_s(comm_s: float, gemm_s: float, chunks: int, sm_fraction: float = 0.0) -> float:
    """Exposed seconds of a collective run alongside a GEMM it does not depend on.

    While the collective runs, its kernel holds a fraction ``f`` of the SMs (one CTA per NCCL
    channel), so the GEMM advances at ``1 - f``: together they take
    ``T = max(t_comm, t_gemm + f t_comm)``. Concurrent (``chunks == 1``, Megatron's async TP in
    backward: the input re-gather runs under the data-gradient GEMM, the gradient
    reduce-scatter under the weight-gradient GEMM): exposed ``T - t_gemm``. Decomposed into
    ``c`` chunks (collective matmul: Wang et al., ASPLOS 2023; TransformerEngine's userbuffers;
    PyTorch async-TP), one chunk cannot hide: ``T + min(t_comm, t_gemm) / c - t_gemm``. With
    ``f = 0``: ``max(0, t_comm - t_gemm)`` and ``max(t_comm, t_gemm) + min / c - t_gemm``.
    """
    together = max(comm_s, gemm_s + sm_fraction * comm_s)
    if chunks <= 1:
        return together - gemm_s
    return together + min(comm_s, gemm_s) / chunks - gemm_s


def ring_exposed_s(comm_s: float, compute_s: float, steps: int) -> float:
    """Exposed seconds of a ring exchange of ``steps`` steps under ``steps + 1`` equal compute blocks.

    Ring attention (Liu et al. 2023; TransformerEngine / Megatron-Core context parallelism with
    p2p): block 0 uses the local K/V; while block i is computed the next K/V block travels one
    hop. Step i waits for ``max(t_step, t_block)``: exposed ``steps * max(0, t_comm / steps -
    t_compute / (steps + 1))``. A ring moves the same bytes as the all-gather of the sequence.
    """
    if steps <= 0:
        return comm_s
    return steps * max(0.0, comm_s / steps - compute_s / (steps + 1))
