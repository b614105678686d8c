"""Training set 2: about 350 published pre-training rows from NVIDIA's performance tables, Megatron-LM's
READMEs, BLOOM and MT-NLG (``teton/data/training-set-2.csv``, with each row's source, commit and FLOP
convention), each turned into a spec and a measured step time.

Sources (the CSV's ``source``): **A** NeMo 24.07 performance summary (H100 fp8, three revisions of
one table: repeat measurements of the same configurations); **B** NeMo's long-sequence (context
parallel) tables, H100 (24.03) and B200 (25.04); **C** the NeMo Framework user guide's summaries
25.02-25.07 (B200, GB200, one H100 row); **D** Megatron-Bridge's performance summary and archive
(containers 25.09-26.08; its H100 rows are not part of this set); **E** Megatron-LM's H100 weak-
scaling table (core_r0.8.0); **F** Megatron-LM's Llama fp8 table; **H** BLOOM 176B (Jean Zay) and
MT-NLG 530B (Selene) on A100.

Every row is loaded; :func:`row_status` says whether teton judges it, and why not:

* ``inconsistent`` (as flagged in the data, with the published inconsistency): B's B200 table,
  whose degrees multiply to a quarter of its GPU counts; Mixtral 8x22B's swapped batch columns; rows
  whose own batch arithmetic does not add up; and (found here) an EP that does not divide the ranks
  of one pipeline stage;
* ``no_layout`` / ``no_measurement``: a throughput without its parallel layout, or a truncated cell;
* ``needs_hardware``: a system whose GPU or host the catalog lacks (none today);
* ``needs_model``: models whose configuration the sources do not give (Nemotron 3's hybrid Mamba-2 /
  MoE patterns, DeepSeek-V4): the model spec can describe their layers, not guess their sizes;
* ``incomplete_layout``: a pipelined row whose virtual stages and micro-batch are not published.

A judged row becomes a spec: the system's cluster preset, the model, the layout as published (DP
from the GPU count; interleaved with ``VP > 1``; Megatron-FSDP, ZeRO-3, where ``FSDP > 0``, else the
distributed optimizer, ZeRO-1; sequence parallelism with TP), the software stack of its release with
the row's fp8 recipe, and activation memory savings where the source does not state them: none if the
job fits in memory, else the least that does (``teton.validation.memory_saving``: for an MoE row of
Megatron-Bridge, selective recompute of the cheap modules, as its MoE recipes do; on Grace hosts,
GB200 / GB300 NVL72, CPU activation offload of the fewest layers that fits; else full recompute;
selective recompute of the attention core saves nothing under flash attention). NeMo's and Megatron-Bridge's Llama 3.1 405B split the embedding and the loss into the
pipeline as a layer each (``pp_embedding_slots``). MoE rows (Mixtral, Qwen3, DeepSeek-V3, Kimi K2,
GPT-OSS, Llama 4) run force-balanced routing (NVIDIA's tables: "we force-balance the token
distribution among experts"), experts without tensor parallelism (the recipes'
``expert_tensor_parallel_size`` 1) in Megatron's ``tp-cp-ep-dp-pp`` order, a ``(tokendrop)`` row
with capacity factor 1 and a ``(w/o MTP)`` row without DeepSeek-V3's MTP module. Its measured step time is
``GBS x seq / (tokens/s/GPU x GPUs)``; rows with only TFLOP/s are converted with their source's FLOP
convention (``teton.validation.flop_conventions``), rows with an iteration time (BLOOM, MT-NLG) use it.
Where the row's own performance recipe is bundled (``teton.validation.recipes``: Megatron-Bridge's
26.08 MoE recipes), its CUDA graphs, all-to-all overlap, fp8 attention and recomputed modules are
the row's, not inferred.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from importlib import resources

from teton.memo import cached
from teton.validation.memory_saving import unstated_memory_saving
from teton.validation.recipes import recipe_of

DATA_FILE = "training-set-2.csv"
SOURCE_NAMES = {
    "A": "NeMo 24.07 performance summary", "B": "NeMo long-sequence performance",
    "C": "NeMo Framework performance summary", "D": "Megatron-Bridge performance summary",
    "E": "Megatron-LM weak scaling (core_r0.8.0)", "F": "Megatron-LM Llama fp8 table",
    "H": "BLOOM 176B / MT-NLG 530B on A100",
}
JUDGED = "judged"
# MoE rows: run and compared with their measurement (``teton validate``'s case training-set-2-moe),
# but not part of the fit: their misses are per model (GPT-OSS and Nemotron 3 Nano about a quarter
# too fast on every GPU and release), and fitted together with the dense rows they would move every
# stack's in-situ values (stop 48: the dense rows' leave-one-out mean 3.7 -> 6.0 %, theirs 16.7 %)
PREDICTED = "predicted"
MOE_NOT_FITTED = ("MoE row: predicted with the values fitted on the dense rows (training-set-2-moe), not part "
                  "of the fit: its misses are per model (docs/moe.md, what is left), and fitted in they would "
                  "move the dense rows' values")
# system -> cluster preset (DGX H100 above 1,024 GPUs: the 8K variant). The NVL72 SuperPODs' compute
# trays hold 4 GPUs in a 72-GPU NVLink domain (one rack): a job of up to 72 GPUs runs inside one
# domain, a larger one spans whole racks (256 GPUs: 3 full racks and part of a fourth).
SYSTEMS = {"DGX-H100": "dgx-h100-superpod", "DGX-B200": "dgx-b200-superpod", "DGX-A100": "selene",
           "Jean-Zay-A100-80GB": "jean-zay-a100", "DGX-GB200": "gb200-nvl72-superpod",
           "DGX-GB300": "gb300-nvl72-superpod", "DGX-B300": "dgx-b300-superpod"}
# systems whose rows the catalog cannot describe yet (none since GB200 / GB300 NVL72 and B300 joined
# it). GB300 rows run 1.05-1.27x GB200's throughput at the same layout, release and dense peaks: the
# catalog gives Blackwell Ultra (B300, GB300) a GPU family of its own, so its in-situ values are its own.
NEEDS_HARDWARE: dict[str, str] = {}
# published precisions that do not say what ran: a row of one is listed, not judged (its step time
# depends on the precision and recipe as much as on the layout). NeMo 25.07's GB200 table gives a
# second value in parentheses, with its own mapping for the 70B and 405B, without saying what it
# measures (Megatron-Bridge's 25.09 page, the next, says its parentheses are MXFP8 32 x 32 blocks)
UNSTATED_PRECISIONS = {"unstated (likely MXFP8)": (
    "the page does not say what its parenthesised second value ran: a second mapping of unstated "
    "precision and recipe (MXFP8 by the next release's footnote, unverified)")}
# the source's model name (its leading word) -> teton model (a preset, or a mapping)
MODELS: dict[str, str | dict] = {
    "GPT3-5B": {"base": "gpt3-5b", "vocab": 51200}, "GPT3-20B": {"base": "gpt3-20b", "vocab": 51200},
    "GPT3-175B": {"base": "gpt3-175b", "vocab": 51200},  # NeMo's perf runs: vocabulary 51,200
    "LLAMA2-7B": "llama2-7b", "LLAMA2-13B": "llama2-13b", "LLAMA2-70B": "llama2-70b",
    "LLAMA3-8B": "llama3-8b", "LLAMA3_8B": "llama3-8b", "LLAMA3-70B": "llama3-70b", "LLAMA3_70B": "llama3-70b",
    "LLAMA3-405B": "llama3.1-405b", "LLAMA3.1-405B": "llama3.1-405b", "LLAMA3.1_405B": "llama3.1-405b",
    "Nemotron-8B": "nemotron3-8b", "Nemotron-22B": "nemotron3-22b", "Nemotron-15B": "nemotron4-15b",
    "Nemotron-340B": "nemotron4-340b", "Mixtral-8x7B": "mixtral-8x7b", "Mixtral-8x22B": "mixtral-8x22b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
    "BLOOM-176B": "bloom-176b", "MT-NLG-530B": "mt-nlg-530b",
    "DeepSeekV3": "deepseek-v3", "Kimi_K2": "kimi-k2", "GPT": "gpt-oss-120b",
    "LLAMA4-Scout-LLM": "llama4-scout", "LLAMA4-Maverick-LLM": "llama4-maverick",
    "Nemotron_3_Nano": "nemotron-3-nano",  # its config: Megatron-Bridge 0.6.0's Nano recipe
}
# models whose architecture teton can describe (hybrid Mamba-2 / attention / MoE patterns) but whose
# configuration (layer pattern, widths, experts) none of this set's sources gives (Megatron-Bridge's
# recipes read Super's and Ultra's from the HF hub; 3.5 Lightning is Nano with two MTP layers of
# pattern "*E", which teton's MTP module, one layer of the model's last kind, cannot express)
_NO_CONFIG = ("hybrid Mamba-2 / attention / MoE layers that model.layer_pattern describes, but the sources "
              "give no layer pattern, widths or expert counts for it")
NEEDS_MODEL = {
    "DeepSeekV4": "an architecture without a public config in this set's sources",
    "Nemotron_3_Super": _NO_CONFIG, "Nemotron_3_Ultra": _NO_CONFIG,
    "Nemotron_3_5_Lightning": "Nemotron 3 Nano with two MTP layers of a hybrid pattern (*E, repeated), which "
                              "teton's multi-token prediction module (one layer of the model's last kind) cannot express",
}
def _is_moe(preset: str | dict) -> bool:
    from teton.spec.model import MODEL_PRESETS

    name = preset.get("base", "") if isinstance(preset, dict) else preset
    return MODEL_PRESETS.get(name, {}).get("experts", 1) > 1


def stack_of(row: PublishedRow) -> str:
    """The software stack preset of a row's release."""
    if row.source == "A":
        return "nemo-24.07"
    if row.source == "B":
        return "nemo-24.03" if row.release.startswith("24.03") else "nemo-25.04"
    if row.source == "C":
        return f"nemo-{row.release}"
    if row.source == "D":
        return f"megatron-bridge-{row.release}"
    return {"E": "megatron-core-0.8", "F": "megatron-lm-2025", "H": "megatron-deepspeed"}[row.source]


# published precision -> (job.precision, software.fp8_recipe or None: the stack's default)
PRECISIONS = {"FP8": ("fp8", None), "FP8 (hybrid)": ("fp8", None), "FP8-CS": ("fp8", "current"),
              "FP8-CS (presumed)": ("fp8", "current"), "MXFP8": ("fp8", "mxfp8"), "FP8-MX": ("fp8", "mxfp8"),
              "unstated (likely MXFP8)": ("fp8", "mxfp8"), "NVFP4": ("fp8", "nvfp4"), "BF16": ("bf16", None),
              "mixed (fp16/bf16, unstated)": ("bf16", None)}
INT_FIELDS = ("gpus", "gbs", "mbs", "seq_len", "fsdp", "tp", "pp", "cp", "vp", "ep", "ga")
FLOAT_FIELDS = ("tokens_per_s_per_gpu", "tflops_per_gpu", "step_time_s")


@dataclass(frozen=True)
class PublishedRow:
    """One row of ``training-set-2.csv`` as published (None where the source gives nothing)."""

    id: str
    source: str
    release: str
    where: str
    system: str
    model: str
    variant: str
    precision: str
    flop_convention: str
    flag: str
    flag_reason: str
    gpus: int | None = None
    gbs: int | None = None
    mbs: int | None = None
    seq_len: int | None = None
    fsdp: int | None = None
    tp: int | None = None
    pp: int | None = None
    cp: int | None = None
    vp: int | None = None
    ep: int | None = None
    ga: int | None = None
    tokens_per_s_per_gpu: float | None = None
    tflops_per_gpu: float | None = None
    step_time_s: float | None = None

    @property
    def base_model(self) -> str:
        """The model name without its parenthesised qualifier (``DeepSeekV3 (tokendrop)``)."""
        return self.model.split(" (")[0].split(" ")[0]

    @property
    def config_key(self) -> tuple:
        """What makes two rows the same configuration (repeat measurements of one job)."""
        return (self.release.split("r")[0], self.system, self.model, self.precision, self.gpus, self.gbs, self.mbs,
                self.seq_len, self.fsdp, self.tp, self.pp, self.cp, self.vp, self.ep)


def _number(text: str, kind):
    text = (text or "").strip()
    return kind(float(text)) if text else None


@cached(1)
def published_rows() -> tuple[PublishedRow, ...]:
    """Every row of the bundled CSV."""
    text = resources.files("teton.data").joinpath(DATA_FILE).read_text()
    out = []
    for r in csv.DictReader(text.splitlines()):
        nums = {k: _number(r[k], int) for k in INT_FIELDS} | {k: _number(r[k], float) for k in FLOAT_FIELDS}
        out.append(PublishedRow(**{k: r[k] for k in ("id", "source", "release", "where", "system", "model", "variant",
                                                     "precision", "flop_convention", "flag", "flag_reason")}, **nums))
    return tuple(out)


def row_status(row: PublishedRow) -> tuple[str, str]:
    """(status, reason): ``judged``, or why teton does not judge the row (module docstring)."""
    if row.flag:
        return row.flag, row.flag_reason
    if row.system in NEEDS_HARDWARE:
        return "needs_hardware", NEEDS_HARDWARE[row.system]
    if row.precision in UNSTATED_PRECISIONS:
        return "unstated_precision", UNSTATED_PRECISIONS[row.precision]
    if row.base_model in NEEDS_MODEL or row.model.split(" ")[0] in NEEDS_MODEL:
        return "needs_model", NEEDS_MODEL.get(row.base_model) or NEEDS_MODEL[row.model.split(" ")[0]]
    stage = (row.gpus or 0) // (row.pp or 1)  # ranks of one pipeline stage: tp x cp x dp
    if (row.ep or 1) > 1 and stage % row.ep:
        return "inconsistent", (f"EP {row.ep} does not divide the {stage} ranks of one pipeline stage "
                                f"({row.gpus} GPUs / PP {row.pp or 1}): the published degrees cannot all hold")
    if _is_moe(MODELS.get(row.base_model, "")):
        return PREDICTED, MOE_NOT_FITTED
    if row.source == "E" and (row.pp or 1) > 1:
        return "incomplete_layout", ("pipelined, but its virtual stages and micro-batch size are not published "
                                     "(the bubble depends on both)")
    if row.source == "D" and (row.pp or 1) > 1 and row.vp is None:
        return "incomplete_layout", ("pipelined, but its VP cell is empty: the interleaving that sets the bubble "
                                     "is not published")
    return JUDGED, ""


def _model(row: PublishedRow) -> str | dict:
    """The row's model: a preset, or (E) the Megatron GPT its architecture column gives: vocabulary
    131,072, 4h GELU MLP, MHA (Megatron-LM's GPT defaults: LayerNorm, biases, learned positions,
    dropout, tied embeddings)."""
    if row.source == "E":
        h, a, layers = (int(part[1:]) for part in row.variant.split("-"))
        return dict(name=row.model.lower(), layers=layers, hidden=h, ffn_hidden=4 * h, heads=a, vocab=131072,
                    mlp="gelu", norm="layernorm", bias=True, position_embedding="learned", max_seq_len=4096,
                    dropout=True, tied_embeddings=True)
    model = MODELS[row.base_model]
    change = {k: v for qualifier, fields in MODEL_QUALIFIERS.items() if qualifier in row.model for k, v in fields.items()}
    return {"base": model, **change} if change and isinstance(model, str) else model


# a row's parenthesised model qualifier -> the model fields it sets. Megatron-Bridge's token-drop MoE
# recipes cap each expert at its balanced share and pad it to that (training/utils/moe_token_drop.py,
# apply_moe_token_drop's defaults: moe_expert_capacity_factor 1.0, moe_pad_expert_input_to_capacity True);
# "w/o MTP" drops DeepSeek-V3's multi-token prediction module, which its rows otherwise keep
# (ASSUMPTION: an unlabelled DeepSeek-V3 row trains the model as published, with its MTP module)
MODEL_QUALIFIERS = {"(tokendrop)": {"capacity_factor": 1.0, "pad_to_capacity": True}, "(w/o MTP)": {"mtp_depth": 0}}


# DeepSeek-V3's pipeline layouts by the number of virtual stages (pp x vp), as NVIDIA's DeepSeek-V3
# recipes set them: NeMo 2.4.0 scripts/performance/llm/pretrain_deepseek_v3.py's map_pp_vp_to_layout
# and Megatron-Bridge 0.2.0rc6 ... 0.6.2's set_deepseek_v3_pipeline_model_parallel_layout (the same
# map: (4, 1); (8, 1) and (4, 2); (16, 1), (8, 2) and (4, 4); Megatron-Bridge 0.6.2's GB300 recipes
# write PP 2 x VP 8 as the same sixteen stages, "Et*4|(t*4|)*14tmL"): the embedding with the first
# layers, the MTP module and loss with the last, the stages between even
DEEPSEEK_V3_LAYOUTS = {4: "Et*16|t*16|t*16|t*13{last}", 8: "Et*8|(t*8|)*6t*5{last}", 16: "Et*4|(t*4|)*14t{last}"}


def deepseek_v3_layout(row: PublishedRow) -> str | None:
    """The recipe's ``job.pp_layout`` of a DeepSeek-V3 row (:data:`DEEPSEEK_V3_LAYOUTS`), None for
    another model or a stage count the recipes do not map (Megatron-Core's even split)."""
    if MODELS.get(row.base_model) != "deepseek-v3" or row.source not in "CD":
        return None
    stages = (row.pp or 1) * (row.vp or 1)
    if stages not in DEEPSEEK_V3_LAYOUTS:
        return None
    mtp = "" if "(w/o MTP)" in row.model else "m"
    return DEEPSEEK_V3_LAYOUTS[stages].format(last=mtp + "L")


def _cluster(row: PublishedRow) -> str:
    name = SYSTEMS[row.system]
    return "dgx-h100-superpod-8k" if name == "dgx-h100-superpod" and (row.gpus or 0) > 1024 else name


def _micro_batch(row: PublishedRow) -> int:
    """The published micro-batch; unstated: the whole per-DP batch for Megatron-LM's pipeline-free
    weak-scaling points (E: 4 sequences, no gradient accumulation), else 1."""
    if row.mbs:
        return row.mbs
    if row.source == "E" and (row.pp or 1) == 1:
        return row.gbs * (row.tp or 1) * (row.cp or 1) // row.gpus
    return 1


def row_spec(row: PublishedRow, recompute: str | tuple[str, ...] = "none", offload_layers: int = 0,
             fp8_weights: bool = False) -> dict:
    """The spec mapping of a judged row, with ``recompute`` (the source states it only for H; a
    tuple of modules: selective recompute of those, ``job.recompute_modules``),
    ``offload_layers`` per pipeline chunk of CPU activation offload (``software.cpu_offload_layers``)
    and ``fp8_weights`` (``software.fp8_param_gather``); the row's own recipe, where bundled, sets
    its graphs, overlap, fp8 attention and recompute."""
    precision, recipe = PRECISIONS[row.precision]
    stack = stack_of(row)
    tp, pp, cp, vp = row.tp or 1, row.pp or 1, row.cp or 1, row.vp or 1
    job = dict(gpus=row.gpus, tp=tp, pp=pp, cp=cp, ep=row.ep or 1, seq_len=row.seq_len, micro_batch=_micro_batch(row),
               global_batch=row.gbs, precision=precision, sequence_parallel=tp > 1,
               recompute="selective" if isinstance(recompute, tuple) else recompute,
               zero=3 if (row.fsdp or 0) > 0 else 1, pp_schedule="interleaved" if vp > 1 else "1f1b",
               virtual_stages=vp)
    if row.source == "H":  # both checkpoint every layer's activations (full recompute); no SP in 2021-22
        job.update(recompute="full", sequence_parallel=False)
        if row.model.startswith("BLOOM"):  # --pp-partition-method 'type:transformer|embedding'
            job["pp_embedding_slots"] = True
    if _is_moe(MODELS.get(row.base_model, "")) and row.source in "CD":
        # NVIDIA's MoE tables: "we force-balance the token distribution among experts"; the
        # Megatron-Bridge / NeMo MoE recipes run the experts without tensor parallelism
        # (expert_tensor_parallel_size 1) in Megatron's tp-cp-ep-dp-pp order (the MoE default)
        job.update(moe_router_balance="forced", etp=1)
    if row.source in "CD" and _model(row) == "llama3.1-405b" and pp > 1:
        # NeMo's and Megatron-Bridge's Llama 3.1 405B recipes split 126 layers + embedding + loss
        # (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split): the only
        # reading under which their PP x VP (8 x 8, 16 x 8, 8 x 4) divides the layers
        job["pp_embedding_slots"] = True
    layout = deepseek_v3_layout(row)
    if layout is not None:
        job["pp_layout"] = layout
    if isinstance(recompute, tuple):
        job["recompute_modules"] = list(recompute)
    software = {"base": stack} if recipe is None else {"base": stack, "fp8_recipe": recipe}
    if offload_layers:
        software["cpu_offload_layers"] = offload_layers
    if fp8_weights:
        software["fp8_param_gather"] = True
    stated = recipe_of(row)  # the row's own recipe: its graphs, overlap, fp8 attention, recompute
    if stated is not None:
        software.update(stated.software())
        job.update(stated.job())
    return {"cluster": _cluster(row), "model": _model(row), "software": software, "job": job}


def measured_step_s(row: PublishedRow, spec) -> float:
    """The row's measured step time: its iteration time, or ``GBS x seq / (tokens/s/GPU x GPUs)``,
    tokens/s from TFLOP/s with the source's FLOP convention where only that is published."""
    if row.step_time_s:
        return row.step_time_s
    from teton.validation.flop_conventions import flops_per_token

    tokens = row.tokens_per_s_per_gpu or row.tflops_per_gpu * 1e12 / flops_per_token(
        row.flop_convention, spec.model, row.seq_len)
    return row.gbs * row.seq_len / (tokens * row.gpus)


def _metric(row: PublishedRow) -> tuple[str, float]:
    if row.step_time_s:
        return "step_time_s", row.step_time_s
    if row.tokens_per_s_per_gpu:
        return "tokens_per_s_per_gpu", row.tokens_per_s_per_gpu
    return "tflops_per_gpu", row.tflops_per_gpu


def row_note(row: PublishedRow, recompute_note: str) -> str:
    """What the spec assumes beyond the row as published."""
    notes = [row.variant] if row.variant and row.source not in "EH" else []
    if recompute_note:
        notes.append(recompute_note)
    if row.mbs is None and row.source != "H":
        notes.append(f"micro-batch unstated: {_micro_batch(row)}")
    if row.source == "H" and row.model.startswith("MT-NLG"):
        notes.append("micro-batch unstated: 1; fp16 as bf16 (the same A100 peak)")
    if not row.tokens_per_s_per_gpu and not row.step_time_s:
        notes.append(f"tokens/s from TFLOP/s ({row.flop_convention} FLOP count)")
    return "; ".join(notes)


@cached(1)
def training_runs_2() -> tuple:
    """The judged rows as measured runs (name: the row id; group: its configuration, so that repeat
    measurements of one job are held out together)."""
    return _runs(JUDGED)


@cached(1)
def moe_runs_2() -> tuple:
    """The MoE rows teton predicts but does not fit yet (:data:`PREDICTED`), as measured runs."""
    return _runs(PREDICTED)


def _runs(status: str) -> tuple:
    from teton.spec import load_spec
    from teton.validation.runs import MeasuredRun

    runs = []
    for row in published_rows():
        if row_status(row)[0] != status:
            continue
        saving = unstated_memory_saving(row, row_spec)
        spec, rnote = load_spec(saving.spec(row, row_spec)), saving.note
        metric, value = _metric(row)
        runs.append(MeasuredRun(row.id, spec, metric, value, measured_step_s(row, spec),
                                source=f"{SOURCE_NAMES[row.source]} ({row.where})", note=row_note(row, rnote),
                                tolerance=0.12, group="|".join(map(str, row.config_key))))
    return tuple(runs)


RATIO_TOLERANCE = 0.04  # fp8 / bf16 (and fp8 recipe) ratios of one layout: within 4 %


def precision_pairs() -> list[tuple[str, str, str, float]]:
    """(label, numerator run, denominator run, tolerance): the judged rows that measured one layout
    in two precisions or fp8 recipes (the parenthesised values of a table), as step-time ratios."""
    rows = {x.id: x for x in published_rows()}
    by_layout: dict[tuple, list] = {}
    for r in training_runs_2():
        row = rows[r.name]
        key = (row.release, row.system, row.base_model, row.gpus, row.gbs, row.mbs, row.seq_len, row.tp, row.pp,
               row.cp, row.vp, row.ep, row.fsdp)
        by_layout.setdefault(key, []).append(row)
    out = []
    for key, members in by_layout.items():
        if len({m.precision for m in members}) < 2:
            continue
        # every pair of precisions; the numerator: the table's parenthesised (alternative) measurement
        ordered = sorted(members, key=lambda m: not m.variant.startswith("parenthesised"))
        for a, b in itertools.combinations(ordered, 2):
            if a.precision != b.precision:
                out.append((f"{key[2]} on {key[3]} {key[1]} ({key[0]}): {a.precision} / {b.precision} step time",
                            a.id, b.id, RATIO_TOLERANCE))
    return out
