"""Training-data loading, and the developer-experience job-start storm on the parallel NFS.

Data loading. The job consumes ``tokens_per_s``; each token is ``bytes_per_token`` on storage
(4: pre-tokenised int32 ids — Llama 3's 128,256-entry vocabulary does not fit uint16). Every host
of the job reads its share of a step's tokens from open shard files (no per-step metadata). A
loader that prefetches one step ahead stalls the step only when reading a step's bytes takes
longer than the step: stall_s = max(0, read_s - step_s). The reads get the share of the storage
servers other jobs leave (:mod:`teton.storage.budget`).

Job start on the parallel NFS. ``clients`` hosts each open ``files`` files (``metadata_ops_per_file``
NFS ops each: OPEN, LAYOUTGET, GETATTR, CLOSE) and read them in ``read_bytes`` requests. The
files hash onto data servers; the hottest server holds ceil(files / servers) of them. Time:
    max(metadata = clients * files * ops / metadata_rate,
        hot server = max(requests / server_ops_s, bytes / nic_goodput),
        client chain = files * (ops + reads_per_file) * op_latency)   (requests issued in order)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from teton.errors import SpecError
from teton.spec.storage import DataLoadingSpec, StorageSystem, spec_storage
from teton.storage.budget import other_jobs_share
from teton.storage.transfer import transfer

DATA_LOADING_KEYS = tuple(DataLoadingSpec.model_fields)  # the ``storage.data_loading`` fields


@dataclass(frozen=True)
class DataLoading:
    tokens_per_s: float
    bytes_per_token: float
    needed_bytes_s: float
    read_bw_bytes_s: float  # the read rate the path can deliver to the job's hosts (min of the caps)
    # read_s_per_step below is the time for one step's bytes, stragglers and request latency included
    bottleneck: str
    step_s: float
    read_s_per_step: float
    stall_s_per_step: float
    headroom: float  # delivered / needed

    @property
    def stalls(self) -> bool:
        return self.stall_s_per_step > 0

    def to_dict(self) -> dict:
        return {**asdict(self), "stalls": self.stalls}


def job_tokens_per_s(spec, simulate: Callable[[Any], Any]) -> float:
    """tokens/s of the job from ``simulate(spec)``, the step simulator the caller passes (the
    engine's :func:`teton.engine.step.simulate_step`, or ``teton.simulate``)."""
    return float(simulate(spec).tokens_per_s)


def data_loading(spec, tokens_per_s: float | None = None, bytes_per_token: float | None = None,
                 system: StorageSystem | None = None, simulate: Callable[[Any], Any] | None = None) -> DataLoading:
    """Does reading the training data keep up with the job? Its tokens/s: ``tokens_per_s``, else
    the spec's ``storage.data_loading.tokens_per_s``, else the step simulator ``simulate``'s."""
    system = system or spec_storage(spec)
    loader = DataLoadingSpec() if spec.storage is None else spec.storage.data_loading  # checked at load
    if bytes_per_token is None:
        bytes_per_token = float(loader.bytes_per_token)
    if bytes_per_token <= 0:
        raise SpecError("storage.data_loading.bytes_per_token", bytes_per_token, "must be > 0")
    field = "tokens_per_s"
    if tokens_per_s is None:  # the spec's figure (0 is a bad value, not "absent"), else the step model
        given = loader.tokens_per_s
        field = "storage.data_loading.tokens_per_s" if given is not None else field
        if given is None and simulate is None:
            raise SpecError("tokens_per_s", None, "give the job's tokens/s, storage.data_loading.tokens_per_s "
                            "or a step simulator")
        tokens_per_s = given if given is not None else job_tokens_per_s(spec, simulate)
    try:
        tokens_per_s = float(tokens_per_s)
    except (TypeError, ValueError):
        raise SpecError(field, tokens_per_s, "must be a number (tokens/s)") from None
    if not (math.isfinite(tokens_per_s) and tokens_per_s > 0):
        raise SpecError(field, tokens_per_s, "must be a positive, finite number (tokens/s)")
    job = spec.job
    g = spec.cluster.gpus_per_host
    hosts = np.arange(math.ceil(job.gpus / g))
    step_s = job.layout.tokens_per_step / tokens_per_s
    step_bytes = job.layout.tokens_per_step * bytes_per_token
    share = 1.0 - other_jobs_share(system, job.gpus, spec.cluster.gpus)[0]
    t = transfer(system, spec.cluster, np.full(hosts.size, step_bytes / hosts.size), hosts, "read",
                 seed=spec.seed, metadata=False, storage_share=share)
    needed = tokens_per_s * bytes_per_token
    read_bw = min(t.caps_bytes_s.values())
    bottleneck = min(t.caps_bytes_s, key=t.caps_bytes_s.get)
    return DataLoading(float(tokens_per_s), float(bytes_per_token), needed, read_bw, bottleneck,
                       step_s, t.time_s, max(0.0, t.time_s - step_s), read_bw / needed)


@dataclass(frozen=True)
class JobStart:
    clients: int
    files: int
    file_bytes: int
    read_bytes: int
    time_s: float
    bottleneck: str
    metadata_s: float
    hot_server_s: float
    client_chain_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def devx_job_start(system: StorageSystem, clients: int, files: int = 1, file_bytes: int = 2**20,
                   read_bytes: int = 4096) -> JobStart:
    """Thousands of hosts reading the same code/config files at job start."""
    for name, v in (("clients", clients), ("files", files), ("file_bytes", file_bytes), ("read_bytes", read_bytes)):
        if v <= 0:
            raise SpecError(f"devx_{name}", v, "must be > 0")  # the checkpoint verb's --devx-* flags
    reads_per_file = math.ceil(file_bytes / read_bytes)
    ops = system.metadata_ops_per_file
    metadata_s = clients * files * ops / system.metadata_ops_s
    servers = 1 if system.kind == "local" else system.servers
    hot_files = math.ceil(files / min(files, servers))
    requests = clients * hot_files * reads_per_file
    hot_server_s = max(requests / system.server_ops_s, clients * hot_files * file_bytes / system.nic_goodput_bytes_s)
    chain_s = files * (ops + reads_per_file) * system.op_latency_us * 1e-6
    parts = {"metadata": metadata_s, "data_server": hot_server_s, "request_latency": chain_s}
    name = max(parts, key=parts.get)
    return JobStart(clients, files, file_bytes, read_bytes, parts[name], name, metadata_s, hot_server_s, chain_s)
