"""The one decoder layer ``benchmarks/device/calibrate_hopper.py`` times, priced as teton prices it
(``teton.validation.calibration.predicted_layer_s``) with the catalog's or measured efficiencies."""

import pytest


def test_layer_prediction_is_the_layers_compute_items():
    """The layer calibrate_hopper.py times is priced as teton prices one layer on one TP rank:
    the compute items of its eager block, without collectives or the accumulation pass; eager
    elementwise kernels cost more than fused, and the 405B shard on an H100 falls between the
    GEMM-only time and twice it."""
    from teton.validation.calibration import predicted_layer_s

    shard = dict(tokens=8192, hidden=16384, ffn=53248, heads=128, kv_heads=8, tp=8)
    eager = predicted_layer_s({**shard, "kernel_fusion": "eager"}, "h100-sxm")
    fused = predicted_layer_s({**shard, "kernel_fusion": "fused"}, "h100-sxm")
    gemm_flops = 3 * 2 * 8192 * (16384 * (2048 + 2 * 128) + 2048 * 16384 + 3 * 16384 * 6656)
    gemm_only = gemm_flops / (989.4e12 * 794.5 / 989.4)
    assert gemm_only < fused < eager < 2 * gemm_only
    # measured kernels twice as fast: the prediction halves
    faster = predicted_layer_s({**shard, "kernel_fusion": "fused"}, "h100-sxm",
                               {"gemm_bf16": 2 * 0.803, "attn_fwd": 0.70, "attn_bwd": 0.60, "mem": 1.8})
    assert faster == pytest.approx(fused / 2, rel=0.02)
