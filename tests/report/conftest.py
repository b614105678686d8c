import json

import pytest
from layouts import LLAMA3_8B_64 as SMALL  # runs every section in well under a second each


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
    """The default report of the small spec with its validation section, written once: (html path, info)."""
    from teton.report.html import write_report
    from teton.report.sections import DEFAULT_SECTIONS

    out = tmp_path_factory.mktemp("report") / "report.html"
    info = write_report(small_spec_path, [], out, (*DEFAULT_SECTIONS, "validation"), progress=False, goodput_runs=8)
    return out, info
