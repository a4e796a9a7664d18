"""2D R x C partition (Buluc-Madduri; Bisson, Bernaschi, Mastrostefano): one rank's block of the adjacency.

Rank ``r`` sits at grid row ``i = r // C`` and column ``j = r % C``.  Its *row block* is the vertices owned
by the ranks of grid row ``i`` (contiguous ids ``[i * C * block, (i + 1) * C * block)``), its *column set*
the vertices owned by the ranks of grid column ``j`` (ranks ``k * C + j``, ``k < R``).  The entry
``u -> v`` lives at the rank whose row block holds ``v`` and whose column set holds ``u``, so a top-down
level needs the frontier of its column set only (``R - 1`` peers) and sends the vertices it reaches to their
owners within its grid row (``C - 1`` peers); bottom-up scans its row block against the same column frontier.

Column-set vertices are numbered compactly: ``u`` owned by rank ``k * C + j`` at offset ``o`` in its block is
``k * block + o``, so the column frontier is the concatenation of the ``R`` owners' bitmaps, ``R * block``
bits (``n / C``) instead of ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .shard import Shard, array_module, column_dtype, to_module


@dataclass
class GridBlocks:
    """One rank's 2D block, built from the entries ``u -> v`` it holds.

    ``td_offsets`` (int64, ``R * block + 1``) / ``td_columns`` (global ids of the row block, the shard's column
    dtype): rows by compact column-set id, the top-down view.  ``bu_offsets`` (int64, ``row_hi - row_lo + 1``) /
    ``bu_columns`` (compact column-set ids): rows by ``v - row_lo``, the bottom-up view.
    """

    grid: tuple[int, int]
    row_lo: int
    row_hi: int
    td_offsets: Any
    td_columns: Any
    bu_offsets: Any
    bu_columns: Any

    def to(self, xp) -> "GridBlocks":
        """The same block with its arrays on array module ``xp``."""
        return replace(self, td_offsets=to_module(self.td_offsets, xp), td_columns=to_module(self.td_columns, xp),
                       bu_offsets=to_module(self.bu_offsets, xp), bu_columns=to_module(self.bu_columns, xp))

    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self.td_offsets, self.td_columns, self.bu_offsets, self.bu_columns))


def grid_position(rank: int, grid: tuple[int, int]) -> tuple[int, int]:
    """``(grid row, grid column)`` of ``rank``."""
    return divmod(rank, grid[1])


def row_range(i: int, grid: tuple[int, int], block: int, num_vertices: int) -> tuple[int, int]:
    """Global ids ``[lo, hi)`` of grid row ``i``'s row block."""
    c = grid[1]
    return min(i * c * block, num_vertices), min((i + 1) * c * block, num_vertices)


def compact_ids(u, block: int, cols: int):
    """Compact column-set ids of global ids ``u`` (every ``u`` in one grid column of ``cols`` columns)."""
    owner = u // block
    return (owner // cols) * block + (u - owner * block)


def global_ids(c, block: int, cols: int, j: int):
    """Global ids of compact ids ``c`` of grid column ``j`` (the inverse of :func:`compact_ids`)."""
    k = c // block
    return (k * cols + j) * block + (c - k * block)


def repeat_rows(values, offsets, xp=np):
    """``values[r]`` (one per row of a CSR with ``offsets``, int64 ``rows + 1``) for each of row ``r``'s
    entries: ``offsets[-1]`` values, in entry order."""
    if xp is np:
        return np.repeat(values, np.diff(offsets))
    # CuPy repeats by a scalar or a host list only: each entry's row by a search of the row ends
    return values[xp.searchsorted(offsets[1:], xp.arange(int(offsets[-1]), dtype=xp.int64), side="right")]


def grid_pieces(shard: Shard, grid: tuple[int, int]) -> list:
    """This 1D shard's entries ``u -> v`` (its rows: out-entries for a directed graph) cut by the grid row of
    ``owner(v)``: ``R`` arrays ``(k, 2)`` of ``(u, v)`` global ids (the shard's column dtype), for the ranks of
    this shard's grid column, each in the shard's order; on the shard's device (a host sort of a scale-26
    shard's 10^9 entries takes minutes)."""
    xp = array_module(shard.offsets)
    rows, cols = grid
    block = shard.block
    dt = column_dtype(shard.num_vertices)
    u = repeat_rows(xp.arange(shard.lo, shard.hi, dtype=dt), shard.offsets, xp)
    v = shard.columns.astype(dt, copy=False)
    dest = (v // block) // cols
    # R masks keep each piece in the shard's order without sorting 10^9 entries (R is a few grid rows)
    return [xp.stack([u[dest == g], v[dest == g]], axis=1) for g in range(rows)]


def _csr(rows, cols, nrows: int, dtype, xp=np):
    order = xp.argsort(rows, kind="stable")
    offsets = xp.zeros(nrows + 1, xp.int64)
    xp.cumsum(xp.bincount(rows, minlength=nrows), out=offsets[1:])
    return offsets, cols[order].astype(dtype, copy=False)


def build_grid_blocks(shard: Shard, grid: tuple[int, int], *pieces) -> Shard:
    """``shard`` with its 2D block (:class:`GridBlocks`), built from the pieces that the ``R`` ranks of its grid
    column cut for its grid row (:func:`grid_pieces`), on the shard's device."""
    from .partitioning import Partitioning

    xp = array_module(shard.offsets)
    rows, cols = grid
    i, j = grid_position(shard.rank, grid)
    block = shard.block
    lo, hi = row_range(i, grid, block, shard.num_vertices)
    dt = column_dtype(shard.num_vertices)
    e = (xp.concatenate([xp.asarray(p).astype(dt, copy=False).reshape(-1, 2) for p in pieces]) if pieces
         else xp.empty((0, 2), dt))
    cu = compact_ids(e[:, 0], block, cols)
    td_off, td_col = _csr(cu, e[:, 1], rows * block, dt, xp)
    bu_off, bu_col = _csr(e[:, 1] - lo, cu, hi - lo, dt, xp)
    blocks = GridBlocks((rows, cols), lo, hi, td_off, td_col, bu_off, bu_col)
    return replace(shard, partitioning=Partitioning("2d", (rows, cols)), blocks=blocks)
