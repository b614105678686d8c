"""teton fit on a user's runs says what the runs cannot tell (issue 24, item 3): identifiability from
the fit (the correlation of the parameters' effects across runs, the condition number, intervals
that cannot reach across the bounds), the identified subset fitted and the rest held at the prior,
and the fitted values' uncertainty carried into the band a calibrated cluster prints."""

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

import teton
from teton.errors import SpecError

DATA = Path(__file__).resolve().parents[1] / "data" / "fit"
ONE_FAMILY = DATA / "one-layout-family.yaml"  # 70B TP8 PP4 on 512 / 1,024 / 2,048 GPUs, 10 % over the prediction
SEPARATING = DATA / "separating-layouts.yaml"  # four layouts at tensor core 0.66, collective 0.70
OTHER_LAYOUT = ["job.gpus=1024", "job.tp=2", "job.pp=16", "job.global_batch=1024"]


def _fit(cli, runs, *args):
    code, out, err = cli("fit", str(runs), "--json", *args)
    assert code == 0, err
    return json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))  # no NaN / Infinity


def _params(d):
    return {p["key"]: p for p in d["parameters"]}


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """The one-layout-family runs fitted, and the calibrated cluster file written."""
    from typer.testing import CliRunner

    from teton.cli import app

    out = tmp_path_factory.mktemp("cal") / "calibrated.yaml"
    res = CliRunner().invoke(app, ["fit", str(ONE_FAMILY), "--json", "--cluster-out", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), out


def test_one_layout_family_says_which_parameter_it_cannot_tell_and_why(calibrated):
    """Before: both values 'identified' (or the collective one silently near its prior, no why)."""
    d, _ = calibrated
    p = _params(d)
    assert p["tensor_core_in_situ"]["identified"] and not p["tensor_core_in_situ"]["held"]
    coll = p["collective_in_situ"]
    assert not coll["identified"] and coll["held"]
    assert "one layout family" in coll["reason"] and "tensor_core_in_situ" in coll["reason"]
    ident = d["identifiability"][0]
    assert ident["fitted"] == ["tensor_core_in_situ"] and len(ident["layout_families"]) == 1
    assert ident["effect_correlation"][0][1] > 0.99 and ident["condition_number"] > 100
    # held at the catalog's prior centre, and said so
    from teton.hardware.in_situ import fitted_catalog

    assert coll["value"] == pytest.approx(fitted_catalog()["prior"]["hopper"]["collective_in_situ"])
    assert any("collective_in_situ is not identified" in n and "held at" in n for n in d["notes"])


def test_a_confounded_pair_is_not_called_identified(cli):
    """Before: with tensor core and kernel gap, kernel_gap_s was 'identified' and the tensor-core value
    0.711 against 0.636 when fitted alone: the runs cannot separate them. Now one is held (at burst,
    its prior) and the other takes the value the runs give it alone."""
    both = _params(_fit(cli, ONE_FAMILY, "--params", "tensor_core_in_situ,kernel_gap_s"))
    alone = _params(_fit(cli, ONE_FAMILY, "--params", "tensor_core_in_situ"))
    assert not (both["tensor_core_in_situ"]["identified"] and both["kernel_gap_s"]["identified"])
    assert both["kernel_gap_s"]["held"] and both["kernel_gap_s"]["value"] == 0.0
    assert both["tensor_core_in_situ"]["value"] == pytest.approx(alone["tensor_core_in_situ"]["value"], rel=1e-3)
    for p in both.values():  # an identified value's 95 % interval never spans its whole range
        lo, hi = p["bounds"]
        assert not p["identified"] or (p["ci95"][1] - p["ci95"][0]) < 0.75 * (hi - lo)
    forced = _params(_fit(cli, ONE_FAMILY, "--params", "tensor_core_in_situ,kernel_gap_s", "--fit-all"))
    assert not forced["kernel_gap_s"]["held"] and not forced["tensor_core_in_situ"]["held"]
    assert not (forced["tensor_core_in_situ"]["identified"] and forced["kernel_gap_s"]["identified"])


def test_runs_that_separate_the_parameters_identify_both(cli):
    d = _fit(cli, SEPARATING)
    p = _params(d)
    assert p["tensor_core_in_situ"]["identified"] and p["collective_in_situ"]["identified"]
    assert not p["tensor_core_in_situ"]["held"] and not p["collective_in_situ"]["held"]
    # the catalog's prior (tensor core 0.80 on Hopper) pulls a few per cent against six runs
    assert p["tensor_core_in_situ"]["value"] == pytest.approx(0.66, rel=0.05)
    assert p["collective_in_situ"]["value"] == pytest.approx(0.70, rel=0.05)
    ident = d["identifiability"][0]
    assert ident["condition_number"] < 10 and len(ident["layout_families"]) == 4
    reasons = {v["key"]: v["reason"] for v in ident["parameters"]}
    assert reasons["tensor_core_in_situ"] == reasons["collective_in_situ"] == ""
    # bf16 runs say nothing of MX block-scaled GEMMs: held, and not counted as confounding
    assert p["mxfp8_gemm_in_situ"]["held"] and "does not act on these runs" in reasons["mxfp8_gemm_in_situ"]


def test_the_calibrated_band_carries_the_parameter_uncertainty(calibrated):
    """Before: one static band from the runs' leave-one-out errors for every job; now the band a job
    prints adds the fitted values' uncertainty on that job: wider than the in-sample errors for the
    calibration's own family, wider still for a layout the runs did not cover."""
    d, path = calibrated
    eff = yaml.safe_load(path.read_text())["efficiency"]
    assert eff["sd_collective_in_situ"] > eff["sd_tensor_core_in_situ"] > 0
    assert -1 <= eff["corr_tensor_core_in_situ__collective_in_situ"] < 0
    spec = DATA / "llama3-70b-ib.toml"
    own = teton.simulate(spec, [f"cluster={path}", "job.gpus=4096", "job.global_batch=4096"])
    other = teton.simulate(spec, [f"cluster={path}", *OTHER_LAYOUT])
    in_sample = [r["error_in_sample"] for r in d["rows"]]
    width = lambda r: (r.step_time_s_high - r.step_time_s_low) / r.step_time_s  # noqa: E731
    assert own.prediction_mode == "calibrated" and width(own) > 5 * (max(in_sample) - min(in_sample) + 1e-3)
    assert width(own) > 0.1  # the per-run scatter the one family cannot measure, plus the values' uncertainty
    assert other.extra["band_parameter_sd"] > own.extra["band_parameter_sd"] and width(other) > width(own)
    assert any("parameter uncertainty" in n for n in own.notes)


def test_ten_runs_of_one_layout_family_do_not_shrink_the_band(tmp_path, cli):
    """Before: ten configurations of one family took the percentiles of their (near-zero) leave-one-out
    errors, a band of a fraction of a percent; the family counts once."""
    shutil.copy(DATA / "llama3-70b-ib.toml", tmp_path / "job.toml")
    entries = []
    for gpus in range(256, 2816, 256):
        sets = [f"job.gpus={gpus}", f"job.global_batch={gpus}"]
        t = teton.simulate(tmp_path / "job.toml", sets).step_time_s
        entries.append({"name": f"70b-{gpus}", "spec": "job.toml", "set": sets, "step_time_s": round(t * 1.1, 4)})
    (tmp_path / "runs.yaml").write_text(yaml.safe_dump({"runs": entries}))
    d = _fit(cli, tmp_path / "runs.yaml")
    lo, hi = d["summary"]["loo"]["band"]
    assert len(d["rows"]) == 10 and hi - lo > 0.05
    assert not _params(d)["collective_in_situ"]["identified"]


def test_band_arithmetic_and_uncertainty_keys():
    from teton.engine.band import Z_90, widened
    from teton.hardware import GPUS
    from teton.hardware.efficiency import cluster_efficiency, parameter_uncertainty

    lo, hi = widened(10.0, 10.0 / 1.05, 10.0 / 0.95, 0.0)
    assert (lo, hi) == pytest.approx((10.0 / 1.05, 10.0 / 0.95))
    lo, hi = widened(10.0, 10.0, 10.0, 0.1)  # a zero-width band takes the parameter term alone
    assert math.log(10.0 / lo) == pytest.approx(Z_90 * 0.1) and math.log(hi / 10.0) == pytest.approx(Z_90 * 0.1)
    keys, cov = parameter_uncertainty({"sd_tensor_core_in_situ": 0.1, "sd_collective_in_situ": 0.2,
                                       "corr_collective_in_situ__tensor_core_in_situ": -0.5})
    assert keys == ("tensor_core_in_situ", "collective_in_situ") and cov[0][1] == pytest.approx(-0.01)
    assert parameter_uncertainty({"tensor_core_in_situ": 0.7}) is None
    for bad, field in (({"sd_tensor_core": 0.1}, "sd_tensor_core"), ({"sd_tensor_core_in_situ": -1}, "sd_tensor"),
                       ({"corr_tensor_core_in_situ__collective_in_situ": 2}, "corr_"),
                       ({"corr_tensor_core_in_situ": 0.5}, "corr_tensor_core_in_situ")):
        with pytest.raises(SpecError, match=f"cluster.efficiency.{field}"):
            cluster_efficiency(GPUS["h100-sxm"], bad)


def test_runs_that_mislead_the_fit_are_named(tmp_path, cli):
    """A run that does not fit in memory, two measurements of one configuration far apart, and a
    time a little under the burst prediction (8.87 s) that drives a value onto its bound: each named
    in the fit's notes (the JSON stays valid JSON, no NaN). A mistyped time far under it is no run
    any in-situ value can explain: a one-line error naming it."""
    shutil.copy(DATA / "llama3-70b-ib.toml", tmp_path / "job.toml")
    oom = ["job.gpus=512", "job.global_batch=512", "job.tp=1", "job.pp=1", "job.virtual_stages=1", "job.zero=0"]
    dp32 = ["job.gpus=1024", "job.global_batch=1024"]

    def runs_file(name, *runs):
        (tmp_path / name).write_text(yaml.safe_dump({"runs": [{"name": n, "spec": "job.toml", "set": s, "step_time_s": t}
                                                              for n, s, t in runs]}))
        return tmp_path / name

    notes = _fit(cli, runs_file("r.yaml", ("oom", oom, 11.8), ("a", dp32, 11.8), ("b", dp32, 16.0)))["notes"]
    assert any(n.startswith("run oom:") and "does not fit" in n for n in notes)
    assert any(n.startswith("runs a, b are one configuration") for n in notes)
    notes = _fit(cli, runs_file("fast.yaml", ("a", dp32, 8.43)))["notes"]
    assert any("bound" in n and "mistyped" in n for n in notes)
    code, _, err = cli("fit", str(runs_file("typo.yaml", ("a", dp32, 11.8), ("b", dp32, 0.01))))
    assert code == 2 and "b.step_time_s = 0.01" in err and len(err.strip().splitlines()) == 1, err
    clean = _fit(cli, SEPARATING)["notes"]
    assert not any("does not fit" in n or "bound" in n or "one configuration" in n for n in clean)
