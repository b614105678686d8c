"""Weak-scaling series of the training sets: the same work per GPU at several GPU counts.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

NOT_WEAK = ("Megatron-LM's weak-scaling table (source E) grows the model with the GPU count; Llama 3 405B's "
            "Table 4 and MT-NLG 530B keep the global batch (strong scaling): none is the same work per GPU")


@dataclass(frozen=True)
class WeakScalingSeries:
    """Rows (ids) of one configuration at the same work per GPU, by ascending GPU count."""

    label: str
    row_ids: tuple[str, ...]
    gpus: tuple[int, ...]


def series_key(row) -> tuple | None:
    """What rows of one weak-scaling series share (module docstring); None for a row without a GPU
    count or a global batch."""
    if not row.gpus or not row.gbs:
        return None
    return (row.source, row.release.split("r")[0], row.system, row.model, row.precision, row.tp, row.pp,
            row.cp, row.vp, row.ep, row.fsdp, row.mbs, row.seq_len, Fraction(row.gbs, row.gpus))


def weak_scaling_series(rows) -> list[WeakScalingSeries]:
    """The weak-scaling series among ``rows`` (training set 2's ``PublishedRow``): groups of one
    :func:`series_key` measured at two or more GPU counts."""
    groups: dict[tuple, list] = {}
    for row in rows:
        key = series_key(row)
        if key is not None:
            groups.setdefault(key, []).append(row)
    out = []
    for key, members in groups.items():
        if len({m.gpus for m in members}) < 2:
            continue
        members.sort(key=lambda m: (m.gpus, m.id))
        label = f"{key[3]} {key[4]} on {key[2]} ({key[1]}), {float(key[-1]):g} sequences per GPU"
        out.append(WeakScalingSeries(label, tuple(m.id for m in members), tuple(m.gpus for m in members)))
    return out


def _ratio(small, large) -> tuple[float, float]:
    """(published, teton) step-time ratio of row ``large`` over row ``small``."""
    from teton.engine.step import simulate_step
    from teton.spec import load_spec
    from teton.validation.memory_saving import unstated_memory_saving
    from teton.validation.training_set2 import measured_step_s, row_spec

    steps = []
    for row in (small, large):
        recompute, offload, _ = unstated_memory_saving(row, row_spec)
        spec = load_spec(row_spec(row, recompute, offload))
        steps.append((measured_step_s(row, spec), simulate_step(spec).step_time_s))
    return steps[1][0] / steps[0][0], steps[1][1] / steps[0][1]


def weak_scaling_table() -> dict:
    """Per judged series of training set 2: GPU counts, the published and teton's step-time ratio
    largest / smallest and their difference (teton - published); with the note on what the
    bundled data hold (module docstring)."""
    from teton.validation.training_set2 import JUDGED, published_rows, row_status

    rows = {r.id: r for r in published_rows()}
    judged = [r for r in rows.values() if row_status(r)[0] == JUDGED]
    out = []
    for s in weak_scaling_series(judged):
        published, predicted = _ratio(rows[s.row_ids[0]], rows[s.row_ids[-1]])
        out.append({"series": s.label, "gpus": list(s.gpus), "published_ratio": published,
                    "teton_ratio": predicted, "difference": predicted - published})
    found = len(weak_scaling_series(rows.values()))
    note = (f"{len(out)} weak-scaling series among the judged rows of training set 2 ({found} among all rows). "
            + NOT_WEAK + "." + ("" if out else " No published ratio to compare with teton's yet."))
    return {"series": out, "note": note}
