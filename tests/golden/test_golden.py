"""No behaviour change: the numbers the main verbs print for the bundled examples are pinned.

Each case in ``golden_cases.py`` runs twice in-process, once with ``--json`` and once as text. The JSON
object (less wall-clock keys) and every number in the text must equal the pinned file exactly.
A restructuring must leave them all identical; a deliberate model change regenerates them with
``TETON_GOLDEN_UPDATE=1 pytest tests/golden`` and says so in its commit.
"""
import json
import os
import re
from pathlib import Path

import pytest
from golden_cases import CASES, VOLATILE_KEYS, VOLATILE_LINE

ROOT = Path(__file__).resolve().parents[2]
PINNED = Path(__file__).parent / "pinned"
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
UPDATE = os.environ.get("TETON_GOLDEN_UPDATE") == "1"


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE_KEYS}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _text_numbers(text: str) -> list[str]:
    lines = [ln for ln in text.splitlines() if not re.search(VOLATILE_LINE, ln)]
    return NUMBER.findall("\n".join(lines))


def _args(args: list[str], tmp: Path, *extra: str) -> list[str]:
    tmp.mkdir(parents=True, exist_ok=True)
    out = [a.replace("{tmp}", str(tmp)) for a in args]
    return out + list(extra)  # example paths stay relative (the test runs in the repository root)


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_golden(name, args, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(*_args(args, tmp_path / "j", "--json"))
    assert code == 0, err
    got_json = _strip(json.loads(out))
    code, out, err = cli(*_args(args, tmp_path / "t"))
    assert code == 0, err
    got = {"json": got_json, "text_numbers": _text_numbers(out)}
    path = PINNED / f"{name}.json"
    if UPDATE:
        PINNED.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(path.read_text())
    assert got["json"] == pinned["json"], f"{name}: JSON output changed"
    assert got["text_numbers"] == pinned["text_numbers"], f"{name}: printed numbers changed"
