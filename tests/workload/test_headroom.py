"""Usable HBM: capacity less CUDA context, NCCL buffers, fragmentation and the spec's reserve; `fits`,
`search` and `plan` keep that much free (issue 24, item 4)."""

import json

import pytest

import teton
from teton.errors import SpecError
from teton.spec import load_spec
from teton.sweep.search import SearchSpace, rank_layouts
from teton.units import GIB
from teton.workload.headroom import (
    NCCL_LL128_BUFF_BYTES,
    NCCL_LL_BUFF_BYTES,
    P2P_CHANNELS,
    MemoryHeadroom,
    fit_text,
    memory_headroom,
    nccl_buffer_bytes,
)

MIB = 2**20
SMALL = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
         "job": {"gpus": 64, "tp": 1, "pp": 1, "seq_len": 8192, "global_batch": 256, "zero": 1}}
SPACE = SearchSpace(tp=(1, 2), cp=(1,), pp=(1, 2), virtual_stages=(1,), micro_batch=(1, 2))
# a setting a careful user might give: the default caching allocator's 15 % (GMLake) and 6 GiB kept
STRICT = ["job.headroom.fragmentation=0.15", "job.headroom.reserve_gib=6"]


def _left(r) -> float:
    """HBM the job leaves free, bytes."""
    return r.hbm_bytes - r.memory_per_gpu_bytes


def test_nccl_buffers_per_communicator():
    """Channels x connections x (Simple + LL128 + LL) per communicator: TP 8 inside a host is 16
    NVLink channels of a ring; a group across hosts adds the tree's three connections per channel."""
    per_conn = 4 * MIB + NCCL_LL128_BUFF_BYTES + NCCL_LL_BUFF_BYTES
    tp8 = load_spec({**SMALL, "job": {"gpus": 8, "tp": 8}}).job
    # tp (16 channels, ring) and the world, the same 8 GPUs
    assert nccl_buffer_bytes(tp8, 8, 8) == 2 * 16 * 2 * per_conn
    dp16 = load_spec({**SMALL, "job": {"gpus": 16, "tp": 8, "global_batch": 16}}).job
    # dp 2 across hosts, one GPU of each host: 2 channels of its one NIC, ring + tree; the world 16 GPUs
    # over 2 hosts, 8 NICs each: 16 channels
    assert nccl_buffer_bytes(dp16, 8, 8) == (16 * 2 + 2 * 5 + 16 * 5) * per_conn
    pp2 = load_spec({**SMALL, "job": {"gpus": 2, "pp": 2, "global_batch": 2}}).job
    # send/recv to two neighbours over NCCL_NCHANNELS_PER_NET_PEER channels, Simple only; the world
    assert nccl_buffer_bytes(pp2, 8, 8) == P2P_CHANNELS * 2 * 4 * MIB + 16 * 2 * per_conn
    bigger = load_spec({**SMALL, "job": {"gpus": 8, "tp": 8, "headroom": {"nccl_buffsize_mib": 8}}}).job
    assert nccl_buffer_bytes(bigger, 8, 8) > nccl_buffer_bytes(tp8, 8, 8)


def test_usable_hbm_is_capacity_less_what_is_kept():
    spec = load_spec(SMALL, ["job.headroom.cuda_context_gib=0.75", "job.headroom.fragmentation=0.1",
                             "job.headroom.reserve_gib=2"])
    room = memory_headroom(spec.job, spec.cluster)
    pool = room.capacity_bytes - 0.75 * GIB - room.nccl_buffer_bytes
    assert room.fragmentation_bytes == pytest.approx(0.1 * pool)
    assert room.usable_bytes == pytest.approx(0.9 * pool - 2 * GIB)
    r = teton.simulate(spec)
    assert r.usable_hbm_bytes == pytest.approx(room.usable_bytes)
    assert r.headroom_bytes == pytest.approx(room.usable_bytes - r.memory_per_gpu_bytes)
    assert sum(r.memory_reserved.values()) == pytest.approx(r.hbm_bytes - r.usable_hbm_bytes)


def test_a_job_within_hbm_but_not_its_headroom_does_not_fit(example_spec):
    """The 405B example allocates 69.5 GiB of 79.6: it fits with the default headroom, not with a
    10 GiB reserve, and the verdict says how far short it is."""
    ok = teton.simulate(example_spec)
    assert ok.fits_in_memory and ok.headroom_bytes > 0
    short = teton.simulate(example_spec, ["job.headroom.reserve_gib=10"])
    assert short.memory_per_gpu_bytes < short.hbm_bytes and not short.fits_in_memory and short.headroom_bytes < 0
    assert short.step_time_s == ok.step_time_s  # headroom is a verdict, not a cost


def test_search_ranks_first_only_layouts_that_leave_the_headroom():
    """No layout that search ranks first (or that it calls fitting) leaves less than the spec's
    headroom free; without the setting its first layout would leave less."""
    spec = load_spec(SMALL, STRICT)
    _, ranked, _ = rank_layouts(spec, SPACE)
    fitting = [c for c in ranked if c.result.fits_in_memory]
    assert fitting and ranked[0] is fitting[0]
    for c in fitting:
        kept = sum(c.result.memory_reserved.values())
        assert _left(c.result) >= kept and c.result.memory_reserved["reserve"] == 6 * GIB
    _, loose, _ = rank_layouts(load_spec(SMALL), SPACE)
    assert _left(loose[0].result) < sum(fitting[0].result.memory_reserved.values())  # the setting mattered
    _, fitting_only, _ = rank_layouts(spec, SPACE, fitting_only=True)
    assert [c.result.step_time_s for c in fitting_only] == [c.result.step_time_s for c in fitting]


def test_plan_chooses_a_layout_that_leaves_the_headroom(cli, tmp_path):
    spec = {**SMALL, "job": {**SMALL["job"], "headroom": {"fragmentation": 0.15, "reserve_gib": 6}},
            "storage": {"preset": "tectonic-llama3", "servers": 20}}
    path = tmp_path / "small.json"
    path.write_text(json.dumps(spec))
    code, out, err = cli("plan", str(path), "--tokens", "100B", "--gpus", "64", "--storage-servers", "20",
                         "--runs", "50", "--executor", "serial", "--tp", "1,2", "--cp", "1", "--pp", "1,2",
                         "--virtual-stages", "1", "--json")
    assert code == 0, err
    chosen = next(p for p in json.loads(out)["plans"] if p["chosen"])
    rep = chosen["reproduce"]
    r = teton.simulate(load_spec(path, rep["set"]))
    assert r.step_time_s == chosen["step_time_s"]
    assert r.fits_in_memory and _left(r) >= sum(r.memory_reserved.values())


@pytest.mark.parametrize("item, allowed", [("job.headroom.fragmentation=1", "[0, 1)"),
                                           ("job.headroom.cuda_context_gib=-1", "[0, 1024]"),
                                           ("job.headroom.spare=1", "unknown field")])
def test_bad_headroom_is_one_line(item, allowed):
    with pytest.raises(SpecError) as e:
        load_spec(SMALL, [item])
    assert "job.headroom" in str(e.value) and allowed in str(e.value) and "\n" not in str(e.value)


def test_a_job_over_usable_but_within_the_fragmentation_allowance_is_tight():
    """Llama 3 405B at 131K tokens on 16K GPUs (Table 4, row 3: a layout Meta ran) comes out 2 GiB
    over the usable HBM, less than the 2.3 GiB kept for fragmentation: ``tight``, which run prints
    as such (not DOES NOT FIT), while search and plan still count it as not fitting."""
    room = MemoryHeadroom(80 * GIB, 0.5 * GIB, 1.5 * GIB, 2.0 * GIB, 0.0)
    assert [room.verdict(b * GIB) for b in (76.0, 77.5, 78.5)] == ["fits", "tight", "does not fit"]
    assert fit_text("tight", 1.0 * GIB, 2.0 * GIB, "activations").startswith("TIGHT: fits only if the allocator "
                                                                            "fragments under 1.0 GiB")
    spec = load_spec("examples/llama3-405b-16k.yaml", overrides=["job.cp=16", "job.dp=8", "job.seq_len=131072",
                                                                  "job.global_batch=128"])
    r = teton.simulate(spec)
    assert (r.fits_in_memory, r.memory_verdict) == (False, "tight")
