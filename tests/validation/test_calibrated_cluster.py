"""The cluster files `teton fit RUNS --cluster-out` and `teton fit --trace --cluster-out` write:
every one is a file `teton run` accepts, carries the values the fit used and a band that contains
what the runs measured as often as it claims, and a value or run no in-situ value can explain is
named, never written silently."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from teton.hardware.in_situ import PARAMETERS, fitted_catalog, gpu_in_situ_values
from teton.hardware.kernels import EAGER_KERNEL_GAP_S

ROOT = Path(__file__).resolve().parents[2]
E = ROOT / "examples" / "llama3-70b-ib-2k.toml"  # Llama 3 70B on 2,048 H100s (meta-ib-24k)
TRACES = ROOT / "tests" / "data" / "traces"
T2 = TRACES / "a100-2rank-nccl.kineto.json.gz"  # the GPU 24 % busy; NCCL kernels that wait on the other rank


def _runs(tmp_path, *runs) -> Path:
    """A runs file of (name, sets, step seconds) runs of ``E``."""
    path = tmp_path / "runs.yaml"
    path.write_text(yaml.safe_dump({"runs": [{"name": n, "spec": str(E), "set": list(s), "step_time_s": t}
                                             for n, s, t in runs]}))
    return path


def _run(cli, spec, cluster: Path) -> dict:
    code, out, err = cli("run", str(spec), "--set", f"cluster={cluster}", "--json")
    assert code == 0, err
    return json.loads(out)


def _refused(cli, runs: Path) -> str:
    """``teton fit RUNS --cluster-out`` refused in one line, no file written: the error line."""
    out = runs.parent / "c.yaml"
    code, _, err = cli("fit", str(runs), "--cluster-out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    return err


# --- a user's runs ----------------------------------------------------------------------------

def test_a_run_faster_than_its_burst_prediction_is_refused_by_name(tmp_path, cli):
    """6.0 s against a burst-only (peak microbenchmark) prediction of 8.89 s: no in-situ value can
    make teton that fast. The fit had written a band of +102 % that `teton run` then refused."""
    err = _refused(cli, _runs(tmp_path, ("fast", [], 6.0), ("ok", ["job.tp=4", "job.pp=8"], 10.5)))
    assert "fast.step_time_s = 6.0" in err and "8.891 s" in err and "burst" in err


def test_a_band_a_cluster_cannot_hold_is_not_written(tmp_path, cli):
    """One layout measured at its burst prediction, another at 50 times it: their held-out errors
    span past -100 %, which no cluster band can hold; the file is refused in one line naming the
    worst run."""
    err = _refused(cli, _runs(tmp_path, ("a", [], 9.0), ("b", ["job.tp=4", "job.pp=8"], 400.0)))
    assert "--cluster-out" in err and "worst: b" in err and "-100 %" in err


def test_one_run_gets_the_catalogs_band_about_the_calibrated_point(tmp_path, cli):
    """One configuration leaves no run to hold out: its leave-one-out prediction is the uncalibrated
    prior, 10 % off, and a band centred there contained neither the point nor the measured 12.6 s.
    The band is the catalog's for a seen stack on the family, about the calibrated point."""
    runs = _runs(tmp_path, ("base-2k", [], 12.60))
    out = tmp_path / "c1.yaml"
    code, text, err = cli("fit", str(runs), "--cluster-out", str(out))
    assert code == 0, err
    assert "nan" not in text.lower()
    eff = yaml.safe_load(out.read_text())["efficiency"]
    lo, hi = fitted_catalog()["band"]["seen_by_family"]["hopper"]
    assert (eff["band_low"], eff["band_high"]) == pytest.approx((lo, hi), abs=1e-6)
    run = _run(cli, E, out)
    assert run["prediction_mode"] == "calibrated"
    assert run["step_time_s_low"] < 12.60 < run["step_time_s_high"]
    assert run["step_time_s_low"] < run["step_time_s"] < run["step_time_s_high"]
    code, text, _ = cli("fit", str(runs), "--json")
    assert json.loads(text)["summary"]["loo"]["band_source"] == "catalog"


def test_values_not_fitted_keep_the_catalogs_values_in_the_file_and_the_fit(tmp_path, cli):
    """`--params tensor_core_in_situ`: the collective and attention values stay at the catalog's
    for the stack and GPU (0.74, 0.80 on Hopper), not at burst (1.0), both in the file and in the
    fit itself, so the file predicts what the fit reported."""
    runs = _runs(tmp_path, ("base-2k", [], 12.60), ("dp32-1k", ["job.gpus=1024", "job.global_batch=1024"], 12.55),
                 ("tp4pp8", ["job.tp=4", "job.pp=8"], 11.20))
    out = tmp_path / "p.yaml"
    code, text, err = cli("fit", str(runs), "--params", "tensor_core_in_situ", "--cluster-out", str(out), "--json")
    assert code == 0, err
    eff = yaml.safe_load(out.read_text())["efficiency"]
    from teton.spec import load_spec

    spec = load_spec(E)
    catalog = gpu_in_situ_values(spec.cluster.gpu_spec, spec.job.software.name)
    for key in ("collective_in_situ", "cudnn_attention_in_situ", "mxfp8_gemm_in_situ", "nvfp4_gemm_in_situ"):
        assert eff[key] == pytest.approx(catalog[key], abs=1e-6), key
    assert catalog["collective_in_situ"] < 0.9 and eff["tensor_core_in_situ"] < 1.0
    fitted = json.loads(text)["rows"][0]
    assert _run(cli, E, out)["step_time_s"] == pytest.approx(fitted["in_sample_s"], rel=1e-5)


# --- a profiler trace -------------------------------------------------------------------------

def test_a_trace_estimate_past_its_bound_is_named_not_written(tmp_path, cli):
    """The 2-rank trace's NCCL kernels wait on the other rank: 0.028 of nccl-tests' bus bandwidth,
    a tenth of the parameter's lower bound. It is not clipped to 0.3 and written: a one-line warning
    names it, and the cluster keeps the catalog's collective value."""
    out = tmp_path / "t.yaml"
    code, _, err = cli("fit", "--trace", str(T2), "--cluster-out", str(out))
    assert code == 0, err
    lines = [ln for ln in err.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("warning: collective_in_situ = 0.02842"), err
    eff = yaml.safe_load(out.read_text())["efficiency"]
    assert "collective_in_situ" not in eff
    assert "collective_in_situ" in out.read_text().splitlines()[0]  # the header says what was left out


def test_trace_values_are_clipped_near_their_bound_and_left_out_far_past_it():
    from teton.validation.calibration import trace_values

    values, warnings = trace_values({"tensor_core_in_situ": 1.04, "collective_in_situ": 0.028,
                                     "kernel_gap_s": 3e-6})
    assert values == {"tensor_core_in_situ": 1.0, "kernel_gap_s": 3e-6}
    assert len(warnings) == 2
    assert "tensor_core_in_situ" in warnings[0] and "clipped to 1" in warnings[0]
    assert "collective_in_situ" in warnings[1] and "not written" in warnings[1]


def test_the_trace_kernel_gap_is_the_lower_quartile_beyond_the_eager_gap(tmp_path, cli):
    """The 2-rank trace's median idle gap, 55 us, is the CPU's launch pace (priced apart); the gap the
    GPU itself leaves is the lower quartile, 2.0 us, no more than the 2.5 us eager gap teton already
    charges each kernel: nothing in situ beyond it (the file had carried 55 us per kernel)."""
    out = tmp_path / "t.yaml"
    code, text, err = cli("fit", "--trace", str(T2), "--cluster-out", str(out), "--json")
    assert code == 0, err
    gap = json.loads(text)["achieved"]["kernel_gap"]
    assert gap["lower_quartile_s"] == pytest.approx(2.04e-6, rel=0.01) and gap["median_s"] > 50e-6
    assert EAGER_KERNEL_GAP_S > gap["lower_quartile_s"]
    assert yaml.safe_load(out.read_text())["efficiency"]["kernel_gap_s"] == 0.0


def test_a_trace_calibrated_cluster_prints_a_band(tmp_path, cli):
    """A trace gives no held-out step-time errors: the file carries the catalog's band for a stack
    without training runs on the trace's family, so its predictions show one."""
    out = tmp_path / "t.yaml"
    code, _, err = cli("fit", "--trace", str(T2), "--cluster-out", str(out))
    assert code == 0, err
    run = _run(cli, ROOT / "examples" / "gpt3-175b-a100.yaml", out)
    lo, hi = fitted_catalog()["band"]["unseen_by_family"]["a100"]
    t = run["step_time_s"]
    assert run["prediction_mode"] == "calibrated"
    assert (run["step_time_s_low"], run["step_time_s_high"]) == pytest.approx((t / (1 + hi), t / (1 + lo)))
    for key, value in yaml.safe_load(out.read_text())["efficiency"].items():
        if key in PARAMETERS:
            assert PARAMETERS[key].bounds[0] <= value <= PARAMETERS[key].bounds[1]
    assert np.isfinite([run["step_time_s_low"], run["step_time_s_high"]]).all()
