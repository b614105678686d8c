"""Writer scaling 8 -> 16,384: bandwidth saturates at the storage limit; the tail is the slowest writer."""

from __future__ import annotations

import numpy as np
import pytest

from teton.spec.storage import spec_storage
from teton.storage import simulate_checkpoint
from teton.storage.scaling import DEFAULT_WRITERS, plot_scaling, writer_scaling


@pytest.fixture(scope="module")
def study(spec16k):
    total = simulate_checkpoint(spec16k).state.total_bytes
    system = spec_storage(spec16k)
    return system, writer_scaling(system, spec16k.cluster, total, seed=0)


def test_writer_counts():
    assert DEFAULT_WRITERS[0] == 8 and DEFAULT_WRITERS[-1] == 16384


def test_bandwidth_grows_then_saturates_at_storage_limit(study):
    system, pts = study
    limit = system.peak_write_bytes_s()
    peak = np.array([p.peak_rate_bytes_s for p in pts])
    assert np.all(np.diff(peak) >= -1e-6 * limit)  # never falls as writers are added
    assert peak.max() == pytest.approx(limit)  # reaches the storage limit ...
    assert peak.max() <= limit * (1 + 1e-9)  # ... and never exceeds it
    flat = [p for p in pts if p.peak_rate_bytes_s == pytest.approx(limit)]
    assert len(flat) >= 2  # flat once saturated (12,288 and 16,384 writers)
    # below saturation the client hosts limit it: rate ~ hosts x FUSE ceiling
    small = pts[0]
    assert small.bottleneck == "fuse_client"
    assert small.peak_rate_bytes_s < 1.05 * system.client_bytes_s_per_host()
    # saturated, the server NICs cap the rate, but the slowest FUSE host sets the finish time (it
    # ran at its own ceiling throughout: more servers would not finish sooner)
    assert pts[-1].rate_bottleneck == "server_nic" and pts[-1].bottleneck == "fuse_client"


def test_tail_dominated_by_slowest_writer(study):
    _, pts = study
    for p in pts:
        assert p.time_s == pytest.approx(p.slowest_writer_s + 100e-6)  # done when the slowest is
        assert p.slowest_writer_s >= p.median_writer_s
    assert max(p.slowest_writer_s / p.median_writer_s for p in pts) > 1.5
    assert all(p.delivered_bw_bytes_s <= p.peak_rate_bytes_s * (1 + 1e-9) for p in pts)


def test_no_jitter_no_tail(spec16k):
    system = spec_storage(spec16k).model_copy(update={"writer_jitter_sigma": 0.0})
    pts = writer_scaling(system, spec16k.cluster, 5.68e12, writers=(8, 16384))
    assert pts[-1].delivered_bw_bytes_s == pytest.approx(system.peak_write_bytes_s(), rel=1e-3)
    assert pts[-1].tail_s == pytest.approx(0.0, abs=1e-9)


def test_plot_png(study, tmp_path):
    system, pts = study
    out = plot_scaling(pts, system.peak_write_bytes_s(), tmp_path / "scaling.png", "t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
