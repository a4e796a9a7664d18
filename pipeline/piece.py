"""What a chunk sends an owner in the shuffle: a :class:`Piece` of adjacency entries (no Numba here, so
that GPU workers, which cut pieces with CuPy, never load it)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Piece(NamedTuple):
    """What one chunk sends to one owner: ``(k, 2)`` int64 ``[row, column]`` entries in global ids."""

    out: np.ndarray
    inc: np.ndarray | None  # directed graphs only: in-entries [row, column] (row = head of the edge)
    loops: np.ndarray  # int64 vertex ids of self-loop tuples owned here
