"""The declared training set: the published runs the in-situ parameters are fitted on.

Two sets, nothing else (held-out runs are judged by others, never fitted or reconstructed here):

* **Llama 3 405B, Table 4** (arXiv 2407.21783, Sec. 3.3.2): H100 on Meta's RoCE cluster, Meta's
  PyTorch stack. The layouts as published, with what the text says of them: bf16; no activation
  checkpointing at 8K; FSDP sharding optimizer state and gradients with parameters kept after
  forward, gradients accumulated and reduce-scattered in FP32 (zero 2, reduced once per step);
  interleaved schedule with one transformer layer per model chunk and the embedding and output
  head as chunks of their own ("we reduce one Transformer layer each from the first and the last
  stages ... the first model chunk on the first stage has only the embedding"), i.e. 128 chunks =
  16 ranks x 8 virtual stages; [TP, CP, PP, DP] order; topology-aware placement; micro-batch of
  one sequence. Published as TFLOPs/GPU.
* **Korthikanti et al. 2022, Table 5** (arXiv 2205.05198): Megatron-LM GPT models on Selene
  (DGX A100 80 GB, 8 x 200G HDR per node; teton's ``dgx-a100-superpod``, the reference
  architecture Selene is built to), fp16 mixed precision (the same tensor-core peak as bf16 on
  A100), sequence 2,048, vocabulary 51,200, GELU MLP of 4h, LayerNorm, biases, learned positions,
  dropout, tied embeddings, no flash attention (Megatron's fused softmax keeps the s x s scores),
  DP = 1. Each model with full recompute (no SP) and with SP + selective recompute (the attention
  core). What Megatron-LM of 2022 does that the job fields name: the weight-gradient GEMMs
  accumulate into fp32 main_grad (``gradient_accumulation_fusion``); the column-parallel layers'
  backward overlaps the input re-gather / gradient reduce-scatter (SP) or the gradient all-reduce
  (no SP) with the GEMMs (``LinearWithGradAccumulationAndAsyncCommunication``: ``tp_overlap:
  bwd``); without SP each TP rank sends 1/tp of the hidden state to the next stage, which
  all-gathers it (``scatter_gather_tensors_in_pipeline``: ``pp_scatter_gather``); and the p2p
  exchange waits for its sends and receives and synchronises the device (``pp_p2p: blocking``).
  Published as seconds per iteration.
"""

from __future__ import annotations

import csv
from importlib import resources

from teton.memo import cached
from teton.spec import load_spec
from teton.spec.layout import dp_of
from teton.validation.runs import MeasuredRun, measured_run

TABLE4_SOURCE = "Llama 3 herd paper, arXiv 2407.21783, Table 4"
KORTHIKANTI_SOURCE = "Korthikanti et al. 2022, arXiv 2205.05198, Table 5"
KORTHIKANTI_MEMORY_SOURCE = "Korthikanti et al. 2022, arXiv 2205.05198, Figure 1"

LLAMA3_405B_BASE = {
    "cluster": "meta-roce-24k",
    "model": "llama3-405b",
    "software": "meta-llama3-2024",
    "job": {
        "micro_batch": 1, "precision": "bf16", "recompute": "none", "sequence_parallel": True,
        "pp_schedule": "interleaved", "virtual_stages": 8, "pp_embedding_slots": True, "zero": 2,
        "grad_accum_dtype": "fp32", "placement": "topology-aware",
    },
}

KORTHIKANTI_CLUSTER = "dgx-a100-superpod"
KORTHIKANTI_JOB = {"dp": 1, "seq_len": 2048, "precision": "bf16", "zero": 0, "placement": "topology-aware"}
# (column, recompute, sequence parallelism)
KORTHIKANTI_MODES = (("full_recompute_s", "full", False), ("sp_selective_s", "selective", True))


def _csv(name: str) -> list[dict]:
    return list(csv.DictReader(resources.files("teton.data").joinpath(name).read_text().splitlines()))


def table4_spec(row: dict, efficiency: dict | None = None) -> tuple[dict, str]:
    """(spec mapping, note) of one Table 4 row; row 3's degrees as printed multiply to 8,192 GPUs
    and ~8.4M tokens, so it is modelled with the DP that makes both columns consistent."""
    gpus, tp, cp, pp, dp = (int(row[k]) for k in ("gpus", "tp", "cp", "pp", "dp"))
    seq, per_dp = int(row["seq_len"]), int(row["batch_size_per_dp"])
    note = ""
    if tp * cp * pp * dp != gpus:
        fixed = dp_of(gpus, tp * cp * pp)
        note = (f"as printed tp*cp*pp*dp = {tp * cp * pp * dp} != {gpus} GPUs (and {per_dp}x{seq}x{dp} "
                f"~ {per_dp * seq * dp / 1e6:.1f}M tokens, not 16M); modelled with DP = {fixed}")
        dp = fixed
    job = dict(LLAMA3_405B_BASE["job"], gpus=gpus, tp=tp, cp=cp, pp=pp, dp=dp, seq_len=seq,
               global_batch=per_dp * dp)
    cluster = {"base": LLAMA3_405B_BASE["cluster"], "efficiency": efficiency} if efficiency else LLAMA3_405B_BASE["cluster"]
    return {**LLAMA3_405B_BASE, "cluster": cluster, "job": job}, note


def table4_case_name(i: int, row: dict) -> str:
    return (f"Llama 3 405B Table 4 row {i}: {int(row['gpus']) // 1024}K GPUs, CP {row['cp']}, "
            f"{int(row['seq_len']) // 1024}K seq")


def korthikanti_model(row: dict) -> dict:
    """The Megatron GPT model of one Table 5 row (a model mapping)."""
    h = int(row["hidden"])
    return dict(name=f"megatron-gpt-{row['model'].lower()}", layers=int(row["layers"]), hidden=h, ffn_hidden=4 * h,
                heads=int(row["heads"]), vocab=51200, mlp="gelu", norm="layernorm", bias=True,
                position_embedding="learned", max_seq_len=2048, dropout=True, tied_embeddings=True)


def korthikanti_spec(row: dict, recompute: str, sequence_parallel: bool) -> dict:
    """The spec mapping of one Table 5 row in one recompute mode."""
    v, pp = int(row["virtual_stages"]), int(row["pp"])
    job = dict(KORTHIKANTI_JOB, gpus=int(row["gpus"]), tp=int(row["tp"]), pp=pp, micro_batch=int(row["micro_batch"]),
               global_batch=int(row["global_batch"]), recompute=recompute, sequence_parallel=sequence_parallel,
               pp_schedule="interleaved" if v > 1 else "1f1b", virtual_stages=v)
    return {"cluster": KORTHIKANTI_CLUSTER, "model": korthikanti_model(row), "software": "megatron-lm-2022", "job": job}


def korthikanti_case_name(row: dict, recompute: str) -> str:
    what = "full recompute" if recompute == "full" else "SP + selective recompute"
    return f"Korthikanti 2022 Table 5: {row['model']}, {what}"


@cached(1)
def training_runs() -> tuple[MeasuredRun, ...]:
    """The 11 runs of the training set: Table 4 rows 1-3, Korthikanti's 4 models x 2 modes."""
    runs = []
    for i, row in enumerate(_csv("llama3-405b-table4.csv"), start=1):
        spec, note = table4_spec(row)
        runs.append(measured_run(table4_case_name(i, row), load_spec(spec), "tflops_per_gpu",
                                 float(row["tflops_per_gpu"]), source=TABLE4_SOURCE, note=note,
                                 tolerance=0.05))
    for row in _csv("korthikanti-2022-table5.csv"):
        for column, recompute, sp in KORTHIKANTI_MODES:
            runs.append(measured_run(korthikanti_case_name(row, recompute),
                                     load_spec(korthikanti_spec(row, recompute, sp)), "step_time_s",
                                     float(row[column]), source=KORTHIKANTI_SOURCE, tolerance=0.05))
    return tuple(runs)


def ratio_pairs() -> list[tuple[str, str, str, float]]:
    """(label, numerator run, denominator run, tolerance) of the step-time ratios the training
    set must keep: Table 4 row 2 / row 1 (8K -> 16K GPUs) within 1 %, and each Korthikanti
    selective / full within 2 %."""
    t4 = _csv("llama3-405b-table4.csv")
    pairs = [("Table 4 row 2 / row 1 step time (8K -> 16K GPUs, same tokens/step)",
              table4_case_name(2, t4[1]), table4_case_name(1, t4[0]), 0.01)]
    for row in _csv("korthikanti-2022-table5.csv"):
        pairs.append((f"Korthikanti {row['model']}: SP + selective / full recompute step time",
                      korthikanti_case_name(row, "selective"), korthikanti_case_name(row, "full"), 0.02))
    return pairs


def korthikanti_memory_rows() -> list[dict]:
    """Figure 1's per-GPU memory terms against teton's memory model, as validation-row dicts.

    Figure 1's parameter + optimizer term counts the transformer layers only (12 h^2 parameters
    per layer, 18 bytes each: fp16 weights, fp32 gradients, fp32 master weights and Adam moments),
    averaged over the GPUs; teton's figure for the same is the layers one GPU holds times its
    per-layer parameters (biases and norms included) times the memory model's bytes per parameter.
    The activation terms are teton's activations on the first pipeline rank (the fullest).
    """
    from teton.workload.items import ACT_BYTES, FP32
    from teton.workload.memory import ADAM_STATE_BYTES, memory_per_gpu
    from teton.workload.ops import layer_params_per_gpu

    gib = 2.0**30
    out = []
    for row in _csv("korthikanti-2022-table5.csv"):
        base = load_spec(korthikanti_spec(row, "none", False))
        job = base.job
        per_param = ACT_BYTES + (FP32 if job.grad_accum_dtype == "fp32" else ACT_BYTES) + ADAM_STATE_BYTES
        layers_per_gpu = base.model.layers / job.layout.pp
        state = layers_per_gpu * layer_params_per_gpu(base.model, job) * per_param
        none_act = memory_per_gpu(base.model, job)[0].activations
        sel = load_spec(korthikanti_spec(row, "selective", True))
        sel_act = memory_per_gpu(sel.model, sel.job)[0].activations
        case = "Korthikanti 2022 Figure 1: memory per GPU (GiB)"
        for metric, published, predicted, note in (
                ("layer_params_optimizer_gib", row["mem_params_opt_gib"], state,
                 "transformer layers' weights, fp32 gradients, Adam state"),
                ("activations_no_recompute_gib", row["mem_act_none_gib"], none_act, "no recompute, no SP"),
                ("activations_sp_selective_gib", row["mem_act_sp_selective_gib"], sel_act,
                 "sequence parallelism + selective recompute")):
            out.append(dict(case=case, metric=f"{metric} ({row['model']}): {note}", published=float(published),
                            predicted=predicted / gib, tolerance=0.05, source=KORTHIKANTI_MEMORY_SOURCE))
    return out
