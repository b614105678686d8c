"""A bounded memo keyed by the identity of live objects (frozen specs, placements, blocks, cost
models) plus plain values, for the simulator's hot path.

Keys hold ``id()``s, which Python reuses once an object is freed; the memo keeps a reference to
every object of a key, so an entry can only be hit by the very objects it was made for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class IdentityMemo:
    """``memo.get(objs, extra, make)``: the value cached for these objects (by identity) and these
    plain values, else ``make()`` stored; cleared whole when it holds ``maxsize`` entries."""

    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._entries: dict[tuple, tuple[tuple, Any]] = {}

    def get(self, objs: tuple, extra: tuple, make: Callable[[], Any]) -> Any:
        key = (tuple(map(id, objs)), extra)
        hit = self._entries.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], objs, strict=True)):
            return hit[1]
        value = make()
        if len(self._entries) >= self.maxsize:
            self._entries.clear()
        self._entries[key] = (objs, value)
        return value

    def clear(self) -> None:
        self._entries.clear()
