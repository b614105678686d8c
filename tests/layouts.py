"""Layouts the tests share, each defined once (imported by bare name: ``from layouts import ...``).

The dicts are spec input; copy before changing one (``{**JOB_405B_16K, "zero": 2}``).
"""

# Llama 3 405B on 16,384 H100s of Meta's RoCE cluster (meta-roce-24k): "The Llama 3 Herd of
# Models" (arXiv 2407.21783), Table 4, row 2. The degrees, sequence and batch (TP 8, PP 16, so
# DP 128; 8K sequences, 2,048 of them = 16M tokens per step) ...
LAYOUT_405B_16K = {"gpus": 16384, "tp": 8, "pp": 16, "seq_len": 8192, "global_batch": 2048}
# ... and the pipeline Llama 3 ran them with: interleaved, one layer per model chunk (v = 8), the
# embedding and the LM head as chunks of their own; ZeRO-1. (examples/llama3-405b-16k.yaml, the
# ``example_spec`` fixture, has the same degrees and pipeline with ZeRO-2 and more fields spelled out.)
JOB_405B_16K = {**LAYOUT_405B_16K, "zero": 1, "pp_schedule": "interleaved", "virtual_stages": 8,
                "pp_embedding_slots": True}
LLAMA3_405B_16K = {"cluster": "meta-roce-24k", "model": "llama3-405b", "job": JOB_405B_16K}

# Llama 3 8B on one host of meta-roce-24k, everything else the defaults: the smallest spec file.
LLAMA3_8B_8_GPUS_YAML = "cluster: meta-roce-24k\nmodel: llama3-8b\njob: {gpus: 8}\n"

# Llama 3 8B on 64 H100s of a DGX SuperPOD (TP 2, PP 4 interleaved, v = 2), checkpointing to the
# Tectonic preset (the SuperPOD preset names no storage): every report section in well under a second.
LLAMA3_8B_64 = {"cluster": "dgx-h100-superpod", "model": "llama3-8b", "storage": {"preset": "tectonic-llama3"},
                "job": {"gpus": 64, "tp": 2, "pp": 4, "global_batch": 64, "pp_schedule": "interleaved",
                        "virtual_stages": 2}, "seed": 0}

# Llama 3 8B on one DGX H100 host: TP 8, pp = 1, dp = 1 (one pipeline rank, no data parallelism).
LLAMA3_8B_ONE_HOST = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
                      "job": {"gpus": 8, "tp": 8, "pp": 1, "dp": 1, "seq_len": 8192, "global_batch": 8}}
