"""What a chunk sends an owner in the shuffle: a :class:`Piece` of adjacency entries, and the check of the ids
a chunk is cut from (no Numba here, so that workers that cut pieces with CuPy or NumPy never load it)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Piece(NamedTuple):
    """What one chunk sends to one owner: ``(k, 2)`` ``[row, column]`` entries in global ids, int32 when every
    id fits (the shard's column dtype), else int64."""

    out: np.ndarray
    inc: np.ndarray | None  # directed graphs only: in-entries [row, column] (row = head of the edge)
    loops: np.ndarray  # int64 vertex ids of self-loop tuples owned here


def check_ids(edges: np.ndarray, num_vertices: int, where: str = "edge chunk") -> None:
    """Raise ``ValueError`` naming the first id outside ``[0, num_vertices)`` of a ``(k, 2)`` chunk about to be
    cut into pieces."""
    if edges.size == 0:
        return
    lo, hi = int(edges.min()), int(edges.max())
    if lo < 0 or hi >= num_vertices:
        bad = np.flatnonzero((edges < 0).any(axis=1) | (edges >= num_vertices).any(axis=1))[0]
        raise ValueError(f"{where}: row {bad} has vertex id {edges[bad].tolist()} outside "
                         f"[0, {num_vertices}); relabel the ids or pass num_vertices")
