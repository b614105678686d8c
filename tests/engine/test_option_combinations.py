"""Every model preset under mixes of the job's modelling options simulates, and its breakdown adds
up to the step time (a crash here once hid in MoE layers with TP overlap)."""

import itertools
import random

import pytest

from teton import simulate
from teton.errors import SpecError
from teton.spec.model import MODEL_PRESETS

OPTIONS = {"tp_overlap": ["none", "bwd", "full"], "cp_algo": ["all_gather", "ring", "a2a"], "precision": ["bf16", "fp8"],
           "grad_accum_fusion": [True, False], "recompute": ["none", "full", "selective"],
           "cp_regather_kv": [False, True], "zero": [1, 2, 3]}
_rng = random.Random(0)
CASES = [(model, dict(zip(OPTIONS, combo, strict=True))) for model in sorted(MODEL_PRESETS)
         for combo in _rng.sample(list(itertools.product(*OPTIONS.values())), 3)]


@pytest.mark.parametrize("model,options", CASES, ids=[f"{m}-{i % 3}" for i, (m, _) in enumerate(CASES)])
def test_option_mixes_simulate_consistently(model, options):
    preset = MODEL_PRESETS[model]  # a learned position table takes at most its max_seq_len (GPT-3, BLOOM, MT-NLG)
    seq = min(4096, preset.get("max_seq_len", 4096)) if preset.get("position_embedding") == "learned" else 4096
    job = {"gpus": 64, "tp": 2, "cp": 2, "pp": 2, "seq_len": seq, "global_batch": 64, "pp_schedule": "interleaved",
           "virtual_stages": 2, **options}
    if "mixtral" in model:
        job["ep"] = 2
    try:
        r = simulate({"cluster": "dgx-h100-superpod", "model": model, "job": job})
    except SpecError:
        pytest.skip("not a valid layout for this model")
    assert r.step_time_s > 0 and 0 < r.mfu < 1 and 0 < r.hfu
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert all(v >= 0 for v in r.breakdown.values())
