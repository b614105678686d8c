"""Scaling series of the training sets: the same work per GPU (weak) or the same global batch
(strong) at several GPU counts.

Issue #25's definition: rows of one source and release, system, model, precision and layout (TP,
PP, CP, VP, EP, FSDP, micro-batch, sequence length) with the same global batch per GPU (GBS /
GPUs), measured at two or more GPU counts. Between its smallest and largest count the step time
of such a series grows only by what grows with scale (stragglers, collective latency, the exposed
last gradient bucket: ``teton.engine.scale``), so its published ratio, largest / smallest, is a
direct test of those mechanisms. :func:`weak_scaling_series` finds the series in the rows;
:func:`weak_scaling_table` compares each published ratio with teton's.

Near-series the bundled data hold, and why they are not weak scaling under that definition (the
table's note says so): Megatron-LM's "weak scaling" table (training set 2, source E; GPT 1.7B on
48 H100s to 462B on 6,144) grows the model with the GPU count and changes the batch per GPU
(4 to 0.5 sequences); Llama 3 405B's Table 4 (``teton/data/llama3-405b-table4.csv``) keeps the
global batch at 16M tokens from 8,192 to 16,384 GPUs (its batch per DP rank halves: strong
scaling); MT-NLG 530B (source H) keeps its 1,920-sequence batch from 2,240 to 3,360 GPUs (strong).

Those two are strong-scaling series: one layout (TP, PP, ...) and global batch, more DP ranks. Their
published ratio, largest / smallest count, tests what the work per GPU shrinking leaves behind (a
pipeline's bubble stays as its micro-batches per rank fall) together with what grows with scale;
:func:`strong_scaling_table` sets it against teton's beside the ideal ratio (smallest / largest
count). They are not the weak-scaling series issue #25 asks for, and the table says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

NOT_WEAK = ("Megatron-LM's weak-scaling table (source E) grows the model with the GPU count; Llama 3 405B's "
            "Table 4 and MT-NLG 530B keep the global batch (strong scaling): none is the same work per GPU")


@dataclass(frozen=True)
class ScalingSeries:
    """Rows (ids) of one configuration at the same work per GPU (weak) or the same global batch
    (strong), by ascending GPU count."""

    label: str
    row_ids: tuple[str, ...]
    gpus: tuple[int, ...]


def series_key(row, strong: bool = False) -> tuple | None:
    """What rows of one weak-scaling series share (module docstring), of one strong-scaling series
    with ``strong`` (the global batch itself instead of the batch per GPU); None for a row without
    a GPU count or a global batch."""
    if not row.gpus or not row.gbs:
        return None
    return (row.source, row.release.split("r")[0], row.system, row.model, row.precision, row.tp, row.pp,
            row.cp, row.vp, row.ep, row.fsdp, row.mbs, row.seq_len,
            row.gbs if strong else Fraction(row.gbs, row.gpus))


def weak_scaling_series(rows, strong: bool = False) -> list[ScalingSeries]:
    """The weak-scaling series among ``rows`` (training set 2's ``PublishedRow``): groups of one
    :func:`series_key` measured at two or more GPU counts; the strong-scaling ones with ``strong``."""
    groups: dict[tuple, list] = {}
    for row in rows:
        key = series_key(row, strong)
        if key is not None:
            groups.setdefault(key, []).append(row)
    out = []
    for key, members in groups.items():
        if len({m.gpus for m in members}) < 2:
            continue
        members.sort(key=lambda m: (m.gpus, m.id))
        batch = f"{key[-1]:,} sequences per step" if strong else f"{float(key[-1]):g} sequences per GPU"
        label = f"{key[3]} {key[4]} on {key[2]} ({key[1]}), {batch}"
        out.append(ScalingSeries(label, tuple(m.id for m in members), tuple(m.gpus for m in members)))
    return out


def _steps(row) -> tuple[float, float]:
    """(published, teton) step seconds of a training-set-2 row."""
    from teton.engine.step import simulate_step
    from teton.spec import load_spec
    from teton.validation.memory_saving import unstated_memory_saving
    from teton.validation.training_set2 import measured_step_s, row_spec

    spec = load_spec(unstated_memory_saving(row, row_spec).spec(row, row_spec))
    return measured_step_s(row, spec), simulate_step(spec).step_time_s


def _ratio(small, large) -> tuple[float, float]:
    """(published, teton) step-time ratio of row ``large`` over row ``small``."""
    (pub_s, teton_s), (pub_l, teton_l) = _steps(small), _steps(large)
    return pub_l / pub_s, teton_l / teton_s


def _rows_and_judged() -> tuple[dict, list]:
    """Training set 2's rows by id, and those it judges."""
    from teton.validation.training_set2 import JUDGED, published_rows, row_status

    rows = {r.id: r for r in published_rows()}
    return rows, [r for r in rows.values() if row_status(r)[0] == JUDGED]


def weak_scaling_table() -> dict:
    """Per judged series of training set 2: GPU counts, the published and teton's step-time ratio
    largest / smallest and their difference (teton - published); with the note on what the
    bundled data hold (module docstring)."""
    rows, judged = _rows_and_judged()
    out = []
    for s in weak_scaling_series(judged):
        published, predicted = _ratio(rows[s.row_ids[0]], rows[s.row_ids[-1]])
        out.append({"series": s.label, "gpus": list(s.gpus), "published_ratio": published,
                    "teton_ratio": predicted, "difference": predicted - published})
    found = len(weak_scaling_series(rows.values()))
    note = (f"{len(out)} weak-scaling series among the judged rows of training set 2 ({found} among all rows). "
            + NOT_WEAK + "." + ("" if out else " No published ratio to compare with teton's yet."))
    return {"series": out, "note": note}


def _table4_series() -> dict:
    """Llama 3 405B's Table 4 rows 1 and 2 (training set 1): 8,192 and 16,384 GPUs, the same 16M
    tokens per step and layout but DP (64 -> 128)."""
    from teton.engine.step import simulate_step
    from teton.validation.training import training_runs

    small, large = (r for r in training_runs() if r.name.startswith(("Llama 3 405B Table 4 row 1",
                                                                      "Llama 3 405B Table 4 row 2")))
    gpus = (small.spec.job.gpus, large.spec.job.gpus)
    label = (f"Llama 3 405B on {small.spec.cluster.name} (Table 4 rows 1-2), "
             f"{small.spec.job.layout.sequences_per_step:,} sequences per step")
    return _strong_row(label, gpus,
                       large.step_time_s / small.step_time_s,
                       simulate_step(large.spec).step_time_s / simulate_step(small.spec).step_time_s)


def _strong_row(label: str, gpus, published: float, teton: float) -> dict:
    """One row of :func:`strong_scaling_table`."""
    return {"series": label, "gpus": list(gpus), "ideal_ratio": gpus[0] / gpus[-1], "published_ratio": published,
            "teton_ratio": teton, "difference": teton - published}


def strong_scaling_table() -> dict:
    """Per strong-scaling series of the training sets (module docstring): GPU counts, the ideal
    step-time ratio largest / smallest (smallest / largest count), the published and teton's, and
    their difference (teton - published), each step at its run's in-situ values."""
    rows, judged = _rows_and_judged()
    out = [_table4_series()]
    for s in weak_scaling_series(judged, strong=True):
        published, predicted = _ratio(rows[s.row_ids[0]], rows[s.row_ids[-1]])
        out.append(_strong_row(s.label, s.gpus, published, predicted))
    note = ("the same global batch and layout on more DP ranks: the bubble and the per-step collectives stay while "
            "the micro-batches per rank fall, so these test the work per GPU as well as what grows with scale; "
            "they are not weak scaling")
    return {"series": out, "note": note}
