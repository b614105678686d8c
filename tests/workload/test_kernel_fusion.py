"""``job.kernel_fusion``: fused elementwise kernels vs the eager reference PyTorch code.

teton's eager byte counts (teton/workload/elementwise.py) are checked against the reference layer
of teton/workload/torch_reference.py, run on the meta device: the HBM bytes of its elementwise
aten ops (a byte-counting dispatch mode) and the tensors autograd saves for backward.
"""

import pytest

import teton
from teton.spec import load_spec
from teton.workload.elementwise import BYTES_PER_ELEMENT
from teton.workload.memory import layer_activation_bytes
from teton.workload.ops import layer_block


def _job(model: str, tp: int, seq_len: int, fusion: str):
    return load_spec({"cluster": "meta-roce-24k", "model": model,
                      "job": {"gpus": tp, "tp": tp, "seq_len": seq_len, "global_batch": 1,
                              "sequence_parallel": False, "kernel_fusion": fusion}})


def _layer_memory_bytes(spec) -> tuple[float, float]:
    """Forward and backward bytes of the layer's memory-bound items, weight-gradient accumulation
    aside (the reference's backward is taken for the input only)."""
    block = layer_block(spec.model, spec.job)

    def total(items):
        return sum(i.bytes for i in items if getattr(i, "kind", "") == "memory" and i.name != "grad_accumulate")

    return total(block.fwd), total(block.bwd)


# Llama layouts: plain MHA (Llama 2 7B), GQA with several local KV heads (Llama 3 8B, TP 1 and 2),
# GQA with one local KV head (Llama 3 405B at TP 8: repeat_kv's expansion is a view)
LAYOUTS = [("llama2-7b", 1, 1024), ("llama3-8b", 1, 1024), ("llama3-8b", 2, 1024), ("llama3-405b", 8, 512),
           ("gpt3-175b", 8, 1024)]  # GPT: LayerNorm, GELU, biases, dropout


@pytest.mark.parametrize("model,tp,seq", LAYOUTS)
def test_eager_elementwise_bytes_equal_the_reference_layer(model, tp, seq):
    pytest.importorskip("torch")
    from teton.workload.torch_reference import torch_layer_eager_traffic

    spec = _job(model, tp, seq, "eager")
    ref = torch_layer_eager_traffic(spec.model, seq, 1, tp)
    fwd, bwd = _layer_memory_bytes(spec)
    assert fwd == pytest.approx(ref["fwd_bytes"], rel=0.01)
    assert bwd == pytest.approx(ref["bwd_bytes"], rel=0.02)  # layout copies around the attention kernel: ~1 %


@pytest.mark.parametrize("model,tp,seq", LAYOUTS)
def test_eager_saved_activations_equal_the_reference_layer(model, tp, seq):
    pytest.importorskip("torch")
    from teton.workload.torch_reference import torch_layer_eager_traffic

    spec = _job(model, tp, seq, "eager")
    ref = torch_layer_eager_traffic(spec.model, seq, 1, tp)
    # an eager RMSNorm keeps its fp32 upcast, not its input: the layer's input is not saved
    assert layer_activation_bytes(spec.model, spec.job) == pytest.approx(ref["saved_bytes"], rel=0.02)


def test_single_kernel_ops_are_the_same_eager_or_fused():
    for op in ("layernorm", "gelu"):
        assert BYTES_PER_ELEMENT[op]["eager"] == BYTES_PER_ELEMENT[op]["fused"]
    for op, by_fusion in BYTES_PER_ELEMENT.items():
        assert all(e >= f for e, f in zip(by_fusion["eager"], by_fusion["fused"], strict=True)), op


def test_eager_is_slower_and_keeps_more_activations():
    base = {"cluster": "meta-roce-24k", "model": "llama3-8b",
            "job": {"gpus": 8, "tp": 1, "dp": 8, "seq_len": 8192, "global_batch": 8}}
    fused = teton.simulate(base)
    eager = teton.simulate(base, ["job.kernel_fusion=eager"])
    assert eager.step_time_s > fused.step_time_s * 1.05  # elementwise traffic is ~1/h of a GEMM's work
    assert eager.memory_breakdown["activations"] > fused.memory_breakdown["activations"]
    assert eager.model_flops_per_step == fused.model_flops_per_step


def test_gpt3_eager_keeps_what_fused_kernels_keep():
    """LayerNorm, GELU and dropout save the same tensors eager or fused; eager GPT-3 pays in
    traffic (the unfused bias-dropout-add) only."""
    fused, eager = _job("gpt3-175b", 8, 2048, "fused"), _job("gpt3-175b", 8, 2048, "eager")
    assert _layer_memory_bytes(eager)[0] > _layer_memory_bytes(fused)[0]
    assert layer_activation_bytes(eager.model, eager.job) == layer_activation_bytes(fused.model, fused.job)


def _clamped_glu_bytes(code: str) -> tuple[float, float]:
    """Bytes per FFN element of a clamped gated activation over a (rows, 2 x width) input:
    ``megatron`` the clamps and cat Megatron-Core 0.16 runs before its fused kernel
    (``weighted_bias_quick_geglu_impl``), ``hf`` HF transformers' GptOssExperts activation, and
    ``swiglu`` the plain ``silu(g) * u`` on the same (chunked) input."""
    torch = pytest.importorskip("torch")
    from teton.workload.torch_reference import count_elementwise_bytes

    rows, width = 64, 32
    x = torch.randn(rows, 2 * width, dtype=torch.bfloat16, requires_grad=True)

    def megatron():
        gate, linear = x.chunk(2, -1)
        return torch.cat((gate.clamp(min=None, max=7.0), linear.clamp(min=-7.0, max=7.0)), -1)

    def hf():
        gate, up = x[..., ::2].clamp(min=None, max=7.0), x[..., 1::2].clamp(min=-7.0, max=7.0)
        return (up + 1) * (gate * torch.sigmoid(gate * 1.702))

    def swiglu():
        gate, up = x.chunk(2, -1)
        return torch.nn.functional.silu(gate) * up

    fwd, bwd = count_elementwise_bytes({"megatron": megatron, "hf": hf, "swiglu": swiglu}[code], [x])
    return fwd / (rows * width), bwd / (rows * width)


def test_clamped_glu_bytes_are_counted_from_the_code():
    """GPT-OSS's clamped activation (model.glu_clamp): Megatron-Core's clamps and cat, and HF's
    eager activation over the plain SwiGLU's (whose chunked input adds the 8 B of the split's
    gradient that teton's separate gate and up projections do not have)."""
    from teton.workload.elementwise import GLU_CLAMP_BYTES

    assert _clamped_glu_bytes("megatron") == pytest.approx(GLU_CLAMP_BYTES["fused"], abs=0.01)
    hf, swiglu = _clamped_glu_bytes("hf"), _clamped_glu_bytes("swiglu")
    plain = BYTES_PER_ELEMENT["swiglu"]["eager"]
    assert swiglu == pytest.approx((plain[0], plain[1] + 8.0), abs=0.01)
    assert (hf[0] - plain[0], hf[1] - plain[1]) == pytest.approx(GLU_CLAMP_BYTES["eager"], abs=0.01)


def test_a_clamped_glu_costs_its_bytes_in_the_experts_and_the_dense_mlp():
    from teton.workload.elementwise import GLU_CLAMP_BYTES
    from teton.workload.moe import moe_rows

    oss = load_spec({"cluster": "dgx-b200-superpod", "model": "gpt-oss-120b",
                     "job": {"gpus": 8, "ep": 8, "seq_len": 4096, "global_batch": 8}})
    plain = load_spec({**oss.model_dump(mode="json", include={"cluster", "job"}),
                       "model": {**oss.model.model_dump(), "glu_clamp": None}})
    extra = [a.bytes - b.bytes for a, b in zip(layer_block(oss.model, oss.job).fwd,
                                                  layer_block(plain.model, plain.job).fwd, strict=True)]
    rows = moe_rows(oss.model, oss.job)
    assert sum(extra) == pytest.approx(GLU_CLAMP_BYTES["fused"][0] * rows.expert * oss.model.expert_ffn, rel=1e-9)
    clamped_run, plain_run = teton.simulate(oss), teton.simulate(plain)
    assert clamped_run.step_time_s > plain_run.step_time_s
    # the clamps' input and the clamped copy both kept: one more bf16 gate-and-up tensor per row
    kept = clamped_run.memory_breakdown["activations"] - plain_run.memory_breakdown["activations"]
    assert kept == pytest.approx(2 * 2 * rows.expert * oss.model.expert_ffn * oss.model.layers, rel=1e-6)
    dense = _job("llama3-8b", 1, 1024, "fused")
    clamped = dense.model.model_copy(update={"glu_clamp": 7.0})
    f = dense.job.layout.tokens * dense.model.ffn_hidden
    assert (_layer_memory_bytes(load_spec({**dense.model_dump(mode="json", include={"cluster", "job"}),
                                           "model": clamped.model_dump()}))[0]
            - _layer_memory_bytes(dense)[0]) == pytest.approx(GLU_CLAMP_BYTES["fused"][0] * f, rel=1e-9)
    with pytest.raises(teton.SpecError, match="model.glu_clamp"):
        load_spec({"cluster": "meta-roce-24k", "model": {**dense.model.model_dump(), "mlp": "gelu", "glu_clamp": 7.0},
                   "job": {"gpus": 8, "seq_len": 1024, "global_batch": 8}})


def _megatron_eager_rope_bytes() -> tuple[float, float]:
    """Bytes per Q / K element of Megatron-Core's eager rotary (0.16 ``rope_utils``'s
    ``_apply_rotary_pos_emb_bshd`` with ``_rotate_half``), the cos / sin tables given (their
    reads, shared by 64 heads, add 1/16 of a byte)."""
    torch = pytest.importorskip("torch")
    from teton.workload.torch_reference import count_elementwise_bytes

    s, heads, d = 64, 64, 32
    t = torch.randn(s, 1, heads, d, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = torch.randn(s, 1, 1, d, dtype=torch.bfloat16), torch.randn(s, 1, 1, d, dtype=torch.bfloat16)

    def megatron():
        rot, passed = t[..., :d], t[..., d:]
        x1, x2 = torch.chunk(rot, 2, dim=-1)
        return torch.cat(((rot * cos) + (torch.cat((-x2, x1), dim=-1) * sin), passed), dim=-1)

    fwd, bwd = count_elementwise_bytes(megatron, [t])
    return fwd / t.numel(), bwd / t.numel()


def test_megatron_eager_rope_bytes_are_counted_from_the_code():
    from teton.workload.elementwise import MEGATRON_EAGER_ROPE_BYTES

    assert _megatron_eager_rope_bytes() == pytest.approx(MEGATRON_EAGER_ROPE_BYTES, abs=0.07)


def test_yarn_runs_megatron_cores_eager_rotary_and_a_fused_kernel_elsewhere():
    """GPT-OSS's YaRN rotary: Megatron-Core's stacks run their eager rotary (software.fused_yarn_rope
    off), a stack with a fused YaRN kernel the fused rope's bytes; plain rope is fused in both."""
    from teton.workload.elementwise import MEGATRON_EAGER_ROPE_BYTES
    from teton.workload.ops import layer_block

    def rope_bytes(position: str, stack: str) -> tuple[float, float]:
        spec = load_spec({"cluster": "dgx-b200-superpod", "software": stack,
                          "model": {"base": "gpt-oss-120b", "position_embedding": position},
                          "job": {"gpus": 8, "ep": 8, "seq_len": 4096, "global_batch": 8}})
        block = layer_block(spec.model, spec.job)
        f = next(i for i in block.fwd if getattr(i, "name", "") == "rope")
        b = next(i for i in block.bwd if getattr(i, "name", "") == "rope.bwd")
        return f.bytes, b.bytes

    fused_f, fused_b = rope_bytes("rope", "megatron-bridge-26.04")
    assert rope_bytes("rope", "unknown") == (fused_f, fused_b) == rope_bytes("yarn", "unknown")
    yarn_f, yarn_b = rope_bytes("yarn", "megatron-bridge-26.04")
    per_element = fused_f / BYTES_PER_ELEMENT["rope"]["fused"][0]
    assert (yarn_f, yarn_b) == pytest.approx((MEGATRON_EAGER_ROPE_BYTES[0] * per_element,
                                              MEGATRON_EAGER_ROPE_BYTES[1] * per_element))
