"""The settings a published row's own recipe states beyond its table: CUDA graphs, the MoE
all-to-all overlap, fp8 attention and the recomputed modules (``teton/data/training-set-2-recipes.csv``).

Megatron-Bridge's performance tables give each row's layout and batch but not the switches that
change its time; its performance recipes (``src/megatron/bridge/perf_recipes/<family>/<gpu>/``,
shipped in the PyPI sdist from 0.6.0, the NeMo 26.08 generation) do. A recipe is matched to a row
by release, system, model and precision, and must state the row's layout (TP, PP, VP, EP,
micro-batch): a test checks every one against its row, so a recipe of another layout cannot be
applied. A 26.06 or 26.06.01 row of a 26.08 recipe's layout runs that recipe (:data:`INHERITS`:
the published throughputs show those releases ran it). The 26.08 table has no B300 rows; the
sdist's B300 recipes are kept for the 26.06 B300 rows of their layouts, whose steps moved with
GB200's and GB300's in that release (Qwen3-30B-A3B: 8.58 -> 6.43 s on B300, 8.33 -> 5.79 s on
GB300 and 10.07 -> 6.44 s on GB200, the release whose GB rows the recipes' full-iteration graphs
explain). Each row of the table names the recipe function it was read from; its columns map to
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


# Releases that ran a later release's recipes: at the layout of a 26.08 recipe, every MoE model's
# 26.06 row runs within 2.3 % of its 26.08 row (DeepSeek-V3, GPT-OSS, Qwen3-30B and 235B on GB200
# and GB300: 0.995-1.023 of 26.08's tokens/s), while 26.04.01 at the same layouts runs at 0.65-0.87:
# the full-iteration graphs and the all-to-all overlap arrived in 26.06. 26.06.01 likewise (GPT-OSS
# 120B excepted: 0.61-0.64 of 26.08, a regression of that release teton does not model).
INHERITS = {"26.06": "26.08", "26.06.01": "26.08"}


def row_layout(row) -> tuple[int, ...]:
    """A published row's TP, PP, VP, EP and micro-batch (1 where a cell is empty)."""
    return tuple(getattr(row, f) or 1 for f in LAYOUT)


def recipe_of(row) -> RowRecipe | None:
    """The recipe of a ``training_set2.PublishedRow``: its release's, or (:data:`INHERITS`) the later
    release's recipe of the same system, model, precision and layout; None where none is bundled."""
    own = row_recipes().get((row.release, row.system, row.model, row.precision))
    if own is not None or row.release not in INHERITS:
        return own
    later = row_recipes().get((INHERITS[row.release], row.system, row.model, row.precision))
    return later if later is not None and later.layout == row_layout(row) else None
