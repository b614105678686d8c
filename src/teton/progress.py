"""Progress bars for long work: drawn on stderr, cleared when done, and silent when stderr is not
a terminal (pipes, CI logs), so that an error stays one line and JSON on stdout stays clean.

``TETON_PROGRESS=1`` draws them even when stderr is not a terminal (tests, ``script`` logs);
``TETON_PROGRESS=0`` never draws them.

Library loops report through plain callbacks, ``progress(done, total)``, and never import rich;
the CLI turns a callback into a bar with :func:`progress_task`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ProgressCallback = Callable[[int, int], None]


def forced() -> bool | None:
    """``TETON_PROGRESS``: True (``1``: draw even in a pipe), False (``0``: never draw), None (unset)."""
    value = os.environ.get("TETON_PROGRESS", "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def progress_bar(*columns: Any, disable: bool = False):
    """A transient ``rich.progress.Progress`` on stderr (default columns when none are given)."""
    from rich.console import Console
    from rich.progress import Progress

    force = forced()
    console = Console(stderr=True, force_terminal=True if force else None)
    return Progress(*columns, console=console, transient=True,
                    disable=disable or force is False or not console.is_terminal)


def eta_column():
    """Time left at the average rate since the task started. rich's ``TimeRemainingColumn`` needs
    two updates within 30 s to estimate a speed, so work done in a few slow steps (a policy, a
    section) would show none."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class AverageEtaColumn(ProgressColumn):
        max_refresh = 0.5

        def render(self, task) -> Text:
            if task.finished:
                left: float | None = 0.0
            elif task.total and task.completed and task.elapsed:
                left = task.elapsed * (task.total - task.completed) / task.completed
            else:
                left = None
            if left is None:
                return Text("eta -:--:--", style="progress.remaining")
            m, s = divmod(int(left + 0.5), 60)
            h, m = divmod(m, 60)
            return Text(f"eta {h}:{m:02d}:{s:02d}", style="progress.remaining")

    return AverageEtaColumn()


def eta_columns(counts: bool = True) -> tuple:
    """Description, bar, done/total (``counts``; else a percentage), time elapsed, time left."""
    from rich.progress import BarColumn, MofNCompleteColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

    return (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn() if counts else TaskProgressColumn(),
            TimeElapsedColumn(), eta_column())


@contextmanager
def progress_task(description: str, total: int | None = None, disable: bool = False,
                  counts: bool = True) -> Iterator[ProgressCallback]:
    """A bar with an ETA for one piece of work; yields its ``progress(done, total)`` callback
    (a no-op when the bar is off)."""
    with progress_bar(*eta_columns(counts), disable=disable) as bar:
        if bar.disable:
            yield lambda done, total: None
            return
        task = bar.add_task(description, total=total)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
