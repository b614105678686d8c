"""Which kind of transformer layer each layer of each pipeline chunk is.

Most layers of a job run the same block; the model and three settings make some of them
differ, each by the layer's position:

* the model's layer types (``teton.spec.layer_types``: a hybrid pattern, a dense prefix, MoE
  every N-th layer, windowed attention): layer ``i`` of the model is of ``model.layer_types()[i]``,
  and its block is built from ``model.as_layer(type)``. A uniform model's kinds carry no type
  (``LayerKind.layer`` None), so its kinds, labels and blocks are those of a model without types.

* ``software.fp8_bf16_layers = N`` (fp8 jobs): the first N and the last N layers of the model
  run in bf16 (Megatron-LM's ``--first-last-layers-bf16`` with ``--num-layers-at-start-in-bf16``
  / ``--num-layers-at-end-in-bf16``; Megatron-Core's ``TransformerBlock`` builds those layers
  outside fp8 autocast). Layer ``i`` of the model sits on virtual stage ``c * p + r`` as
  ``workload.pipeline.split_layers`` cuts them: the first ones on pipeline rank 0's first
  chunk (and on into rank 1's when that chunk holds fewer than N), the last ones on the last
  rank's last chunk.
* ``job.recompute = selective_layer``: torchtitan's per-layer AC checkpoints every N-th layer a
  rank builds, counted over its chunks in order (``workload.recompute.checkpointed_layers``).
* ``software.cpu_offload_layers = N``: the first N layers of each chunk send their saved
  activations to host memory (Megatron-Core's ``cpu_offloading_num_layers``, applied per model
  chunk through Transformer Engine's ``get_cpu_offload_context(num_layers, model_layers)``, whose
  double-buffered handler offloads the first ``num_layers`` groups). ASSUMPTION: at most all but
  the chunk's last layer, whose backward starts as soon as its forward ends (Megatron requires
  ``cpu_offloading_num_layers`` below the layer count).

:func:`layer_kind_counts` gives every kind the model and the job's settings allow (zeros
included, the plain kind of the first layer type first) and how many layers of each chunk are of
it; ``workload.step_work`` builds each kind's block and ``workload.memory`` each kind's saved
bytes; :func:`layer_type_counts` sums them per layer type (parameters depend on the type alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

from teton.memo import ValueMemo, cached
from teton.spec.job import JobSpec
from teton.spec.layer_types import LayerType
from teton.spec.model import ModelSpec
from teton.workload.pipeline import PipelineSplit


@dataclass(frozen=True)
class LayerKind:
    """What sets a layer apart from the plain layer of its job."""

    bf16: bool = False  # kept in bf16 in an fp8 job (software.fp8_bf16_layers)
    checkpointed: bool = False  # fully checkpointed by selective_layer's per-layer AC
    offloaded: bool = False  # saved activations in host memory (software.cpu_offload_layers)
    layer: LayerType | None = None  # the layer's type in a model of several (None: a uniform model)

    @property
    def label(self) -> str:
        """``layer`` for the plain kind of a uniform model, else ``<what>[_<what>]_layer``
        (``checkpointed_layer``, ``bf16_layer``, ``bf16_offloaded_layer``, ``dense_layer``,
        ``mamba_layer``, ``bf16_moe_layer``, ...; the type's name by :func:`type_name`)."""
        parts = [n for n, on in (("bf16", self.bf16), ("checkpointed", self.checkpointed),
                                 ("offloaded", self.offloaded)) if on]
        if self.layer is not None:
            parts.append(type_name(self.layer))
        return "_".join([*parts, "layer"])


# (mixer, ffn) -> the name a layer type's kinds carry in reports
_TYPE_NAMES = {("attention", "dense"): "dense", ("attention", "moe"): "moe", ("mamba", "none"): "mamba",
               ("attention", "none"): "attention", ("none", "dense"): "mlp", ("none", "moe"): "moe_mlp"}


def type_name(t: LayerType) -> str:
    """``dense``, ``moe`` (attention + dense / MoE MLP), ``mamba``, ``attention``, ``mlp``,
    ``moe_mlp`` (a hybrid pattern's one-sub-block layers), ``windowed_`` before a windowed one's."""
    name = _TYPE_NAMES.get((t.mixer, t.ffn), t.label.replace("+", "_"))
    return ("windowed_" + name) if t.windowed else name


@cached(64)
def model_layer_types(model: ModelSpec) -> tuple[LayerType, ...] | None:
    """Every layer's type, None for a uniform model (memoised per model)."""
    types = model.layer_types()
    return None if all(t == types[0] for t in types) else types


@cached(256)
def kind_model(model: ModelSpec, layer: LayerType | None) -> ModelSpec:
    """The model a kind's block is built from: ``model`` itself (no type), else every layer of
    ``layer`` (``ModelSpec.as_layer``), memoised."""
    return model if layer is None else model.as_layer(layer)


def bf16_layers(job: JobSpec) -> int:
    """Layers at each end of the model an fp8 job keeps in bf16 (0 for a bf16 job)."""
    return job.software.fp8_bf16_layers if job.precision == "fp8" else 0


_COUNTS = ValueMemo(1024)  # (chunk layer counts, bf16 layers, AC interval, offloaded layers) -> counts


def layer_kind_counts(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> dict[LayerKind, np.ndarray]:
    """(p, v) layers of each chunk per kind (module docstring), for every kind ``model`` and
    ``job`` allow; memoised by what decides them (the step's hot path asks twice per layout)."""
    n_bf16, n_off = bf16_layers(job), job.software.cpu_offload_layers
    interval = job.recompute_interval if job.recompute == "selective_layer" else 0
    types = model_layer_types(model)
    if not (n_bf16 or interval or n_off or types):  # every layer is the plain one
        plain = split.layers.view()
        plain.flags.writeable = False
        return {LayerKind(): plain}
    key = (split.layers.shape, split.layers.tobytes(), n_bf16, interval, n_off, types)
    hit = _COUNTS.get(key)
    if hit is None:
        hit = _COUNTS.put(key, _counts(split, n_bf16, interval, n_off, types))
    return hit


def layer_type_counts(model: ModelSpec, job: JobSpec, split: PipelineSplit) -> dict[LayerType | None, np.ndarray]:
    """(p, v) layers of each chunk per layer type (None: a uniform model's only one): the kinds of
    :func:`layer_kind_counts` summed over their bf16 / checkpointed / offloaded flags."""
    kinds = layer_kind_counts(model, job, split)
    if len(kinds) == 1:
        return {k.layer: n for k, n in kinds.items()}
    out: dict[LayerType | None, np.ndarray] = {}
    for kind, n in kinds.items():
        out[kind.layer] = out[kind.layer] + n if kind.layer in out else n
    return out


def _counts(split: PipelineSplit, n_bf16: int, interval: int, n_off: int,
            types: tuple[LayerType, ...] | None) -> dict[LayerKind, np.ndarray]:
    p, v, layers = split.p, split.v, split.layers
    total = int(layers.sum())
    options = [(False, True) if on else (False,) for on in (n_bf16 > 0, interval > 0, n_off > 0)]
    distinct = list(dict.fromkeys(types)) if types else [None]
    counts = {LayerKind(*flags, layer=t): np.zeros((p, v), dtype=np.int64)
              for flags in product(*options) for t in distinct}
    first = np.zeros((p, v), dtype=np.int64)  # model index of each chunk's first layer
    offset = 0
    for c in range(v):
        for r in range(p):
            first[r, c] = offset
            offset += int(layers[r, c])
    for r in range(p):
        built = 0  # layers this rank has built so far (torchtitan's per-process counter)
        for c in range(v):
            n = int(layers[r, c])
            offloaded = min(n_off, max(n - 1, 0))
            for j in range(n):
                built += 1
                i = int(first[r, c]) + j
                kind = LayerKind(bf16=i < n_bf16 or i >= total - n_bf16,
                                 checkpointed=interval > 0 and built % interval == 0, offloaded=j < offloaded,
                                 layer=types[i] if types else None)
                counts[kind][r, c] += 1
    for a in counts.values():
        a.flags.writeable = False
    return counts
