"""NICs and hosts (GPU servers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NIC:
    name: str
    gbps: float  # line rate, Gb/s
    latency_us: float  # one-way NIC + PCIe + RDMA software latency

    @property
    def bytes_s(self) -> float:
        return self.gbps * 1e9 / 8


NICS: dict[str, NIC] = {
    # NVIDIA ConnectX-6 VPI datasheet: 200 Gb/s HDR IB / 200GbE; ~ 0.6 us port latency; ib_write_lat
    # ~ 1.5-2 us end to end.
    "cx6-200g": NIC("cx6-200g", 200, 2.0),
    # NVIDIA ConnectX-7 datasheet: 400 Gb/s NDR IB / 400GbE RoCE.
    "cx7-400g": NIC("cx7-400g", 400, 2.0),
    # Intel Omni-Path Host Fabric Interface 100 series datasheet: 100 Gb/s per port; ~ 1 us MPI
    # latency end to end.
    "opa-100g": NIC("opa-100g", 100, 1.0),
    # NVIDIA ConnectX-8 SuperNIC datasheet: 800 Gb/s XDR IB / 800GbE.
    "cx8-800g": NIC("cx8-800g", 800, 2.0),
}


# PCIe x16, one direction: GT/s x 16 lanes x 128b/130b / 8 (PCI-SIG PCIe 4.0 / 5.0 base specifications)
PCIE_GEN4_X16_BYTES_S = 16e9 * 16 * 128 / 130 / 8  # 31.5 GB/s
PCIE_GEN5_X16_BYTES_S = 32e9 * 16 * 128 / 130 / 8  # 63.0 GB/s


@dataclass(frozen=True)
class Host:
    name: str
    gpu: str
    gpus: int
    backend_nic: str
    backend_nics: int
    frontend_nic: str
    frontend_nics: int
    host_power_w: float  # CPUs, DRAM, NICs, fans, SSDs: system max minus GPUs' TDP
    # each GPU's x16 link (through a PCIe switch shared with its NIC and towards a CPU), and how
    # many GPUs share one link to host memory
    pcie_x16_bytes_s: float = PCIE_GEN5_X16_BYTES_S
    gpus_per_pcie_link: int = 2


HOSTS: dict[str, Host] = {
    # PCIe: Grand Teton has 4 PCIe Gen5 switches, each with 2 GPUs and one x16 link towards a CPU
    # (Lockwood, "Meta's H100 clusters"; OCP Grand Teton design); DGX H100 / HGX H200 / DGX B200
    # likewise 4 switches with 2 GPUs each (DGX H100 user guide block diagram).
    # Grand Teton (OCP 2022; Meta GenAI blog 2024; Lockwood "Meta's H100 clusters"): 8 x H100
    # SXM 700 W on NVLink, 4 PCIe Gen5 switches each with 2 x 400G backend NICs (one per GPU),
    # 2 CPUs each with one 400G frontend NIC. Non-GPU power: 10.2 kW max (DGX H100-class
    # chassis) minus 8 x 700 W GPUs = 4.6 kW.
    "grand-teton": Host("grand-teton", "h100-sxm", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # NVIDIA DGX A100 user guide: 8 x A100 80GB, 8 x ConnectX-6 200G (HDR) compute + 2 storage,
    # 6.5 kW max system power; 4 PCIe Gen4 switches, 2 GPUs each.
    "dgx-a100": Host("dgx-a100", "a100-80gb", 8, "cx6-200g", 8, "cx6-200g", 2, 3300, PCIE_GEN4_X16_BYTES_S),
    # HPE Apollo 6500 Gen10 Plus as IDRIS's Jean Zay gpu_p5 partition (BLOOM's, bigscience tr11
    # README: "8 GPUs per node Using NVLink 4 inter-gpu connects, 4 OmniPath links"): 8 x A100 80GB
    # SXM4, 4 x 100 Gb/s Omni-Path, 2 AMD EPYC CPUs, PCIe Gen4. Non-GPU power: ASSUMPTION, as DGX A100.
    "apollo-6500-a100": Host("apollo-6500-a100", "a100-80gb", 8, "opa-100g", 4, "opa-100g", 1, 3300,
                             PCIE_GEN4_X16_BYTES_S),
    # NVIDIA DGX H100 user guide: 8 x H100 SXM, 8 x 400G ConnectX-7 compute ports (4 OSFP),
    # 2 x 400G storage/in-band, 10.2 kW max.
    "dgx-h100": Host("dgx-h100", "h100-sxm", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # HGX H200 8-GPU: as DGX H100 with H200 GPUs.
    "hgx-h200": Host("hgx-h200", "h200", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # NVIDIA DGX B200 datasheet: 8 x B200, 8 x 400G ConnectX-7 compute (4 OSFP), 14.3 kW max.
    "dgx-b200": Host("dgx-b200", "b200", 8, "cx7-400g", 8, "cx7-400g", 2, 6300),
}
