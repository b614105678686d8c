"""Independent, deterministic tasks of a fit on the machine's cores (two at most: the fits are
small), in order, so that the results are a serial run's.

Workers are forked (they inherit the runs and specs the task reads from a module-level mapping,
nothing is pickled but the task's index); they ignore Ctrl-C, which the parent handles by stopping
them. Without ``fork`` the tasks run in the calling process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def map_forked(fn: Callable[[Any], Any], items: Iterable, progress: Callable[[int, int], None] | None = None,
               workers: int = 2) -> list:
    """``[fn(i) for i in items]``, on up to ``workers`` forked processes; ``progress(done, total)``."""
    import multiprocessing as mp
    import os

    items = list(items)
    total = len(items)
    workers = min(workers, os.cpu_count() or 1, total)
    if progress is not None:
        progress(0, total)
    if workers < 2 or "fork" not in mp.get_all_start_methods():
        out = []
        for i, item in enumerate(items):
            out.append(fn(item))
            if progress is not None:
                progress(i + 1, total)
        return out
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=_ignore_sigint)
    try:
        futures = [pool.submit(fn, item) for item in items]
        out = []
        for i, f in enumerate(futures):
            out.append(f.result())
            if progress is not None:
                progress(i + 1, total)
        pool.shutdown()
        return out
    except BaseException:  # Ctrl-C or a failed task: stop the workers, don't wait for them
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
