"""Weak-scaling series of the training sets (teton.validation.weak_scaling)."""
import csv
from dataclasses import replace
from importlib import resources

import pytest

from teton.validation.training_set2 import JUDGED, published_rows, row_status
from teton.validation.weak_scaling import _ratio, weak_scaling_series, weak_scaling_table


def _row(row_id: str):
    return next(r for r in published_rows() if r.id == row_id)


def test_a_series_is_the_same_work_per_gpu_at_several_counts():
    base = _row("a-24.07-h100-llama2-7b-8")  # 8 H100s, GBS 128: 16 sequences per GPU
    same = replace(base, id="x-64", gpus=64, gbs=1024)
    other_batch = replace(base, id="y-64", gpus=64, gbs=128)  # strong scaling: 2 per GPU
    other_layout = replace(base, id="z-64", gpus=64, gbs=1024, tp=2)
    found = weak_scaling_series([base, same, other_batch, other_layout])
    assert len(found) == 1 and found[0].row_ids == (base.id, same.id) and found[0].gpus == (8, 64)


def test_teton_ratio_of_a_series_grows_and_the_published_one_is_read_from_the_rows():
    base = _row("a-24.07-h100-llama2-7b-8")
    assert row_status(base)[0] == JUDGED
    published, teton = _ratio(base, replace(base, id="x-512", gpus=512, gbs=128 * 64))
    assert published == pytest.approx(1.0)  # the same tokens/s per GPU: the same step time
    assert 1.0 < teton < 1.06


def test_bundled_sets_hold_no_true_weak_scaling_series_and_say_so():
    table = weak_scaling_table()
    assert table["series"] == [] and "0 weak-scaling series" in table["note"] and "strong scaling" in table["note"]
    assert weak_scaling_series(published_rows()) == []
    # Llama 3 405B Table 4: the sequences per GPU halve from 8,192 to 16,384 GPUs (strong scaling)
    text = resources.files("teton.data").joinpath("llama3-405b-table4.csv").read_text()
    rows = [r for r in csv.DictReader(text.splitlines()) if r["cp"] == "1"]
    per_gpu = {int(r["gpus"]): int(r["dp"]) * int(r["batch_size_per_dp"]) / int(r["gpus"]) for r in rows}
    assert per_gpu[8192] == 2 * per_gpu[16384]
    # Megatron-LM's "weak scaling" table (source E): the model grows with the GPU count
    e_rows = [r for r in published_rows() if r.source == "E"]
    assert len({r.model for r in e_rows}) == len(e_rows) > 1


def test_validate_prints_an_empty_weak_scaling_table_as_its_note():
    from rich.console import Console

    from teton.cli.validate import _weak_scaling

    console = Console(record=True, width=200)
    _weak_scaling({"series": [], "note": "0 weak-scaling series among the judged rows."}, console)
    text = console.export_text()
    assert text.startswith("weak scaling: no series. 0 weak-scaling series") and "┃" not in text
    series = {"series": "Llama 3 8B, 4 sequences per DP rank", "gpus": [8, 2048], "published_ratio": 1.03,
              "teton_ratio": 1.05, "difference": 0.02}
    console = Console(record=True, width=200)
    _weak_scaling({"series": [series], "note": "1 series."}, console)
    text = console.export_text()
    assert "8 / 2,048" in text and "1.030" in text and "+2.0 pts" in text and "note: 1 series." in text
