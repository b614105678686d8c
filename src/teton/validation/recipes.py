"""The settings a published row's own recipe states beyond its table: CUDA graphs, the MoE
all-to-all overlap, fp8 attention and the recomputed modules (``teton/data/training-set-2-recipes.csv``).

Megatron-Bridge's performance tables give each row's layout and batch but not the switches that
change its time; its performance recipes (``src/megatron/bridge/perf_recipes/<family>/<gpu>/``,
shipped in the PyPI sdist from 0.6.0, the NeMo 26.08 generation) do. A recipe is matched to a row
by release, system, model and precision, and must state the row's layout (TP, PP, VP, EP,
micro-batch): a test checks every one against its row, so a recipe of another layout cannot be
applied. Each row of the table names the recipe function it was read from; its columns map to
teton's fields as:

* ``cuda_graph_impl = "full_iteration"`` -> ``software.cuda_graphs = full`` (the whole step
  replayed; Transformer Engine's per-module scopes, ``attn`` / ``moe_router`` / ``moe_preprocess``,
  leave the experts and the dispatcher eager and are not modelled: ``none``);
* ``comm_overlap.overlap_moe_expert_parallel_comm`` (with ``delay_wgrad_compute``) ->
  ``software.ep_comm_overlap``;
* ``mixed_precision.fp8_dot_product_attention`` -> ``software.fp8_attention``;
* ``recompute_modules`` under ``recompute_granularity = "selective"`` -> ``job.recompute =
  selective`` with ``job.recompute_modules`` (an empty list recomputes nothing: ``none``).

Not modelled, and listed here so that a reader knows: HybridEP's dispatcher kernels (priced as
teton's all-to-all), the CuTe DSL fused grouped MLP and Transformer Engine's op fuser (fewer
launches, which a full-iteration graph removes anyway), ``moe_paged_stash`` (MoE activations
stashed in host memory: memory only) and ``moe_expert_rank_capacity_factor`` (a padded buffer for
the graph, with force-balanced routing never reached).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

from teton.memo import cached

RECIPE_FILE = "training-set-2-recipes.csv"
LAYOUT = ("tp", "pp", "vp", "ep", "mbs")


@dataclass(frozen=True)
class RowRecipe:
    """One recipe's settings for the rows of (release, system, model, precision)."""

    release: str
    system: str
    model: str
    precision: str
    layout: tuple[int, ...]  # TP, PP, VP, EP, micro-batch as the recipe sets them (VP 1: none)
    cuda_graphs: str
    ep_comm_overlap: bool
    fp8_attention: bool
    recompute_modules: tuple[str, ...]
    recipe: str  # the source file and function

    def software(self) -> dict:
        """The ``software`` fields the recipe sets."""
        return {"cuda_graphs": self.cuda_graphs, "ep_comm_overlap": self.ep_comm_overlap,
                "fp8_attention": self.fp8_attention}

    def job(self) -> dict:
        """The ``job`` fields the recipe sets: its recomputation."""
        if not self.recompute_modules:
            return {"recompute": "none"}
        return {"recompute": "selective", "recompute_modules": list(self.recompute_modules)}


@cached(1)
def row_recipes() -> dict[tuple[str, str, str, str], RowRecipe]:
    """Every bundled recipe, by (release, system, model, precision)."""
    text = resources.files("teton.data").joinpath(RECIPE_FILE).read_text()
    out = {}
    for r in csv.DictReader(text.splitlines()):
        recipe = RowRecipe(r["release"], r["system"], r["model"], r["precision"],
                           tuple(int(r[k] or 1) for k in LAYOUT), r["cuda_graphs"], r["ep_comm_overlap"] == "true",
                           r["fp8_attention"] == "true", tuple(r["recompute_modules"].split()), r["recipe"])
        out[(recipe.release, recipe.system, recipe.model, recipe.precision)] = recipe
    return out


def recipe_of(row) -> RowRecipe | None:
    """The recipe of a ``training_set2.PublishedRow``, or None where none is bundled."""
    return row_recipes().get((row.release, row.system, row.model, row.precision))
