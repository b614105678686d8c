"""Bundled data: published measurements (the validation / training set) and trace samples.

* ``llama3-405b-table4.csv``: "The Llama 3 Herd of Models", arXiv 2407.21783, Sec. 3.3, Table 4
  (Llama 3 405B layouts on Meta's H100 RoCE cluster: TFLOPs/GPU and BF16 MFU).
* ``llama3-405b-interruptions-table5.csv``: same paper, Sec. 3.3.4, Table 5 (root causes of the
  unexpected interruptions in 54 days of pre-training).
* ``korthikanti-2022-table5.csv``: Korthikanti et al., "Reducing Activation Recomputation in Large
  Transformer Models", arXiv 2205.05198, Table 5 (iteration time with full recompute and with
  sequence parallelism + selective recompute, Megatron-LM GPT models on Selene) and Figure 1
  (per-GPU memory in GiB: parameters + optimizer state; activations without recompute; with SP +
  selective recompute).
* ``training-set-2.csv``: about 350 published pre-training rows, one per measurement, transcribed
  from (each row's ``where`` column names the repository, path and commit or URL):
  NVIDIA/NeMo ``docs/source/performance/performance_summary.md`` (24.07, three revisions) and
  ``performance_long_sequence.md``; the NeMo Framework user guide's performance summaries (25.02,
  25.04, 25.07); NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` and
  ``performance-summary-archive.md`` (containers 25.09-26.08; their H100 rows are not part of the
  set); NVIDIA/Megatron-LM ``images/model_table.png`` (core_r0.8.0 weak scaling) and
  ``examples/llama/README.md``; bigscience-workshop/bigscience ``train/tr11-176B-ml`` (BLOOM
  176B) and the MT-NLG 530B paper (Smith et al. 2022, arXiv 2201.11990, Sec. 2.4). Numbers as
  published, with the source's FLOP convention (``flop_convention``) and, where the source has a
  published inconsistency, ``flag`` and ``flag_reason``. These are facts from those documents
  (NeMo, Megatron-Bridge: Apache-2.0; Megatron-LM: BSD-3-Clause-style licence; bigscience:
  Apache-2.0), re-tabulated here, not copies of their files.
"""
