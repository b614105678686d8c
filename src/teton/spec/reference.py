"""The spec reference (docs/spec.md), generated from the spec models themselves: every section's
fields with their type, default and meaning, so the page cannot drift from the code.

A field's meaning is its ``Field(description=...)``, else the comment on its line, else the
comment block just above it in the model's source.
"""

from __future__ import annotations

import inspect
import re
import typing

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from teton.hardware import GPU, NIC, Host
from teton.spec.cluster import ClusterSpec, FabricLayer
from teton.spec.fields import field_range, numeric_kinds, range_text
from teton.spec.headroom import HeadroomSpec
from teton.spec.job import JobSpec
from teton.spec.model import ModelSpec
from teton.spec.network import NetworkSpec
from teton.spec.plan import PlanSpec
from teton.spec.reliability import InfantMortality, ReliabilitySpec
from teton.spec.software import SoftwareSpec
from teton.spec.storage import CheckpointPolicy, DataLoadingSpec, DevxSpec, StorageSystem

SECTIONS: tuple[tuple[str, type[BaseModel], str], ...] = (
    ("cluster", ClusterSpec, "a preset name (`teton presets`), a file, or a mapping (`base:` a preset plus overrides)"),
    ("cluster.layers[]", FabricLayer, "one fabric layer, innermost first"),
    ("cluster.host", Host, "the GPU server, when given as a mapping or a file (else a host preset's name); "
                           "`base:` a preset or a file plus overrides ([hardware.md](hardware.md))"),
    ("cluster.gpu", GPU, "a GPU, as `cluster.gpu` or a host's `gpu` takes it when given as a mapping or a file "
                         "([hardware.md](hardware.md))"),
    ("cluster.backend_nic", NIC, "a NIC, as `cluster.backend_nic` or a host's `backend_nic` / `frontend_nic` takes it"),
    ("model", ModelSpec, "a preset name, a Hugging Face config.json, a file, or a mapping"),
    ("job", JobSpec, "the parallel layout, batch and the memory and overlap choices"),
    ("job.headroom", HeadroomSpec, "the HBM kept free on every GPU: a job fits when its allocations are at most "
                                   "the rest ([memory.md](memory.md#headroom))"),
    ("software", SoftwareSpec, "the software stack: a preset name (`teton presets`), or a mapping (`base:` a preset "
                               "plus overrides); it sets the defaults of the job's framework fields and keys the "
                               "fitted in-situ values"),
    ("network", NetworkSpec, "which cost model prices the collectives"),
    ("storage", StorageSystem, "the storage system checkpoints land on (`preset:` plus overrides); "
                               "default: the cluster's `storage`"),
    ("storage.checkpoint", CheckpointPolicy, "how checkpoints are written and restored"),
    ("storage.data_loading", DataLoadingSpec, "what the data loader reads (`teton checkpoint`)"),
    ("storage.devx", DevxSpec, "the developer-experience job start (`teton checkpoint`)"),
    ("reliability", ReliabilitySpec, "failures, recovery, run length, power and cost of a whole run"),
    ("reliability.infant_mortality", InfantMortality, "early-life failures (Weibull)"),
    ("plan", PlanSpec, "what `teton plan` chooses between"),
)


# Meanings of fields whose model carries no comment (the field's name says the rest).
GLOSSARY = {
    "cluster.name": "the cluster's name in tables", "cluster.host": "the GPU server (GPUs, NVLink, NICs per host)",
    "cluster.hosts": "GPU hosts in the cluster", "cluster.topology": "fabric shape of the explicit switch graph",
    "cluster.layers": "fabric layers, innermost (rack) first",
    "cluster.frontend_oversubscription": "down:up ratio of the frontend (storage) network",
    "cluster.layers[].name": "layer name (rack, pod, zone)", "cluster.layers[].switch": "switch model of the tier",
    "cluster.layers[].hop_latency_us": "latency a path pays to turn around at this tier, up and down",
    "model.layers": "transformer layers", "model.hidden": "hidden size d_model", "model.ffn_hidden": "MLP width",
    "model.heads": "attention (query) heads", "model.kv_heads": "KV heads (GQA); default: heads",
    "model.head_dim": "dimension of one head; default: hidden / heads", "model.vocab": "vocabulary size",
    "model.experts": "MoE experts per layer (1: dense)", "model.top_k": "experts each token is routed to",
    "model.mamba_head_dim": "Mamba-2 head dimension P (d_inner = heads x P)",
    "job.gpus": "GPUs the job runs on", "job.tp": "tensor-parallel degree", "job.cp": "context-parallel degree",
    "job.pp": "pipeline-parallel degree", "job.dp": "data-parallel degree; default: gpus / (tp cp pp)",
    "job.ep": "expert-parallel degree: MoE all-to-all ranks, etp*ep dividing tp*cp*dp (may span TP and CP ranks)",
    "job.etp": "expert tensor-parallel degree of the routed experts' GEMMs (Megatron-Core's "
               "expert_tensor_parallel_size); default: tp",
    "job.seq_len": "tokens per sequence",
    "job.micro_batch": "sequences per micro-batch", "job.global_batch_tokens": "tokens per step (instead of global_batch)",
    "job.precision": "GEMM precision", "job.sequence_parallel": "shard norms and dropout over TP (Korthikanti 2022)",
    "job.flash_attention": "fused attention kernel (no s x s scores in HBM)",
    "job.pp_schedule": "pipeline schedule", "job.virtual_stages": "model chunks per pipeline rank (interleaved)",
    "job.zero": "ZeRO stage: 1 optimizer state, 2 + gradients, 3 + parameters sharded over DP",
    "job.grad_accum_dtype": "dtype of the accumulated gradients", "job.placement": "rank-to-GPU placement policy",
    "job.software": "the software stack (put here from the top-level software: section)",
    "software.description": "what the stack is, in words",
    "network.fidelity": "analytical (alpha-beta) or flow (max-min fair flows on the switch graph)",
    "network.routing": "flow model: how connections pick paths (default: the fabric's own, cluster.routing)", "network.qps_per_connection": "flow model: RDMA QPs per connection",
    "storage.checkpoint.mode": "sync: GPUs wait for the upload; async: only for the device-to-host copy",
    "storage.checkpoint.writers": "which ranks write", "storage.checkpoint.restore": "how a restore rebuilds the state",
    "reliability.preset": "failure-rate preset", "reliability.tokens": "token budget of the run (15.6T) instead of days",
    "plan.gpus": "GPU counts to compare: a list (8192,16384), lo:hi:step, or lo:hi (five spaced geometrically); "
                 "each positive", "plan.storage_servers": "storage server counts, as plan.gpus (default: the "
                 "preset's)", "plan.tokens": "tokens to train on: a positive count (15.6T, 2e12)",
    "plan.deadline_days": "finish within",
    "plan.budget_usd": "spend at most", "plan.global_batch": "batch rule across GPU counts",
    "plan.top_layouts": "layouts kept per GPU count",
    "cluster.description": "what the cluster is, in words (shown by teton presets)",
    "model.name": "the model's name in tables", "model.norm": "normalisation layer: RMSNorm (Llama) or LayerNorm (GPT)",
    "model.max_seq_len": "longest sequence the model takes, tokens (sizes a learned position embedding)",
    "model.tied_embeddings": "the output layer shares the input embedding's weights",
    "software.version": "the framework's release, e.g. 24.07 or core_r0.8.0",
    "storage.name": "the storage system's name in tables",
    "storage.kind": "distributed (Tectonic-like, many servers), parallel-nfs (pNFS), local (the GPU hosts' own drives)",
    "storage.ssds_per_server": "flash drives per storage server", "storage.ssd": "drive model from the SSD catalog",
    "storage.ssd_write_gbytes_s": "one drive's sequential write, GB/s (default: the catalog's)",
    "storage.ssd_capacity_tb": "one drive's capacity, TB (default: the catalog's)",
    "storage.ssd_dwpd": "rated drive writes per day, the flash's endurance (default: the catalog's)",
    "storage.server_nics": "NICs per storage server", "storage.mtu_bytes": "network MTU, bytes (sets TCP goodput)",
    "storage.redundancy": "how every byte is protected: none, replication or erasure coding",
    "storage.replicas": "copies written with replication", "storage.ec_data": "data chunks of RS(k, m) erasure coding",
    "storage.ec_parity": "parity chunks of RS(k, m) erasure coding",
    "storage.chunk_bytes": "bytes per storage chunk, each costing metadata_ops_per_chunk operations",
    "storage.metadata_nodes": "metadata servers (shards)",
    "storage.metadata_ops_s_per_node": "metadata operations one metadata server answers per second",
    "storage.client": "client path: FUSE (Tectonic), the kernel NFS client, or the local kernel filesystem",
    "storage.client_gbytes_s_per_host": "streaming ceiling of one host's client, GB/s (None: no ceiling)",
    "storage.client_op_bytes": "bytes per client request", "storage.client_op_overhead_us": "CPU time per client "
                                                                                              "request, us",
    "storage.description": "what the storage system is, in words",
    "reliability.days": "run length in days (instead of tokens; default 54, the Llama 3 Table 5 window)",
    "reliability.infant_mortality": "early-life failures of a young cluster (Weibull); None: constant rates",
    "reliability.pg_init": "process-group start-up: stock (O(n) rendezvous) or optimized (O(log n), Meta's)",
    "reliability.checkpoint_save_s": "a checkpoint's save time, s, instead of the storage model's",
    "reliability.checkpoint_blocking_s": "the part of a save the GPUs wait for, s, instead of the storage model's",
    "reliability.checkpoint_restore_s": "a restore's time, s, instead of the storage model's",
    "reliability.depreciation_years": "capex mode: years the servers are depreciated over (straight line)",
    "reliability.infant_mortality.weibull_shape": "Weibull shape of the early-life hazard (< 1: decaying)",
    "reliability.infant_mortality.cluster_age_days": "the cluster's age when the run starts, days",
    "reliability.infant_mortality.reference_age_days": "the age at which the Table 5 rates are the hazard, days",
}


def _comments(cls: type) -> dict[str, str]:
    """Field name -> its line's comment, else the comment block just above it."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    above: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if not text.startswith("---"):  # a section banner (# --- cost ---) is no field's meaning
                above.append(text)
            continue
        m = re.match(r"\s+(\w+)\s*:[^=]*(?:=.*?)?(?:#\s*(.*))?$", line)
        if m and not stripped.startswith(("def ", "@", "return")):
            text = m.group(2) or " ".join(above)
            if text:
                out.setdefault(m.group(1), text.strip())
        above = []
    return out


def _type(annotation) -> str:
    text = str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    return re.sub(r"typing\.|teton\.[\w.]+\.", "", text).replace("NoneType", "None")


def _default(field) -> str:
    if field.default is PydanticUndefined:
        return "required" if field.default_factory is None else f"`{field.default_factory()!r}`"
    return f"`{field.default!r}`"


def _range(field) -> str:
    """The allowed range of a numeric field (``teton.spec.fields``), else empty."""
    ints, floats = numeric_kinds(field.annotation)
    if not (ints or floats) or str in typing.get_args(field.annotation):  # text parsed by the section (15.6T, lo:hi)
        return ""
    return range_text(*field_range(field), ints and not floats).removeprefix("an integer in ").removeprefix(
        "a finite number in ")


def markdown() -> str:
    """Every spec section's fields as Markdown tables."""
    out = []
    for name, cls, what in SECTIONS:
        notes = _comments(cls) | {k.removeprefix(f"{name}."): v for k, v in GLOSSARY.items()
                                   if k.startswith(f"{name}.") and "." not in k.removeprefix(f"{name}.")}
        out += [f"### `{name}`", "", what[0].upper() + what[1:] + ".", "",
                "| field | type | default | range | meaning |", "|---|---|---|---|---|"]
        for field_name, field in cls.model_fields.items():
            meaning = field.description or notes.get(field_name, "")
            cells = (f"`{field_name}`", _type(field.annotation), _default(field), _range(field), meaning)
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"
