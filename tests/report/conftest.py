import json

import pytest

# A small job that runs every section in well under a second each: Llama 3 8B on 64 H100s of a
# DGX SuperPOD, checkpointing to the Tectonic preset (the SuperPOD preset names no storage).
SMALL = {"cluster": "dgx-h100-superpod", "model": "llama3-8b", "storage": {"preset": "tectonic-llama3"},
         "job": {"gpus": 64, "tp": 2, "pp": 4, "global_batch": 64, "pp_schedule": "interleaved",
                 "virtual_stages": 2}, "seed": 0}


@pytest.fixture(scope="session")
def small_spec_dict():
    return json.loads(json.dumps(SMALL))


@pytest.fixture(scope="session")
def small_spec_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "llama3-8b-64.json"
    path.write_text(json.dumps(SMALL))
    return path


@pytest.fixture(scope="session")
def small_report(small_spec_path, tmp_path_factory):
    """The default report (all sections but search) of the small spec, written once: (html path, info)."""
    from teton.report.html import write_report
    from teton.report.sections import DEFAULT_SECTIONS

    out = tmp_path_factory.mktemp("report") / "report.html"
    info = write_report(small_spec_path, [], out, DEFAULT_SECTIONS, progress=False, goodput_runs=8)
    return out, info
