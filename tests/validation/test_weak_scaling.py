"""Weak-scaling series of the training sets (teton.validation.weak_scaling)."""
import csv
from dataclasses import replace
from importlib import resources

import pytest

from teton.validation.training_set2 import JUDGED, published_rows, row_status
from teton.validation.weak_scaling import (
    _ratio,
    strong_scaling_table,
    weak_scaling_series,
    weak_scaling_table,
)


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


def test_strong_series_keep_the_global_batch_and_layout_on_more_gpus():
    base = _row("a-24.07-h100-llama2-7b-8")
    same_batch = replace(base, id="x-64", gpus=64)
    weak = replace(base, id="y-64", gpus=64, gbs=1024)
    other_layout = replace(base, id="z-64", gpus=64, tp=2)
    found = weak_scaling_series([base, same_batch, weak, other_layout], strong=True)
    assert [(s.row_ids, s.gpus) for s in found] == [((base.id, same_batch.id), (8, 64))]
    assert "128 sequences per step" in found[0].label
    # MT-NLG 530B (source H): 2,240 -> 3,360 A100s, 1,920 sequences per step throughout
    mt_nlg = [s for s in weak_scaling_series(published_rows(), strong=True) if s.label.startswith("MT-NLG")]
    assert len(mt_nlg) == 1 and mt_nlg[0].gpus == (2240, 2800, 3360)


def test_strong_scaling_table_sets_published_against_teton_and_the_ideal():
    table = strong_scaling_table()
    by_label = {s["series"].split(" (")[0]: s for s in table["series"]}
    t4 = by_label["Llama 3 405B on meta-roce-24k"]
    assert t4["gpus"] == [8192, 16384] and t4["ideal_ratio"] == 0.5
    assert t4["published_ratio"] == pytest.approx(430 / 400 / 2)  # TFLOPs per GPU 430 -> 400, twice the GPUs
    assert abs(t4["difference"]) < 0.01
    for s in table["series"]:  # the same batch on more GPUs: faster, never better than linear
        assert s["ideal_ratio"] < s["teton_ratio"] < 1.0 and s["ideal_ratio"] < s["published_ratio"] < 1.0
        assert s["difference"] == pytest.approx(s["teton_ratio"] - s["published_ratio"])
    assert "not weak scaling" in table["note"]


def test_validate_prints_the_strong_scaling_table():
    from rich.console import Console

    from teton.cli.validate import _strong_scaling

    console = Console(record=True, width=200)
    series = {"series": "MT-NLG 530B, 1,920 sequences per step", "gpus": [2240, 3360], "ideal_ratio": 2 / 3,
              "published_ratio": 0.739, "teton_ratio": 0.711, "difference": -0.028}
    _strong_scaling({"series": [series], "note": "not weak scaling."}, console)
    text = console.export_text()
    assert "2,240 / 3,360" in text and "0.667" in text and "0.739" in text and "-2.8 pts" in text
    assert "note: not weak scaling." in text
