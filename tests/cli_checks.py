"""Checks the command-line tests share (imported by bare name: ``from cli_checks import ...``).

A verb that refuses its input exits 2 with one ``error:`` line on stderr, no traceback.
"""


def write_spec(tmp_path, text, name="spec.yaml"):
    """``text`` written to ``tmp_path / name``: the path."""
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(code, err, needle):
    """Exit 2, no traceback, stderr exactly one line, starting ``error:`` and naming ``needle``: that line."""
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert needle in lines[0], err
    return lines[0]


def error_line(code: int, err: str) -> str:
    """Exit 2 and one non-blank stderr line, starting ``error: ``: that line (the caller checks what it names)."""
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]
