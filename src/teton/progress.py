"""Progress bars for long work: drawn on stderr, cleared when done, and silent when stderr is not
a terminal (pipes, CI logs), so that an error stays one line and JSON on stdout stays clean."""

from __future__ import annotations

from typing import Any


def progress_bar(*columns: Any, disable: bool = False):
    """A transient ``rich.progress.Progress`` on stderr (default columns when none are given)."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    return Progress(*columns, console=console, transient=True, disable=disable or not console.is_terminal)
