"""The vectorised ring of groups with the same members on every host builds the same hops, in the
same order, as the general loop (the 131K-GPU flow step's DP rings take the vectorised path)."""

import numpy as np
import pytest

from teton.collectives.algorithms import _even_ring_chains, _hosts, _uneven_ring_chains


@pytest.mark.parametrize("drop_wrap", [False, True])
@pytest.mark.parametrize(("row", "gph"), [
    (np.arange(64) * 8, 8),  # one member per host: a DP group
    (np.arange(32), 8),  # four hosts of eight
    (np.array([17, 3, 2, 16, 9, 8, 25, 24]), 8),  # two members on each of four hosts, out of order
    (np.arange(0, 288, 2), 72),  # 36 members in each of four NVL72 domains
])
def test_even_and_general_ring_chains_agree(row, gph, drop_wrap):
    members = _hosts(row, gph)
    assert isinstance(members, np.ndarray)  # every host holds the same number
    channels = 2 * members.shape[1]
    even = _even_ring_chains(members, channels, drop_wrap)
    general = _uneven_ring_chains(list(members), channels, drop_wrap)
    assert len(even) == len(general) == channels
    for (s1, d1), (s2, d2) in zip(even, general, strict=True):
        assert s1.tolist() == s2.tolist() and d1.tolist() == d2.tolist()


def test_uneven_hosts_keep_their_members_in_order_of_appearance():
    members = _hosts(np.array([9, 0, 8, 1, 2]), 8)
    assert [m.tolist() for m in members] == [[8, 9], [0, 1, 2]]
