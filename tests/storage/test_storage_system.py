"""Storage presets, the per-server derivation of Tectonic's throughput, and spec validation."""

from __future__ import annotations

import math

import pytest

from teton.errors import SpecError
from teton.hardware.storage import d2h_bytes_s_per_gpu, tcp_goodput_fraction
from teton.spec.storage import STORAGE_PRESETS, spec_storage, storage_system


def test_tcp_goodput_by_hand():
    # 1500 MTU IPv6: payload 1500 - 40 - 20 - 12 = 1428; wire 1500 + 8 + 14 + 4 + 12 = 1538
    assert tcp_goodput_fraction() == pytest.approx(1428 / 1538)
    assert tcp_goodput_fraction(9000) == pytest.approx(8928 / 9038)


def test_tectonic_peak_and_sustained_come_from_per_server_figures():
    s = storage_system({"preset": "tectonic-llama3"})
    nic = 12.5e9 / 8 * 1428 / 1538  # one server's NIC goodput
    amp = 15 / 9  # RS(9,6)
    assert s.write_amplification == pytest.approx(amp)
    # the server is NIC-bound (4 x 4 GB/s of flash writes > 1.45 GB/s)
    assert s.peak_write_bytes_s() == pytest.approx(7500 * nic / amp)
    assert s.peak_read_bytes_s() == pytest.approx(7500 * nic)
    endurance = 7500 * 4 * 7.68e12 * 1.0 / 86400 / amp
    assert s.sustained_write_bytes_s() == pytest.approx(endurance)
    # published (Llama 3 paper 3.3.1): 7 TB/s peak, 2 TB/s sustained, 240 PB -- within 25 %
    assert s.peak_write_bytes_s() == pytest.approx(7e12, rel=0.1)
    assert s.sustained_write_bytes_s() == pytest.approx(2e12, rel=0.25)
    assert s.raw_capacity_bytes() == pytest.approx(240e15, rel=0.05)


def test_peak_follows_the_per_server_figures_not_a_constant():
    base = storage_system({"preset": "tectonic-llama3"})
    double_nic = storage_system({"base": "tectonic-llama3", "server_nic_gbps": 25})
    assert double_nic.peak_write_bytes_s() == pytest.approx(2 * base.peak_write_bytes_s())
    half = storage_system({"base": "tectonic-llama3", "servers": 3750})
    assert half.peak_write_bytes_s() == pytest.approx(base.peak_write_bytes_s() / 2)
    flash_bound = storage_system({"base": "tectonic-llama3", "server_nic_gbps": 400, "ssds_per_server": 1})
    assert flash_bound.peak_write_bytes_s() == pytest.approx(7500 * 4.0e9 / (15 / 9))
    repl = storage_system({"base": "tectonic-llama3", "redundancy": "replication", "replicas": 3})
    assert repl.write_amplification == 3


def test_presets_validate():
    for name in STORAGE_PRESETS:
        assert storage_system(name).name == name
    nfs = storage_system("hammerspace-pnfs")
    assert nfs.kind == "parallel-nfs" and nfs.client == "nfs"
    local = storage_system("local-nvme")
    assert local.kind == "local" and local.peak_write_bytes_s(hosts=2) == pytest.approx(2 * 8 * 4.2e9)


def test_spec_without_storage_uses_cluster_storage(make_spec):
    spec = make_spec()
    assert spec.storage is None and spec_storage(spec).name == "tectonic-llama3"
    spec2 = make_spec(overrides=["storage.servers=100"])  # --set without a preset: the cluster's base
    assert spec_storage(spec2).servers == 100 and spec_storage(spec2).name == "tectonic-llama3"
    spec3 = make_spec(storage={"preset": "local-nvme"})
    assert spec_storage(spec3).kind == "local"


@pytest.mark.parametrize("raw, field", [
    ({"preset": "tectonik"}, "storage.preset"),
    ({"base": "tectonic-llama3", "servers": 0}, "storage.servers"),
    ({"base": "tectonic-llama3", "bogus": 1}, "storage.bogus"),
    ({"base": "tectonic-llama3", "ssd": "floppy"}, "storage.ssd"),
    ({"base": "local-nvme", "kind": "distributed"}, "storage.server_nic_gbps"),
])
def test_bad_storage_is_one_line_spec_error(raw, field):
    with pytest.raises(SpecError) as err:
        storage_system(raw)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_cluster_without_storage_asks_for_one(make_spec):
    spec = make_spec(job={"gpus": 8, "tp": 8}, cluster="dgx-h100-superpod", model="llama3-8b")
    with pytest.raises(SpecError, match="names no storage preset"):
        spec_storage(spec)


def test_d2h_rate_grand_teton():
    # PCIe Gen5 x16 63.0 GB/s, ~55 GB/s achieved, two GPUs per x16 link
    assert d2h_bytes_s_per_gpu("grand-teton") == pytest.approx(55e9 / 2)


def test_validation_case_rows():
    from teton.validation.cases import run_validation

    d = run_validation(["tectonic-llama3-storage"])
    rows = {r["metric"]: r for r in d["rows"]}
    assert rows["peak_write_bytes_s"]["predicted"] == pytest.approx(
        storage_system("tectonic-llama3").peak_write_bytes_s())
    assert rows["peak_write_bytes_s"]["published"] == 7e12 and rows["sustained_write_bytes_s"]["published"] == 2e12
    assert rows["sustained_write_bytes_s"]["error"] == pytest.approx(
        storage_system("tectonic-llama3").sustained_write_bytes_s() / 2e12 - 1)


def test_pcie_links_come_from_the_host_catalog():
    """DGX A100 hosts are PCIe Gen4 (31.5 GB/s per x16 link), Hopper hosts Gen5 (63 GB/s): the
    checkpoint's device->host copies and the fabric graph's GPU-NIC links both read the host."""
    from teton.hardware.hosts import HOSTS, PCIE_GEN4_X16_BYTES_S
    from teton.spec.cluster import CLUSTER_PRESETS, ClusterSpec
    from teton.topology.graph import build_fabric

    assert HOSTS["dgx-a100"].pcie_x16_bytes_s == PCIE_GEN4_X16_BYTES_S == pytest.approx(31.5e9, rel=1e-3)
    assert d2h_bytes_s_per_gpu("dgx-a100") == pytest.approx(d2h_bytes_s_per_gpu("grand-teton") / 2)
    fabric = build_fabric(ClusterSpec(**CLUSTER_PRESETS["dgx-a100-superpod"]))
    from teton.topology.graph import PCIE

    assert set(fabric.link_capacity_bytes_s[fabric.link_layer == PCIE].tolist()) == {PCIE_GEN4_X16_BYTES_S}


@pytest.mark.parametrize("field", ["ssd_write_gbytes_s", "server_nic_gbps", "metadata_ops_s_per_node",
                                   "op_latency_us"])
def test_storage_rejects_infinite_values(field):
    """``--set storage.ssd_write_gbytes_s=inf`` was accepted and --json printed ``Infinity``
    (not JSON)."""
    with pytest.raises(SpecError, match=f"storage.{field}"):
        storage_system({"preset": "tectonic-llama3", field: math.inf})
