"""The ``storage:`` part of a spec: a storage system (servers with SSDs and a NIC, redundancy,
metadata service, client) and the checkpoint policy (``storage.checkpoint``).

Model (per server, then times the server count):
    server ingress (write)  = min(ssds * ssd_write, nic_goodput)
    user write bandwidth    = servers * server ingress / write_amplification
    user read bandwidth     = servers * min(ssds * ssd_read, nic_goodput)
    write_amplification     = replicas (replication) or (k + m) / k (Reed-Solomon RS(k, m)):
                              every user byte crosses the server NICs and lands on flash that
                              many times (Tectonic clients encode and write the chunks directly,
                              Pan et al., FAST'21 Sec. 3.3).
    sustained write         = min(peak write, endurance)   with
    endurance               = servers * ssds * capacity * DWPD / 86,400 s / write_amplification,
                              the average user write rate the flash can absorb for its whole
                              rated life (a burst can run at peak; the long-run average, i.e. the
                              checkpoint frequency, cannot exceed this).
    nic_goodput             = server_nics * server_nic_gbps / 8 * TCP goodput fraction (MTU 1500).

The ``tectonic-llama3`` preset's per-server figures and how the published 7 TB/s peak and
2 TB/s sustained compare with what this model gives are documented at the preset.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from teton.errors import SpecError, closest, from_validation, unknown_field
from teton.hardware import storage as hw
from teton.spec.fields import Section
from teton.units import GB, MIB, TB


class StorageSystem(Section):
    """A storage tier that checkpoints and training data live on."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # inf would reach --json

    name: str = "custom"
    kind: Literal["distributed", "parallel-nfs", "local"] = "distributed"
    servers: int = Field(default=1, gt=0, description="storage servers (local: ignored, one per GPU host)")
    ssds_per_server: int = Field(default=1, gt=0)
    ssd: str = "e1s-7.68tb"
    ssd_read_gbytes_s: float | None = Field(default=None, gt=0)  # overrides of the SSD catalog entry
    ssd_write_gbytes_s: float | None = Field(default=None, gt=0)
    ssd_capacity_tb: float | None = Field(default=None, gt=0)
    ssd_dwpd: float | None = Field(default=None, gt=0)
    server_nic_gbps: float | None = Field(default=None, gt=0)  # None: no network hop (local tier)
    server_nics: int = Field(default=1, gt=0)
    mtu_bytes: int = Field(default=1500, ge=576, le=9216)
    redundancy: Literal["none", "replication", "erasure"] = "none"
    replicas: int = Field(default=3, gt=0)
    ec_data: int = Field(default=9, gt=0)
    ec_parity: int = Field(default=6, ge=0)
    chunk_bytes: int = Field(default=64 * MIB, gt=0)
    metadata_ops_per_chunk: int = Field(default=1, ge=0, description="Block-layer ops per chunk written/read")
    metadata_nodes: int = Field(default=1, gt=0)
    metadata_ops_s_per_node: float = Field(default=1e5, gt=0)
    metadata_ops_per_file: int = Field(default=3, ge=0, description="create + open + close")
    client: Literal["fuse", "nfs", "kernel"] = "fuse"
    client_gbytes_s_per_host: float | None = Field(default=hw.FUSE_GBYTES_S_PER_HOST, gt=0)
    client_op_bytes: int = Field(default=hw.FUSE_OP_BYTES, gt=0)
    client_op_overhead_us: float = Field(default=hw.FUSE_OP_OVERHEAD_US, ge=0)
    # ASSUMPTION: one request round trip client -> server -> client in a data centre over TCP
    # (tens of us of network and kernel, plus server software): 100 us.
    op_latency_us: float = Field(default=100.0, ge=0)
    # ASSUMPTION: small (4 KiB, cached) requests one data server answers per second: 2e5, the order
    # of single-node NFS server results in SPEC SFS-style benchmarks.
    server_ops_s: float = Field(default=2e5, gt=0)
    # ASSUMPTION: sigma of the per-host log-normal slowdown (stragglers); no figure is published for
    # Tectonic's FUSE clients. 0 turns stragglers off. See teton.storage.transfer.
    writer_jitter_sigma: float = Field(default=0.2, ge=0, le=2)
    # ASSUMPTION (no operator publishes its storage's tenant mix): None gives the other jobs the share
    # of the cluster's GPUs this job leaves to them, 1 - job GPUs / cluster GPUs (the storage serves
    # the whole cluster and every job reads and writes alike per GPU); 0 on the local tier (the job's
    # own hosts). Set 0 for a system dedicated to the job, or the share measured on a shared one.
    other_jobs_share: float | None = Field(default=None, ge=0, lt=1, description=(
        "share of the storage's bandwidth and flash write budget other jobs use; default: the cluster's "
        "GPUs outside this job as a share of its GPUs (0 on the local tier)"))
    description: str = ""

    @model_validator(mode="after")
    def _check(self) -> StorageSystem:
        if self.ssd not in hw.SSDS:
            raise SpecError("storage.ssd", self.ssd, closest(self.ssd, hw.SSDS))
        if self.kind != "local" and self.server_nic_gbps is None:
            raise SpecError("storage.server_nic_gbps", None, f"needed for a {self.kind} storage system")
        return self

    # -- per-drive and per-server figures -------------------------------------------------
    @property
    def ssd_spec(self) -> hw.SSD:
        base = hw.SSDS[self.ssd]
        return hw.SSD(
            base.name,
            self.ssd_read_gbytes_s * GB if self.ssd_read_gbytes_s else base.read_bytes_s,
            self.ssd_write_gbytes_s * GB if self.ssd_write_gbytes_s else base.write_bytes_s,
            self.ssd_capacity_tb * TB if self.ssd_capacity_tb else base.capacity_bytes,
            self.ssd_dwpd if self.ssd_dwpd else base.dwpd,
        )

    @property
    def write_amplification(self) -> float:
        if self.redundancy == "replication":
            return float(self.replicas)
        if self.redundancy == "erasure":
            return (self.ec_data + self.ec_parity) / self.ec_data
        return 1.0

    @property
    def nic_goodput_bytes_s(self) -> float:
        """Per server; infinite for the local tier (no network hop)."""
        if self.server_nic_gbps is None:
            return float("inf")
        return self.server_nics * self.server_nic_gbps * 1e9 / 8 * hw.tcp_goodput_fraction(self.mtu_bytes)

    @property
    def server_flash_write_bytes_s(self) -> float:
        return self.ssds_per_server * self.ssd_spec.write_bytes_s

    @property
    def server_flash_read_bytes_s(self) -> float:
        return self.ssds_per_server * self.ssd_spec.read_bytes_s

    @property
    def metadata_ops_s(self) -> float:
        return self.metadata_nodes * self.metadata_ops_s_per_node

    def client_bytes_s_per_host(self) -> float:
        """Streaming ceiling of one host's client, with the per-request overhead:
        1 / (1/bw + overhead/op_bytes)."""
        per_op = self.client_op_overhead_us * 1e-6 / self.client_op_bytes
        inv_bw = 1.0 / (self.client_gbytes_s_per_host * GB) if self.client_gbytes_s_per_host else 0.0
        if inv_bw + per_op == 0:
            return float("inf")
        return 1.0 / (inv_bw + per_op)

    # -- whole-system figures (distributed and parallel-NFS tiers) -----------------------
    def _servers(self, hosts: int | None = None) -> int:
        return (hosts or 1) if self.kind == "local" else self.servers

    def peak_write_bytes_s(self, hosts: int | None = None) -> float:
        per = min(self.server_flash_write_bytes_s, self.nic_goodput_bytes_s)
        return self._servers(hosts) * per / self.write_amplification

    def peak_read_bytes_s(self, hosts: int | None = None) -> float:
        return self._servers(hosts) * min(self.server_flash_read_bytes_s, self.nic_goodput_bytes_s)

    def endurance_write_bytes_s(self, hosts: int | None = None) -> float:
        s = self.ssd_spec
        return self._servers(hosts) * self.ssds_per_server * s.capacity_bytes * s.dwpd / 86_400.0 \
            / self.write_amplification

    def sustained_write_bytes_s(self, hosts: int | None = None) -> float:
        return min(self.peak_write_bytes_s(hosts), self.endurance_write_bytes_s(hosts))

    def raw_capacity_bytes(self, hosts: int | None = None) -> float:
        return self._servers(hosts) * self.ssds_per_server * self.ssd_spec.capacity_bytes

    def usable_capacity_bytes(self, hosts: int | None = None) -> float:
        return self.raw_capacity_bytes(hosts) / self.write_amplification


STORAGE_PRESETS: dict[str, dict[str, Any]] = {
    # Llama 3 storage (Llama 3 paper Sec. 3.3.1): 240 PB on 7,500 SSD servers; "sustainable
    # throughput of 2 TB/s and a peak throughput of 7 TB/s". Meta's 2024 blog: a flash-optimised
    # Tectonic behind FUSE, on YV3 Sierra Point servers with E1.S SSDs. Per-server figures
    # (not published by Meta; each is a labelled choice):
    # - ssds_per_server 4 x 7.68 TB E1.S: 240 PB / 7,500 = 32 TB per server, and 7.68 TB is the
    #   largest common E1.S capacity point (4 x 7.68 = 30.7 TB; the model's raw total is 230 PB).
    # - server_nic_gbps 12.5: ASSUMPTION. Yosemite sleds put four one-socket servers behind one
    #   OCP multi-host NIC (50 GbE on Yosemite V2, OCP Yosemite V2 design spec), 12.5 Gb/s each.
    #   This is the least certain figure; it makes each server NIC-bound (1.45 GB/s goodput vs
    #   16 GB/s of flash writes).
    # - RS(9,6) erasure coding: ASSUMPTION (production RS parameters not published; RS(9,6) is the
    #   code the Tectonic paper describes for its multi-failure-domain placement).
    # What comes out (``teton checkpoint --json`` prints it): peak write = 7,500 x 1.45 GB/s / (15/9)
    # = 6.5 TB/s (published 7 TB/s, -7 %); sustained = endurance-bound 7,500 x 4 x 7.68 TB x
    # 1 DWPD / 86,400 / (15/9) = 1.6 TB/s (published 2 TB/s, -20 %). The totals are never set.
    "tectonic-llama3": dict(
        name="tectonic-llama3", kind="distributed", servers=7500, ssds_per_server=4, ssd="e1s-7.68tb",
        server_nic_gbps=12.5, redundancy="erasure", ec_data=9, ec_parity=6,
        # ASSUMPTION: Tectonic metadata (Name/File/Block layers on ZippyDB, hash-partitioned,
        # Pan et al. FAST'21) scales with shards; 1 M ops/s taken as the cluster's aggregate rate.
        metadata_nodes=10, metadata_ops_s_per_node=1e5, chunk_bytes=64 * MIB, client="fuse",
        description="Llama 3 Tectonic: 7,500 YV3 Sierra Point servers, E1.S flash, RS(9,6), FUSE clients"),
    # Hammerspace parallel NFS (Meta 2024 blog: for interactive debugging / developer experience,
    # same YV3 Sierra Point + E1.S servers). Hammerspace reference architecture: Anvil metadata
    # nodes (pNFS v4.2 control path, HA pair: one active) and DSX data nodes (NFSv3 data path)
    # (blocksandfiles, 20 Nov 2023). ASSUMPTION: 1,000 DSX nodes (Meta's count is not published),
    # no server-side redundancy (protection left to the underlying volumes), one active Anvil
    # answering 1e5 NFS metadata ops/s. Kernel NFS client: rsize/wsize 1 MiB, ~ 5 us per request,
    # ~ 4 GB/s per mount with nconnect (Linux NFS client documentation; ASSUMPTION for the ceiling).
    "hammerspace-pnfs": dict(
        name="hammerspace-pnfs", kind="parallel-nfs", servers=1000, ssds_per_server=4, ssd="e1s-7.68tb",
        server_nic_gbps=12.5, redundancy="none", metadata_nodes=1, metadata_ops_s_per_node=1e5,
        metadata_ops_per_file=4, metadata_ops_per_chunk=0, client="nfs", client_gbytes_s_per_host=4.0,
        client_op_bytes=MIB, client_op_overhead_us=5.0,
        description="Hammerspace-like parallel NFS: Anvil metadata + DSX data nodes"),
    # The GPU hosts' own NVMe: Grand Teton has 2 NVMe per PCIe switch, 8 per host (Lockwood,
    # "Meta's H100 clusters"). Kernel filesystem (XFS/ext4), no network, no redundancy. ASSUMPTION:
    # a local filesystem creates ~ 5e4 files/s per host (order of mdtest results for XFS on NVMe).
    "local-nvme": dict(
        name="local-nvme", kind="local", ssds_per_server=8, ssd="gen4-3.84tb", server_nic_gbps=None,
        redundancy="none", metadata_nodes=1, metadata_ops_s_per_node=5e4, metadata_ops_per_chunk=0,
        client="kernel", client_gbytes_s_per_host=None, client_op_overhead_us=0.0, op_latency_us=10.0,
        writer_jitter_sigma=0.0, description="the GPU hosts' local NVMe drives"),
}

POLICY_KEYS = ("checkpoint", "data_loading", "devx")


def _system_fields(raw: dict[str, Any] | None, default_preset: str | None) -> dict[str, Any]:
    raw = dict(raw or {})
    for k in POLICY_KEYS:
        raw.pop(k, None)
    base = raw.pop("preset", None)
    base2 = raw.pop("base", None)
    if base is not None and base2 is not None:
        raise SpecError("storage.base", base2, "give either storage.preset or storage.base, not both")
    base = base if base is not None else base2
    if base is None:
        base = default_preset
    if base is None:
        raise SpecError("storage", raw or None,
                        "the cluster names no storage preset; add storage: {preset: <name>} "
                        f"({', '.join(STORAGE_PRESETS)})")
    if not isinstance(base, str) or base not in STORAGE_PRESETS:
        raise SpecError("storage.preset", base, closest(str(base), STORAGE_PRESETS))
    fields = copy.deepcopy(STORAGE_PRESETS[base])
    fields.update(raw)
    return fields


def storage_system(raw: dict[str, Any] | str | None, default_preset: str | None = None) -> StorageSystem:
    """Validate a spec's ``storage:`` mapping (``preset``/``base`` + overrides) into a system.

    ``raw`` None or without a preset uses ``default_preset`` (the cluster's storage).
    """
    if isinstance(raw, str):
        raw = {"preset": raw}
    if raw is not None and not isinstance(raw, dict):
        raise SpecError("storage", raw, "must be a mapping or a preset name")
    fields = _system_fields(raw, default_preset)
    try:
        return StorageSystem(**fields)
    except SpecError:
        raise
    except ValidationError as err:
        allowed = sorted([*StorageSystem.model_fields, "preset", "base", *POLICY_KEYS])
        raise from_validation(err, "storage", unknown_field=lambda loc: unknown_field(loc[-1], allowed)) from None


def spec_storage(spec) -> StorageSystem:
    """The storage a resolved spec checkpoints to: its ``storage`` section, else the cluster's."""
    if spec.storage is None:
        return storage_system(None, spec.cluster.storage)
    return spec.storage.system(spec.cluster.storage)


class CheckpointPolicy(Section):
    """The ``storage.checkpoint`` part of a spec."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    mode: Literal["sync", "async"] = "async"
    writers: Literal["spread", "one_replica", "every_rank"] = "spread"
    restore: Literal["all_read", "broadcast", "shard_allgather"] = "all_read"
    bf16_weights: bool = True  # save the bf16 copy too (else it is rebuilt from the fp32 master)
    files_per_rank: int = Field(default=1, gt=0)  # DCP FileSystemWriter: one file per writer thread
    writer_ranks: int | None = Field(default=None, gt=0)  # what-if: the bytes spread over N writers
    interval_s: float | None = Field(default=None, gt=0)  # checkpoint every interval_s of training
    # ASSUMPTION: checkpoints held on storage at once: the last durable one and the one being
    # written (older ones deleted); what teton plan charges capacity for. Keep more to roll back further.
    keep: int = Field(default=2, ge=1, le=100_000, description="checkpoints held on storage at once")


TOKEN_BYTES = 4  # int32 token ids (vocab 128,256 > 65,536)
DEVX_NFS = "hammerspace-pnfs"  # the job-start storage when the spec's storage.devx names none


class DataLoadingSpec(Section):
    """The ``storage.data_loading`` part of a spec: what the data loader reads."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    tokens_per_s: float | None = Field(default=None, gt=0)  # the job's tokens/s; default: the step model's
    bytes_per_token: float = Field(default=TOKEN_BYTES, gt=0)  # bytes of one token on storage


class DevxSpec(Section):
    """The ``storage.devx`` part of a spec: the developer-experience job start."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nfs: str = DEVX_NFS  # the storage preset every host reads the job-start files from

    @model_validator(mode="after")
    def _check(self) -> DevxSpec:
        if self.nfs not in STORAGE_PRESETS:
            raise SpecError("storage.devx.nfs", self.nfs, closest(self.nfs, STORAGE_PRESETS))
        return self


class StorageSection(Section):
    """The ``storage:`` section as loaded: the system (a preset, default the cluster's, and the
    fields set over it, kept to rebuild it on another preset), the checkpoint policy, the data
    loader and the job start. :meth:`system` gives the :class:`StorageSystem`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preset: str | None = None  # storage.preset (or storage.base); None: the cluster's storage
    system_fields: tuple[tuple[str, Any], ...] = ()  # the StorageSystem fields set over the preset
    checkpoint: CheckpointPolicy = CheckpointPolicy()
    data_loading: DataLoadingSpec = DataLoadingSpec()
    devx: DevxSpec = DevxSpec()

    def system(self, default_preset: str | None = None) -> StorageSystem:
        """The storage system: the preset (else ``default_preset``) with the fields set over it."""
        return storage_system({"preset": self.preset, **dict(self.system_fields)}, default_preset)

    def given(self, key: str) -> Any:
        """The value the section gives ``key`` (``preset`` or a system field), None where it gives none."""
        return self.preset if key == "preset" else dict(self.system_fields).get(key)

    def on(self, preset: str, **fields: Any) -> StorageSection:
        """The section on another ``preset``, with ``fields`` set over the ones it sets (checked)."""
        merged = {**dict(self.system_fields), **fields}
        storage_system({"preset": preset, **merged})
        return self.model_copy(update={"preset": preset, "system_fields": tuple(merged.items())})


def _part(cls, raw: dict[str, Any], key: str):
    """The ``storage.<key>`` part of a ``storage:`` mapping as ``cls``; SpecError on bad input."""
    part = raw.get(key)
    part = {} if part is None else part  # absent or null: the defaults; false, 0 or [] are no mapping
    if isinstance(part, cls):
        return part
    if not isinstance(part, dict):
        raise SpecError(f"storage.{key}", part, "must be a mapping")
    try:
        return cls(**part)
    except ValidationError as err:
        raise from_validation(err, f"storage.{key}", unknown_field=lambda loc: unknown_field(loc[-1], cls.model_fields)) \
            from None


def parse_storage(raw: dict[str, Any] | str | StorageSection, default_preset: str | None = None) -> StorageSection:
    """Validate a spec's ``storage:`` section (a preset name, or a mapping: ``preset``/``base``,
    system fields, ``checkpoint``, ``data_loading``, ``devx``); SpecError on bad input."""
    if isinstance(raw, StorageSection):
        return raw
    if isinstance(raw, str):
        raw = {"preset": raw}
    system = storage_system(raw, default_preset)  # the preset and system fields (unknown keys too)
    given = [k for k in raw if k not in ("preset", "base", *POLICY_KEYS)]
    preset = raw.get("preset") if raw.get("preset") is not None else raw.get("base")
    return StorageSection(preset=preset, system_fields=tuple((k, getattr(system, k)) for k in given),
                          checkpoint=_part(CheckpointPolicy, raw, "checkpoint"),
                          data_loading=_part(DataLoadingSpec, raw, "data_loading"), devx=_part(DevxSpec, raw, "devx"))


def checkpoint_policy(spec) -> CheckpointPolicy:
    """The checkpoint policy of a resolved spec (its ``storage.checkpoint``, else the defaults)."""
    return CheckpointPolicy() if spec.storage is None else spec.storage.checkpoint


def parse_checkpoint_policy(storage: dict[str, Any] | None) -> CheckpointPolicy:
    """Validate the ``checkpoint`` part of a ``storage:`` mapping; SpecError on bad input."""
    return _part(CheckpointPolicy, storage or {}, "checkpoint")
