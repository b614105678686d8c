"""Exposed time of a collective that runs alongside compute it does not depend on.

The work side (``workload.ops``) marks which collective runs under which GEMM or attention op
(``Collective.overlap``, ``chunks``, ``ring_steps``); this module turns the two priced times into
the seconds the collective adds to its pass:

* Concurrent or decomposed with a GEMM (:func:`overlapped_exposed_s`): NCCL's kernel holds a
  fraction ``f`` of the SMs (one CTA per channel) while it runs, so the GEMM advances at
  ``1 - f``. Megatron's async TP in backward (Korthikanti et al. 2022, Sec. 4.2.2) and the
  userbuffers' "bulk" overlaps run the pair concurrently; collective matmul (Wang et al., ASPLOS
  2023; PyTorch async-TP; the userbuffers' "ring_exchange" overlaps) pipelines it in chunks, the
  local one first.
* A ring exchange under equal compute blocks (:func:`ring_exposed_s`): ring attention (Liu et al.
  2023; TransformerEngine / Megatron-Core context parallelism with p2p).
"""

from __future__ import annotations


def overlapped_exposed_s(comm_s: float, gemm_s: float, chunks: int, sm_fraction: float = 0.0) -> float:
    """Exposed seconds of a collective run alongside a GEMM it does not depend on.

    While the collective runs, its kernel holds a fraction ``f`` of the SMs, so the GEMM
    advances at ``1 - f`` and takes ``g' = t_gemm + f t_comm``.

    * Concurrent (``chunks == 1``: Megatron's async TP in backward, the input re-gather under
      the data-gradient GEMM and the gradient reduce-scatter under the weight-gradient GEMM;
      the userbuffers' ``bulk`` overlaps): the pair takes ``max(t_comm, g')``, exposed
      ``max(t_comm, g') - t_gemm``.
    * Pipelined in ``c`` chunks (the TP group's size; collective matmul): an all-gather's GEMM
      runs on the local shard first while the first remote shard arrives, then on each remote
      shard as it lands (PyTorch 2.13 ``torch/distributed/_symmetric_memory``,
      ``_pipelined_all_gather_and_consume``); a reduce-scatter's GEMM computes the remote ranks'
      chunks first, each sent while the next is computed, and its own last
      (``_pipelined_produce_and_all2all``), then sums the partials (a memory-bound kernel the
      work side adds, ``workload.ops``). Megatron-Bridge's userbuffers configurations run the
      forward and data-gradient pairs this way (``ring_exchange``) and the weight-gradient pairs
      concurrently (``bulk``); ASSUMPTION: Transformer Engine's ring exchange (compiled, not
      read) pipelines as PyTorch's does. Each of the ``c - 1`` steps waits for the longer of
      one shard's transfer ``t_comm / (c - 1)`` and one GEMM chunk ``g' / c``: exposed
      ``(c - 1) max(0, t_comm / (c - 1) - g' / c) + f t_comm``, nothing but the SM share when
      the GEMM chunks are the longer.
    """
    slowed = gemm_s + sm_fraction * comm_s
    if chunks <= 1:
        return max(comm_s, slowed) - gemm_s
    return (chunks - 1) * max(0.0, comm_s / (chunks - 1) - slowed / chunks) + sm_fraction * comm_s


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
