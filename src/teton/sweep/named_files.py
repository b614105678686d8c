"""The files a sweep point's spec names, and those they name in turn, with their content digests:
what :func:`teton.sweep.grid.point_key` hashes besides the spec mapping, so that an edited cluster,
model or GPU file makes new points instead of reading back stale rows."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from teton.memo import cached
from teton.spec.load import SPEC_SUFFIXES, read_file


def named_files(value: Any, base_dir: Path | None = None, seen: frozenset[str] = frozenset()) -> set[str]:
    """The existing spec files (by suffix) a spec mapping names anywhere in it, relative to
    ``base_dir`` (None: the working directory), and those the files name in turn."""
    if isinstance(value, str):
        if not value.endswith(SPEC_SUFFIXES):
            return set()
        path = Path(value) if base_dir is None else base_dir / value
        if not os.path.isfile(path):
            return set()
        name = str(path.resolve())
        if name in seen:
            return set()
        st = os.stat(name)
        return {name} | named_files(_file_mapping(name, st.st_mtime_ns, st.st_size), Path(name).parent,
                                     seen | {name})
    if isinstance(value, dict):
        return set().union(*(named_files(v, base_dir, seen) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(named_files(v, base_dir, seen) for v in value)) if value else set()
    return set()


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
    """A named file's content digest (cached while its modification time and size stay)."""
    st = os.stat(path)
    return _digest_of(path, st.st_mtime_ns, st.st_size)
