"""Token mixers besides grouped-query attention: MLA, Mamba-2, sliding windows, and layers with one
sub-block (``workload.mixers``, ``workload.mamba``)."""

import pytest

from teton.errors import SpecError
from teton.spec import load_spec
from teton.spec.layer_types import LayerType
from teton.workload.items import Collective, ComputeOp
from teton.workload.mixers import causal_keys, mixer_params
from teton.workload.ops import layer_block, layer_params_per_gpu


def _job(model, **job):
    base = {"gpus": 8, "tp": 2, "seq_len": 4096, "global_batch": 64}
    base.update(job)
    return load_spec({"cluster": "dgx-h100-superpod", "model": model, "job": base})


def _ops(block, backward=False):
    return {i.name: i for i in (block.bwd if backward else block.fwd) if isinstance(i, ComputeOp)}


def _deepseek_dense(**job):
    spec = _job("deepseek-v3", **{"gpus": 64, "ep": 1, **job})
    return spec.model.as_layer(LayerType("attention", "dense")), spec.job


def test_mla_down_projections_are_replicated_and_up_projections_sharded():
    m, job = _deepseek_dense()
    lay = job.layout
    ops = _ops(layer_block(m, job))
    tok, tok_e = lay.tokens, lay.elementwise_tokens
    assert (ops["kv_down"].m, ops["kv_down"].n) == (tok_e, m.kv_lora_rank + m.qk_rope_head_dim)
    assert (ops["q_down"].m, ops["q_down"].n) == (tok_e, m.q_lora_rank)
    assert (ops["q_up"].m, ops["q_up"].n) == (tok, m.heads // 2 * m.qk_head_dim)  # over the gathered tokens
    assert ops["kv_up"].n == m.heads // 2 * (m.d_head + m.v_dim)
    assert ops["attn_out"].k == m.heads // 2 * m.v_dim
    sharded, replicated = mixer_params(m)
    assert sharded + replicated == m.attention_params()
    assert replicated == m.hidden * (1536 + 512 + 64) + 1536 + 512


def test_mla_attention_core_uses_its_head_dims():
    m, job = _deepseek_dense()
    lay = job.layout
    core = _ops(layer_block(m, job))["attention"]
    assert core.flops == pytest.approx(2 * lay.tokens * (lay.seq_len / 2) * (m.heads // 2) * (192 + 128))


def test_mla_latents_gathered_over_tp_and_cp_exchanges_per_head_kv():
    m, job = _deepseek_dense(cp=2)
    lay = job.layout
    blk = layer_block(m, job)
    coll = {i.name: i for i in blk.fwd if isinstance(i, Collective)}
    assert coll["tp.ag_latents"].bytes == 2 * lay.tokens * (1536 + 512 + 64)
    kv = coll["cp.kv_gather"] if "cp.kv_gather" in coll else coll["cp.kv_ring"]
    assert kv.bytes == 2 * lay.micro_batch * lay.seq_len * m.heads * (192 + 128) / 2


def test_mamba_layer_ops_follow_megatron_bridge_counts():
    spec = _job("nemotron-h-8b")
    m, job = spec.model.as_layer(LayerType("mamba", "none")), spec.job
    lay = job.layout
    tok, h, d_in, gn, heads = lay.tokens, m.hidden, m.mamba_inner, m.mamba_groups * m.mamba_state_dim, m.n_mamba_heads
    blk = layer_block(m, job)
    ops = _ops(blk)
    assert ops["in_proj"].flops == 2 * tok * h * (2 * d_in + 2 * gn + heads) / 2
    assert ops["out_proj"].flops == 2 * tok * d_in * h / 2
    assert {"mamba.conv1d", "mamba.ssd_scan", "mamba.gated_norm"} <= set(ops)
    assert not {"qkv", "mlp_up", "attention"} & set(ops)
    assert [n for n in ops if n.endswith("_norm")] == ["mamba_norm", "mamba.gated_norm"]  # one pre-norm
    scan = ops["mamba.ssd_scan"].flops / tok
    assert 0.5 < scan / (7 * d_in / 2 * m.mamba_state_dim) < 1.5  # SSD's chunked matmuls ~ Megatron-Bridge's 7 d_in N
    assert layer_params_per_gpu(m, job) == pytest.approx(m.mamba_params() / 2 + m.norm_params())


def test_ssd_scan_backward_runs_mamba_ssms_kernels_and_moves_their_bytes():
    """mamba_ssm 2.3.2's combined scan: 5 forward kernels; the backward runs the forward's four
    again and 17 more, reading x, dout, B, C, C B^T and the chunk states several times: more than
    twice the forward's bytes, and launch-bound sooner when eager."""
    from teton.workload.mamba import SSD_BWD_KERNELS, SSD_KERNELS

    spec = _job("nemotron-h-8b")
    m, job = spec.model.as_layer(LayerType("mamba", "none")), spec.job
    blk = layer_block(m, job)
    fwd, bwd = _ops(blk)["mamba.ssd_scan"], {i.name: i for i in blk.bwd}["mamba.ssd_scan.bwd"]
    assert (fwd.kernels, bwd.kernels) == (SSD_KERNELS, SSD_BWD_KERNELS) == (5, 21)
    tok, d_in = job.layout.tokens, m.mamba_inner / job.layout.tp
    assert fwd.bytes > 3 * 2 * tok * d_in  # x read twice and the output written, in bf16, at least
    assert 2.5 < bwd.bytes / fwd.bytes < 4


def test_mamba_context_parallelism_is_megatrons_all_to_all():
    """Megatron-Core 0.16's MambaContextParallel: z, x, B, C and dt go from sequence- to
    head-sharded (five all-to-alls over CP) before the conv and scan, y comes back after; the scan
    then runs the whole sequence for 1/cp of the heads, the same elements as cp = 1's shard."""
    plain, cp2 = _job("nemotron-h-8b", tp=2, gpus=8), _job("nemotron-h-8b", tp=2, cp=2, gpus=8)
    m = plain.model.as_layer(LayerType("mamba", "none"))
    blk, blk2 = layer_block(m, plain.job), layer_block(m, cp2.job)
    colls = {i.name: i for i in blk2.fwd if isinstance(i, Collective)}
    assert set(colls) >= {"cp.a2a_z", "cp.a2a_x", "cp.a2a_B", "cp.a2a_C", "cp.a2a_dt", "cp.a2a_y"}
    assert all(c.op == "all_to_all" and c.axis == "cp" for c in colls.values() if c.name.startswith("cp."))
    tok, d_in = cp2.job.layout.tokens, m.mamba_inner // 2
    assert colls["cp.a2a_x"].bytes == colls["cp.a2a_y"].bytes == 2 * tok * d_in
    assert {f"{n}.bwd" for n in colls if n.startswith("cp.")} <= {i.name for i in blk2.bwd}
    # the scan's work per rank follows the rank's tokens: half of cp = 1's at the same micro-batch
    assert _ops(blk2)["mamba.ssd_scan"].flops == pytest.approx(_ops(blk)["mamba.ssd_scan"].flops / 2)
    assert not any(i.name.startswith("cp.") for i in blk.fwd)


def test_mamba_cp_repeats_groups_and_refuses_what_megatron_refuses():
    # 8 groups over tp 2: 4 per rank; cp 8 repeats each group on two CP ranks
    spec = _job("nemotron-h-8b", tp=2, cp=8, gpus=16, global_batch=16)
    m = spec.model.as_layer(LayerType("mamba", "none"))
    colls = {i.name: i for i in layer_block(m, spec.job).fwd if isinstance(i, Collective)}
    tok = spec.job.layout.tokens
    assert colls["cp.a2a_B"].bytes == 2 * tok * (8 // 2) * m.mamba_state_dim * 2
    with pytest.raises(SpecError, match="job.cp = 3: must divide the Mamba-2 heads"):
        layer_block(m.model_copy(update={"mamba_heads": 64}), _job("nemotron-h-8b", tp=2, cp=3, gpus=6,
                                                                  global_batch=12, seq_len=4098).job)
    with pytest.raises(SpecError, match="job.tp"):
        layer_block(m.model_copy(update={"mamba_groups": 3, "mamba_heads": 129}), _job("nemotron-h-8b").job)


def test_mlp_only_and_attention_only_layers_have_one_sub_block():
    spec = _job("nemotron-h-8b")
    mlp = _ops(layer_block(spec.model.as_layer(LayerType("none", "dense")), spec.job))
    att = _ops(layer_block(spec.model.as_layer(LayerType("attention", "none")), spec.job))
    assert "mlp_up" in mlp and not {"qkv", "attention", "attn_norm"} & set(mlp)
    assert "attention" in att and not {"mlp_up", "mlp_norm"} & set(att)


def test_sliding_window_keys():
    assert causal_keys(8192, None) == 4096 and causal_keys(8192, 10000) == 4096
    assert causal_keys(8192, 128) == pytest.approx(128 * (1 - 128 / 16384))


def test_windowed_layer_ring_steps_stop_at_the_window():
    spec = _job("gpt-oss-120b", gpus=64, tp=2, ep=8, cp=4, cp_algo="ring", seq_len=8192)
    m = spec.model.as_layer(LayerType("attention", "moe", windowed=True))
    ring = next(i for i in layer_block(m, spec.job).fwd if isinstance(i, Collective) and i.name == "cp.kv_ring")
    assert ring.ring_steps == 1  # 128 keys lie within one neighbouring chunk of 1,024


def test_mla_and_mamba_refuse_the_eager_reference_code():
    m, job = _deepseek_dense()
    with pytest.raises(SpecError, match="kernel_fusion"):
        layer_block(m, job.model_copy(update={"kernel_fusion": "eager"}))


def test_a2a_context_parallelism_sends_q_k_v_and_the_output_and_keeps_no_gathered_kv():
    """cp_algo a2a (DeepSpeed-Ulysses; Transformer Engine 2.9's AttnFuncWithCPAndQKVOA2A): Q, K, V
    sequence- to head-sharded before the core, the output back after, the gradients the other
    way in backward; no K/V of the whole sequence is kept, and the core's work per rank is a
    ring's."""
    from teton.workload.activations import layer_activation_bytes

    a2a, ring, ag = (_job("llama3-8b", tp=2, cp=4, seq_len=32768, global_batch=8, cp_algo=algo)
                     for algo in ("a2a", "ring", "all_gather"))
    m, lay = a2a.model, a2a.job.layout
    blk = layer_block(m, a2a.job)
    fwd = {i.name: i for i in blk.fwd if isinstance(i, Collective)}
    bwd = {i.name: i for i in blk.bwd if isinstance(i, Collective)}
    tok = lay.tokens
    assert fwd["cp.a2a_qkv"].bytes == 2 * tok * (m.q_width + 2 * m.kv_width) / 2
    assert fwd["cp.a2a_out"].bytes == bwd["cp.a2a_out_grad"].bytes == 2 * tok * m.q_width / 2
    assert bwd["cp.a2a_qkv_grad"].bytes == fwd["cp.a2a_qkv"].bytes
    assert all(c.op == "all_to_all" and c.axis == "cp" and not c.overlap for c in (*fwd.values(), *bwd.values())
               if c.name.startswith("cp."))
    assert _ops(blk)["attention"].flops == _ops(layer_block(m, ring.job))["attention"].flops
    assert layer_activation_bytes(m, a2a.job) == layer_activation_bytes(m, ring.job) < layer_activation_bytes(m, ag.job)
    # Llama 3 8B: 8 KV heads, 4 a TP rank at tp 2; cp 8 cannot split them
    with pytest.raises(SpecError, match="job.cp = 8: must divide the key / value heads of a TP rank"):
        layer_block(m, _job("llama3-8b", tp=2, cp=8, gpus=16, seq_len=32768, global_batch=8, cp_algo="a2a").job)


def test_transformer_engine_refuses_ring_cp_with_windows_and_all_gather_cp_with_mla():
    """TE 2.9's attn_forward_func_with_cp: sliding windows only under a2a or all_gather CP, MLA only
    under p2p (ring); a job on cuDNN attention gets those refusals in one line, a FlashAttention
    job keeps its ring."""
    te = {"attention_kernel": "cudnn"}
    with pytest.raises(SpecError, match="job.cp_algo = 'ring': Transformer Engine's attention"):
        _job("gpt-oss-120b", gpus=64, tp=2, ep=8, cp=4, cp_algo="ring", seq_len=8192, **te)
    _job("gpt-oss-120b", gpus=64, tp=2, ep=8, cp=4, cp_algo="all_gather", seq_len=8192, **te)
    _job("gpt-oss-120b", gpus=64, tp=2, ep=8, cp=4, cp_algo="ring", seq_len=8192)  # fa2: allowed
    with pytest.raises(SpecError, match="runs MLA only under ring CP \\(p2p\\) or a2a\\+p2p"):
        _job("deepseek-v3", gpus=64, tp=2, ep=8, cp=2, cp_algo="all_gather", seq_len=8192, **te)


def test_hierarchical_cp_runs_all_to_alls_inside_its_groups_and_a_ring_across_them():
    """cp_algo a2a+p2p (Transformer Engine 2.9's AttnFuncWithCPAndKVP2P with cp_group = [a2a, p2p];
    Megatron-Core's hierarchical CP groups): Q, K, V all-to-all over cp_a2a consecutive CP ranks,
    a ring of cp / cp_a2a - 1 steps over the ranks cp_a2a apart carrying the group's share of the
    heads, the output all-to-all back; backward re-shards the output with its gradient."""
    from teton.engine.prepare import default_placement

    spec = _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="a2a+p2p", cp_a2a=8)
    ring = _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="ring")
    m, lay = spec.model, spec.job.layout
    blk = layer_block(m, spec.job)
    fwd = {i.name: i for i in blk.fwd if isinstance(i, Collective)}
    bwd = {i.name: i for i in blk.bwd if isinstance(i, Collective)}
    ring_kv = next(i for i in layer_block(m, ring.job).fwd if isinstance(i, Collective) and i.name == "cp.kv_ring")
    assert (fwd["cp.kv_ring"].axis, fwd["cp.kv_ring"].ring_steps, ring_kv.ring_steps) == ("cp_p2p", 3, 31)
    assert fwd["cp.kv_ring"].bytes == ring_kv.bytes / 8 and bwd["cp.kv_ring.bwd"].bytes == 2 * ring_kv.bytes / 8
    assert fwd["cp.a2a_qkv"].axis == fwd["cp.a2a_out"].axis == "cp_a2a"
    assert fwd["cp.a2a_qkv"].bytes == 2 * lay.tokens * (m.q_width + 2 * m.kv_width)
    assert bwd["cp.a2a_out_grad"].bytes == 2 * fwd["cp.a2a_out"].bytes
    placement = default_placement(spec)
    cp = placement.groups("cp")[0]
    assert placement.groups("cp_a2a")[0].tolist() == cp[:8].tolist()
    assert placement.groups("cp_p2p")[0].tolist() == cp[::8].tolist()
    with pytest.raises(SpecError, match="job.cp_a2a = None: a2a\\+p2p needs"):
        _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="a2a+p2p")
    with pytest.raises(SpecError, match="job.cp_a2a = 32: must divide job.cp \\(32\\) and be smaller"):
        _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="a2a+p2p", cp_a2a=32)
    with pytest.raises(SpecError, match="job.cp_a2a = 16: must divide the key / value heads"):
        _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="a2a+p2p", cp_a2a=16)
    with pytest.raises(SpecError, match="job.cp_a2a = 4: applies only to job.cp_algo = a2a\\+p2p"):
        _job("llama3-8b", gpus=32, tp=1, cp=32, seq_len=65536, global_batch=1, cp_algo="ring", cp_a2a=4)
    with pytest.raises(SpecError, match="refuses hierarchical \\(a2a\\+p2p\\) CP with sliding-window layers"):
        _job("gpt-oss-120b", gpus=64, tp=2, ep=8, cp=4, cp_algo="a2a+p2p", cp_a2a=2, seq_len=8192)
    # MLA runs under a2a+p2p in Transformer Engine (as under p2p)
    _job("deepseek-v3", gpus=64, tp=2, ep=8, cp=4, cp_algo="a2a+p2p", cp_a2a=2, seq_len=8192, attention_kernel="cudnn")


def test_a_ring_step_between_hosts_runs_over_one_nic():
    """Ring attention's steps are point-to-point sends to the next CP rank: a hop between hosts
    runs over one GPU's NIC, where an all-gather's channels spread over every NIC of the host. On
    32 GPUs of 4 hosts at 64K tokens the ring's blocks are too short to hide that hop; the
    hierarchical CP keeps the all-to-alls inside the hosts and runs a ring of 4 across them."""
    import teton
    from teton.engine.block_timer import BlockTimer
    from teton.engine.compute import ComputeModel
    from teton.engine.prepare import default_placement, make_cost_model

    job = {"gpus": 32, "tp": 1, "cp": 32, "seq_len": 65536, "global_batch": 1}
    ring = _job("llama3-8b", cp_algo="ring", **job)
    placement, cost = default_placement(ring), make_cost_model(ring)
    c = ring.cluster
    timer = BlockTimer(ComputeModel.for_gpu(c.gpu_spec, "bf16", 65536, c.efficiency), cost, placement, c)
    kv = next(i for i in layer_block(ring.model, ring.job).fwd if isinstance(i, Collective) and i.name == "cp.kv_ring")
    groups = placement.groups("cp")
    hop = cost.collective_time("send_recv", groups[0, 7:9].reshape(1, 2), kv.bytes / 32)  # across hosts
    assert timer.collective_s(kv) == pytest.approx(31 * hop + timer.compute.eff.kernel_gap_s, rel=1e-6)
    assert timer.collective_s(kv) > 2 * cost.collective_time("all_gather", groups, kv.bytes)
    runs = {algo: teton.simulate(_job("llama3-8b", cp_algo=algo, **job, **extra))
            for algo, extra in (("ring", {}), ("a2a+p2p", {"cp_a2a": 8}))}
    assert runs["a2a+p2p"].step_time_s < 0.9 * runs["ring"].step_time_s
    # teton run says so: the exposed ring earns a hint naming the hierarchical layout
    assert any("job.cp_algo=a2a+p2p with job.cp_a2a=8" in w for w in runs["ring"].warnings)
    assert not any("a2a+p2p" in w for w in runs["a2a+p2p"].warnings)
    long = teton.simulate(_job("llama3-8b", cp_algo="ring", **{**job, "seq_len": 262144}))
    assert not any("a2a+p2p" in w for w in long.warnings)  # its ring hides under the attention
