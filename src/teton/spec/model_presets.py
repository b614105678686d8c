"""Published model architectures (model cards, papers, config files), each with its source.
``published_params``: the headline parameter count, checked against ``ModelSpec.total_params``."""

from __future__ import annotations

# Published architectures (model cards / papers). published_params: the headline count.
MODEL_PRESETS: dict[str, dict] = {
    # Llama 2 paper (Touvron et al. 2023, Table 1) and HF config.json files.
    "llama2-7b": dict(layers=32, hidden=4096, ffn_hidden=11008, heads=32, vocab=32000, max_seq_len=4096,
                      published_params=6.74e9),
    "llama2-13b": dict(layers=40, hidden=5120, ffn_hidden=13824, heads=40, vocab=32000, max_seq_len=4096,
                       published_params=13.0e9),
    "llama2-70b": dict(layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000,
                       max_seq_len=4096, published_params=69.0e9),
    # Llama 3 herd paper (arXiv 2407.21783, Table 3) and Meta-Llama-3 HF config.json files.
    "llama3-8b": dict(layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256,
                      published_params=8.03e9),
    "llama3-70b": dict(layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256,
                       published_params=70.6e9),
    "llama3-405b": dict(layers=126, hidden=16384, ffn_hidden=53248, heads=128, kv_heads=8, vocab=128256,
                        published_params=405e9),
    # GPT-3 paper (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, 96 heads, context 2048,
    # 4x FFN, GELU, LayerNorm, biases, learned positions, tied embeddings, BPE vocab 50257.
    "gpt3-175b": dict(layers=96, hidden=12288, ffn_hidden=49152, heads=96, vocab=50257, mlp="gelu",
                      norm="layernorm", bias=True, position_embedding="learned", max_seq_len=2048,
                      dropout=True, tied_embeddings=True, published_params=175e9),
}
# NeMo's GPT-3 family (NVIDIA/NeMo nemo/collections/llm/gpt/model/gpt.py, GPTConfig5B / 20B; the
# layout of Brown et al. 2020, Table 2.1): GELU, LayerNorm, biases, learned positions, tied embeddings.
for _size, (_layers, _hidden, _heads) in {"5b": (24, 4096, 32), "20b": (44, 6144, 48)}.items():
    MODEL_PRESETS[f"gpt3-{_size}"] = dict(MODEL_PRESETS["gpt3-175b"], layers=_layers, hidden=_hidden,
                                           ffn_hidden=4 * _hidden, heads=_heads, published_params=None)
# Nemotron (NVIDIA/NeMo nemo/collections/llm/gpt/model/nemotron.py: Nemotron3Config8B / 22B,
# Nemotron4Config15B / 340B; Nemotron-4 15B and 340B technical reports, arXiv 2402.16819 and
# 2406.11704): squared-ReLU MLP (not gated), LayerNorm, RoPE, no biases, untied embeddings, a
# 256,000-token vocabulary.
_NEMOTRON = dict(mlp="relu2", norm="layernorm", vocab=256000, max_seq_len=4096)
MODEL_PRESETS["nemotron3-8b"] = dict(_NEMOTRON, layers=32, hidden=4096, ffn_hidden=16384, heads=32)
MODEL_PRESETS["nemotron3-22b"] = dict(_NEMOTRON, layers=40, hidden=6144, ffn_hidden=24576, heads=48)
MODEL_PRESETS["nemotron4-15b"] = dict(_NEMOTRON, layers=32, hidden=6144, ffn_hidden=24576, heads=48, kv_heads=8,
                                      published_params=15.6e9)
MODEL_PRESETS["nemotron4-340b"] = dict(_NEMOTRON, layers=96, hidden=18432, ffn_hidden=73728, heads=96, kv_heads=8,
                                       published_params=340e9)
# BLOOM (BigScience, arXiv 2211.05100, Table 3; bigscience tr11-176B-ml): 70 layers, hidden 14,336,
# 112 heads, 4h GELU MLP, LayerNorm (and one on the embedding), biases, ALiBi positions, tied
# embeddings, a 250,680-token vocabulary, no dropout.
MODEL_PRESETS["bloom-176b"] = dict(layers=70, hidden=14336, ffn_hidden=57344, heads=112, vocab=250680, mlp="gelu",
                                   norm="layernorm", bias=True, position_embedding="alibi", max_seq_len=2048,
                                   tied_embeddings=True, published_params=176e9)
# Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990, Sec. 2): 105 layers, hidden 20,480,
# 128 heads, sequence 2,048, GPT-2 BPE vocabulary (50,272 padded), GPT-3-style blocks.
MODEL_PRESETS["mt-nlg-530b"] = dict(MODEL_PRESETS["gpt3-175b"], layers=105, hidden=20480, ffn_hidden=81920,
                                    heads=128, vocab=50272, published_params=530e9)
# Qwen3 MoE (Qwen/Qwen3-30B-A3B and Qwen3-235B-A22B config.json): every layer routed (128 experts,
# top 8, no shared expert), expert width moe_intermediate_size, head_dim 128, GQA; vocab 151,936;
# QK-LayerNorm (Megatron-Bridge's Qwen3MoE providers: qk_layernorm).
MODEL_PRESETS["qwen3-30b-a3b"] = dict(layers=48, hidden=2048, ffn_hidden=768, heads=32, kv_heads=4, head_dim=128,
                                      vocab=151936, experts=128, top_k=8, max_seq_len=40960, qk_norm=True,
                                      published_params=30.5e9)
MODEL_PRESETS["qwen3-235b-a22b"] = dict(layers=94, hidden=4096, ffn_hidden=1536, heads=64, kv_heads=4, head_dim=128,
                                        vocab=151936, experts=128, top_k=8, max_seq_len=40960, qk_norm=True,
                                        published_params=235e9)
# Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088, Table 1) and HF config.json files:
# 8 experts, 2 active per token; 46.7B total / 12.9B active (8x7B), 141B / 39B (8x22B).
MODEL_PRESETS["mixtral-8x7b"] = dict(layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=32000,
                                     experts=8, top_k=2, max_seq_len=32768, published_params=46.7e9)
MODEL_PRESETS["mixtral-8x22b"] = dict(layers=56, hidden=6144, ffn_hidden=16384, heads=48, kv_heads=8, vocab=32768,
                                      experts=8, top_k=2, max_seq_len=65536, published_params=141e9)
# DeepSeek-V3 (deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json @ 9b4e978; README_WEIGHTS.md):
# 61 layers, the first 3 dense (inter_dim 18,432), the rest 256 routed + 1 shared experts of width
# 2,048, top 8 within at most 4 of 8 expert groups (n_limited_groups / HF topk_group 4, one group a
# node: the report's node-limited routing, arXiv 2412.19437 Sec. 2.1.2); MLA (q_lora 1536, kv_lora 512, nope / rope / v head dims 128 / 64 / 128); one MTP
# module; vocabulary 129,280; 671B main-model parameters (+ 14B MTP on HF).
MODEL_PRESETS["deepseek-v3"] = dict(layers=61, hidden=7168, ffn_hidden=18432, heads=128, head_dim=128, vocab=129280,
                                    experts=256, top_k=8, moe_ffn_hidden=2048, shared_experts=1, moe_max_nodes=4,
                                    first_dense_layers=3, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64,
                                    v_head_dim=128, mtp_depth=1, max_seq_len=4096, published_params=685e9)
# Kimi K2 (moonshotai/Kimi-K2-Base config.json: DeepSeek-V3's architecture with 64 heads, 384
# routed experts, one dense first layer, no group-limited routing (n_group 1), vocabulary 163,840;
# 1.04T parameters). Read from the HF config, not from this project's stored sources.
MODEL_PRESETS["kimi-k2"] = dict(MODEL_PRESETS["deepseek-v3"], heads=64, experts=384, first_dense_layers=1, moe_max_nodes=None,
                                vocab=163840, mtp_depth=0, published_params=1.04e12)
# Llama 4 (Megatron-Bridge Llama4 providers @ accf110; HF Llama-4-Scout-17B-16E config.json): 48
# layers, hidden 5,120, 40 / 8 heads of 128; experts of width 8,192 (intermediate_size) with one
# shared expert, top 1; dense layers 16,384 (intermediate_size_mlp); vocabulary 202,048. Scout: 16
# experts in every layer (109B); Maverick: 128 experts in every other layer (400B).
_LLAMA4 = dict(layers=48, hidden=5120, ffn_hidden=16384, moe_ffn_hidden=8192, heads=40, kv_heads=8, head_dim=128,
               vocab=202048, top_k=1, shared_experts=1, max_seq_len=8192)
# Scout normalises queries and keys (an L2 norm on its RoPE layers, 3 of 4: teton's qk_norm on every
# layer, at RMSNorm's bytes); Maverick does not (Megatron-Bridge's Llama4 providers: qk_l2_norm).
MODEL_PRESETS["llama4-scout"] = dict(_LLAMA4, experts=16, qk_norm=True, published_params=109e9)
MODEL_PRESETS["llama4-maverick"] = dict(_LLAMA4, experts=128, moe_layer_interval=2, published_params=400e9)
# Nemotron-H (Megatron-Bridge NemotronH providers @ 38b4a06; arXiv 2504.03624): hybrid Mamba-2 /
# attention / squared-ReLU MLP layers by hybrid_override_pattern; Mamba head dim 64, n_groups 8,
# state 128 (8B) / 256 (47B, 56B); vocabulary 131,072 (the HF NemotronH config's default).
_NEMOTRON_H = dict(mlp="relu2", norm="rmsnorm", vocab=131072, max_seq_len=8192, mamba_head_dim=64, mamba_groups=8)
MODEL_PRESETS["nemotron-h-8b"] = dict(
    _NEMOTRON_H, layers=52, hidden=4096, ffn_hidden=21504, heads=32, kv_heads=8, mamba_heads=128,
    mamba_state_dim=128, layer_pattern="M-M-M-M*-" + "M-M-M-M-M*-" * 3 + "M-M-M-M-M-", published_params=8e9)
MODEL_PRESETS["nemotron-h-56b"] = dict(
    _NEMOTRON_H, layers=118, hidden=8192, ffn_hidden=32768, heads=64, kv_heads=8, mamba_heads=256,
    mamba_state_dim=256, layer_pattern="M-M-M-M*-" + "M-M-M-M-M*-" * 9 + "M-M-M-M-M-", published_params=56e9)
# Nemotron 3 Nano 30B-A3B (Megatron-Bridge 0.6.0 sdist, recipes/nemotronh/h100/nemotron_3_nano.py,
# nemotron_3_nano_pretrain_8gpu_h100_bf16_config's HybridModelProvider): 52 hybrid layers (23
# Mamba-2, 6 attention, 23 MoE), hidden 2,688, 32 / 2 heads of 128, Mamba 64 heads x 64, state
# 128, 8 groups; 128 squared-ReLU experts of width 1,856, top 6, one shared expert of 3,712 (two
# experts' width); untied embeddings (HybridModelProvider's default). ASSUMPTION: vocabulary
# 131,072, the Nemotron 3 family's (the same release's Nemotron 3 Nano 4B recipe states it; the
# 30B recipe reads it from its HF tokenizer). published_params: the 30B of its name (HF id
# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16); teton counts 31.6B, 3.2B active.
MODEL_PRESETS["nemotron-3-nano"] = dict(
    _NEMOTRON_H, layers=52, hidden=2688, ffn_hidden=1856, heads=32, kv_heads=2, head_dim=128, mamba_heads=64,
    mamba_state_dim=128, experts=128, top_k=6, moe_ffn_hidden=1856, shared_experts=2,
    layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", published_params=30e9)
# Grok-1 (xai-org/grok-1 model.py / run.py @ 7050ed2): 64 layers, hidden 6,144, 48 / 8 heads of 128,
# 8 experts top 2 of width 32,768, vocabulary 131,072, context 8,192; 314B parameters.
MODEL_PRESETS["grok-1"] = dict(layers=64, hidden=6144, ffn_hidden=32768, heads=48, kv_heads=8, head_dim=128,
                               vocab=131072, experts=8, top_k=2, max_seq_len=8192, published_params=314e9)
# GPT-OSS 120B (openai/gpt-oss-120b config.json, read from the HF config, not from this project's
# stored sources): 36 layers, hidden 2,880, 64 / 8 heads of 64, 128 experts of width 2,880, top 4,
# QKV and expert biases, a 128-token sliding window on every other layer (starting with the
# first), the gated MLP's inputs clamped at 7 (swiglu_limit), YaRN rotary (rope_scaling
# rope_type yarn, factor 32), vocabulary 201,088; 117B parameters.
MODEL_PRESETS["gpt-oss-120b"] = dict(layers=36, hidden=2880, ffn_hidden=2880, heads=64, kv_heads=8, head_dim=64,
                                     vocab=201088, experts=128, top_k=4, bias=True, sliding_window=128, glu_clamp=7.0,
                                     position_embedding="yarn",
                                     global_attention_every=2, max_seq_len=131072, published_params=117e9)
# Llama 3.1 keeps the Llama 3 shapes (longer RoPE context).
for _size in ("8b", "70b", "405b"):
    MODEL_PRESETS[f"llama3.1-{_size}"] = dict(MODEL_PRESETS[f"llama3-{_size}"], max_seq_len=131072)
for _name, _fields in MODEL_PRESETS.items():
    _fields.setdefault("name", _name)


