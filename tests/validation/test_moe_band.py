"""An MoE job's band: the MoE rows' out-of-sample errors (they are not in the fit), each model once,
not the dense rows' few per cent; widened for a stack without training runs."""

import math

import numpy as np
import pytest

import teton
from teton.hardware.efficiency import family_of
from teton.hardware.in_situ import band, fitted_catalog, in_situ_values, widened_for_unseen
from teton.validation.moe_band import by_model, moe_band, moe_coverage
from teton.validation.training_set2 import moe_runs_2


def test_an_moe_job_prints_the_moe_band_not_the_dense_one():
    run = next(r for r in moe_runs_2() if r.spec.model.name == "qwen3-30b-a3b" and in_situ_values(
        family_of(r.spec.cluster.gpu_spec), r.spec.job.software.name)[1] == "stack")
    result = teton.simulate(run.spec)
    assert result.prediction_mode == "in_situ"
    lo, hi = fitted_catalog()["band"]["moe"]
    assert result.step_time_s_low == pytest.approx(result.step_time_s / (1 + hi))
    assert result.step_time_s_high == pytest.approx(result.step_time_s / (1 + lo))
    assert any("an MoE model: its band is the MoE rows'" in n for n in result.notes)
    dense_lo, dense_hi = fitted_catalog()["band"]["seen"]
    # teton's MoE model is less sure than its dense one
    assert math.log1p(hi) - math.log1p(lo) > 2 * (math.log1p(dense_hi) - math.log1p(dense_lo))


def test_the_moe_band_contains_most_moe_rows_nested_by_model():
    """Each model's rows against the band of the other models: the catalog's MoE band claims 80 %
    and a new model lands inside about as often (the catalog's coverage, written by the fit)."""
    assert 0.6 <= fitted_catalog()["coverage"]["moe"] <= 0.95


def test_band_weights_each_model_once_and_coverage_is_nested():
    errors = np.array([-0.5, 0.1, 0.1, 0.1, 0.1, 0.0, 0.05])
    models = ["a", "b", "b", "b", "b", "c", "d"]
    lo, hi = moe_band(errors, models)
    # model b's four rows weigh as much as a's one: the band reaches down towards a's -50 %
    assert lo < -0.2 and hi <= 0.1
    cov = moe_coverage(errors, models)
    assert 0.0 <= cov < 1.0  # a's row lies outside the band the others give
    rows = {r["model"]: r for r in by_model(errors, models)}
    assert rows["a"]["inside_band"] == 0.0 and rows["b"]["rows"] == 4


def test_unseen_stack_widens_the_band_as_the_dense_bands_differ():
    moe = (-0.4, 0.16)
    assert widened_for_unseen(moe, (-0.06, 0.06), (-0.06, 0.06)) == pytest.approx(moe)
    lo, hi = widened_for_unseen(moe, (-0.06, 0.065), (-0.16, 0.115))
    assert lo < moe[0] and hi > moe[1] - 0.05
    assert math.log1p(hi) - math.log1p(lo) > math.log1p(moe[1]) - math.log1p(moe[0])
    assert band(seen=False, moe=True) == pytest.approx(widened_for_unseen(
        tuple(fitted_catalog()["band"]["moe"]), tuple(fitted_catalog()["band"]["seen"]),
        tuple(fitted_catalog()["band"]["unseen"])))
    assert band(seen=True, moe=False) == pytest.approx(tuple(fitted_catalog()["band"]["seen"]))


def test_validate_reports_the_moe_rows_band_and_coverage_per_model(cli):
    import json

    code, out, _ = cli("validate", "--case", "training-set-2-moe", "--json")
    moe = json.loads(out)["moe"]
    assert code == 0 and moe["rows"] == len(moe_runs_2())
    assert moe["band"] == pytest.approx(fitted_catalog()["band"]["moe"], abs=2e-3)
    assert {m["model"] for m in moe["models"]} >= {"deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b"}
    assert sum(m["rows"] for m in moe["models"]) == moe["rows"]
    code, out, _ = cli("validate", "--case", "training-set-2-moe")
    assert "MoE rows (" in out and "nested leave-one-model-out" in out
