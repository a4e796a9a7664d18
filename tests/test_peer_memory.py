"""The host side of peer-memory rounds (bfs/transport/peer_memory.py): which bytes go where.  The rounds
themselves run only between GPUs (tests/test_multigpu.py runs every level through them on a GPU machine)."""

from __future__ import annotations

import pytest

from breadth.bfs.transport.peer_memory import push_segments


def test_segments_land_at_the_receivers_offsets():
    # this rank sends two arrays to rank 1 and one to rank 2; rank 1 receives them in its buffer 3 at
    # byte offsets 0 and 64, rank 2 in its buffer 0 at 4096; mapped bases differ per peer
    # (the second array to rank 1 moves at most *count * 16 bytes, the count at device address 555)
    sends = {1: [(1000, 64, 0, 0), (2000, 128, 555, 16)], 2: [(3000, 8, 0, 0)]}
    where = {1: [(3, 0, 64), (3, 64, 128)], 2: [(0, 4096, 8)]}
    bases = {1: [10, 20, 30, 1 << 40], 2: [7 << 40]}
    assert push_segments(sends, where, bases) == [(1000, 1 << 40, 64, 0, 0), (2000, (1 << 40) + 64, 128, 555, 16),
                                                  (3000, (7 << 40) + 4096, 8, 0, 0)]


@pytest.mark.parametrize("where,match", [({1: [(0, 0, 64)]}, "receives 1 arrays"),
                                         ({1: [(0, 0, 64), (0, 64, 64)]}, "bytes sent"),
                                         ({1: [(0, 0, 60), (0, 64, 60)]}, "bytes sent")])
def test_mismatched_sides_are_refused(where, match):
    sends = {1: [(1000, 64, 0, 0), (2000, 128, 0, 0)]}
    with pytest.raises(ValueError, match=match):
        push_segments(sends, where, {1: [0]})


def test_odd_sizes_are_refused():
    with pytest.raises(ValueError, match="multiples of 8"):
        push_segments({1: [(1000, 12, 0, 0)]}, {1: [(0, 0, 12)]}, {1: [0]})
    with pytest.raises(ValueError, match="multiples of 8"):
        push_segments({1: [(1000, 16, 555, 12)]}, {1: [(0, 0, 16)]}, {1: [0]})
