"""Per-owner CSR construction: count rows, scatter, sort and deduplicate each row in parallel.

This is gapbs' builder in three passes over the owner's entries, which arrive as pieces from every edge
chunk; no piece is concatenated with another, so peak memory is the pieces plus one column array.
Scattering is split among threads by row range (each thread reads every entry and writes only its
rows), which needs no atomics.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from breadth.bfs.shard import Shard, block_size, column_dtype

from .partition import Piece


@numba.njit(nogil=True, cache=True)
def _count_rows(entries, lo, deg):
    # unsigned indices: Numba checks signed ones for wraparound on every access (see bfs/bottom_up.py)
    ulo = np.uint64(lo)
    for i in range(entries.shape[0]):
        deg[np.uint64(entries[i, 0]) - ulo] += 1


@numba.njit(nogil=True, cache=True)
def _scatter_rows(entries, lo, r0, r1, cursor, cols):
    """Scatter the entries whose local row is in ``[r0, r1)``; threads own disjoint row ranges."""
    base = np.uint64(lo) + np.uint64(r0)
    nrows = np.uint64(r1 - r0)
    for i in range(entries.shape[0]):
        r = np.uint64(entries[i, 0]) - base  # rows below the range wrap to huge values
        if r < nrows:
            r += np.uint64(r0)
            cols[np.uint64(cursor[r])] = entries[i, 1]
            cursor[r] += 1


def _scatter_parallel(entries: list[np.ndarray], lo: int, nrows: int, cursor: np.ndarray, cols: np.ndarray) -> None:
    """Each thread reads every entry and writes only its own rows: no atomics, no per-thread copies."""
    nt = max(1, min(numba.get_num_threads(), nrows))
    cuts = np.linspace(0, nrows, nt + 1).astype(np.int64)

    def work(t: int) -> None:
        for e in entries:
            _scatter_rows(e, lo, cuts[t], cuts[t + 1], cursor, cols)

    if nt == 1:
        work(0)
    else:
        with ThreadPoolExecutor(nt) as ex:
            list(ex.map(work, range(nt)))


@numba.njit(nogil=True, cache=True, inline="always")
def _insertion_sort(a, lo, hi):
    i = lo + np.uint64(1)
    while i < hi:
        x = a[i]
        j = i
        while j > lo and a[j - np.uint64(1)] > x:
            a[j] = a[j - np.uint64(1)]
            j -= np.uint64(1)
        a[j] = x
        i += np.uint64(1)


@numba.njit(parallel=True, nogil=True, cache=True)
def _sort_unique_rows(offsets, cols, uniq):
    one = np.uint64(1)
    for r in numba.prange(offsets.size - 1):
        a, b = np.uint64(offsets[r]), np.uint64(offsets[r + 1])
        if b - a <= np.uint64(16):  # most rows are short: sort in place, nothing allocated
            _insertion_sort(cols, a, b)
        else:
            cols[a:b].sort()
        k = a
        j = a
        while j < b:
            if j == a or cols[j] != cols[j - one]:
                cols[k] = cols[j]
                k += one
            j += one
        uniq[r] = k - a


@numba.njit(parallel=True, nogil=True, cache=True)
def _compact(offsets, cols, new_offsets, out):
    n = offsets.size - 1
    for r in numba.prange(n):
        a = offsets[r]
        s = new_offsets[r]
        for j in range(new_offsets[r + 1] - s):
            out[s + j] = cols[a + j]


def csr_from_entries(entries: list[np.ndarray], lo: int, num_local: int, num_vertices: int):
    """Deduplicated CSR of rows ``lo..lo+num_local-1`` from ``(k, 2)`` ``[row, col]`` entry arrays.

    Returns ``(offsets int64[num_local+1], columns int32|int64[nnz], multiplicity int64[num_local])``
    where ``multiplicity`` counts entries per row before deduplication.
    """
    deg = np.zeros(num_local, np.int64)
    for e in entries:
        _count_rows(e, lo, deg)
    offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(deg, out=offsets[1:])
    cols = np.empty(int(offsets[-1]), np.int64)
    cursor = offsets[:-1].copy()
    _scatter_parallel(entries, lo, num_local, cursor, cols)
    uniq = np.empty(num_local, np.int64)
    _sort_unique_rows(offsets, cols, uniq)
    new_offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(uniq, out=new_offsets[1:])
    out = np.empty(int(new_offsets[-1]), column_dtype(num_vertices))
    _compact(offsets, cols, new_offsets, out)
    return new_offsets, out, deg


def build_shard(rank: int, nparts: int, num_vertices: int, pieces: list[Piece], directed: bool = False) -> Shard:
    """Build owner ``rank``'s :class:`Shard` from the pieces every edge chunk sent it."""
    block = block_size(num_vertices, nparts)
    lo = min(rank * block, num_vertices)
    hi = min(lo + block, num_vertices)
    offsets, columns, deg_out = csr_from_entries([p.out for p in pieces], lo, hi - lo, num_vertices)
    in_offsets = in_columns = None
    if directed:
        # tuple_degree stays the OUT-tuple count: a directed search's Graph500 edge count is the tuples
        # whose tail it reached (each counted once), see bfs/graph500.py
        in_offsets, in_columns, _ = csr_from_entries([p.inc for p in pieces], lo, hi - lo, num_vertices)
    loops = np.zeros(hi - lo, np.int64)
    for p in pieces:
        if p.loops.size:
            loops += np.bincount(p.loops - lo, minlength=hi - lo)
    return Shard(rank, nparts, num_vertices, lo, hi, offsets, columns,
                 deg_out.astype(np.int32), loops.astype(np.int32), in_offsets, in_columns)
