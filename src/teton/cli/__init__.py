"""The ``teton`` command: :func:`main`, the console entry point, and (loaded on first use) the
typer ``app`` and its click ``command`` from :mod:`teton.cli._app`.

Importing this package is light on purpose: ``main`` sets Ctrl-C to one line and exit 130 before
the verbs (typer, numpy, the engine) are imported, so an interrupt in the first half second of a
command is no traceback either.
"""

from __future__ import annotations

import signal
import sys
from typing import Any


def _interrupted_while_starting(signum, frame) -> None:
    print("interrupted", file=sys.stderr)
    raise SystemExit(130)


def main() -> None:
    """Console entry point (:func:`teton.cli._app.main`): one-line errors with exit code 2 for
    bad input; Ctrl-C exits 130, from the first moment."""
    early = _swap(signal.default_int_handler, _interrupted_while_starting)
    from teton.cli._app import main as run

    if early:  # back to Python's own, which the command's numba-safe handler replaces (cli._interrupt)
        _swap(_interrupted_while_starting, signal.default_int_handler)
    run()


def _swap(current, new) -> bool:
    """Install ``new`` for SIGINT if ``current`` is the handler (not ``nohup``'s ignore, nor another
    program's); False off the main thread."""
    try:
        if signal.getsignal(signal.SIGINT) is current:
            signal.signal(signal.SIGINT, new)
            return True
    except ValueError:  # not the main thread
        pass
    return False


def __getattr__(name: str) -> Any:
    if name in ("app", "command"):
        from teton.cli._app import app, command

        return {"app": app, "command": command}[name]
    raise AttributeError(f"module 'teton.cli' has no attribute {name!r}")
