"""Storage hardware constants: SSDs, network goodput, PCIe, FUSE.

Every figure names its public source. Where Meta has not published a figure (the Sierra Point
server's SSD count and NIC, Tectonic's erasure code and metadata rate) the constant is marked
ASSUMPTION, says what it was chosen from, and can be overridden in a spec's ``storage:`` section.
"""

from __future__ import annotations

from dataclasses import dataclass

from teton.hardware.hosts import HOSTS, PCIE_GEN5_X16_BYTES_S, Host
from teton.units import GB, MIB, TB


@dataclass(frozen=True)
class SSD:
    """One NVMe drive: sequential bandwidths (bytes/s), capacity and rated endurance."""

    name: str
    read_bytes_s: float
    write_bytes_s: float
    capacity_bytes: float
    dwpd: float  # rated drive writes per day over the warranty period


SSDS: dict[str, SSD] = {
    # Samsung PM9A3 (PCIe Gen4 x4, E1.S / U.2) data sheet, 7.68 TB model: sequential read
    # ~ 6.7 GB/s, sequential write ~ 4.0 GB/s, endurance 1 DWPD over 5 years. Meta's blog says
    # Tectonic and Hammerspace run on "YV3 Sierra Point servers with the latest high-capacity
    # E1.S SSD"; 7.68 TB is the largest common E1.S capacity point of that generation.
    "e1s-7.68tb": SSD("e1s-7.68tb", 6.7 * GB, 4.0 * GB, 7.68 * TB, 1.0),
    # Samsung PM1743 (PCIe Gen5 x4) data sheet, 7.68 TB: ~ 13 GB/s read, ~ 6.6 GB/s write, 1 DWPD.
    "gen5-7.68tb": SSD("gen5-7.68tb", 13.0 * GB, 6.6 * GB, 7.68 * TB, 1.0),
    # Solidigm D7-P5520 (PCIe Gen4) data sheet, 3.84 TB: ~ 7.1 GB/s read, ~ 4.2 GB/s write, 1 DWPD.
    # Used for the GPU hosts' local NVMe (Grand Teton carries 2 NVMe drives per PCIe switch,
    # 8 per host: Lockwood, "Meta's H100 clusters"; the drive model is not published).
    "gen4-3.84tb": SSD("gen4-3.84tb", 7.1 * GB, 4.2 * GB, 3.84 * TB, 1.0),
}


def tcp_goodput_fraction(mtu_bytes: int = 1500, ipv6: bool = True) -> float:
    """Payload bytes / wire bytes of a full-size TCP segment on Ethernet.

    Wire overhead per frame: preamble+SFD 8, Ethernet header 14, FCS 4, inter-frame gap 12
    (IEEE 802.3); IP header 40 (IPv6, RFC 8200) or 20 (IPv4); TCP header 20 + 12 bytes of
    timestamp option (RFC 7323, on by default in Linux). Meta's data centres run IPv6.
    1500 MTU, IPv6: 1428 / 1538 = 0.928.
    """
    ip = 40 if ipv6 else 20
    payload = mtu_bytes - ip - 20 - 12
    wire = mtu_bytes + 8 + 14 + 4 + 12
    return payload / wire


# Pinned-memory cudaMemcpy device->host reaches ~ 55 GB/s of a PCIe Gen5 x16 link's 63 GB/s on
# H100 SXM hosts (NVIDIA nvbandwidth "device_to_host_memcpy_ce" results reported for HGX H100), an
# efficiency of ~ 0.87 (TLP headers and flow-control credits); taken to hold for Gen4 too.
PCIE_D2H_EFFICIENCY = 55e9 / PCIE_GEN5_X16_BYTES_S


def d2h_bytes_s_per_gpu(host: str | Host) -> float:
    """Device->host copy rate of one GPU when every GPU of the host snapshots at once: its link to
    host memory (PCIe, or a Grace's NVLink-C2C: ``hardware.hosts``) shared by the GPUs behind it (a host, or a catalog host's
    name; an unknown name: one GPU on a Gen5 link)."""
    spec = host if isinstance(host, Host) else HOSTS.get(host)
    link, gpus_per_link = (spec.cpu_copy_link_bytes_s, spec.gpus_per_pcie_link) if spec else (PCIE_GEN5_X16_BYTES_S, 1)
    return link * PCIE_D2H_EFFICIENCY / gpus_per_link


# FUSE client. The kernel splits I/O into requests of at most max_write bytes: 128 KiB by default,
# up to 1 MiB with max_pages (Linux >= 4.20, libfuse 3 docs). Each request costs two user/kernel
# crossings and a daemon wake-up: ~ 10-20 us (Vangoor et al., "To FUSE or Not to FUSE", FAST'17,
# Sec. 5). ASSUMPTION: the per-mount streaming ceiling of a production FUSE client (daemon
# threads copying into its network stack) ~ 5 GB/s; Meta has published no figure for its Tectonic
# FUSE client. Calibrate with ``teton checkpoint --measure`` on a real mount.
FUSE_OP_BYTES = 1 * MIB
FUSE_OP_OVERHEAD_US = 15.0
FUSE_GBYTES_S_PER_HOST = 5.0
