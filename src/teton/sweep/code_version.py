"""A fingerprint of teton's own code, stored with every sweep row (the store's ``code`` column).

teton's version string stays the same across many changes to its models, so a point key holding
only the version would let a resumed sweep read back rows that older code computed. The
fingerprint hashes every file of the installed ``teton`` package - its ``.py`` modules and its
bundled data (hardware catalogs, CSV tables, templates) - by relative path and contents, skipping
compiled ``__pycache__`` files: a run under other code drops the rows it needs that other code
computed and simulates them again (``ResultStore.discard_other_code``); under the same code a
sweep resumes. About 2 MB are read once per process (a few milliseconds).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from teton.memo import cached


def _package_dir() -> str:
    """The installed teton package's folder (this module's package's parent)."""
    return str(Path(__file__).resolve().parents[1])


def tree_fingerprint(root: str) -> str:
    """SHA-256 (first 16 hex digits) of every file under ``root`` - its path relative to ``root``
    and its contents, in sorted order - leaving out ``__pycache__`` folders, compiled ``.pyc`` /
    ``.pyo`` files, editor backups (``~``) and hidden files and folders (``.``-named)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".pyc", ".pyo", "~")):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    body = hashlib.sha256(f.read()).digest()
            except OSError:  # a file removed or unreadable while walking: named, without contents
                body = b"unreadable"
            digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0" + body)
    return digest.hexdigest()[:16]


@cached(1)
def code_fingerprint() -> str:
    """The fingerprint (:func:`tree_fingerprint`) of the installed teton package, computed once
    per process."""
    return tree_fingerprint(_package_dir())
