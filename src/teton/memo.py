"""teton's one memoisation mechanism, for the simulator's hot path.

- :class:`IdentityMemo`: a bounded memo keyed by the identity of live objects (frozen specs,
  placements, blocks, cost models) plus plain values. Keys hold ``id()``s, which Python reuses once an object is freed; the memo keeps
  a reference to every object of a key, so an entry can only be hit by the very objects it was
  made for.
- :class:`ValueMemo`: a bounded dict for keys of plain values on the hottest paths, where a
  ``make`` closure per call would cost more than the lookup: ``memo.get(key)``, then
  ``memo.put(key, value)`` on a miss.
- :func:`cached`: a decorator for a pure function of hashable arguments (``functools.lru_cache``,
  bounded), where the arguments themselves are the key.
- :func:`fields_key`: a :class:`ValueMemo` key of a frozen spec's fields but those a function does
  not read, so specs that differ only in them share its result.
- :func:`fewer_collections` (not a cache): a loop that makes and drops many specs while the memos
  keep hundreds of thousands of objects alive (a layout search) runs with CPython's collections
  spaced further apart.

Every cache of a module-level function goes through one of the three caches; all are bounded, and
all only ever return what the function would compute (the functions are pure).
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import Any


class IdentityMemo:
    """``memo.get(objs, extra, make)``: the value cached for these objects (by identity) and these
    plain values, else ``make()`` stored; cleared whole when it holds ``maxsize`` entries."""

    def __init__(self, maxsize: int = 4096):
        self.maxsize = maxsize
        self._entries: dict[tuple, tuple[tuple, Any]] = {}

    def get(self, objs: tuple, extra: Any, make: Callable[[], Any]) -> Any:
        key = (tuple(map(id, objs)), extra)
        hit = self._entries.get(key)
        if hit is not None:  # the entry holds its objects alive, so no other object has their ids
            return hit[1]
        value = make()
        if len(self._entries) >= self.maxsize:
            self._entries.clear()
        self._entries[key] = (objs, value)
        return value

    def of(self, obj: Any, make: Callable[[Any], Any]) -> Any:
        """``make(obj)`` cached by ``obj``'s identity alone: the hottest path's form of :meth:`get`
        (no key tuple, no closure)."""
        hit = self._entries.get(id(obj))
        if hit is not None:
            return hit[1]
        value = make(obj)
        if len(self._entries) >= self.maxsize:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value

    def clear(self) -> None:
        self._entries.clear()


class ValueMemo(dict):
    """A dict cleared whole when ``put`` finds it holding ``maxsize`` entries."""

    def __init__(self, maxsize: int = 4096):
        super().__init__()
        self.maxsize = maxsize

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= self.maxsize:
            self.clear()
        self[key] = value
        return value


def cached(maxsize: int | None = 4096) -> Callable[[Callable], Callable]:
    """Memoise a pure function of hashable arguments, keeping at most ``maxsize`` results."""
    return functools.lru_cache(maxsize=maxsize)


def fields_key(spec: Any, ignored: frozenset[str]) -> tuple:
    """The values of every field of the frozen ``spec`` but the ``ignored`` ones, in order: a field
    added to the spec later is part of the key unless it is listed."""
    return tuple(v for k, v in spec.__dict__.items() if k not in ignored)


# Allocations between two collections of the youngest generation inside ``fewer_collections``
# (CPython's default is 700): a cold 16K-GPU DeepSeek-V3 layout search (benchmarks/bench_search.py,
# ~800K objects alive at its end) ran in 15.7 s instead of 18.7 s with it.
SEARCH_GEN0_THRESHOLD = 100_000


@contextlib.contextmanager
def fewer_collections(gen0: int = SEARCH_GEN0_THRESHOLD) -> Iterator[None]:
    """Run the block with the youngest generation collected every ``gen0`` allocations (never more
    often than before), then restore the thresholds. Reference cycles are still collected, later."""
    old = gc.get_threshold()
    gc.set_threshold(max(gen0, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
