"""``teton report`` on the command line: PNGs, the search section, --help, one-line errors."""

import json
import re

import pytest
from layouts import LLAMA3_8B_ONE_HOST

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_cli_writes_html_and_pngs(cli, small_spec_path, tmp_path):
    out = tmp_path / "r.html"
    png = tmp_path / "png"
    code, stdout, stderr = cli("report", small_spec_path, "--out", out, "--sections", "step,memory,timeline",
                               "--png-dir", png, "--set", "job.micro_batch=2")
    assert code == 0, stderr
    assert out.is_file() and "wrote" in stdout
    html = out.read_text(encoding="utf-8")
    assert "job.micro_batch=2" in html and "<h2>Placement</h2>" not in html
    names = sorted(p.name for p in png.iterdir())
    assert names == ["memory-memory.png", "step-breakdown.png", "timeline-timeline.png"]
    for p in png.iterdir():
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_cli_search_section(cli, small_spec_path, tmp_path):
    out = tmp_path / "search.html"
    code, _, stderr = cli("report", small_spec_path, "--out", out, "--sections", "search")
    assert code == 0, stderr
    html = out.read_text(encoding="utf-8")
    assert "<h2>Layout search</h2>" in html and " simulated (" in html and 'id="fig-search-top-layouts"' in html


def test_unknown_section_is_one_line_exit_2(cli, small_spec_path, tmp_path):
    code, _, stderr = cli("report", small_spec_path, "--out", tmp_path / "x.html", "--sections", "step,memroy")
    assert code == 2
    assert stderr.strip().count("\n") == 0
    assert "--sections" in stderr and "memroy" in stderr and "memory" in stderr
    assert not (tmp_path / "x.html").exists()


def test_unwritable_out_is_one_line_exit_2(cli, small_spec_path, tmp_path):
    for bad in (tmp_path / "missing-dir" / "r.html", tmp_path):
        code, _, stderr = cli("report", small_spec_path, "--out", bad, "--sections", "step")
        assert code == 2, bad
        assert stderr.strip().count("\n") == 0 and "--out" in stderr


def test_png_path_that_is_a_file_is_exit_2(cli, small_spec_path, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    code, _, stderr = cli("report", small_spec_path, "--out", tmp_path / "r.html", "--sections", "step", "--png-dir", f)
    assert code == 2 and "--png-dir" in stderr


def test_png_dir_in_a_missing_directory_is_exit_2_and_creates_nothing(cli, small_spec_path, tmp_path):
    """As --out: a mistyped parent is an error, not a tree of new folders."""
    png = tmp_path / "no" / "such" / "pngs"
    code, _, stderr = cli("report", small_spec_path, "--out", tmp_path / "r.html", "--sections", "step", "--png-dir", png)
    assert code == 2 and "does not exist" in stderr and not (tmp_path / "no").exists()


def test_help_names_every_section(cli):
    from teton.report.sections import SECTIONS

    code, out, _ = cli("report", "--help")
    assert code == 0
    flat = re.sub(r"[\s│]+", "", out)  # rich wraps the help text in a box
    for key in SECTIONS:
        assert key in flat, key
    assert re.search(r"from:step,memory,(\w+),", flat).group(1) == "ops"


@pytest.mark.parametrize("value", [",", " , "])
def test_sections_naming_nothing_is_one_line_exit_2(cli, tmp_path, value):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(LLAMA3_8B_ONE_HOST))
    code, _, err = cli("report", path, "--out", tmp_path / "r.html", "--sections", value)
    assert code == 2 and "--sections" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "r.html").exists()
