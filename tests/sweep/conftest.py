import pytest

BASE = {"cluster": "dgx-h100-superpod", "model": "llama3-8b",
        "job": {"gpus": 64, "seq_len": 4096, "global_batch": 64}}


@pytest.fixture
def base_spec():
    import copy

    return copy.deepcopy(BASE)


@pytest.fixture
def small_sweep(base_spec):
    """12 points: 3 TP x 2 PP x 2 precisions; tp=3 is invalid (64 GPUs don't divide)."""
    return {"base": base_spec, "grid": {"job.tp": [2, 3, 8], "job.pp": [1, 2], "job.precision": ["bf16", "fp8"]}}


@pytest.fixture(autouse=True)
def fresh_code_fingerprint():
    """Each test fingerprints teton's code afresh (stored rows record it): a test that reads back a
    subprocess's rows sees the code as it is now, not as the session began."""
    from teton.sweep.code_version import code_fingerprint

    code_fingerprint.cache_clear()
    yield
