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
"""
