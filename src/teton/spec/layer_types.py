"""What each layer of a model is: its token mixer and its feed-forward part.

A model's layers need not be alike. Four settings of ``model:`` say which layer is which, by its
position ``i`` (0-based):

* ``layer_pattern`` (Nemotron-H's ``hybrid_override_pattern``, Megatron-Core's hybrid models): one
  character per layer, ``M`` a Mamba-2 layer, ``*`` self-attention, ``-`` a dense MLP, ``E`` an
  MoE MLP. Each such layer is one sub-block with its own pre-norm and residual (Megatron-Core's
  ``MambaStack`` builds one ``MambaLayer`` / ``TransformerLayer`` / ``MLPLayer`` per character).
* ``first_dense_layers = K`` (DeepSeek-V3's ``first_k_dense_replace``, Kimi K2): the first K layers
  have a dense MLP of width ``ffn_hidden``, the rest an MoE MLP.
* ``moe_layer_interval = N`` (Llama 4's ``interleave_moe_layer_step``; Megatron's
  ``moe_layer_freq``): layer ``i`` is MoE when ``(i + 1) % N == 0`` (Maverick, N = 2: layers 1, 3,
  5, ... are MoE), the others dense.
* ``sliding_window`` with ``global_attention_every = N`` (GPT-OSS's alternating ``layer_types``,
  Llama 4's chunked attention with a NoPE layer every 4th): every N-th layer (``(i + 1) % N == 0``)
  attends to the whole sequence, the others to the last ``sliding_window`` keys; N = 0: every layer
  windowed.

Without these every layer is one attention + MLP block, dense or MoE as ``model.experts`` says.
:class:`LayerType` names one kind; :func:`layer_types` lists them per layer and
``ModelSpec.as_layer`` gives the model every one of whose layers is of a given kind, so the
workload builds each kind's block as it builds a uniform model's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from teton.errors import SpecError
from teton.memo import cached

Mixer = Literal["attention", "mamba", "none"]
Ffn = Literal["dense", "moe", "none"]
# layer_pattern characters -> (mixer, ffn)
PATTERN_CHARS: dict[str, tuple[str, str]] = {"M": ("mamba", "none"), "*": ("attention", "none"),
                                             "-": ("none", "dense"), "E": ("none", "moe")}


@dataclass(frozen=True, order=True)
class LayerType:
    """One kind of layer: its token mixer, its feed-forward part and whether its attention is
    windowed (``model.sliding_window``)."""

    mixer: str = "attention"  # attention | mamba | none
    ffn: str = "dense"  # dense | moe | none
    windowed: bool = False

    @property
    def label(self) -> str:
        """``attention+moe``, ``mamba``, ``dense``, ``windowed_attention+moe``, ..."""
        mixer = ("windowed_" if self.windowed else "") + self.mixer
        parts = [p for p in (mixer, self.ffn) if p != "none"]
        return "+".join(parts)

    @property
    def sub_blocks(self) -> int:
        """Pre-norm + residual sub-blocks of the layer (1 or 2)."""
        return (self.mixer != "none") + (self.ffn != "none")


def check_pattern(pattern: str, layers: int) -> None:
    """``model.layer_pattern``'s rules: one known character per layer."""
    bad = sorted(set(pattern) - set(PATTERN_CHARS))
    if bad:
        raise SpecError("model.layer_pattern", pattern,
                        f"has {bad[0]!r}; allowed: M (Mamba-2), * (attention), - (MLP), E (MoE)")
    if len(pattern) != layers:
        raise SpecError("model.layer_pattern", pattern,
                        f"has {len(pattern)} characters; must have one per layer (model.layers = {layers})")


@cached(256)
def layer_types(layers: int, experts: int, pattern: str | None, first_dense: int, moe_interval: int,
                window: int | None, global_every: int) -> tuple[LayerType, ...]:
    """The :class:`LayerType` of every layer (module docstring); memoised by its arguments (the
    workload asks for a model's kinds on every layout of a search)."""
    out = []
    for i in range(layers):
        if pattern:
            mixer, ffn = PATTERN_CHARS[pattern[i]]
        else:
            moe = experts > 1 and i >= first_dense and (i + 1) % moe_interval == 0
            mixer, ffn = "attention", "moe" if moe else "dense"
        windowed = bool(window) and mixer == "attention" and not (global_every and (i + 1) % global_every == 0)
        out.append(LayerType(mixer, ffn, windowed))
    return tuple(out)


@cached(256)
def layer_type_counts(*args) -> tuple[tuple[LayerType, int], ...]:
    """(kind, layers of it) for :func:`layer_types` ``(*args)``, in the order the kinds first appear;
    memoised by the same arguments (a search asks it for every layout)."""
    out: dict[LayerType, int] = {}
    for t in layer_types(*args):
        out[t] = out.get(t, 0) + 1
    return tuple(out.items())
