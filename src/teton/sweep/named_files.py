"""The files a sweep point's spec names, and those they name in turn, with their content digests:
what :func:`teton.sweep.grid.point_key` hashes besides the spec mapping, so that an edited cluster,
model, software, storage or hardware file makes new points instead of reading back stale rows.
A file counts where the loader would read it (``teton.sweep.paths``), whatever its extension."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from teton.memo import cached
from teton.spec.load import read_file
from teton.sweep.paths import Where, map_files


def named_files(spec: Any, base_dir: Path | None = None) -> set[str]:
    """The existing files (absolute paths) a spec mapping names where the loader reads files,
    relative to ``base_dir`` (None: the working directory, as the loader reads a mapping), and
    those the files name in turn, relative to their own folders."""
    found: set[str] = set()
    walked: set[tuple[str, Where]] = set()  # each file read once as each kind: a cycle ends, as does a diamond

    def visit(where: Where, path: Path) -> None:
        name = os.path.abspath(path)
        if not os.path.isfile(name):  # a missing file (or no file name at all): the loader reports it
            return
        try:
            real = os.path.realpath(name)
            st = os.stat(name)
        except (OSError, ValueError):
            return
        found.add(name)
        if (real, where) in walked:
            return
        walked.add((real, where))
        map_files(_file_mapping(name, st.st_mtime_ns, st.st_size), where, Path(name).parent, visit)

    map_files(spec, (), base_dir, visit)
    return found


@cached(1024)
def _file_mapping(path: str, mtime_ns: int, size: int) -> Any:
    """A named file's parsed contents, for the files it names (None where it does not parse: the
    loader reports that; its bytes are hashed all the same)."""
    try:
        return read_file(Path(path))
    except Exception:  # noqa: BLE001 - any unreadable file: hashed by its bytes, named files unknown
        return None


@cached(1024)
def _digest_of(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def file_digest(path: str) -> str:
    """A named file's content digest (cached while its modification time and size stay);
    ``unreadable`` where it cannot be read (the loader reports that)."""
    try:
        st = os.stat(path)
        return _digest_of(path, st.st_mtime_ns, st.st_size)
    except OSError:
        return "unreadable"
