"""Issue 13: every table's "MFU" is against one peak (bf16's dense peak), so an fp8 run that is
faster never shows a lower MFU; the figure against the fp8 peak is labelled as such."""

import json

import pytest

import teton


def table_rows(out: str) -> dict[str, list[str]]:
    """The cells of every row of the rich tables in ``out``, by their first cell."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.replace("┃", "│").split("│")]
        cells = [c for c in cells[1:-1]] if len(cells) > 2 else []
        if cells and cells[0] and cells[0] not in rows:
            rows[cells[0]] = cells[1:]
    return rows


def test_run_table_mfu_is_the_bf16_peak_one_and_fp8_peak_is_labelled(cli, example_spec):
    fp8 = example_spec.parent / "llama3-405b-megatron-fp8.yaml"
    code, out, err = cli("run", fp8)
    assert code == 0, err
    r = teton.simulate(fp8)
    rows = table_rows(out)
    assert rows["MFU"] == [f"{r.mfu_bf16 * 100:.1f} %"]
    assert rows["MFU (fp8 peak)"] == [f"{r.mfu * 100:.1f} %"]
    assert rows["HFU"] == [f"{r.hfu_bf16 * 100:.1f} %"] and rows["HFU (fp8 peak)"] == [f"{r.hfu * 100:.1f} %"]
    code, out, _ = cli("run", example_spec)  # bf16: one MFU row, no peak to name
    rows = table_rows(out)
    assert "MFU" in rows and not any("peak" in k for k in rows)


def test_compare_fp8_against_bf16_mfu_rises_with_the_speed_up(cli, example_spec):
    code, out, err = cli("compare", example_spec, "--b", "job.precision=fp8")
    assert code == 0, err
    rows = table_rows(out)
    a, b = teton.simulate(example_spec), teton.simulate(example_spec, ["job.precision=fp8"])
    assert b.step_time_s < a.step_time_s
    assert rows["MFU"] == [f"{a.mfu_bf16 * 100:.1f} %", f"{b.mfu_bf16 * 100:.1f} %",
                           f"{(b.mfu_bf16 - a.mfu_bf16) * 100:+.1f} pts"]  # a share: percentage points
    assert rows["MFU"][2].startswith("+") and rows["HFU"][2].startswith("+")
    # the two variants have different peaks: no row compares MFUs against different peaks
    assert not any("peak" in k for k in rows)
    d = json.loads(cli("compare", example_spec, "--b", "job.precision=fp8", "--json")[1])
    assert d["change"]["mfu_bf16"] == pytest.approx(b.mfu_bf16 / a.mfu_bf16 - 1)
    assert (d["a"]["precision"], d["b"]["precision"]) == ("bf16", "fp8")


def test_compare_two_fp8_variants_shows_the_fp8_peak_row(cli, example_spec):
    fp8 = example_spec.parent / "llama3-405b-megatron-fp8.yaml"
    code, out, err = cli("compare", fp8, "--b", "job.tp_overlap=none")
    assert code == 0, err
    rows = table_rows(out)
    assert "MFU" in rows and "MFU (fp8 peak)" in rows


def test_search_table_mfu_is_against_the_bf16_peak(cli, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                                "job": {"gpus": 64, "tp": 8, "seq_len": 8192, "global_batch": 256,
                                        "precision": "fp8"}}))
    args = ("search", path, "--tp", "8", "--pp", "1,2", "--cp", "1", "--virtual-stages", "1", "--top", "3")
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    best = json.loads(out)["rows"][0]
    assert best["mfu_bf16"] > best["mfu"] > 0
    code, out, err = cli(*args)
    assert code == 0, err
    header = next(line for line in out.splitlines() if "step s" in line)
    assert "MFU (fp8 peak)" in header
    assert f"{best['mfu_bf16'] * 100:.1f} %" in out and f"{best['mfu'] * 100:.1f} %" in out
