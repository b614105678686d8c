"""Field checks shared by the spec sections: every number a spec gives is bounded.

The checks themselves (:class:`Section`, the number rules and their default bounds) live in
``teton.hardware.bounds``, which the hardware catalog's models share; this module adds the
spec's own bounds (GPUs, sequence length, widths, vocabulary, layers) and re-exports the rest.
"""

from __future__ import annotations

from teton.hardware.bounds import (  # noqa: F401 - re-exported
    MAX_COUNT,
    MAX_REAL,
    MIN_POSITIVE,
    Section,
    check_number,
    field_range,
    number_problem,
    numeric_kinds,
    range_text,
)

MAX_GPUS = 10**7  # GPUs of a job, and any one parallel degree (the largest clusters hold ~10^5)
MAX_SEQ_LEN = 2**24  # tokens of one sequence (16M; the longest-context models train at 1M)
MAX_WIDTH = 2**20  # a model width (hidden, MLP, heads, head dim: 1M; the widest trained are ~50k)
MAX_VOCAB = 2**24  # vocabulary entries (16M; the largest in use are ~256k)
MAX_LAYERS = 2**14  # transformer layers, or experts per layer (16,384; the deepest trained are ~200)
