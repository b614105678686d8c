"""A cluster: hosts with an NVLink domain, and a layered backend fabric.

Each fabric layer is a *domain* of GPUs under one switch tier (rack under an RTSW, pod under the
CTSW spine, the whole building under the ATSWs). Traffic that leaves a domain climbs to the next
tier through uplinks whose capacity is the domain's injection bandwidth divided by
``oversubscription``; a path that turns around at a tier pays that tier's hop latency on the way
up and down. This layered view is what the analytical (alpha-beta) network model needs; the
explicit switch graph is built from the same fields by ``teton.topology`` builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from teton.errors import SpecError
from teton.hardware import GPU, GPUS, HOSTS, NIC, NICS, Host, efficiency_for
from teton.hardware.bounds import catalog_slot
from teton.hardware.hosts import nic_pcie_problem
from teton.spec.fields import MAX_GPUS, Section


class FabricLayer(Section):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    switch: str = "switch"
    span_gpus: int = Field(gt=0, description="GPUs in one domain of this layer")
    oversubscription: float = Field(default=1.0, ge=1.0, description="down:up capacity leaving a domain")
    hop_latency_us: float = Field(default=1.0, ge=0, description="port-to-port latency of this layer's switches, us")
    link_latency_us: float = Field(default=0.0, ge=0, le=100_000,
                                   description="propagation of the links that join this layer's domains, one way, "
                                               "us (fibre ~ 5 us per km: inter-building links)")


def path_latency_s(layers: Sequence[FabricLayer], tier: int) -> float:
    """One-way switch and cable latency of a path that turns around at fabric tier ``tier``
    (0: the leaf): it passes each switch below the turn twice (up and down) and the turning switch
    once, and crosses the cables into every tier up to the turn twice:
    2 sum_{i<t} hop_i + hop_t + 2 sum_{i<=t} link_i (the NIC's latency is the caller's)."""
    below = sum(layer.hop_latency_us for layer in layers[:tier])
    cables = sum(layer.link_latency_us for layer in layers[:tier + 1])
    return (2 * below + layers[tier].hop_latency_us + 2 * cables) * 1e-6


class ClusterSpec(Section):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = "custom"
    host: str | Host = Field(default="grand-teton", description="the GPU server: a host preset, a file or a mapping "
                                                                "(the host schema: docs/hardware.md)")
    hosts: int = Field(gt=0, le=MAX_GPUS)
    gpu: str | GPU | None = Field(default=None, description="override the host's GPU: a GPU preset, a file or a "
                                                            "mapping (the GPU schema: docs/hardware.md)")
    backend_nic: str | NIC | None = Field(default=None, description="override the host's backend NIC: a NIC preset, "
                                                                    "a file or a mapping")
    nvlink_domain_gpus: int | None = Field(
        default=None, gt=0, le=MAX_GPUS, description="GPUs in one NVLink (scale-up) domain; default: the host's "
                                                     "(NVL72: 72, NVL36: 36); a multiple of the host's GPUs")
    topology: Literal["clos", "fat-tree", "rail-optimized"] = "clos"
    fabric_planes: int = Field(
        default=1, ge=1, le=8, description="independent backend fabric planes the GPUs' NIC ports spread over (DGX "
                                           "B300 Spectrum-X: 2); with 2 or more a switch or cable failure takes one "
                                           "plane down and the job runs on the others instead of stopping")
    routing: Literal["ecmp", "e-ecmp", "pinned", "adaptive"] = Field(
        default="e-ecmp", description="how the fabric's switches pick paths, the flow model's default for "
                                      "network.routing: e-ecmp (RoCE with QP hashing, Meta's), ecmp, pinned "
                                      "(destination-based tables), adaptive (InfiniBand adaptive routing)")
    layers: tuple[FabricLayer, ...]
    storage: str | None = None  # storage preset that checkpoints land on
    frontend_oversubscription: float = Field(default=1.0, ge=1.0)
    # overrides of hardware.efficiency fields, the in-situ parameters, and profile: in_situ | burst
    efficiency: dict[str, float | str] = Field(default_factory=dict)
    # Coefficient of variation of sustained per-GPU throughput across the cluster's GPUs (power,
    # thermals, silicon): a synchronous job runs at the pace of its slowest GPU. 0 = identical GPUs.
    gpu_speed_cv: float = Field(default=0.0, ge=0.0, lt=0.5)
    step_jitter_cv: float = Field(
        default=0.01, ge=0.0, lt=0.5,
        description="coefficient of variation of a rank's step time from step to step (clocks, thermals, host "
                    "noise): a synchronous step waits for the slowest of its ranks, the stragglers line "
                    "(teton.engine.scale); 0 = no jitter")
    description: str = ""

    @field_validator("host", "gpu", "backend_nic", mode="before")
    @classmethod
    def _hardware(cls, value: Any, info) -> Any:
        if value is None and info.field_name != "host":
            return None
        catalog, model, kind = {"host": (HOSTS, Host, "a host"), "gpu": (GPUS, GPU, "a GPU"),
                                "backend_nic": (NICS, NIC, "a NIC")}[info.field_name]
        return catalog_slot(value, catalog, model, f"cluster.{info.field_name}", kind)

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        if self.backend_nic is not None:
            problem = nic_pcie_problem(self.nic, self.host_spec.pcie_x16_bytes_s)
            if problem:
                raise SpecError("cluster.backend_nic", self.nic.name, problem)
        from teton.hardware.efficiency import with_overrides

        with_overrides(efficiency_for(self.gpu_spec), self.efficiency)  # unknown keys / bad values
        spans = [layer.span_gpus for layer in self.layers]
        if not spans:
            raise SpecError("cluster.layers", [], "needs at least one fabric layer")
        g = self.host_spec.gpus
        d = self.domain_gpus
        if d % g:
            raise SpecError("cluster.nvlink_domain_gpus", d, f"must be a multiple of the host's {g} GPUs")
        if self.gpus % d:
            raise SpecError("cluster.nvlink_domain_gpus", d, f"must divide the cluster's {self.gpus:,} GPUs "
                            f"({self.hosts:,} hosts x {g}): whole domains only")
        prev = g
        for i, s in enumerate(spans):
            if s % prev:
                raise SpecError(f"cluster.layers[{i}].span_gpus", s,
                                f"must be a multiple of the layer below ({prev} GPUs)")
            prev = s
        if spans[-1] < self.gpus:
            raise SpecError("cluster.layers[-1].span_gpus", spans[-1],
                            f"the top layer must span all {self.gpus} GPUs")
        return self

    @property
    def host_spec(self) -> Host:
        return HOSTS[self.host] if isinstance(self.host, str) else self.host

    @property
    def gpu_spec(self) -> GPU:
        if self.gpu is None:
            return self.host_spec.gpu_spec
        return GPUS[self.gpu] if isinstance(self.gpu, str) else self.gpu

    @property
    def nic(self) -> NIC:
        if self.backend_nic is None:
            return self.host_spec.backend_nic_spec
        return NICS[self.backend_nic] if isinstance(self.backend_nic, str) else self.backend_nic

    @property
    def gpus_per_host(self) -> int:
        return self.host_spec.gpus

    @property
    def domain_gpus(self) -> int:
        """GPUs in one NVLink domain: ``nvlink_domain_gpus``, else the host's."""
        return self.nvlink_domain_gpus or self.host_spec.domain_gpus

    @property
    def nics_per_domain(self) -> int:
        """Backend NICs in one NVLink domain."""
        return self.host_spec.backend_nics * (self.domain_gpus // self.host_spec.gpus)

    @property
    def gpus(self) -> int:
        return self.hosts * self.host_spec.gpus

    @property
    def nic_bytes_s_per_gpu(self) -> float:
        h = self.host_spec
        return self.nic.bytes_s * h.backend_nics / h.gpus


def _meta_clos(name: str, desc: str, **extra) -> dict:
    return dict(
        name=name, host="grand-teton", hosts=3072, topology="clos", description=desc,
        storage="tectonic-llama3",
        layers=[
            # Llama 3 paper §3.3.3: 16 GPUs (2 servers) per rack behind one Minipack2 RTSW;
            # 192 racks per pod (3,072 GPUs) with full bisection; 8 pods joined by aggregation
            # switches at 1:7. Hop latencies: Tomahawk-4 RTSW ~ 1 us (Broadcom TH4 brief);
            # Arista 7800R3 (Jericho2, deep-buffer VOQ) CTSW/ATSW ~ 4 us (Arista 7800R3 datasheet
            # lists 3.8 us port-to-port for 400G).
            dict(name="rack", switch="rtsw", span_gpus=16, oversubscription=1.0, hop_latency_us=1.0),
            dict(name="pod", switch="ctsw", span_gpus=3072, oversubscription=7.0, hop_latency_us=4.0),
            dict(name="cluster", switch="atsw", span_gpus=24576, oversubscription=1.0, hop_latency_us=4.0),
        ],
        **extra,
    )


# NVIDIA Quantum InfiniBand switches (QM8700 HDR, QM9700 NDR; Quantum-X800 Q3400 XDR taken alike,
# ASSUMPTION): < 130 ns port-to-port (QM9700 datasheet)
QUANTUM_HOP_LATENCY_US = 0.13


# InfiniBand switches route by the subnet manager's forwarding tables or, with adaptive routing on,
# per packet over the least-loaded equal-cost port: no 5-tuple hashing. NVIDIA's DGX SuperPOD
# reference architectures run the compute fabric with adaptive routing, and NCCL's IB transport
# takes it where the subnet manager enables it. ASSUMPTION for the IB presets that publish no
# routing (Meta's IB cluster among them): adaptive.
IB_ROUTING = "adaptive"


def _infiniband(switch: str, **spans: int) -> list[dict]:
    """Non-blocking InfiniBand tiers of ``switch``, lowest first: ``name=span_gpus`` each."""
    return [dict(name=name, switch=switch, span_gpus=span, oversubscription=1.0,
                 hop_latency_us=QUANTUM_HOP_LATENCY_US) for name, span in spans.items()]


CLUSTER_PRESETS: dict[str, dict] = {
    "meta-roce-24k": _meta_clos(
        "meta-roce-24k",
        "Meta 24,576 x H100 RoCE cluster (Arista 7800 CTSW/ATSW, Minipack2 RTSW), 8 pods of 3,072 at 1:7"),
    # Meta's InfiniBand twin: NVIDIA Quantum-2 NDR 400G, "optimized for full-bisection bandwidth"
    # (Meta 2024 blog). Three-tier fat tree of 64-port QM9700 switches: 32 GPUs per leaf
    # (32 down / 32 up), 1,024 GPUs per spine block, core above; ~ 0.13 us per switch hop
    # (QM9700 datasheet: < 130 ns port-to-port).
    "meta-ib-24k": dict(
        name="meta-ib-24k", host="grand-teton", hosts=3072, topology="fat-tree", storage="tectonic-llama3",
        description="Meta 24,576 x H100 InfiniBand (Quantum-2 NDR) cluster, full bisection",
        routing=IB_ROUTING, layers=_infiniband("qm9700", leaf=32, spine=1_024, core=24_576)),
    # Meta RSC (2022 announcement): 2,000 DGX A100 = 16,000 A100, NVIDIA Quantum 200 Gb/s HDR
    # InfiniBand, two-level Clos with no oversubscription. QM8700 (40 ports): 20 down / 20 up.
    "meta-rsc-16k": dict(
        name="meta-rsc-16k", host="dgx-a100", hosts=2000, topology="fat-tree",
        description="Meta Research SuperCluster: 16,000 x A100, 200G HDR InfiniBand, non-blocking",
        routing=IB_ROUTING, layers=_infiniband("qm8700", leaf=160, spine=16_000)),
    # NVIDIA DGX SuperPOD (A100) reference architecture: scalable units of 20 DGX A100,
    # 140 nodes (1,120 GPUs), rail-optimised HDR 200G, full fat tree.
    "dgx-a100-superpod": dict(
        name="dgx-a100-superpod", host="dgx-a100", hosts=140, topology="rail-optimized",
        description="NVIDIA DGX SuperPOD, 140 x DGX A100, rail-optimised 200G HDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("qm8700", su=160, pod=1_120)),
    # Selene (NVIDIA, Top500 2020-21): 560 DGX A100 nodes (4,480 GPUs) as four DGX SuperPODs of
    # 140 nodes, rail-optimised HDR 200G InfiniBand, full fat tree (the MT-NLG 530B cluster).
    "selene": dict(
        name="selene", host="dgx-a100", hosts=560, topology="rail-optimized",
        description="NVIDIA Selene, 560 x DGX A100 (four SuperPODs), rail-optimised 200G HDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("qm8700", su=160, pod=1_120, cluster=4_480)),
    # IDRIS Jean Zay gpu_p5 (BLOOM 176B; bigscience tr11 README): 52 HPE Apollo 6500 nodes of 8 x A100
    # 80GB, 4 x 100 Gb/s Omni-Path per node, a "fully dedicated subnet" for NCCL. Fat tree of Omni-Path
    # edge switches (4 nodes, 16 links, 32 GPUs each) under a core: ASSUMPTION for the tiers,
    # non-blocking; ~ 0.11 us per switch hop (Intel Omni-Path Edge Switch 100 series datasheet).
    # Routing: the fabric manager's destination-based tables (ASSUMPTION: static, "pinned").
    "jean-zay-a100": dict(
        name="jean-zay-a100", host="apollo-6500-a100", hosts=52, topology="fat-tree", routing="pinned",
        description="IDRIS Jean Zay A100 partition (BLOOM): 416 x A100 80GB, 4 x 100G Omni-Path per node",
        layers=[
            dict(name="edge", switch="opa-edge", span_gpus=32, oversubscription=1.0, hop_latency_us=0.11),
            dict(name="core", switch="opa-core", span_gpus=416, oversubscription=1.0, hop_latency_us=0.11),
        ]),
    # NVIDIA DGX SuperPOD (H100) reference architecture: 4 scalable units of 32 DGX H100
    # (1,024 GPUs), rail-optimised NDR 400G, full fat tree.
    "dgx-h100-superpod": dict(
        name="dgx-h100-superpod", host="dgx-h100", hosts=128, topology="rail-optimized",
        description="NVIDIA DGX SuperPOD, 128 x DGX H100, rail-optimised 400G NDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("qm9700", su=256, pod=1_024)),
    # The same scalable units joined by a third (core) tier of QM9700 switches: 1,024 DGX H100 (8,192
    # GPUs), full bisection, as NVIDIA's larger H100 clusters (Eos: 576 nodes) are built; the
    # Megatron-LM weak-scaling runs used up to 6,144 H100s.
    "dgx-h100-superpod-8k": dict(
        name="dgx-h100-superpod-8k", host="dgx-h100", hosts=1024, topology="rail-optimized",
        description="DGX H100 scalable units under a core tier: 8,192 x H100, rail-optimised 400G NDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("qm9700", su=256, pod=1_024, core=8_192)),
    # NVIDIA DGX SuperPOD (B200) reference architecture: scalable units of 32 DGX B200 (256 GPUs),
    # rail-optimised 400G NDR compute fabric (8 x ConnectX-7 per node), full fat tree; 4 SUs.
    "dgx-b200-superpod": dict(
        name="dgx-b200-superpod", host="dgx-b200", hosts=128, topology="rail-optimized",
        description="NVIDIA DGX SuperPOD, 128 x DGX B200, rail-optimised 400G NDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("qm9700", su=256, pod=1_024)),
    # NVIDIA DGX SuperPOD with DGX GB200 reference architecture (network fabrics): scalable units
    # of 8 NVL72 racks (576 GPUs), up to 16 SUs (128 racks, 9,216 GPUs). Compute fabric NDR 400G,
    # rail-aligned per rack: 4 rails (one ConnectX-7 per GPU of a tray), a leaf per (rack, rail)
    # with the rack's 18 trays below it; spine-leaf groups per SU, non-blocking; core groups above.
    "gb200-nvl72-superpod": dict(
        name="gb200-nvl72-superpod", host="gb200-nvl72", hosts=2304, topology="rail-optimized",
        description="NVIDIA DGX SuperPOD GB200: 128 NVL72 racks (9,216 GPUs), 400G NDR InfiniBand per GPU",
        routing=IB_ROUTING, layers=_infiniband("qm9700", rack=72, su=576, core=9_216)),
    # The GB300 NVL72 racks on the same SuperPOD layout with 800G XDR (Quantum-X800, 144 x 800G;
    # DGX SuperPOD B300 XDR RA). ASSUMPTION: the GB200 SU shape carried over; port-to-port
    # latency as Quantum-2.
    "gb300-nvl72-superpod": dict(
        name="gb300-nvl72-superpod", host="gb300-nvl72", hosts=2304, topology="rail-optimized",
        description="GB300 NVL72 SuperPOD-style: 128 racks (9,216 GPUs), 800G XDR InfiniBand per GPU",
        routing=IB_ROUTING, layers=_infiniband("q3400", rack=72, su=576, core=9_216)),
    # NVIDIA DGX SuperPOD with DGX B300, XDR InfiniBand RA: SUs of 72 nodes (576 GPUs), 18 SUs
    # (9,216 GPUs), 800G ConnectX-8 per GPU, rail-optimised, non-blocking.
    "dgx-b300-superpod": dict(
        name="dgx-b300-superpod", host="dgx-b300", hosts=1152, topology="rail-optimized",
        description="NVIDIA DGX SuperPOD B300: 1,152 x DGX B300 (9,216 GPUs), rail-optimised 800G XDR InfiniBand",
        routing=IB_ROUTING, layers=_infiniband("q3400", su=576, core=9_216)),
    # DeepSeek-V3's H800 cluster (DeepSeek-V3 technical report, arXiv 2412.19437, Sec. 3.1: 2,048
    # H800, 8 per node on NVLink / NVSwitch, InfiniBand between nodes): 256 HGX H800 nodes. Fabric
    # (Liu et al., "Insights into DeepSeek-V3", arXiv 2505.09343, multi-plane fat tree): each of a
    # node's eight GPU-NIC pairs (400G IB) on its own plane, each plane a two-layer fat tree of 64-port
    # 400G switches (32 down / 32 up per leaf: 32 nodes under a leaf, 256 GPUs per leaf group over the
    # 8 planes). Traffic between planes crosses NVLink inside the node first (rail-optimized here: the
    # analytical and flow models see one leaf per (group, rail)). ASSUMPTION: non-blocking, Quantum-2
    # port-to-port latency.
    "deepseek-h800-2k": dict(
        name="deepseek-h800-2k", host="hgx-h800", hosts=256, topology="rail-optimized", fabric_planes=8,
        description="DeepSeek-V3's cluster: 2,048 x H800 (NVLink 400 GB/s), 400G InfiniBand per GPU, "
                    "8-plane two-layer fat tree",
        routing=IB_ROUTING, layers=_infiniband("qm9700", leaf=256, spine=2_048)),
    # A Meta-style GB200 cluster: Catalina NVL36x2 pods (72-GPU NVLink domains) on an 800G RoCE
    # fabric shaped as the Llama 3 clusters (Llama 3 paper 3.3.3): one RTSW tier per pod, AI zones
    # of 64 pods with full bisection, zones joined at 1:7. ASSUMPTION throughout: Meta has
    # published no GB200 fabric; 36,864 GPUs (512 pods, 8 zones).
    "meta-gb200-roce": dict(
        name="meta-gb200-roce", host="catalina", hosts=9216, topology="clos",
        description="Meta-style GB200 (Catalina NVL36x2) on 800G RoCE: 512 pods of 72, zones of 4,608 at 1:7",
        layers=[
            dict(name="pod", switch="rtsw", span_gpus=72, oversubscription=1.0, hop_latency_us=1.0),
            dict(name="zone", switch="ctsw", span_gpus=4608, oversubscription=7.0, hop_latency_us=4.0),
            dict(name="cluster", switch="atsw", span_gpus=36864, oversubscription=1.0, hop_latency_us=4.0),
        ]),
    # Several buildings of Meta's H100 design joined into one training cluster (131,072 GPUs):
    # racks of 16 behind an RTSW, pods of 4,096 with full bisection, buildings of 8 pods whose
    # ATSWs leave the pod at 1:7 (as the 24K clusters), and a campus tier between 4 buildings.
    # ASSUMPTIONS, labelled: the building's uplinks to the campus spine at 1:4 of its injection
    # bandwidth, and 2 km of fibre between buildings (~ 5 us per km one way: light in glass at
    # ~ 2e8 m/s).
    "meta-h100-campus-131k": dict(
        name="meta-h100-campus-131k", host="grand-teton", hosts=16384, topology="clos",
        storage="tectonic-llama3",
        description="4 buildings of 32,768 H100 (Meta's RoCE design), joined at 1:4 over 2 km of fibre",
        layers=[
            dict(name="rack", switch="rtsw", span_gpus=16, oversubscription=1.0, hop_latency_us=1.0),
            dict(name="pod", switch="ctsw", span_gpus=4096, oversubscription=7.0, hop_latency_us=4.0),
            dict(name="building", switch="atsw", span_gpus=32768, oversubscription=4.0, hop_latency_us=4.0),
            dict(name="campus", switch="campus-spine", span_gpus=131072, oversubscription=1.0,
                 hop_latency_us=4.0, link_latency_us=10.0),
        ]),
}
