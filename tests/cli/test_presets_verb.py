"""``teton presets``: every bundled cluster, model and GPU, in the units ``teton run`` uses."""

import json

import pytest


def test_presets_lists_everything(cli):
    code, out, _ = cli("presets", "--json")
    d = json.loads(out)
    assert code == 0
    assert {"meta-roce-24k", "meta-ib-24k", "meta-rsc-16k", "dgx-a100-superpod", "dgx-h100-superpod",
            "deepseek-h800-2k"} <= set(d["clusters"])
    assert {"llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "llama3.1-405b",
            "gpt3-175b"} <= set(d["models"])
    assert {"a100-40gb", "a100-80gb", "h100-sxm", "h100-96gb", "h200", "b200", "h800"} <= set(d["gpus"])
    assert "hgx-h800" in d["hosts"]


def test_presets_show_hbm_in_gib_and_no_fake_fp8(cli):
    code, out, _ = cli("presets")
    assert code == 0
    row = next(line for line in out.splitlines() if "a100-80gb" in line and "312" in line)
    assert "-" in row.split("312")[1] and " 0 " not in row  # A100 has no fp8: not "0 TFLOPS"
    h100 = next(line for line in out.splitlines() if "h100-sxm" in line and "989" in line)
    assert "79.6" in h100  # the 79.6 GiB teton run reports memory against
    code, js, _ = cli("presets", "--json")
    assert json.loads(js)["gpus"]["h100-sxm"]["hbm_gib"] == pytest.approx(79.6, abs=0.05)
