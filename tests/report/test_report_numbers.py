"""The report page's numbers are ``teton run``'s for the same spec, on the odd specs a user's QA pass
ran ``teton report`` on: one host, MoE with fp8 and full recompute, a job that does not fit."""

import html as htmllib
import json
import re

import pytest
from layouts import LLAMA3_8B_ONE_HOST as SINGLE_HOST

# MoE with expert parallelism, fp8 and full recompute
MIXTRAL = {"cluster": "dgx-h100-superpod", "model": "mixtral-8x7b",
           "job": {"gpus": 64, "tp": 2, "pp": 4, "ep": 8, "seq_len": 4096, "global_batch": 256, "precision": "fp8",
                   "recompute": "full"}}
# does not fit: Llama 3 8B without TP or recompute at 16K tokens on one host
TOO_BIG = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
           "job": {"gpus": 8, "tp": 1, "pp": 1, "seq_len": 16384, "global_batch": 8, "zero": 0}}


def _spec(tmp_path, name, spec):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(spec))
    return path


def _cells(page: str) -> list[str]:
    body = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    return [htmllib.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", body, flags=re.S)]


def _after(cells: list[str], label: str) -> str:
    return cells[cells.index(label) + 1]


@pytest.mark.parametrize("name, spec", [("single-host", SINGLE_HOST), ("mixtral", MIXTRAL), ("too-big", TOO_BIG)])
def test_report_numbers_are_teton_runs(cli, tmp_path, name, spec):
    path = _spec(tmp_path, name, spec)
    out = tmp_path / f"{name}.html"
    code, _, err = cli("report", path, "--out", out, "--sections", "step,memory,timeline")
    assert code == 0, err
    code, text, err = cli("run", path, "--json")
    assert code == 0, err
    d = json.loads(text)
    cells = _cells(out.read_text(encoding="utf-8"))
    assert _after(cells, "step time") == f"{d['step_time_s']:.3f} s"
    assert _after(cells, "MFU") == f"{d['mfu_bf16'] * 100:.1f} %"  # as teton run's table: the bf16 peak
    if d["precision"] != "bf16":
        assert _after(cells, f"MFU ({d['precision']} peak)") == f"{d['mfu'] * 100:.1f} %"
    assert _after(cells, "TFLOPs / GPU") == f"{d['tflops_per_gpu']:.0f}"
    assert _after(cells, "tokens / s") == f"{d['tokens_per_s']:,.0f}"
    assert _after(cells, "total") == f"{d['memory_per_gpu_bytes'] / 2**30:.2f}"
    for category, seconds in d["breakdown"].items():
        assert _after(cells, category) == f"{seconds:.3f}", category


def test_memory_is_in_gib_as_teton_run_prints_it(cli, tmp_path):
    """teton run says '22.6 GiB of 79.6 GiB'; the report said '24.3 GB of 86 GB' for the same GPU."""
    path = _spec(tmp_path, "s", SINGLE_HOST)
    code, run_out, _ = cli("run", path)
    assert code == 0
    said = re.search(r"([\d.]+ GiB of [\d.]+ GiB usable \([^)]*\): [\d.]+ GiB left)", run_out).group(1)
    out = tmp_path / "r.html"
    assert cli("report", path, "--out", out, "--sections", "memory")[0] == 0
    page = out.read_text(encoding="utf-8")
    assert f"Fullest GPU: {said}: fits." in page
    assert " GB of " not in page and "79.6 GiB HBM" in page  # the spec section's GPU line too


def test_a_spec_that_does_not_fit_names_its_largest_term(cli, tmp_path):
    path = _spec(tmp_path, "big", TOO_BIG)
    out = tmp_path / "r.html"
    assert cli("report", path, "--out", out, "--sections", "memory")[0] == 0
    assert re.search(r"Fullest GPU: [\d.]+ GiB of [\d.]+ GiB usable \(79\.6 GiB HBM less [^)]*\): [\d.]+ GiB short: "
                     r"DOES NOT FIT \(largest term: \w+\)", out.read_text())


def test_a_spec_that_does_not_fit_says_so_in_the_step_section_and_the_terminal(cli, tmp_path):
    path = _spec(tmp_path, "big", TOO_BIG)
    out = tmp_path / "r.html"
    code, said, _ = cli("report", path, "--out", out, "--sections", "step")
    assert code == 0 and re.search(r"; DOES NOT FIT in memory \([\d.]+ GiB short\)", said)
    assert "It DOES NOT FIT in memory" in out.read_text(encoding="utf-8")


def test_moe_ops_section_lists_the_expert_ops(cli, tmp_path):
    """MoE layers are blocks of their own kind (``moe_layer``): the section shows them, not nothing."""
    path = _spec(tmp_path, "moe", MIXTRAL)
    out = tmp_path / "r.html"
    assert cli("report", path, "--out", out, "--sections", "ops")[0] == 0
    page = out.read_text(encoding="utf-8")
    ms = float(re.search(r"A layer takes ([\d.]+) ms per micro-batch", page).group(1))
    assert ms > 0 and "expert_up" in page


def test_moe_layout_shows_expert_parallelism(cli, tmp_path):
    path = _spec(tmp_path, "moe", MIXTRAL)
    out = tmp_path / "r.html"
    assert cli("report", path, "--out", out, "--sections", "step")[0] == 0
    cells = _cells(out.read_text(encoding="utf-8"))
    assert _after(cells, "layout") == "tp=2 cp=1 pp=4 dp=8 ep=8 v=1"
    assert _after(cells, "tp x cp x pp x dp") == "2 x 1 x 4 x 8 (ep 8)"


def test_one_pipeline_rank_is_one_rank(cli, tmp_path):
    path = _spec(tmp_path, "s", SINGLE_HOST)
    out = tmp_path / "r.html"
    assert cli("report", path, "--out", out, "--sections", "timeline")[0] == 0
    assert "of one pipeline (1 rank, 8 micro-batches)" in out.read_text(encoding="utf-8")


def test_the_step_section_carries_the_band_the_mode_and_the_runs_notes(cli, tmp_path):
    """`teton run` prints the band, the prediction mode and the notes (a custom GPU's borrowed
    in-situ values); the report's step section said none of them."""
    out = tmp_path / "mi300x.html"
    code, _, err = cli("report", "examples/mi300x-cluster.yaml", "--out", out, "--sections", "step")
    assert code == 0, err
    page = out.read_text()
    run = json.loads(cli("run", "examples/mi300x-cluster.yaml", "--json")[1])
    cells = _cells(page)
    assert _after(cells, "step time") == f"{run['step_time_s']:.3f} s"
    band = _after(cells, "band")
    assert f"{run['step_time_s_low']:.3f} s - {run['step_time_s_high']:.3f} s" in band, band
    assert "in-situ" in _after(cells, "prediction")
    assert any("not a catalog GPU" in n for n in run["notes"]) and "not a catalog GPU" in page
