"""IdentityMemo: hits only for the very objects an entry was made for."""

import numpy as np

from teton.memo import IdentityMemo


def test_identity_memo_hits_by_identity_and_plain_values_only():
    memo, calls = IdentityMemo(maxsize=2), []

    def make(v):
        def f():
            calls.append(v)
            return v
        return f

    a, b = np.arange(3), np.arange(3)  # equal contents, different objects
    assert memo.get((a,), ("x",), make(1)) == 1
    assert memo.get((a,), ("x",), make(2)) == 1  # hit
    assert memo.get((b,), ("x",), make(3)) == 3  # equal is not identical: a miss
    assert memo.get((a,), ("y",), make(4)) == 4  # plain values are part of the key; the memo was full
    assert memo.get((a,), ("x",), make(5)) == 5  # ... and cleared whole
    assert calls == [1, 3, 4, 5]


def test_fewer_collections_spaces_collections_and_restores_the_thresholds():
    import gc

    from teton.memo import SEARCH_GEN0_THRESHOLD, fewer_collections

    before = gc.get_threshold()
    try:
        with fewer_collections():
            assert gc.get_threshold() == (max(SEARCH_GEN0_THRESHOLD, before[0]), *before[1:])
            raise KeyError("a search that fails")
    except KeyError:
        pass
    assert gc.get_threshold() == before
