"""NICs and hosts (GPU servers): one schema each, for the catalog and for what a spec defines.

:class:`NIC` and :class:`Host` are the models of the catalog's entries and of a NIC or host a
spec or a file defines (``cluster.host``, ``cluster.backend_nic``: docs/hardware.md); a host's
``gpu`` and NICs are catalog names or such models themselves. A host's rules: each NIC fits its
PCIe x16 link (a NIC faster than the link it sits on cannot reach its line rate), and the GPUs
sharing one link to host memory are at most the host's GPUs.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from teton.errors import SpecError
from teton.hardware.bounds import Section, catalog_slot
from teton.hardware.gpus import GPU, GPUS


class NIC(Section):
    """One network adapter: line rate and its end-to-end latency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=80, description="the NIC's name in tables")
    gbps: float = Field(gt=0, le=100_000, description="line rate, Gb/s")
    latency_us: float = Field(ge=0, le=10_000, description="one-way NIC + PCIe + RDMA software latency, us")
    source: str = Field(default="", max_length=2000, description="where the figures come from")

    @property
    def bytes_s(self) -> float:
        return self.gbps * 1e9 / 8


NICS: dict[str, NIC] = {
    # NVIDIA ConnectX-6 VPI datasheet: 200 Gb/s HDR IB / 200GbE; ~ 0.6 us port latency; ib_write_lat
    # ~ 1.5-2 us end to end.
    "cx6-200g": NIC(name="cx6-200g", gbps=200, latency_us=2.0),
    # NVIDIA ConnectX-7 datasheet: 400 Gb/s NDR IB / 400GbE RoCE.
    "cx7-400g": NIC(name="cx7-400g", gbps=400, latency_us=2.0),
    # Intel Omni-Path Host Fabric Interface 100 series datasheet: 100 Gb/s per port; ~ 1 us MPI
    # latency end to end.
    "opa-100g": NIC(name="opa-100g", gbps=100, latency_us=1.0),
    # NVIDIA ConnectX-8 SuperNIC datasheet: 800 Gb/s XDR IB / 800GbE.
    "cx8-800g": NIC(name="cx8-800g", gbps=800, latency_us=2.0),
    # NVIDIA BlueField-3 DPU: 400 Gb/s ports; two per GB200 compute tray carry its front-end
    # (storage, in-band) traffic (NVIDIA Multi-Node NVLink tuning guide, "Understanding Your
    # Grace-Blackwell Systems").
    "bf3-400g": NIC(name="bf3-400g", gbps=400, latency_us=2.0),
}


# PCIe x16, one direction: GT/s x 16 lanes x 128b/130b / 8 (PCI-SIG PCIe 4.0 / 5.0 base specifications)
PCIE_GEN4_X16_BYTES_S = 16e9 * 16 * 128 / 130 / 8  # 31.5 GB/s
PCIE_GEN5_X16_BYTES_S = 32e9 * 16 * 128 / 130 / 8  # 63.0 GB/s
# PCI-SIG PCIe 6.0 base specification: 64 GT/s PAM4 in FLIT mode, 256-byte FLITs of which 242 bytes
# carry TLPs and DLLPs (the rest CRC and FEC)
PCIE_GEN6_X16_BYTES_S = 64e9 * 16 / 8 * 242 / 256  # 121 GB/s
MAX_HOST_GPUS = 4096  # GPUs (or NICs) in one host: 8 in an HGX board, 72 in a GB200 NVL72 rack


def nic_pcie_problem(nic: NIC, pcie_x16_bytes_s: float) -> str | None:
    """Why ``nic`` cannot sit on a PCIe x16 link of ``pcie_x16_bytes_s`` (its line rate exceeds
    the link's), or None."""
    if nic.bytes_s <= pcie_x16_bytes_s * (1 + 1e-9):
        return None
    return (f"its {nic.gbps:g} Gb/s ({nic.bytes_s / 1e9:.1f} GB/s) exceeds the host's PCIe x16 link "
            f"({pcie_x16_bytes_s / 1e9:.1f} GB/s, host pcie_x16_bytes_s); give the host a faster link "
            f"(PCIe Gen6 x16: {PCIE_GEN6_X16_BYTES_S:.4g}) or a slower NIC")


class Host(Section):
    """One GPU server: its GPUs (one NVLink domain), backend and frontend NICs, power and PCIe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=80, description="the host's name in tables")
    gpu: str | GPU = Field(description="its GPU: a catalog name, a file or a mapping (the GPU schema)")
    gpus: int = Field(gt=0, le=MAX_HOST_GPUS, description="GPUs per host: one NVLink (scale-up) domain")
    backend_nic: str | NIC = Field(description="the scale-out (compute fabric) NIC: a catalog name, a file or a mapping")
    backend_nics: int = Field(gt=0, le=MAX_HOST_GPUS, description="backend NICs per host")
    frontend_nic: str | NIC = Field(description="the frontend (storage, in-band) NIC")
    frontend_nics: int = Field(gt=0, le=MAX_HOST_GPUS, description="frontend NICs per host")
    host_power_w: float = Field(ge=0, le=1e6, description="CPUs, DRAM, NICs, fans, SSDs: system max minus the "
                                                           "GPUs' TDP, W")
    # each GPU's x16 link (through a PCIe switch shared with its NIC and towards a CPU), and how
    # many GPUs share one link to host memory
    pcie_x16_bytes_s: float = Field(default=PCIE_GEN5_X16_BYTES_S, gt=0, le=1e13,
                                    description="each GPU's (and NIC's) PCIe x16 link, one direction, bytes/s")
    gpus_per_pcie_link: int = Field(default=2, gt=0, le=MAX_HOST_GPUS,
                                    description="GPUs sharing one link to host memory (a PCIe switch's, a Grace "
                                                "CPU's NVLink-C2C)")
    cpu_link_bytes_s: float | None = Field(
        default=None, gt=0, le=1e13, description="the link to host (CPU) memory those GPUs share, one direction, "
                                                 "bytes/s (Grace: NVLink-C2C); default: pcie_x16_bytes_s")
    nvlink_domain_gpus: int | None = Field(
        default=None, gt=0, le=1_000_000, description="GPUs in one NVLink (scale-up) domain: the host's own GPUs "
                                                      "(default) or a multiple of them joined by NVLink switch "
                                                      "trays (GB200 NVL72: 18 trays of 4 GPUs)")
    source: str = Field(default="", max_length=2000, description="where the figures come from")

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, value: Any) -> Any:
        return catalog_slot(value, GPUS, GPU, "gpu", "a GPU")

    @field_validator("backend_nic", "frontend_nic", mode="before")
    @classmethod
    def _nic(cls, value: Any, info) -> Any:
        return catalog_slot(value, NICS, NIC, info.field_name, "a NIC")

    @model_validator(mode="after")
    def _rules(self) -> Host:
        if self.gpus_per_pcie_link > self.gpus:
            raise SpecError("gpus_per_pcie_link", self.gpus_per_pcie_link, f"at most the host's {self.gpus} GPUs")
        if self.nvlink_domain_gpus is not None and self.nvlink_domain_gpus % self.gpus:
            raise SpecError("nvlink_domain_gpus", self.nvlink_domain_gpus,
                            f"must be a multiple of the host's {self.gpus} GPUs (whole hosts join a domain)")
        for field in ("backend_nic", "frontend_nic"):
            problem = nic_pcie_problem(getattr(self, f"{field}_spec"), self.pcie_x16_bytes_s)
            if problem:
                raise SpecError(field, getattr(self, field) if isinstance(getattr(self, field), str)
                                else getattr(self, field).name, problem)
        return self

    @property
    def gpu_spec(self) -> GPU:
        return GPUS[self.gpu] if isinstance(self.gpu, str) else self.gpu

    @property
    def domain_gpus(self) -> int:
        """GPUs in one NVLink domain (``nvlink_domain_gpus``, default the host's GPUs)."""
        return self.nvlink_domain_gpus or self.gpus

    @property
    def cpu_copy_link_bytes_s(self) -> float:
        """The link to host memory that ``gpus_per_pcie_link`` GPUs share, one direction."""
        return self.cpu_link_bytes_s or self.pcie_x16_bytes_s

    @property
    def backend_nic_spec(self) -> NIC:
        return NICS[self.backend_nic] if isinstance(self.backend_nic, str) else self.backend_nic

    @property
    def frontend_nic_spec(self) -> NIC:
        return NICS[self.frontend_nic] if isinstance(self.frontend_nic, str) else self.frontend_nic


def _host(name: str, gpu: str, gpus: int, backend_nic: str, backend_nics: int, frontend_nic: str,
          frontend_nics: int, host_power_w: float, pcie_x16_bytes_s: float = PCIE_GEN5_X16_BYTES_S,
          **extra) -> Host:
    return Host(name=name, gpu=gpu, gpus=gpus, backend_nic=backend_nic, backend_nics=backend_nics,
                frontend_nic=frontend_nic, frontend_nics=frontend_nics, host_power_w=host_power_w,
                pcie_x16_bytes_s=pcie_x16_bytes_s, **extra)


# Grace-Blackwell compute trays: 2 Grace CPUs + 4 GPUs, each Grace joined to its 2 GPUs by
# NVLink-C2C at 900 GB/s (secondary: continuumlabs' GB200 NVL72 page; no stored NVIDIA page).
# ASSUMPTION: the 900 GB/s is both directions together and shared by the Grace's two GPUs.
GRACE_C2C_BYTES_S = 450 * 1e9


HOSTS: dict[str, Host] = {
    # PCIe: Grand Teton has 4 PCIe Gen5 switches, each with 2 GPUs and one x16 link towards a CPU
    # (Lockwood, "Meta's H100 clusters"; OCP Grand Teton design); DGX H100 / HGX H200 / DGX B200
    # likewise 4 switches with 2 GPUs each (DGX H100 user guide block diagram).
    # Grand Teton (OCP 2022; Meta GenAI blog 2024; Lockwood "Meta's H100 clusters"): 8 x H100
    # SXM 700 W on NVLink, 4 PCIe Gen5 switches each with 2 x 400G backend NICs (one per GPU),
    # 2 CPUs each with one 400G frontend NIC. Non-GPU power: 10.2 kW max (DGX H100-class
    # chassis) minus 8 x 700 W GPUs = 4.6 kW.
    "grand-teton": _host("grand-teton", "h100-sxm", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # NVIDIA DGX A100 user guide: 8 x A100 80GB, 8 x ConnectX-6 200G (HDR) compute + 2 storage,
    # 6.5 kW max system power; 4 PCIe Gen4 switches, 2 GPUs each.
    "dgx-a100": _host("dgx-a100", "a100-80gb", 8, "cx6-200g", 8, "cx6-200g", 2, 3300, PCIE_GEN4_X16_BYTES_S),
    # HPE Apollo 6500 Gen10 Plus as IDRIS's Jean Zay gpu_p5 partition (BLOOM's, bigscience tr11
    # README: "8 GPUs per node Using NVLink 4 inter-gpu connects, 4 OmniPath links"): 8 x A100 80GB
    # SXM4, 4 x 100 Gb/s Omni-Path, 2 AMD EPYC CPUs, PCIe Gen4. Non-GPU power: ASSUMPTION, as DGX A100.
    "apollo-6500-a100": _host("apollo-6500-a100", "a100-80gb", 8, "opa-100g", 4, "opa-100g", 1, 3300,
                             PCIE_GEN4_X16_BYTES_S),
    # NVIDIA DGX H100 user guide: 8 x H100 SXM, 8 x 400G ConnectX-7 compute ports (4 OSFP),
    # 2 x 400G storage/in-band, 10.2 kW max.
    "dgx-h100": _host("dgx-h100", "h100-sxm", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # HGX H200 8-GPU: as DGX H100 with H200 GPUs.
    "hgx-h200": _host("hgx-h200", "h200", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # HGX H800 8-GPU as DeepSeek ran it: 8 x H800 on NVLink / NVSwitch, one 400 Gb/s InfiniBand
    # NIC per GPU (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.1: "each node containing
    # 8 GPUs connected by NVLink and NVSwitch ... InfiniBand interconnects"; Liu et al., "Insights
    # into DeepSeek-V3", arXiv 2505.09343: eight 400G IB NICs per node). ConnectX-7, PCIe Gen5,
    # frontend NICs and non-GPU power as DGX H100: ASSUMPTION.
    "hgx-h800": _host("hgx-h800", "h800", 8, "cx7-400g", 8, "cx7-400g", 2, 4600),
    # NVIDIA DGX B200 datasheet: 8 x B200, 8 x 400G ConnectX-7 compute (4 OSFP), 14.3 kW max.
    "dgx-b200": _host("dgx-b200", "b200", 8, "cx7-400g", 8, "cx7-400g", 2, 6300),
    # DGX B300 (NVIDIA LLM benchmarking collection README, reference architectures): 8 x B300,
    # 8 x 800 Gb/s ConnectX-8 compute ports; ConnectX-8 sits on PCIe Gen6. Non-GPU power:
    # ASSUMPTION, the DGX B300 SuperPOD RA's "> 50 kW per rack" of 4 systems (12.5 kW each) minus
    # 8 x 1,100 W; frontend as DGX B200.
    "dgx-b300": _host("dgx-b300", "b300", 8, "cx8-800g", 8, "cx7-400g", 2, 3700, PCIE_GEN6_X16_BYTES_S),
    # GB200 NVL72 compute tray (DGX GB200 user guide; DGX SuperPOD GB200 RA, network fabrics): 4 x
    # GB200 GPUs + 2 Grace, one 400G ConnectX-7 per GPU (4 compute rails), 2 BlueField-3 for the
    # front end; 18 trays and 9 NVLink switch trays make one 72-GPU NVLink domain. Non-GPU power:
    # ASSUMPTION, a rack's ~120 kW (secondary reports) minus 72 x 1,200 W, over 18 trays (switch
    # trays and power conversion included).
    "gb200-nvl72": _host("gb200-nvl72", "gb200", 4, "cx7-400g", 4, "bf3-400g", 2, 1870,
                         cpu_link_bytes_s=GRACE_C2C_BYTES_S, nvlink_domain_gpus=72),
    # GB300 NVL72 compute tray (NVIDIA Enterprise RA, NVL72 AI factory, components): 4 x GB300 + 2
    # Grace, 4 x ConnectX-8 (800G, PCIe Gen6), 72-GPU domain; rack up to 142 kW (8 power shelves x
    # 33 kW). Non-GPU power: 142 kW minus 72 x 1,400 W over 18 trays. Front end as GB200: ASSUMPTION.
    "gb300-nvl72": _host("gb300-nvl72", "gb300", 4, "cx8-800g", 4, "bf3-400g", 2, 2290, PCIE_GEN6_X16_BYTES_S,
                         cpu_link_bytes_s=GRACE_C2C_BYTES_S, nvlink_domain_gpus=72),
    # Meta's Catalina (OCP 2024): GB200 in an NVL36x2 pod, two ORv3 racks of 36 GPUs forming one
    # 72-GPU NVLink domain (~120 kW the pod). ASSUMPTION: 800G backend NICs (ConnectX-8, PCIe
    # Gen6), one per GPU as on Grand Teton; Meta has published no Catalina NIC figure.
    "catalina": _host("catalina", "gb200", 4, "cx8-800g", 4, "bf3-400g", 2, 1870, PCIE_GEN6_X16_BYTES_S,
                      cpu_link_bytes_s=GRACE_C2C_BYTES_S, nvlink_domain_gpus=72),
}
