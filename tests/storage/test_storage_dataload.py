"""Data loading vs the job's tokens/s, and the job-start storm on the parallel NFS."""

from __future__ import annotations

import pytest

import teton
from teton.errors import SpecError
from teton.spec.storage import storage_system
from teton.storage import data_loading, devx_job_start
from teton.storage.dataload import job_tokens_per_s


def test_data_loading_keeps_up_for_text(spec16k):
    d = data_loading(spec16k, tokens_per_s=2.6e6)
    assert d.needed_bytes_s == pytest.approx(2.6e6 * 4)  # int32 token ids
    assert d.step_s == pytest.approx(2048 * 8192 / 2.6e6)
    assert not d.stalls and d.headroom > 1000


def test_data_loading_stalls_when_reads_outlast_the_step(make_spec):
    # 10 MB per token (e.g. raw video): reading a step's 168 TB takes longer than the step
    spec = make_spec(storage={"writer_jitter_sigma": 0.0, "other_jobs_share": 0.0})  # the storage to itself
    d = data_loading(spec, tokens_per_s=2.6e6, bytes_per_token=1e7)
    step_bytes = 2048 * 8192 * 1e7
    fuse_host = 1 / (1 / 5e9 + 15e-6 / 2**20)
    assert d.bottleneck == "fuse_client"  # 2,048 FUSE clients (9.6 TB/s) < 7,500 servers' NICs (10.9)
    assert d.read_s_per_step == pytest.approx(step_bytes / (2048 * fuse_host) + 100e-6)
    assert d.stalls and d.stall_s_per_step == pytest.approx(d.read_s_per_step - 2048 * 8192 / 2.6e6)
    # other jobs holding half the storage: the servers' NICs (half of 10.9 TB/s) bind instead
    shared = data_loading(make_spec(storage={"writer_jitter_sigma": 0.0, "other_jobs_share": 0.5}),
                          tokens_per_s=2.6e6, bytes_per_token=1e7)
    assert shared.bottleneck == "server_nic" and shared.read_s_per_step > d.read_s_per_step


def test_tokens_per_s_from_the_step_simulator_passed(spec16k):
    tps = job_tokens_per_s(spec16k, teton.simulate)
    assert tps == pytest.approx(teton.simulate(spec16k).tokens_per_s)
    assert data_loading(spec16k, simulate=teton.simulate).tokens_per_s == pytest.approx(tps)
    with pytest.raises(SpecError, match=r"^tokens_per_s = None: give the job's tokens/s"):
        data_loading(spec16k)  # no figure and no simulator: an error naming the parameter


def test_devx_job_start_by_hand():
    nfs = storage_system("hammerspace-pnfs")
    j = devx_job_start(nfs, clients=2048, files=1, file_bytes=2**20, read_bytes=4096)
    # one file on one DSX node: 2,048 hosts x 256 reads of 4 KiB at 2e5 requests/s
    assert j.hot_server_s == pytest.approx(2048 * 256 / 2e5)
    assert j.metadata_s == pytest.approx(2048 * 4 / 1e5)  # OPEN, LAYOUTGET, GETATTR, CLOSE on Anvil
    assert j.client_chain_s == pytest.approx((4 + 256) * 100e-6)
    assert j.bottleneck == "data_server" and j.time_s == j.hot_server_s
    # many small files spread over the DSX nodes: the metadata service becomes the limit
    k = devx_job_start(nfs, clients=2048, files=2000, file_bytes=4096, read_bytes=4096)
    assert k.bottleneck == "metadata"
    assert k.time_s == pytest.approx(2048 * 2000 * 4 / 1e5)


def test_devx_bad_input():
    from teton.errors import SpecError

    with pytest.raises(SpecError, match="devx.clients"):
        devx_job_start(storage_system("hammerspace-pnfs"), clients=0)


def test_the_checkpoint_report_loads_data_at_the_simulators_tokens_per_s(spec16k):
    """No step simulator passed (and no tokens/s anywhere): data loading is skipped, not simulated
    behind the caller's back; with one, it runs at the simulated tokens/s."""
    from teton.spec.storage import checkpoint_policy
    from teton.storage.checkpoint_report import checkpoint_with_data_loading

    policy = checkpoint_policy(spec16k)
    _, without = checkpoint_with_data_loading(spec16k, policy)
    _, with_sim = checkpoint_with_data_loading(spec16k, policy, simulate=teton.simulate)
    assert without["data_loading"] is None
    assert with_sim["data_loading"]["tokens_per_s"] == pytest.approx(teton.simulate(spec16k).tokens_per_s)
