import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama3-405b-16k.yaml"


@pytest.fixture
def example_spec():
    return EXAMPLE


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the ``teton`` console entry point in-process: returns (exit code, stdout, stderr)."""
    from teton.cli import main

    def run(*args: str):
        monkeypatch.setattr(sys, "argv", ["teton", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


os.environ.setdefault("COLUMNS", "200")
