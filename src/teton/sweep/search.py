"""Layout search: every valid TP/CP/PP/DP (and schedule, recompute, ZeRO) layout of a job,
simulated, filtered to what fits in memory, ranked by step time.

The global batch (tokens per step), sequence length, GPU count, model and cluster stay fixed;
the search varies how the job is laid out. Invalid layouts (a degree that doesn't divide heads,
an interleaved schedule whose micro-batch count isn't a multiple of pp, ...) are skipped by the
same rules ``teton run`` reports as errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from teton.engine.step import simulate_step
from teton.errors import SpecError
from teton.spec.schema import RECOMPUTE_INTERVAL_DEFAULT, Spec, check_job

TP_CHOICES = (1, 2, 4, 8, 16)
CP_CHOICES = (1, 2, 4, 8, 16, 32)
PP_CHOICES = (1, 2, 4, 8, 16, 32, 64)
V_CHOICES = (1, 2, 4, 8)
MICRO_BATCH_CHOICES = (1, 2, 4)
# selective_layer at the job's recompute_interval (torchtitan's default N = 2 unless the job sets it);
# selective_op is skipped where the job rules refuse it (MoE, biases, fp8)
RECOMPUTE_CHOICES = ("none", "selective", "full", "selective_op", "selective_layer")
ZERO_CHOICES = (1, 2, 3)


@dataclass(frozen=True)
class SearchSpace:
    tp: tuple[int, ...] = TP_CHOICES
    cp: tuple[int, ...] = CP_CHOICES
    pp: tuple[int, ...] = PP_CHOICES
    virtual_stages: tuple[int, ...] = V_CHOICES
    micro_batch: tuple[int, ...] = MICRO_BATCH_CHOICES
    recompute: tuple[str, ...] = RECOMPUTE_CHOICES
    zero: tuple[int, ...] = ZERO_CHOICES


def candidate_jobs(spec: Spec, space: SearchSpace = SearchSpace()) -> Iterator[Spec]:
    """Every layout in ``space`` that passes the job rules, as a full Spec."""
    job = spec.job
    tokens = job.tokens_per_step
    # ZeRO-2 both ways: gradients reduced once per step (Llama 3's FSDP; the unsharded accumulation
    # buffer stays) or after every micro-batch (DeepSpeed; sharded gradients, more traffic)
    zeros = [(z, gr) for z in space.zero for gr in ((None, "per_microbatch") if z == 2 else (None,))]
    for tp, cp, pp, v, mb, rc, (z, gr) in itertools.product(space.tp, space.cp, space.pp, space.virtual_stages,
                                                              space.micro_batch, space.recompute, zeros):
        model_par = tp * cp * pp
        if job.gpus % model_par:
            continue
        if v > 1 and pp == 1:
            continue
        if cp > 1 and job.seq_len < 8192 * cp // 4:  # CP only pays for long sequences
            continue
        dp = job.gpus // model_par
        seqs = tokens // job.seq_len
        if seqs % (dp * mb):
            continue
        interval = job.recompute_interval if rc == "selective_layer" else RECOMPUTE_INTERVAL_DEFAULT
        update = dict(tp=tp, cp=cp, pp=pp, dp=dp, micro_batch=mb, recompute=rc, recompute_interval=interval,
                      zero=z, grad_reduce=gr,
                      pp_schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v,
                      global_batch=seqs, global_batch_tokens=None,
                      # Llama 3's round size N is the job's only for its own pipeline; others use pp
                      pp_round=job.pp_round if (pp, v) == (job.pp, job.virtual_stages) else None,
                      pp_embedding_slots=job.pp_embedding_slots and pp > 1)
        try:
            candidate = check_job(job.model_copy(update=update), spec.model, spec.cluster)
        except SpecError:
            continue
        yield spec.model_copy(update={"job": candidate})


def search_layouts(spec: Spec, space: SearchSpace = SearchSpace(),
                   progress: Callable[[int, int], None] | None = None) -> dict:
    """Simulate every candidate; rows sorted by step time, fitting layouts first."""
    candidates = list(candidate_jobs(spec, space))
    rows = []
    for i, cand in enumerate(candidates):
        r = simulate_step(cand)
        j = cand.job
        rows.append({
            "tp": j.tp, "cp": j.cp, "pp": j.pp, "dp": j.dp_degree, "virtual_stages": j.virtual_stages,
            "micro_batch": j.micro_batch, "recompute": j.recompute,
            "recompute_interval": j.recompute_interval if j.recompute == "selective_layer" else None, "zero": j.zero,
            "grad_reduce": j.grad_reduce_mode,
            "step_time_s": r.step_time_s, "mfu": r.mfu, "tflops_per_gpu": r.tflops_per_gpu,
            "tokens_per_s": r.tokens_per_s, "memory_per_gpu_bytes": r.memory_per_gpu_bytes,
            "fits_in_memory": r.fits_in_memory, "breakdown": r.breakdown,
        })
        if progress is not None:
            progress(i + 1, len(candidates))
    rows.sort(key=lambda row: (not row["fits_in_memory"], row["step_time_s"]))
    unique, seen = [], set()
    for row in rows:  # e.g. selective == none under flash attention: keep the simpler choice once
        key = tuple(row[k] for k in ("tp", "cp", "pp", "virtual_stages", "micro_batch")) + (
            round(row["step_time_s"], 12), round(row["memory_per_gpu_bytes"]))
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return {"evaluated": len(rows), "fitting": sum(r["fits_in_memory"] for r in unique), "rows": unique}
