"""What each rank checkpoints, and how long save and restore take.

State per GPU (mixed-precision Adam, Megatron/DeepSpeed layout): P = parameters of the rank's
model shard (TP-sharded layers of its pipeline stage, embedding on the first stage, head on the
last: ``teton.workload.memory.params_per_rank``). Bytes per parameter: bf16 weights 2, fp32 master
weights 4, Adam m 4 and v 4 (Rajbhandari et al., ZeRO, SC'20: 2 + 2 + 12 bytes/param; gradients
are not checkpointed). ZeRO 1-2 shard the 12 optimizer bytes over DP, ZeRO-3 also the weights.
CP and DP replicas hold identical copies of whatever is not sharded.

Who writes:
    spread      every unique byte written once, split evenly over the ranks that hold it
                (torch.distributed.checkpoint's DefaultSavePlanner de-duplicates replicated
                tensors across ranks): 14 P / (dp * cp) per rank for any ZeRO stage.
    one_replica the (dp=0, cp=0) replica writes the replicated state; sharded state by its owner.
    every_rank  every rank writes everything it holds (no de-duplication).
``files_per_rank`` files per writing rank (DCP's ``__<rank>_<i>.distcp``, one per writer thread)
plus one index file (``.metadata``); each costs ``metadata_ops_per_file`` metadata operations.

Save:  sync  = D2H snapshot of the rank's share + upload (staged through host memory);
       async = GPUs pause for the D2H snapshot only; the upload runs in the background on the
               frontend network, sharing it with the data loader (not with the backend fabric).
D2H per GPU: the host's x16 PCIe link to memory at the measured copy efficiency, shared by the
GPUs behind one PCIe switch (``teton.hardware.storage.d2h_bytes_s_per_gpu``).
Restore: all_read  every rank reads all the state it holds, then copies it host->device;
         broadcast one replica reads the replicated state (each rank still reads its own
                   sharded state), then it is broadcast over the DP (and CP) groups on the
                   backend fabric (the spec's network cost model, ``network.fidelity``, at nccl-tests speed).
         shard_allgather  each DP rank reads 1/dp of the replicated state (plus its own shards),
                   then an all-gather over the DP groups rebuilds it (the read is spread over
                   all client hosts instead of one replica's).
Other jobs' share of the storage (``storage.other_jobs_share``) is taken off the storage servers'
bandwidth for every transfer (:mod:`teton.storage.transfer`). Sustainable frequency: a checkpoint
every total / available seconds at most, ``available`` the write rate the storage leaves the job
after other jobs' share and its data loader (:mod:`teton.storage.budget`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from teton.engine.prepare import default_placement, network_cost_model
from teton.errors import SpecError
from teton.hardware.storage import d2h_bytes_s_per_gpu
from teton.spec.storage import CheckpointPolicy, StorageSystem, checkpoint_policy, spec_storage
from teton.storage.budget import WriteBudget, other_jobs_share, write_budget
from teton.storage.transfer import Transfer, transfer
from teton.units import ADAM_STATE_BYTES, BF16_BYTES
from teton.workload.memory import params_per_rank
from teton.workload.pipeline import split_layers
from teton.workload.step_work import chunk_expert_params

OPTIMIZER_BYTES = ADAM_STATE_BYTES  # fp32 master + Adam m + v


@dataclass(frozen=True)
class RankState:
    """Per-rank checkpoint bytes, indexed by rank in the job's (tp, cp, pp, dp) order."""

    written_bytes: np.ndarray  # what each rank writes under the policy
    held_bytes: np.ndarray  # what each rank must hold after a restore
    replicated_bytes: np.ndarray  # the part of held_bytes identical across its DP x CP replicas
    gpu_of_rank: np.ndarray
    unique_bytes: float  # one copy of the model state
    read_once_bytes: np.ndarray  # restore by broadcast: replica 0 reads the replicated state, others their shards
    read_shard_bytes: np.ndarray  # restore by all-gather: each replica reads 1/(dp cp) of the replicated state

    @property
    def total_bytes(self) -> float:
        return float(self.written_bytes.sum())


def rank_state(spec, policy: CheckpointPolicy | None = None) -> RankState:
    """Bytes each rank writes and holds, from the model's exact parameter counts.

    Dense weights are replicated over the dp*cp ranks of a stage; MoE routed-expert weights
    (``workload.moe.routed_params_per_gpu``: sharded over ep and etp) over their expert-data-parallel
    group of ``tp cp dp / (etp ep)`` ranks, ``etp ep`` distinct shards a stage. ZeRO shards over
    those replicas, as the step model does (CP ranks hold the same weights as their DP peers).
    """
    policy = policy or checkpoint_policy(spec)
    job, model = spec.job, spec.model
    lay = job.layout
    split = split_layers(model, job)
    p_stage = params_per_rank(model, job, split)  # (pp,) per TP rank
    e_stage = np.zeros_like(p_stage)
    if model.experts > 1:
        e_stage = chunk_expert_params(model, job, split).sum(axis=1)  # each layer type's (dense layers: none)
    c = lay.coords()
    dp, cp = lay.dp, lay.cp
    wb = BF16_BYTES if policy.bf16_weights else 0
    n = job.gpus
    written, held, replicated = np.zeros(n), np.zeros(n), np.zeros(n)
    read_once, read_shard = np.zeros(n), np.zeros(n)
    unique = 0.0
    # (params per TP rank by stage, replicas over DP x CP, replica index, distinct shards across DP)
    parts = [(p_stage - e_stage, dp * cp, c["dp"] * cp + c["cp"], 1)]
    if model.experts > 1:
        parts.append((e_stage, lay.edp, lay.expert_coords()["edp"], lay.ep * lay.etp / lay.tp))
    for stage, reps, ridx, distinct in parts:
        p = stage[c["pp"]]
        w, o = wb * p, OPTIMIZER_BYTES * p
        w_sh = reps if job.zero >= 3 else 1
        o_sh = reps if job.zero >= 1 else 1
        h = w / w_sh + o / o_sh
        rep = (w if w_sh == 1 else 0) + (o if o_sh == 1 else 0)
        lead = ridx == 0
        if policy.writers == "spread":
            written += (w + o) / reps
        elif policy.writers == "one_replica":
            written += np.where(lead, h, h - rep)
        else:
            written += h
        held += h
        replicated += rep
        read_once += np.where(lead, h, h - rep)
        read_shard += h - rep + rep / reps
        unique += float((wb + OPTIMIZER_BYTES) * stage.sum() * lay.tp * distinct)
    return RankState(written, held, replicated, default_placement(spec).gpu_of_rank, unique, read_once, read_shard)


@dataclass(frozen=True)
class CheckpointResult:
    system: StorageSystem
    policy: CheckpointPolicy
    state: RankState
    d2h_s: float
    save: Transfer  # the upload of a save
    upload_background: Transfer  # the same upload sharing the frontend with the data loader
    restore_all_read: Transfer
    restore_broadcast_read: Transfer
    broadcast_s: float
    h2d_all_read_s: float
    h2d_broadcast_s: float
    restore_shard_read: Transfer
    allgather_s: float
    h2d_shard_s: float
    writer_bytes: np.ndarray  # bytes of each writer of a save (the ranks, or ``writer_ranks`` what-if writers)
    budget: WriteBudget  # the average write rate the storage leaves the job's checkpoints

    @property
    def sync_save_s(self) -> float:
        return self.d2h_s + self.save.time_s

    @property
    def async_durable_s(self) -> float:
        return self.d2h_s + self.upload_background.time_s

    @property
    def restore_all_read_s(self) -> float:
        return self.restore_all_read.time_s + self.h2d_all_read_s

    @property
    def restore_broadcast_s(self) -> float:
        return self.restore_broadcast_read.time_s + self.h2d_broadcast_s + self.broadcast_s

    @property
    def restore_allgather_s(self) -> float:
        return self.restore_shard_read.time_s + self.h2d_shard_s + self.allgather_s

    def summary(self) -> dict:
        s, st = self.system, self.state
        written = self.writer_bytes[self.writer_bytes > 0]
        is_async = self.policy.mode == "async"
        hosts = max(1, self.save.hosts)
        sustained = s.sustained_write_bytes_s(hosts)
        b = self.budget
        return {
            "storage": s.name,
            "mode": self.policy.mode,
            "writer_policy": self.policy.writers,
            "checkpoint_save_s": self.async_durable_s if is_async else self.sync_save_s,
            "checkpoint_blocking_s": self.d2h_s if is_async else self.sync_save_s,
            "checkpoint_restore_s": {"broadcast": self.restore_broadcast_s, "all_read": self.restore_all_read_s,
                                     "shard_allgather": self.restore_allgather_s}[self.policy.restore],
            "checkpoint_restore_all_read_s": self.restore_all_read_s,
            "checkpoint_restore_broadcast_s": self.restore_broadcast_s,
            "checkpoint_restore_allgather_s": self.restore_allgather_s,
            "restore_read_once_s": self.restore_broadcast_read.time_s,
            "restore_read_once_bottleneck": self.restore_broadcast_read.bottleneck,
            "allgather_s": self.allgather_s,
            "sync_save_s": self.sync_save_s,
            "async_blocking_s": self.d2h_s,
            "async_durable_s": self.async_durable_s,
            "d2h_s": self.d2h_s,
            "upload_s": self.save.time_s,
            "broadcast_s": self.broadcast_s,
            "bytes_per_gpu_min": float(written.min()) if written.size else 0.0,
            "bytes_per_gpu_max": float(written.max()) if written.size else 0.0,
            "writers": int(written.size),
            "files": int(written.size) * self.policy.files_per_rank + 1,
            "total_bytes": st.total_bytes,
            "model_state_bytes": st.unique_bytes,
            "bottleneck": self.save.bottleneck,
            "delivered_bw_bytes_s": self.save.delivered_bw_bytes_s,
            "restore_bottleneck": self.restore_all_read.bottleneck,
            "restore_bw_bytes_s": self.restore_all_read.delivered_bw_bytes_s,
            "caps_bytes_s": self.save.caps_bytes_s,
            "slowest_writer_s": self.save.slowest_writer_s,
            "tail_s": self.save.tail_s,
            "peak_rate_bytes_s": self.save.peak_rate_bytes_s,
            "median_writer_s": self.save.median_writer_s,
            "aggregate_s": self.save.aggregate_s,
            "metadata_s": self.save.metadata_s,
            "storage_peak_write_bytes_s": s.peak_write_bytes_s(hosts),
            "storage_peak_read_bytes_s": s.peak_read_bytes_s(hosts),
            "storage_sustained_write_bytes_s": sustained,
            "storage_raw_capacity_bytes": s.raw_capacity_bytes(hosts),
            "storage_usable_capacity_bytes": s.usable_capacity_bytes(hosts),
            "checkpoints_kept": self.policy.keep,
            "checkpoint_fits_storage": bool(self.policy.keep * st.total_bytes <= s.usable_capacity_bytes(hosts)),
            "storage_other_jobs_share": b.other_jobs_share,
            "storage_other_jobs_share_source": b.other_jobs_share_source,
            "data_loading_bytes_s": b.data_loading_bytes_s,
            "storage_available_write_bytes_s": b.available_write_bytes_s,
            "storage_write_bound": b.bound,
            "min_checkpoint_interval_s": b.min_interval_s(st.total_bytes),
            **self._interval(b.available_write_bytes_s),
        }

    def _interval(self, sustained: float) -> dict:
        """With ``interval_s``: can the storage sustain it, and the share of time the GPUs pause."""
        iv = self.policy.interval_s
        if iv is None:
            return {}
        blocking = self.d2h_s if self.policy.mode == "async" else self.sync_save_s
        durable = self.async_durable_s if self.policy.mode == "async" else self.sync_save_s
        return {"checkpoint_interval_s": iv,
                "checkpoint_sustainable": bool(self.state.total_bytes / iv <= sustained and durable <= iv),
                "checkpoint_pause_fraction": blocking / (iv + blocking)}


def _spread_over(bytes_: np.ndarray, gpu: np.ndarray, n: int, gpus_per_host: int) -> tuple[np.ndarray, np.ndarray]:
    """The same total bytes over n writers placed gpus_per_host per host (what-if writer count)."""
    n = max(1, min(n, bytes_.size))
    order = np.argsort(gpu)
    hosts = gpu[order][:n] // gpus_per_host
    return np.full(n, bytes_.sum() / n), hosts


def simulate_checkpoint(spec, policy: CheckpointPolicy | None = None, system: StorageSystem | None = None,
                        data_bytes_s: float = 0.0) -> CheckpointResult:
    """Save (sync and async) and restore (all read / read once + broadcast) of the spec's job.

    ``data_bytes_s``: the data loader's read rate (on the frontend during an async upload, and
    in the storage's write budget). Every transfer gets the share of the storage servers other
    jobs leave (:func:`teton.storage.budget.other_jobs_share`).
    """
    policy = policy or checkpoint_policy(spec)
    system = system or spec_storage(spec)
    cluster = spec.cluster
    st = rank_state(spec, policy)
    g = cluster.gpus_per_host
    share = 1.0 - other_jobs_share(system, spec.job.gpus, cluster.gpus)[0]
    d2h_bw = d2h_bytes_s_per_gpu(cluster.host_spec)
    w_bytes, w_host = st.written_bytes, st.gpu_of_rank // g
    if policy.writer_ranks and policy.writer_ranks > spec.job.gpus:
        raise SpecError("storage.checkpoint.writer_ranks", policy.writer_ranks,
                        f"at most the job's GPUs ({spec.job.gpus})")
    if policy.writer_ranks:
        w_bytes, w_host = _spread_over(st.written_bytes, st.gpu_of_rank, policy.writer_ranks, g)
    d2h_s = float(w_bytes.max()) / d2h_bw
    kw = dict(files_per_writer=float(policy.files_per_rank), extra_files=1, seed=spec.seed, storage_share=share)
    save = transfer(system, cluster, w_bytes, w_host, "write", **kw)
    upload_bg = transfer(system, cluster, w_bytes, w_host, "write", frontend_busy_bytes_s=data_bytes_s, **kw)
    hosts_all = st.gpu_of_rank // g
    rk = dict(seed=spec.seed + 1, storage_share=share)
    r_all = transfer(system, cluster, st.held_bytes, hosts_all, "read", **rk)
    read_once = st.read_once_bytes
    r_once = transfer(system, cluster, read_once, hosts_all, "read", **rk)
    bcast_s = _broadcast_s(spec, st)
    shard = st.read_shard_bytes
    r_shard = transfer(system, cluster, shard, hosts_all, "read", **rk)
    gather_s = _allgather_s(spec, st)
    budget = write_budget(system, max(1, save.hosts), spec.job.gpus, cluster.gpus, data_bytes_s)
    return CheckpointResult(system, policy, st, d2h_s, save, upload_bg, r_all, r_once, bcast_s,
                            float(st.held_bytes.max()) / d2h_bw, float(read_once.max()) / d2h_bw,
                            r_shard, gather_s, float(shard.max()) / d2h_bw, np.asarray(w_bytes, float), budget)


def _rebuild_s(spec, st: RankState, op: str) -> float:
    """``op`` (broadcast / all_gather) of the replicated state over the ranks that hold the same
    weights (the DP x CP groups); each has read its own ZeRO shards."""
    lay = spec.job.layout
    if float(st.replicated_bytes.max()) == 0 or lay.dp * lay.cp == 1:
        return 0.0
    pl = default_placement(spec)
    return network_cost_model(spec).collective_time(op, pl.groups("dp_cp"), float(st.replicated_bytes.max()))


def _broadcast_s(spec, st: RankState) -> float:
    return _rebuild_s(spec, st, "broadcast")


def _allgather_s(spec, st: RankState) -> float:
    return _rebuild_s(spec, st, "all_gather")


CHECKPOINT_SUMMARY_KEYS = ("checkpoint_save_s", "checkpoint_blocking_s", "checkpoint_restore_s",
                           "min_checkpoint_interval_s")


def checkpoint_summary(spec, data_bytes_s: float = 0.0) -> dict:
    """The checkpoint keys ``teton run`` adds to its result: save (durable), blocking, restore (s),
    and the shortest interval the storage sustains (bytes / the write rate it leaves the job, s).

    Uses the spec's ``storage`` section (or the cluster's storage) and ``storage.checkpoint``;
    ``data_bytes_s``: the data loader's read rate alongside (:func:`simulate_checkpoint`).
    """
    return {k: v for k, v in simulate_checkpoint(spec, data_bytes_s=data_bytes_s).summary().items()
            if k in CHECKPOINT_SUMMARY_KEYS}
