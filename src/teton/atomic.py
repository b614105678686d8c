"""Whole files or none: every file teton writes goes to a temporary file in the same directory,
which replaces the target (``os.replace``, atomic on POSIX) only once it is complete. A Ctrl-C, a
full disk or an exception half-way leaves the previous file (or no file), never a truncated one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _mode_for(target: Path) -> int:
    """The permission bits a plain ``open(target, "w")`` would give: the old file's, else 0o666 less the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path next to ``path`` (same suffix) for a writer that takes a file name; it
    replaces ``path`` when the block ends without an exception and is removed otherwise."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _mode_for(target))
        os.replace(tmp_path, target)
    except BaseException:
        try:
            tmp_path.unlink()
        except OSError:
            pass
        raise


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = None) -> Iterator[IO[Any]]:
    """``open(path, mode)`` (``"w"`` or ``"wb"``) whose content appears at ``path`` only when complete."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file: mode 'w' or 'wb', not {mode!r}")
    if "b" not in mode and encoding is None:
        encoding = "utf-8"
    with atomic_path(path) as tmp, open(tmp, mode, encoding=encoding) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """``Path(path).write_text(text)``, atomically."""
    with atomic_open(path, "w", encoding=encoding) as f:
        f.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """``Path(path).write_bytes(data)``, atomically."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def save_figure(fig: Any, path: str | Path, **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` for a matplotlib figure, atomically (the format from
    ``path``'s suffix, as savefig infers it, else matplotlib's default)."""
    suffix = Path(path).suffix.lstrip(".").lower()
    kwargs.setdefault("format", suffix or None)
    with atomic_open(path, "wb") as f:
        fig.savefig(f, **kwargs)
