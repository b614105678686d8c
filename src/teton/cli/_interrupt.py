"""Ctrl-C for the ``teton`` command: exit 130 with one line, whatever was running.

Python runs a SIGINT handler at the next bytecode boundary, wherever that is. In a numba-compiled
call that is inside numba itself: boxing each returned array calls
``numba.core.serialize._numba_unpickle`` (a Python function) to fetch the array's type, and the
KeyboardInterrupt raised there is never checked by the compiled wrapper, which returns a result
with the exception still set -- CPython then reports ``SystemError: CPUDispatcher(...) returned a
result with an exception set`` (the KeyboardInterrupt as its ``__cause__``), or a later C call
clears it and the interrupt is lost. So the handler installed here does not raise inside numba's
Python code: it installs a profile hook (``sys.setprofile``) that raises at the next call or
return event outside numba, i.e. back in teton code, between compiled calls, and removes itself.
``is_interrupt`` catches what still gets through (an exception whose cause chain holds a
KeyboardInterrupt).
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType
from typing import NoReturn

# Modules whose Python code compiled numba calls run (boxing, unpickling cached types).
_DEFER_IN = ("numba", "llvmlite", "cloudpickle", "pickle", "copyreg")
DEFER_LIMIT_S = 1.0  # raise anyway if the program stays this long in numba's Python code (compiling)

_deferred_since = 0.0


def _in_numba(frame: FrameType | None) -> bool:
    if frame is None:
        return False
    name = frame.f_globals.get("__name__", "") or ""
    return name.split(".", 1)[0] in _DEFER_IN


def _raise_outside_numba(frame: FrameType, event: str, arg: object) -> None:
    """Profile hook while a Ctrl-C is pending: raise it at the first event outside numba (and
    outside this module: the handler's own return is the first event the hook sees)."""
    if (_in_numba(frame) or frame.f_globals.get("__name__") == __name__) and time.monotonic() - _deferred_since < DEFER_LIMIT_S:
        return
    sys.setprofile(None)
    raise KeyboardInterrupt


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _deferred_since
    if _in_numba(frame):
        current = sys.getprofile()
        if current is _raise_outside_numba:
            return  # already pending
        if current is None:  # (under a profiler: leave it alone and raise now)
            _deferred_since = time.monotonic()
            sys.setprofile(_raise_outside_numba)
            return
    raise KeyboardInterrupt


def install() -> None:
    """Use the numba-safe handler for SIGINT, unless Ctrl-C is ignored (``nohup``, a background job)
    or someone else installed a handler."""
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread (teton's main() called from a thread)
        pass


def is_interrupt(err: BaseException | None) -> bool:
    """``err`` is, or was caused by, a KeyboardInterrupt (e.g. numba's SystemError wrapping one)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False


def cancel_pending() -> None:
    """The command is over: drop a deferred Ctrl-C's profile hook."""
    if sys.getprofile() is _raise_outside_numba:
        sys.setprofile(None)


def ignore_further() -> None:
    """The work is over (done, or interrupted and reported): a Ctrl-C from now on, while the
    interpreter shuts down, must not turn a clean exit into a traceback or a death by signal."""
    cancel_pending()
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        pass


def exit_interrupted() -> NoReturn:
    ignore_further()
    print("interrupted", file=sys.stderr)
    sys.exit(130)
