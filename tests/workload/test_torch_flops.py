"""teton's per-layer FLOPs against PyTorch's FlopCounterMode on reference layers (meta device).

Conventions (see teton/workload/torch_reference.py): GEMMs are counted alike (2mnk, bias adds
free); FlopCounterMode counts the full s x s attention matrix whatever the causal mask, teton the
causal half; the flash kernel's backward is 2.5x its forward in both, the meta math path's 2x.
"""

import json
import math
import sys

import pytest

torch = pytest.importorskip("torch")

from teton.errors import SpecError  # noqa: E402
from teton.spec import load_spec  # noqa: E402
from teton.workload.ops import head_block, layer_block  # noqa: E402
from teton.workload.torch_reference import compare_layer_flops, torch_layer_flops  # noqa: E402

EXACT = 1e-9


def _spec(model: str, tp: int, seq_len: int = 8192, micro_batch: int = 1, cp: int = 1, **job):
    return load_spec({"cluster": "meta-roce-24k", "model": model,
                      "job": {"gpus": tp * cp, "tp": tp, "cp": cp, "dp": 1, "seq_len": seq_len,
                              "micro_batch": micro_batch, "global_batch": micro_batch, **job}})


def _rows(d: dict) -> dict:
    return {r["category"]: r for r in d["rows"]}


def _hand_gemm_fwd_flops(m, tok: int, tp: int) -> int:
    """2 tokens x (QKV + output + MLP weights on this rank): the textbook count, independent of both."""
    up = (2 if m.mlp == "swiglu" else 1) * m.ffn_hidden
    weights = m.hidden * (m.q_width + 2 * m.kv_width) + m.q_width * m.hidden + (up + m.ffn_hidden) * m.hidden
    return 2 * tok * weights // tp


@pytest.mark.parametrize("model,tp,seq_len", [("llama3-8b", 1, 8192), ("llama3-8b", 8, 8192),
                                              ("llama3-405b", 8, 8192), ("gpt3-175b", 8, 2048)])
def test_layer_gemm_flops_equal_pytorch_matmuls_exactly(model, tp, seq_len):
    spec = _spec(model, tp, seq_len)
    d = compare_layer_flops(spec.model, spec.job)
    rows = _rows(d)
    ref = torch_layer_flops(spec.model, seq_len, 1, tp)
    for cat in ("layer forward GEMM", "layer backward GEMM"):
        assert rows[cat]["teton_flops"] == pytest.approx(rows[cat]["torch_flops"], rel=EXACT)
    assert ref["fwd_matmul_flops"] == _hand_gemm_fwd_flops(spec.model, seq_len, tp)
    assert ref["bwd_matmul_flops"] == 2 * ref["fwd_matmul_flops"]  # dgrad + wgrad per Linear
    assert set(ref["fwd_by_op"]) - {"aten.bmm", "aten._scaled_dot_product_flash_attention"} <= {"aten.mm", "aten.addmm"}
    assert ref["other_flops"] == 0 and d["torch_other_flops"] == 0


def test_gpt3_biases_ride_in_addmm_for_free():
    """Column-parallel Linear with bias -> aten.addmm, counted as its mm; row-parallel bias added after."""
    m, tp, s = _spec("gpt3-175b", 8, 2048).model, 8, 2048
    ref = torch_layer_flops(m, s, 1, tp)
    assert ref["fwd_by_op"]["aten.addmm"] == 2 * s * m.hidden * (3 * m.q_width + m.ffn_hidden) // tp
    assert ref["fwd_by_op"]["aten.mm"] == 2 * s * (m.q_width + m.ffn_hidden) * m.hidden // tp
    llama = torch_layer_flops(_spec("llama3-8b", 8).model, 8192, 1, 8)
    assert "aten.addmm" not in llama["fwd_by_op"]  # no biases: plain mm


def test_flop_counter_ignores_the_causal_mask():
    """The fact the attention convention rests on: causal and full SDPA count the same 4 b h s^2 d."""
    from torch.utils.flop_counter import FlopCounterMode

    b, h, s, dh = 2, 4, 256, 64
    counts = []
    for causal in (True, False):
        q = torch.empty(b, h, s, dh, device="meta", dtype=torch.bfloat16)
        with FlopCounterMode(display=False) as fc:
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=causal)
        counts.append(fc.get_total_flops())
    assert counts == [4 * b * h * s * s * dh] * 2


@pytest.mark.parametrize("model,tp,cp,micro_batch", [("llama3-8b", 1, 1, 1), ("llama3-405b", 8, 1, 1),
                                                     ("gpt3-175b", 8, 1, 2), ("llama3-8b", 2, 4, 1)])
def test_attention_relation_is_exact(model, tp, cp, micro_batch):
    s = 2048 if model == "gpt3-175b" else 8192
    spec = _spec(model, tp, s, micro_batch, cp)
    m, tok = spec.model, micro_batch * s // cp
    full_fwd = 4 * tok * s * m.q_width // tp  # what FlopCounterMode counts: every (query, key) pair
    flash = torch_layer_flops(m, s, micro_batch, tp, cp, "flash")
    math_ = torch_layer_flops(m, s, micro_batch, tp, cp, "math")
    assert flash["fwd_attention_flops"] == math_["fwd_attention_flops"] == full_fwd
    assert flash["bwd_attention_flops"] == 5 * full_fwd // 2  # five bmm: FA-2 recomputes the scores
    assert math_["bwd_attention_flops"] == 2 * full_fwd  # autograd of two bmm, no recomputation
    assert "aten._scaled_dot_product_flash_attention_backward" in flash["bwd_by_op"]
    assert set(math_["bwd_by_op"]) == {"aten.mm", "aten.bmm"}

    teton = [op for op in (*layer_block(m, spec.job).fwd, *layer_block(m, spec.job).bwd)
             if getattr(op, "kind", None) == "attention"]
    t_fwd, t_bwd = (sum(o.flops for o in teton if o.backward == bwd) for bwd in (False, True))
    assert t_fwd == pytest.approx(full_fwd / 2, rel=EXACT)  # causal: s/2 keys per query on average
    assert t_bwd == pytest.approx(flash["bwd_attention_flops"] / 2, rel=EXACT)
    assert t_bwd == pytest.approx(0.625 * math_["bwd_attention_flops"], rel=EXACT)
    for kernel in ("flash", "math"):
        for r in compare_layer_flops(m, spec.job, kernel)["rows"]:
            if r["category"].startswith("head"):
                continue  # checked below (GPT-3's vocab does not divide by TP)
            assert r["ratio"] == pytest.approx(r["expected_ratio"], rel=EXACT), (kernel, r)


def test_head_gemm_matches_including_a_vocab_that_tp_does_not_divide():
    spec = _spec("llama3-405b", 8)
    rows = _rows(compare_layer_flops(spec.model, spec.job))
    assert rows["head forward GEMM"]["torch_flops"] == 2 * 8192 * 16384 * (128256 // 8)
    assert rows["head backward GEMM"]["ratio"] == pytest.approx(1.0, rel=EXACT)
    # GPT-3's 50257 tokens do not divide by TP 8: both keep ceil(v/tp) rows per rank (Megatron
    # pads further, to a multiple of 128 * tp, which neither models)
    g = _spec("gpt3-175b", 8, 2048)
    grow = _rows(compare_layer_flops(g.model, g.job))
    assert grow["head forward GEMM"]["ratio"] == pytest.approx(1.0, rel=EXACT)
    assert grow["head forward GEMM"]["torch_flops"] == 2 * 2048 * 12288 * math.ceil(50257 / 8)
    lm_head = next(op for op in head_block(g.model, g.job).fwd if op.name == "lm_head")
    assert lm_head.n == math.ceil(50257 / 8)


def test_recompute_is_reported_apart():
    spec = _spec("llama3-8b", 8, recompute="full")
    d = compare_layer_flops(spec.model, spec.job)
    rows = _rows(d)
    assert rows["layer backward GEMM"]["ratio"] == pytest.approx(1.0, rel=EXACT)
    assert d["teton_recompute_flops"] == pytest.approx(
        rows["layer forward GEMM"]["teton_flops"] + rows["layer forward attention"]["teton_flops"], rel=EXACT)


def test_unsupported_layouts_are_one_line_errors():
    with pytest.raises(SpecError, match="job.tp"):
        torch_layer_flops(_spec("llama3-8b", 1).model, 8192, 1, tp=16)  # 8 KV heads cannot split 16 ways
    with pytest.raises(SpecError, match="model.experts"):
        torch_layer_flops(_spec("mixtral-8x7b", 1).model, 4096, 1, tp=1)
    with pytest.raises(SpecError, match="attention_kernel"):
        torch_layer_flops(_spec("llama3-8b", 1).model, 8192, 1, tp=1, attention_kernel="sparse")
    # the reference layer is one grouped-query attention + MLP layer over the whole sequence
    for name, field in (("deepseek-v3", "model.kv_lora_rank"), ("nemotron-h-8b", "model.layer_pattern"),
                        ("gpt-oss-120b", "model.sliding_window")):
        dense = _spec(name, 1).model.model_copy(update={"experts": 1, "top_k": 1})
        with pytest.raises(SpecError, match=field):
            torch_layer_flops(dense, 8192, 1, tp=1)


def test_cli_flops_json(example_spec, cli):
    code, out, _ = cli("flops", example_spec, "--json")
    assert code == 0
    d = json.loads(out)
    assert {"model", "tp", "cp", "seq_len", "micro_batch", "attention_kernel", "rows", "teton_recompute_flops"} <= set(d)
    assert d["model"] == "llama3-405b" and d["tp"] == 8
    cats = {r["category"] for r in d["rows"]}
    assert {"layer forward GEMM", "layer backward GEMM", "layer forward attention", "layer backward attention"} <= cats
    for r in d["rows"]:
        assert {"teton_flops", "torch_flops", "ratio", "expected_ratio"} <= set(r)
        assert r["ratio"] == pytest.approx(r["expected_ratio"], rel=EXACT)


def test_cli_flops_table_and_set(example_spec, cli):
    code, out, _ = cli("flops", example_spec, "--set", "job.seq_len=4096", "--attention-kernel", "math")
    assert code == 0 and "layer backward attention" in out and "0.625" in out and "seq_len=4096" in out


def test_cli_flops_without_torch_is_one_line(example_spec, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    code, out, err = cli("flops", example_spec, "--json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "torch" in err and "pip install" in err
