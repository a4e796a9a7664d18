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

from .id_map import on_device
from .shard import Shard, column_dtype, to_module


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


def _host(shard: Shard) -> Shard:
    return shard.to(np) if on_device(shard.offsets) else shard


def owned_delegates(shard: Shard, degree: int) -> np.ndarray:
    """Global ids (int64, sorted) of this shard's vertices whose row has at least ``degree`` entries (after
    cleaning: the graph's degree, or out-degree for a directed graph)."""
    s = _host(shard)
    deg = np.diff(np.asarray(s.offsets))
    return np.flatnonzero(deg >= degree).astype(np.int64) + s.lo


def delegate_pieces(shard: Shard, delegates: np.ndarray) -> list[np.ndarray]:
    """The entries of this shard's delegates cut by the owner of their target: ``nparts`` arrays ``(k, 2)`` of
    (delegate index, target global id)."""
    s = _host(shard)
    off, cols = np.asarray(s.offsets), np.asarray(s.columns)
    mine = delegates[(delegates >= s.lo) & (delegates < s.hi)]
    first = int(np.searchsorted(delegates, s.lo))
    row_index = np.full(s.num_local, -1, np.int64)  # a delegate row's index among all delegates
    row_index[mine - s.lo] = np.arange(first, first + mine.size)
    entry_index = np.repeat(row_index, np.diff(off))
    of_delegate = entry_index >= 0
    idx = entry_index[of_delegate]
    v = cols[of_delegate].astype(np.int64, copy=False)
    dest = v // s.block
    order = np.argsort(dest, kind="stable")
    starts = np.searchsorted(dest[order], np.arange(s.nparts + 1))
    pairs = np.stack([idx[order], v[order]], axis=1).astype(column_dtype(s.num_vertices), copy=False)
    return [pairs[starts[q]:starts[q + 1]] for q in range(s.nparts)]


def build_delegate_blocks(shard: Shard, delegates: np.ndarray, degree: int, *pieces: np.ndarray) -> Shard:
    """``shard`` with its :class:`DelegateBlocks`, from every owner's piece for it (:func:`delegate_pieces`)."""
    from .partitioning import Partitioning

    s = _host(shard)
    off, cols = np.asarray(s.offsets), np.asarray(s.columns)
    deg = np.diff(off)
    mine = delegates[(delegates >= s.lo) & (delegates < s.hi)] - s.lo
    deg_n = deg.copy()
    deg_n[mine] = 0
    n_off = np.zeros(deg.size + 1, np.int64)
    np.cumsum(deg_n, out=n_off[1:])
    row_is_normal = np.repeat(deg_n > 0, deg)
    n_cols = cols[row_is_normal]
    e = np.concatenate([np.asarray(p, np.int64).reshape(-1, 2) for p in pieces]) if pieces else np.empty((0, 2), np.int64)
    order = np.argsort(e[:, 0], kind="stable")
    d_off = np.zeros(delegates.size + 1, np.int64)
    np.cumsum(np.bincount(e[:, 0], minlength=delegates.size), out=d_off[1:])
    d_cols = e[order, 1].astype(cols.dtype, copy=False)
    blocks = DelegateBlocks(degree, np.asarray(delegates, np.int64), n_off, n_cols, d_off, d_cols)
    if on_device(shard.offsets):
        import cupy

        blocks = blocks.to(cupy)
    return replace(shard, partitioning=Partitioning("delegates", delegate_degree=degree), blocks=blocks)
