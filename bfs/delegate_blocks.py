"""Degree-separated delegates (Pan, Pearce, Owens): one rank's blocks of the adjacency.

Vertices whose (out-)degree is at least the threshold are *delegates*; their sorted ids are on every rank
(``O(#delegates)``).  An entry ``u -> v`` from a normal ``u`` stays at the owner of ``u`` (its 1D row); one
from a delegate ``d`` lives at the owner of ``v``, so a delegate in the frontier is expanded by every rank
over its own vertices, with no message: only the delegates' visited bits (one bitmask, all-reduced) and
the normal vertices' (vertex, parent) pairs cross ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .grid_blocks import repeat_rows
from .shard import Shard, array_module, column_dtype, to_module


@dataclass
class DelegateBlocks:
    """``delegates``: every delegate's global id, sorted (int64).  ``normal_offsets``/``normal_columns``: the
    owned rows (local ids) with the delegates' rows emptied.  ``delegate_offsets`` (int64, ``#delegates + 1``)
    / ``delegate_columns`` (global ids, all owned here): the entries ``d -> v`` by delegate index."""

    degree: int
    delegates: Any
    normal_offsets: Any
    normal_columns: Any
    delegate_offsets: Any
    delegate_columns: Any

    def to(self, xp) -> "DelegateBlocks":
        """The same blocks with their arrays on array module ``xp``."""
        return replace(self, delegates=to_module(self.delegates, xp),
                       normal_offsets=to_module(self.normal_offsets, xp),
                       normal_columns=to_module(self.normal_columns, xp),
                       delegate_offsets=to_module(self.delegate_offsets, xp),
                       delegate_columns=to_module(self.delegate_columns, xp))

    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.delegates, self.normal_offsets, self.normal_columns,
                                            self.delegate_offsets, self.delegate_columns))


def owned_delegates(shard: Shard, degree: int) -> np.ndarray:
    """Global ids (int64, sorted, host memory: ``O(#delegates)``) of this shard's vertices whose row has at
    least ``degree`` entries (after cleaning: the graph's degree, or out-degree for a directed graph)."""
    xp = array_module(shard.offsets)
    deg = xp.diff(shard.offsets)
    return to_module(xp.flatnonzero(deg >= degree).astype(xp.int64) + shard.lo, np)


def delegate_pieces(shard: Shard, delegates: np.ndarray) -> list:
    """The entries of this shard's delegates cut by the owner of their target: ``nparts`` arrays ``(k, 2)`` of
    (delegate index, target global id), on the shard's device."""
    xp = array_module(shard.offsets)
    first = int(np.searchsorted(to_module(delegates, np), shard.lo))
    delegates = xp.asarray(delegates)
    off, cols = shard.offsets, shard.columns
    mine = delegates[(delegates >= shard.lo) & (delegates < shard.hi)]
    row_index = xp.full(shard.num_local, -1, xp.int64)  # a delegate row's index among all delegates
    row_index[mine - shard.lo] = xp.arange(first, first + mine.size)
    entry_index = repeat_rows(row_index, off, xp)
    of_delegate = entry_index >= 0
    dt = column_dtype(shard.num_vertices)
    idx = entry_index[of_delegate].astype(dt, copy=False)
    v = cols[of_delegate].astype(dt, copy=False)
    dest = v // shard.block
    # one mask per owner keeps each piece in the shard's order without a sort of the delegates' entries
    return [xp.stack([idx[dest == q], v[dest == q]], axis=1) for q in range(shard.nparts)]


def build_delegate_blocks(shard: Shard, delegates: np.ndarray, degree: int, *pieces) -> Shard:
    """``shard`` with its :class:`DelegateBlocks`, from every owner's piece for it (:func:`delegate_pieces`),
    on the shard's device."""
    from .partitioning import Partitioning

    xp = array_module(shard.offsets)
    off, cols = shard.offsets, shard.columns
    delegates = xp.asarray(delegates, dtype=xp.int64)
    deg = xp.diff(off)
    mine = delegates[(delegates >= shard.lo) & (delegates < shard.hi)] - shard.lo
    deg_n = deg.copy()
    deg_n[mine] = 0
    n_off = xp.zeros(deg.size + 1, xp.int64)
    xp.cumsum(deg_n, out=n_off[1:])
    row_is_normal = repeat_rows(deg_n > 0, off, xp)
    n_cols = cols[row_is_normal]
    e = (xp.concatenate([xp.asarray(p).astype(xp.int64, copy=False).reshape(-1, 2) for p in pieces]) if pieces
         else xp.empty((0, 2), xp.int64))
    order = xp.argsort(e[:, 0], kind="stable")
    d_off = xp.zeros(int(delegates.size) + 1, xp.int64)
    xp.cumsum(xp.bincount(e[:, 0], minlength=int(delegates.size)), out=d_off[1:])
    d_cols = e[order, 1].astype(cols.dtype, copy=False)
    blocks = DelegateBlocks(degree, delegates, n_off, n_cols, d_off, d_cols)
    return replace(shard, partitioning=Partitioning("delegates", delegate_degree=degree), blocks=blocks)
