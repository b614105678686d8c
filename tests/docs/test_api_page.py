"""docs/api.md: every Python block runs as written from the repository's root, in order (one
namespace), so the page cannot drift from the library it documents."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_python_block_of_the_api_page_runs(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S)
    assert len(blocks) >= 8  # load, simulate, search, sweep, goodput, plan, fit, errors
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/api.md, python block {i + 1}", "exec"), namespace)  # noqa: S102
    assert namespace["r"].step_time_s > 0 and namespace["d"]["plans"] and namespace["fit"].as_dict()["parameters"]
    out = capsys.readouterr().out
    assert "job.dp = 128" in out  # the last block prints the one-line error
