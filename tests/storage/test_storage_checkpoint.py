"""Checkpoint sizes, save (sync / async), restore (all read / broadcast) -- with hand calculations."""

from __future__ import annotations

import numpy as np
import pytest

from teton.hardware.storage import d2h_bytes_s_per_gpu
from teton.network import AnalyticalCostModel
from teton.placement import place
from teton.spec.storage import CheckpointPolicy
from teton.storage import checkpoint_summary, rank_state, simulate_checkpoint

MB, GB = 1e6, 1e9

# Llama 3 405B by hand: attention h*q + 2*h*kv + q*h, SwiGLU 3*h*f, two RMSNorms of h.
H, F, KV, V = 16384, 53248, 8 * 128, 128256
LAYER_TP8 = (2 * H * H + 2 * H * KV + 3 * H * F) // 8 + 2 * H  # one layer on one TP rank
EMB_TP8 = V * H // 8


def test_layer_params_by_hand():
    assert LAYER_TP8 == 398_491_648


def test_per_gpu_bytes_by_hand_16k(spec16k):
    st = rank_state(spec16k, CheckpointPolicy())
    # 126 layers + embedding + head slots = 128 = 16 stages x 8 chunks of 1 slot: the first stage
    # holds the embedding + 7 layers, middle stages 8 layers, the last 7 layers + head (+ norm).
    middle = 8 * LAYER_TP8
    first = 7 * LAYER_TP8 + EMB_TP8
    spread = lambda p: 14 * p / 128  # noqa: E731 -- (2 + 4 + 4 + 4) bytes/param over dp*cp = 128 holders
    assert st.written_bytes.max() == pytest.approx(spread(middle))
    assert st.written_bytes.min() == pytest.approx(spread(first))
    assert st.written_bytes.max() == pytest.approx(348_680_192)
    # the checkpoint is one copy of the model state: 14 bytes per parameter (plus the RMSNorm
    # weights every TP rank holds a copy of: 7 extra copies of 2 x 16,384 per layer, and of the
    # final norm)
    extra_norms = 126 * 2 * H * 7 + 7 * H
    assert st.total_bytes == pytest.approx(14 * (spec16k.model.total_params() + extra_norms), rel=1e-7)


@pytest.mark.parametrize("layout", ["8k", "16k", "16k-cp16"])
def test_table4_sizes_in_metas_range(make_spec, table4, layout):
    """Llama 3 paper 3.3.1: each GPU checkpoints 1 MB to 4 GB."""
    out = simulate_checkpoint(make_spec(job=table4[layout])).summary()
    assert 1 * MB <= out["bytes_per_gpu_min"] <= out["bytes_per_gpu_max"] <= 4 * GB


def test_writer_policies_and_zero_stages(make_spec, table4):
    spec = make_spec()
    p_mid = 8 * LAYER_TP8
    one = rank_state(spec, CheckpointPolicy(writers="one_replica"))
    # replica 0 writes bf16 weights + its optimizer shard; other ranks only their shard
    assert one.written_bytes.max() == pytest.approx(2 * p_mid + 12 * p_mid / 128)
    assert np.sort(one.written_bytes)[0] == pytest.approx(12 * (7 * LAYER_TP8 + EMB_TP8) / 128)
    every = rank_state(spec, CheckpointPolicy(writers="every_rank"))
    # every replica writes its bf16 weights: 128 copies of the 2-byte part, one of the 12-byte part
    assert every.total_bytes == pytest.approx(one.total_bytes * (128 * 2 + 12) / 14)
    assert one.total_bytes == pytest.approx(rank_state(spec, CheckpointPolicy()).total_bytes)
    z0 = rank_state(make_spec(job=dict(table4["16k"], zero=0)), CheckpointPolicy(writers="every_rank"))
    assert z0.held_bytes.max() == pytest.approx(14 * p_mid)  # nothing sharded
    z3 = rank_state(make_spec(job=dict(table4["16k"], zero=3)), CheckpointPolicy(writers="every_rank"))
    assert z3.held_bytes.max() == pytest.approx(14 * p_mid / 128)
    no_bf16 = rank_state(spec, CheckpointPolicy(bf16_weights=False))
    assert no_bf16.total_bytes == pytest.approx(12 / 14 * rank_state(spec, CheckpointPolicy()).total_bytes)


def test_cp_replicas_write_nothing_extra(make_spec, table4):
    st = rank_state(make_spec(job=table4["16k-cp16"]), CheckpointPolicy())
    # dp 8 x cp 16 = 128 holders of each stage's state: same per-GPU bytes as the CP-free layout
    assert st.written_bytes.max() == pytest.approx(14 * 8 * LAYER_TP8 / 128)


def test_sync_save_is_total_over_delivered_bandwidth(make_spec):
    spec = make_spec(storage={"preset": "tectonic-llama3", "writer_jitter_sigma": 0.0, "other_jobs_share": 0.0,
                              "checkpoint": {"mode": "sync"}})
    r = simulate_checkpoint(spec)
    out = r.summary()
    nic_cap = 7500 * 12.5e9 / 8 * 1428 / 1538 / (15 / 9)
    assert out["bottleneck"] == "server_nic"
    assert out["caps_bytes_s"]["server_nic"] == pytest.approx(nic_cap)
    upload = out["total_bytes"] / nic_cap + 100e-6  # + one request round trip
    d2h = 14 * 8 * LAYER_TP8 / 128 / d2h_bytes_s_per_gpu("grand-teton")
    assert out["upload_s"] == pytest.approx(upload)
    assert out["checkpoint_save_s"] == pytest.approx(d2h + upload)
    assert out["checkpoint_blocking_s"] == out["checkpoint_save_s"]  # sync: the GPUs wait for all of it
    assert out["delivered_bw_bytes_s"] == pytest.approx(out["total_bytes"] / out["upload_s"])
    assert out["tail_s"] == pytest.approx(0.0, abs=1e-9)


def test_async_blocking_is_the_device_to_host_copy_only(spec16k):
    out = simulate_checkpoint(spec16k).summary()
    assert out["mode"] == "async"
    d2h = out["bytes_per_gpu_max"] / d2h_bytes_s_per_gpu("grand-teton")
    assert out["checkpoint_blocking_s"] == pytest.approx(d2h)
    assert out["checkpoint_blocking_s"] < 0.02 < out["checkpoint_save_s"]
    assert out["checkpoint_save_s"] == pytest.approx(d2h + out["upload_s"], rel=1e-3)


def test_async_upload_shares_the_frontend_with_data_loading(make_spec):
    # a thin frontend (1:2000 oversubscribed) makes the frontend the bottleneck; a busy data
    # loader then slows the background upload
    spec = make_spec(storage={"writer_jitter_sigma": 0.0}, overrides=["cluster.frontend_oversubscription=2000"])
    quiet = simulate_checkpoint(spec)
    busy = simulate_checkpoint(spec, data_bytes_s=0.5 * quiet.save.caps_bytes_s["frontend_fabric"])
    assert quiet.save.bottleneck == "frontend_fabric"
    assert busy.async_durable_s > 1.5 * quiet.async_durable_s
    assert busy.d2h_s == quiet.d2h_s


def test_straggler_tail_sets_the_end(make_spec):
    # default per-host jitter sigma 0.2, the storage to the job alone (else its NICs bind)
    out = simulate_checkpoint(make_spec(storage={"other_jobs_share": 0.0})).summary()
    assert out["slowest_writer_s"] > 1.2 * out["median_writer_s"]
    assert out["upload_s"] == pytest.approx(out["slowest_writer_s"] + 100e-6)
    assert out["tail_s"] > 0


def test_restore_with_and_without_broadcast(spec16k):
    r = simulate_checkpoint(spec16k)
    out = r.summary()
    st = r.state
    # all ranks read all they hold: bf16 weights (every replica) + their optimizer shard
    assert st.held_bytes.sum() == pytest.approx(st.total_bytes * (128 * 2 + 12) / 14)
    assert r.restore_all_read.total_bytes == pytest.approx(st.held_bytes.sum())
    # broadcast restore: replica 0 reads the weights once, then a broadcast over the DP groups
    job = spec16k.job
    pl = place(spec16k.cluster, {"tp": 8, "cp": 1, "pp": 16, "dp": 128}, tuple(job.parallel_order))
    bcast = AnalyticalCostModel(spec16k.cluster).collective_time("broadcast", pl.groups("dp"), 2 * 8 * LAYER_TP8)
    assert r.broadcast_s == pytest.approx(bcast)
    assert r.restore_broadcast_read.total_bytes == pytest.approx(
        st.held_bytes.sum() - 127 / 128 * st.replicated_bytes.sum())
    assert out["checkpoint_restore_broadcast_s"] == pytest.approx(
        r.restore_broadcast_read.time_s + r.h2d_broadcast_s + bcast)
    assert out["checkpoint_restore_s"] == out["checkpoint_restore_all_read_s"]
    assert out["checkpoint_restore_broadcast_s"] < out["checkpoint_restore_all_read_s"]
    # spreading the once-read over every replica and all-gathering beats both here
    assert out["checkpoint_restore_allgather_s"] < out["checkpoint_restore_broadcast_s"]


def test_restore_policy_and_summary_keys(make_spec):
    spec = make_spec(storage={"checkpoint": {"restore": "broadcast", "mode": "sync"}})
    s = checkpoint_summary(spec)
    assert set(s) == {"checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s", "min_checkpoint_interval_s"}
    full = simulate_checkpoint(spec).summary()
    assert s["checkpoint_restore_s"] == full["checkpoint_restore_broadcast_s"]
    assert s["checkpoint_blocking_s"] == s["checkpoint_save_s"] == full["sync_save_s"]


def test_metadata_storm(make_spec):
    spec = make_spec(storage={"preset": "tectonic-llama3", "metadata_nodes": 1, "metadata_ops_s_per_node": 1000,
                              "writer_jitter_sigma": 0.0})
    out = simulate_checkpoint(spec).summary()
    # 16,384 files x 3 ops + one Block op per 64 MiB chunk + the index file's 3 ops; the middle
    # stages' 348.7 MB files have 6 chunks, the first and last stages' 333.8 MB files 5
    chunks = sum(int(np.ceil(b / 2**26)) for b in rank_state(spec).written_bytes)
    assert chunks == 14 * 1024 * 6 + 2 * 1024 * 5
    assert out["bottleneck"] == "metadata"
    assert out["metadata_s"] == pytest.approx((16384 * 3 + chunks + 3) / 1000)
    # more files per rank: more ops (files x ops per file)
    spec4 = make_spec(storage={"preset": "tectonic-llama3", "metadata_nodes": 1, "metadata_ops_s_per_node": 1000,
                               "checkpoint": {"files_per_rank": 4}})
    out4 = simulate_checkpoint(spec4).summary()
    assert out4["files"] == 4 * 16384 + 1
    assert out4["metadata_s"] == pytest.approx((4 * 16384 * 3 + chunks + 3) / 1000)


def test_sustainable_checkpoint_interval(spec16k, make_spec):
    """The storage sustains a checkpoint every bytes / (sustained write x what other jobs leave):
    the job was given the whole 7,500-server preset to itself (issue 24)."""
    out = simulate_checkpoint(spec16k).summary()
    # by default the other jobs hold the share of the cluster's GPUs this job does not use
    assert out["storage_other_jobs_share"] == pytest.approx(1 - 16384 / 24576)
    assert "8,192 of 24,576" in out["storage_other_jobs_share_source"]
    assert out["storage_write_bound"] == "flash endurance"
    assert out["min_checkpoint_interval_s"] == pytest.approx(out["total_bytes"] / (1.6e12 * 16384 / 24576))
    alone = simulate_checkpoint(make_spec(storage={"other_jobs_share": 0.0})).summary()
    assert alone["min_checkpoint_interval_s"] == pytest.approx(out["total_bytes"] / 1.6e12)
    half = simulate_checkpoint(make_spec(storage={"other_jobs_share": 0.5})).summary()
    assert half["min_checkpoint_interval_s"] == pytest.approx(2 * alone["min_checkpoint_interval_s"])
    # the data loader's reads hold the servers too: at 4.5 TB/s of reads the bandwidth binds
    loaded = simulate_checkpoint(make_spec(storage={"other_jobs_share": 0.5}), data_bytes_s=4.5e12).summary()
    peak_w, peak_r = loaded["storage_peak_write_bytes_s"], loaded["storage_peak_read_bytes_s"]
    assert loaded["storage_write_bound"] == "storage bandwidth"
    assert loaded["storage_available_write_bytes_s"] == pytest.approx(peak_w * (0.5 - 4.5e12 / peak_r))


def test_other_jobs_share_is_checked_and_can_leave_nothing(make_spec):
    from teton.errors import SpecError

    with pytest.raises(SpecError, match=r"storage.other_jobs_share.*1\.5"):
        make_spec(storage={"other_jobs_share": 1.5})
    with pytest.raises(SpecError, match="leaves no write bandwidth for checkpoints"):
        simulate_checkpoint(make_spec(storage={"other_jobs_share": 0.9}), data_bytes_s=2e12)
    local = simulate_checkpoint(make_spec(storage={"preset": "local-nvme"})).summary()
    assert local["storage_other_jobs_share"] == 0.0  # the job's own hosts' drives


def test_bad_policy_is_spec_error(make_spec):
    from teton.errors import SpecError

    with pytest.raises(SpecError, match="storage.checkpoint.mode"):
        simulate_checkpoint(make_spec(storage={"checkpoint": {"mode": "lazy"}}))
    with pytest.raises(SpecError, match="storage.checkpoint.bogus"):
        simulate_checkpoint(make_spec(storage={"checkpoint": {"bogus": 1}}))


def test_interval_policy(make_spec):
    ok = simulate_checkpoint(make_spec(storage={"checkpoint": {"interval_s": 600}})).summary()
    assert ok["checkpoint_sustainable"] is True
    assert ok["checkpoint_pause_fraction"] == pytest.approx(ok["async_blocking_s"] / (600 + ok["async_blocking_s"]))
    # every 2 s would need 2.8 TB/s on average: above the 1.6 TB/s the flash endurance allows
    fast = simulate_checkpoint(make_spec(storage={"checkpoint": {"interval_s": 2}})).summary()
    assert fast["checkpoint_sustainable"] is False


def test_moe_experts_are_replicated_over_dp_over_ep(make_spec):
    model = {"name": "moe", "layers": 4, "hidden": 1024, "ffn_hidden": 2048, "heads": 8, "vocab": 32000,
             "experts": 8, "top_k": 2}
    job = {"gpus": 64, "tp": 1, "pp": 1, "ep": 8, "seq_len": 4096, "global_batch": 64, "zero": 1}
    spec = make_spec(job=job, model=model)
    st = rank_state(spec, CheckpointPolicy())
    # tp = 1: every unique byte written exactly once -> 14 bytes x all parameters (all experts)
    assert st.total_bytes == pytest.approx(14 * spec.model.total_params())
    assert st.unique_bytes == pytest.approx(st.total_bytes)
    every = rank_state(spec, CheckpointPolicy(writers="every_rank"))
    m = spec.model
    expert = 4 * m.experts * m.mlp_params() / 8  # a rank's experts: 1 of 8 per layer
    dense = m.total_params() - 4 * m.experts * m.mlp_params()
    # bf16 of everything it holds + its 1/64 (dense) or 1/8 (experts) optimizer shard
    assert every.written_bytes.max() == pytest.approx(2 * (dense + expert) + 12 * dense / 64 + 12 * expert / 8)


def test_the_straggler_tail_is_not_the_whole_save_of_client_bound_writers():
    """12 writers on the 405B job's storage never saturate it (each at its FUSE client's ceiling):
    the tail had read the whole save (807 s, with slowest / median 1.00); it is the time after half
    the writers finished, and no longer than the save."""
    from teton.storage.transfer import Transfer

    t = Transfer("write", 1.0, 12, 2, 807.0, 1.0, "fuse_client", slowest_writer_s=807.0, median_writer_s=806.9,
                 saturated_s=0.0)
    assert t.tail_s == pytest.approx(0.1)
    t = Transfer("write", 1.0, 2, 1, 7 / 3, 1.0, "server_nic", slowest_writer_s=7 / 3, median_writer_s=1.0,
                 saturated_s=1.0)
    assert t.tail_s == pytest.approx(4 / 3)  # after the stage stopped running flat out, as before
