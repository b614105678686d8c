"""The per-op table (``teton ops``'s rows): the rows add up to what the step model charges, and a
GEMM row carries its shape and fraction of peak."""

import pytest

from teton.engine.op_table import block_totals, op_rows
from teton.engine.step import simulate_step
from teton.spec import load_spec


def test_op_rows_add_up_to_the_step_breakdown():
    spec = load_spec({"cluster": "meta-roce-24k", "model": "llama3-8b",
                      "job": {"gpus": 8, "tp": 8, "seq_len": 8192, "global_batch": 4, "zero": 0,
                              "tp_overlap": "bwd"}})
    totals = block_totals(op_rows(spec))
    r = simulate_step(spec)
    m, layers = r.micro_batches, spec.model.layers

    def per_mb(cat):
        return (layers * (totals["layer.fwd"].get(cat, 0) + totals["layer.bwd"].get(cat, 0))
                + sum(totals[f"{b}.{p}"].get(cat, 0) for b in ("embedding", "head") for p in ("fwd", "bwd")))

    assert r.breakdown["compute"] == pytest.approx(m * per_mb("compute"), rel=1e-9)
    assert r.breakdown["tp_comm"] == pytest.approx(m * per_mb("tp"), rel=1e-9)


def test_gemm_rows_carry_shape_and_fraction_of_peak(example_spec):
    spec = load_spec(example_spec)
    rows = {(r["pass"], r["name"]): r for r in op_rows(spec) if r["block"] == "layer"}
    up = rows[("fwd", "mlp_up")]
    assert up["shape"] == "8192x13312x16384" and up["flops"] == 2 * 8192 * 13312 * 16384
    assert up["fraction_of_peak"] == pytest.approx(up["flops"] / (up["time_s"] * 989.4e12))
    ag = rows[("fwd", "tp.ag_qkv")]
    assert ag["kind"] == "all_gather" and ag["shape"] == "tp=8" and ag["exposed_s"] == ag["time_s"] > 0
