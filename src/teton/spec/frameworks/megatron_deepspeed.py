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
