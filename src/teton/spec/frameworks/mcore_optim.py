"""Megatron-Core's precision-aware optimizer (``OptimizerConfig.use_precision_aware_optimizer``,
Megatron-Core 0.16 ``optimizer/optimizer_config.py``), as Megatron-LM's flags and NeMo 2.0's
``optim.config`` keys name it: the Adam moments' dtype (``exp_avg_dtype`` / ``exp_avg_sq_dtype``:
``job.adam_moments``), the master weights' (``main_params_dtype``: teton keeps them in fp32) and
the main gradients' (``main_grads_dtype``). Without the precision-aware optimizer Megatron-Core
asserts all four fp32. NeMo writes the dtypes as torch's (``torch.bfloat16``), Megatron-LM as
``bf16``: both are read.
"""

from __future__ import annotations

from typing import Any

from teton.errors import SpecError
from teton.spec.frameworks.common import Mapper
from teton.spec.frameworks.mcore import KeyOf, flag, given_value, is_on

_ALIASES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
ACCUMULATE_FP32 = "--accumulate-allreduce-grads-in-fp32"


def dtype_name(raw: Any) -> str:
    """``bf16``, ``torch.bfloat16`` and ``bfloat16`` alike as Megatron-LM's name (``bf16``)."""
    text = str(raw).strip().lower().removeprefix("torch.")
    return _ALIASES.get(text, text)


def optimizer_dtypes(m: Mapper, key_of: KeyOf = flag, sets_grad_buffer: bool = True) -> None:
    """The precision-aware optimizer's dtypes. ``sets_grad_buffer``: Megatron-LM, whose
    ``validate_args`` under ``--bf16`` accumulates and reduces the gradients in fp32 unless
    ``--grad-reduce-in-bf16`` or ``--main-grads-dtype bf16`` (so bf16 main grads are a bf16
    gradient buffer: ``software.grad_accum_dtype``); NeMo sets the buffer's dtype itself
    (``ddp.grad_reduce_in_fp32``), and Megatron-Core reads ``main_grads_dtype`` nowhere but its
    assert: the optimizer takes the buffer's gradients as they are (``decoupled_grad``)."""
    aware_key = key_of("use_precision_aware_optimizer")
    aware = is_on(m, aware_key)
    if aware:
        m.ignore(aware_key, m.config[aware_key], "lets Megatron-Core keep the Adam moments in "
                 f"{key_of('exp_avg_dtype')} / {key_of('exp_avg_sq_dtype')} (read with them); no cost of its own")
    elif given_value(m, aware_key) is not None:
        m.ignore(aware_key, m.config[aware_key], "off: Megatron-Core keeps fp32 master weights, main grads and "
                 "Adam moments")
    _moments(m, key_of, aware_key, aware)
    key = key_of("main_params_dtype")
    raw = given_value(m, key)
    if raw is not None:
        if dtype_name(raw) != "fp32":
            raise SpecError(key, raw, "fp32: teton keeps fp32 master weights (master weights in a lower precision, "
                            "Transformer Engine FusedAdam's master_weight_dtype, are not modelled)")
        m.ignore(key, raw, "fp32: the master weights teton keeps (Megatron-Core's default)")
    _main_grads(m, key_of("main_grads_dtype"), aware_key, aware, sets_grad_buffer)


def _moments(m: Mapper, key_of: KeyOf, aware_key: str, aware: bool) -> None:
    """``exp_avg_dtype`` / ``exp_avg_sq_dtype``: both bf16 (or fp16, the same two bytes) is
    ``job.adam_moments: bf16``; fp8 moments, or the two moments in different dtypes, are not
    modelled."""
    keys = (key_of("exp_avg_dtype"), key_of("exp_avg_sq_dtype"))
    given = {k: given_value(m, k) for k in keys if given_value(m, k) is not None}
    if not given:
        return
    names = {k: dtype_name(v) for k, v in given.items()}
    for k, name in names.items():
        if name not in ("fp32", "bf16", "fp16"):
            raise SpecError(k, given[k], "one of fp32, bf16, fp16; fp8 moments are not modelled (job.adam_moments: "
                            "fp32 or bf16)")
    moments = {k: "fp32" if names.get(k, "fp32") == "fp32" else "bf16" for k in keys}
    if "bf16" in moments.values() and not aware:
        key = next(k for k in keys if moments[k] == "bf16")
        raise SpecError(key, given[key], f"needs {aware_key} (without it Megatron-Core asserts fp32 moments)")
    if moments[keys[0]] != moments[keys[1]]:
        raise SpecError(keys[1], given.get(keys[1], "fp32"), f"must match {keys[0]} ({given.get(keys[0], 'fp32')}): "
                        "teton keeps both Adam moments in one dtype (job.adam_moments)")
    for key, raw in given.items():
        m.put("job.adam_moments", moments[key], key, raw, "fp16: the same two bytes as bf16" if names[key] == "fp16"
              else "")


def _main_grads(m: Mapper, key: str, aware_key: str, aware: bool, sets_grad_buffer: bool) -> None:
    raw = given_value(m, key)
    if raw is None:
        return
    name = dtype_name(raw)
    if name not in ("fp32", "bf16"):
        raise SpecError(key, raw, "one of fp32, bf16 (Megatron-Core's main grads)")
    if name == "fp32":
        m.ignore(key, raw, "fp32: Megatron-Core's default (the gradient buffer's dtype is software.grad_accum_dtype)")
        return
    if not aware:
        raise SpecError(key, raw, f"needs {aware_key} (without it Megatron-Core asserts fp32 main grads)")
    if not sets_grad_buffer:
        m.ignore(key, raw, "no effect of its own: Megatron-Core's precision-aware optimizer reads the gradient "
                 "buffer as it is, in the dtype trainer.strategy.ddp.grad_reduce_in_fp32 sets "
                 "(software.grad_accum_dtype)")
        return
    if m.get(ACCUMULATE_FP32):
        raise SpecError(key, raw, f"fp32 with {ACCUMULATE_FP32}: the main grads are then the fp32 gradient buffer")
    m.put("software.grad_accum_dtype", "bf16", key, raw, "Megatron-LM then accumulates the gradients and reduces "
          "them over DP in bf16 (no fp32 main_grad buffer)")
