"""Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, BigScience's fork for BLOOM): Megatron-LM's
``pretrain_gpt.py`` arguments with ``--deepspeed``, run by the ``deepspeed`` launcher
(``deepspeed --num_nodes N --num_gpus G pretrain_gpt.py ...``).

``--deepspeed`` is the ``megatron-deepspeed`` software preset (DeepSpeed's engine over Megatron-LM
of 2021-22: no flash attention unless asked, blocking p2p, no async TP, no DP overlap);
``--zero-stage N`` is ``job.zero`` N. DeepSpeed's pipeline engine, which Megatron-DeepSpeed runs
unless ``--no-pipeline-parallel``, refuses ZeRO stages 2 and 3. DeepSpeed takes the stage from its
JSON config (``--deepspeed_config``), which teton does not read; the launch scripts write it from
the same ``--zero-stage`` value. ``--checkpoint-activations`` recomputes every
``--checkpoint-num-layers`` layers (DeepSpeed's activation checkpoint interval).
"""

from __future__ import annotations

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper, as_int
from teton.spec.frameworks.shell import parse_flags

FLAG = "--deepspeed"
PRESET = "megatron-deepspeed"
LAUNCHERS = ("deepspeed", "deepspeed.launcher.runner")
_ZERO = {0: "no sharding", 1: "optimizer state sharded over DP", 2: "optimizer state and gradients sharded",
         3: "parameters, gradients and optimizer state sharded"}


def launcher_flags(tokens: list[str]) -> dict[str, object] | None:
    """The ``deepspeed`` launcher's tokens as ``deepspeed --flag`` keys (None: another launcher)."""
    at = next((i for i, t in enumerate(tokens) if t.endswith(LAUNCHERS)), None)
    if at is None:
        return None
    return {f"deepspeed {k}": v for k, v in parse_flags(tokens[at + 1:]).items()}


def gpus(m: Mapper) -> None:
    """``job.gpus`` from ``deepspeed --num_nodes N --num_gpus G`` (G per node). Without
    ``--num_gpus`` the launcher takes every GPU of each node, and without ``--num_nodes`` every
    node of its hostfile: the count is then ``--gpus``'s (one node when no --gpus is given)."""
    per_key, per = m.first("deepspeed --num-gpus", "deepspeed --num-accelerators")
    nodes_key, nodes = m.first("deepspeed --num-nodes")
    picked = m.has("deepspeed --include") or m.has("deepspeed --exclude")
    if per_key is None or picked:
        why = ("--include / --exclude pick the GPUs" if picked else
               "without --num_gpus the launcher takes every GPU of a node")
        for key, raw in ((per_key, per), (nodes_key, nodes)):
            if key is not None:
                m.ignore(key, raw, f"{why}: give --gpus N")
        return
    g = as_int("--num_gpus", per)
    if nodes_key is None:
        if m.gpus_option is not None:
            m.ignore(per_key, per, "without --num_nodes the launcher takes its hostfile's nodes: --gpus gives the count")
            return
        m.default("job.gpus", g, "deepspeed without --num_nodes: one node (no hostfile)", write=False)
        m.put("job.gpus", g, per_key, per)
        return
    n = as_int("--num_nodes", nodes)
    m.put("job.gpus", n * g, "deepspeed --num-nodes x --num-gpus", f"{n} x {g}")


def zero(m: Mapper) -> bool:
    """``job.zero`` from ``--zero-stage`` under ``--deepspeed`` (True: handled here, Megatron-LM's
    distributed optimizer flags are not read)."""
    raw = m.get("--zero-stage")
    if not m.get(FLAG):
        if m.has("--zero-stage"):
            m.ignore("--zero-stage", raw, "read only with --deepspeed (Megatron-DeepSpeed)")
        return False
    for key in ("--use-distributed-optimizer", "--use-torch-fsdp2"):
        if m.has(key):
            m.ignore(key, m.get(key), "not read under --deepspeed: DeepSpeed's ZeRO (--zero-stage) shards the state")
    pipe = not m.get("--no-pipeline-parallel")
    pp = m.spec["job"].get("pp", 1)
    if not pipe:
        if pp > 1:
            raise SpecError("--no-pipeline-parallel", True, f"needs --pipeline-model-parallel-size 1 (not {pp}), as "
                            "Megatron-DeepSpeed asserts")
        m.ignore("--no-pipeline-parallel", True, "DeepSpeed's engine without its pipeline engine (pp 1)")
    if raw is None:
        m.default("job.zero", 1, "no --zero-stage: Megatron-DeepSpeed's default 1 (DeepSpeed reads the stage from "
                  "its JSON config, which teton does not read: --set job.zero=N if it differs)")
        return True
    stage = as_int("--zero-stage", raw, minimum=0)
    if stage not in _ZERO:
        raise SpecError("--zero-stage", raw, "one of 0, 1, 2, 3 (DeepSpeed's ZeRO stages)")
    if stage >= 2 and pipe:
        raise SpecError("--zero-stage", raw, "0 or 1 under DeepSpeed's pipeline engine, which refuses ZeRO-2 and "
                        "ZeRO-3; add --no-pipeline-parallel (with --pipeline-model-parallel-size 1) for stage 2 or 3")
    m.put("job.zero", stage, "--zero-stage", raw, f"DeepSpeed ZeRO-{stage}: {_ZERO[stage]}")
    return True


def stack(m: Mapper) -> bool:
    """``software.base: megatron-deepspeed`` under ``--deepspeed`` (True), with Megatron-DeepSpeed's
    FlashAttention flags: ``--use-flash-attn-v2`` is fa2; FlashAttention-1 (``--use-flash-attn``,
    its alias ``--use-flash-attn-v1``), the Triton and the op-builder kernels are not modelled."""
    if not m.get(FLAG):
        return False
    m.put("software.base", PRESET, FLAG, True, "Megatron-DeepSpeed: DeepSpeed's engine over Megatron-LM of 2021-22")
    if m.has("--deepspeed-config"):
        m.ignore("--deepspeed-config", m.get("--deepspeed-config"), "DeepSpeed's JSON config: teton does not read "
                 "it (the ZeRO stage is --zero-stage's; --set what else it changes)")
    for key in ("--use-flash-attn", "--use-flash-attn-v1", "--use-flash-attn-triton", "--use-flash-attn-builder"):
        if m.get(key):
            raise SpecError(key, True, "not modelled under --deepspeed (Megatron-DeepSpeed's FlashAttention-1, "
                            "Triton or op-builder kernel): teton prices FlashAttention-2 (--use-flash-attn-v2), "
                            "cuDNN or unfused attention")
    if m.get("--use-flash-attn-v2"):
        m.put("software.attention", "fa2", "--use-flash-attn-v2", True, "FlashAttention-2")
    return True


def checkpoint_activations(m: Mapper) -> bool:
    """``--checkpoint-activations`` (Megatron-DeepSpeed; Megatron-LM exits on it since 2022):
    every ``--checkpoint-num-layers`` layers' input kept and the rest recomputed; one layer at a
    time is teton's full recompute, groups of layers keep other activations (refused). True:
    the recomputation is set here."""
    if not m.get("--checkpoint-activations"):
        if m.has("--checkpoint-num-layers"):
            m.ignore("--checkpoint-num-layers", m.get("--checkpoint-num-layers"), "read only with "
                     "--checkpoint-activations")
        return False
    if not m.get(FLAG):
        raise SpecError("--checkpoint-activations", True, "no longer read by Megatron-LM (it exits): use "
                        "--recompute-granularity full --recompute-method uniform (or --deepspeed for "
                        "Megatron-DeepSpeed)")
    raw = m.get("--checkpoint-num-layers", 1)
    if as_int("--checkpoint-num-layers", raw) != 1:
        raise SpecError("--checkpoint-num-layers", raw, "1: teton recomputes every layer one by one (full); "
                        "groups of layers keep other activations (not modelled)")
    m.put("job.recompute", "full", "--checkpoint-activations", True, "every layer's input kept, the rest recomputed")
    return True


def checkpoint_and_offload_options(m: Mapper, checkpointing: bool) -> None:
    """DeepSpeed's activation-checkpoint options, which Megatron-DeepSpeed hands to
    ``deepspeed.checkpointing.configure``, and ZeRO-3's ``--remote-device``. ``--partition-activations``
    keeps each checkpointed layer input split over the TP ranks and all-gathers it before the
    recompute; ``--checkpoint-in-cpu`` moves those partitions to host memory (DeepSpeed asserts
    it without partitioning). teton models neither: sequence parallelism, the nearest, shards
    every activation of a layer and turns its TP all-reduces into all-gathers and reduce-scatters,
    and ``software.cpu_offload_layers`` copies a layer's saved activations asynchronously, never a
    chunk's last layer. They are refused where they act (``--checkpoint-activations`` under
    ``--deepspeed``; partitioning over more than one TP rank) and named where they do not."""
    tp = m.spec["job"].get("tp", 1)
    active = checkpointing and bool(m.get(FLAG))
    if m.get("--distribute-saved-activations"):  # Megatron-LM's own partitioned checkpoints
        raise SpecError("--distribute-saved-activations", True, "not modelled: full recompute's layer inputs kept "
                        "split over the TP ranks (job.sequence_parallel shards every activation, not the same); "
                        "drop it to import")
    if m.get("--deepspeed-activation-checkpointing"):
        m.ignore("--deepspeed-activation-checkpointing", True, "DeepSpeed's checkpoint function in place of "
                 "Megatron's: the same layer inputs kept (its options are read with --checkpoint-activations)")
    partition, in_cpu = m.get("--partition-activations"), m.get("--checkpoint-in-cpu")
    for key, on in (("--partition-activations", partition), ("--checkpoint-in-cpu", in_cpu)):
        if on and not active:
            m.ignore(key, on, "no effect without --checkpoint-activations under --deepspeed: no activation "
                     "checkpoints to partition or move")
    if active and in_cpu:
        raise SpecError("--checkpoint-in-cpu", True, "not modelled: DeepSpeed keeps the partitioned activation "
                        "checkpoints in host memory, copied out and back synchronously (it needs "
                        "--partition-activations); drop it to import (teton's CPU offload, "
                        "software.cpu_offload_layers, is Megatron-Core's)")
    if active and partition and tp > 1:
        raise SpecError("--partition-activations", True, f"not modelled with --tensor-model-parallel-size {tp}: "
                        "each checkpointed layer input split over the TP ranks and all-gathered before the "
                        "recompute (job.sequence_parallel shards every activation, not the same); drop it to import")
    if active and partition:
        m.ignore("--partition-activations", True, "no effect with --tensor-model-parallel-size 1: one rank keeps "
                 "the whole layer input")
    _remote_device(m)


def _remote_device(m: Mapper) -> None:
    """``--remote-device cpu / nvme``: ZeRO-3 (``deepspeed.zero.Init``, enabled only at stage 3)
    creates the partitioned parameters in host memory or on NVMe, ZeRO-Infinity's offload with
    the JSON config's ``offload_param``; not modelled."""
    raw = m.get("--remote-device")
    if raw is None:
        return
    kind = str(raw).strip().lower()
    if kind not in ("none", "cpu", "nvme"):
        raise SpecError("--remote-device", raw, "one of none, cpu, nvme (Megatron-DeepSpeed's choices)")
    if kind == "none":
        m.ignore("--remote-device", raw, "none: parameters on the GPUs (Megatron-DeepSpeed's default)")
    elif not m.get(FLAG) or m.spec["job"].get("zero") != 3:
        m.ignore("--remote-device", raw, "no effect below ZeRO-3 under --deepspeed: deepspeed.zero.Init, which "
                 "reads it, runs only with --zero-stage 3")
    else:
        raise SpecError("--remote-device", raw, "none: ZeRO-Infinity's parameter offload to host memory or NVMe "
                        "is not modelled (teton keeps ZeRO-3's parameter shards on the GPUs)")
