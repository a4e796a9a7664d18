"""Per-owner CSR construction: count rows, scatter, sort and deduplicate each row in parallel.

This is gapbs' builder in three passes over the owner's entries, which arrive as pieces from every edge
chunk; no piece is concatenated with another, so peak memory is the pieces plus one column array (of the
shard's column dtype, shrunk in place after deduplication).  Counting and scattering are split among
threads by row range (each thread reads every entry and writes only its rows), which needs no atomics.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from breadth.bfs.shard import Shard, block_size, column_dtype

from .partition import Piece


@numba.njit(nogil=True, cache=True)
def _count_rows(entries, lo, r0, r1, deg):
    """Count the entries whose local row is in ``[r0, r1)``; threads own disjoint row ranges."""
    # unsigned indices: Numba checks signed ones for wraparound on every access (see bfs/cpu/bottom_up.py)
    base = np.uint64(lo) + np.uint64(r0)
    nrows = np.uint64(r1 - r0)
    for i in range(entries.shape[0]):
        r = np.uint64(entries[i, 0]) - base  # rows below the range wrap to huge values
        if r < nrows:
            deg[r + np.uint64(r0)] += 1


@numba.njit(nogil=True, cache=True)
def _scatter_rows(entries, lo, r0, r1, cursor, cols):
    """Scatter the entries whose local row is in ``[r0, r1)``; threads own disjoint row ranges."""
    base = np.uint64(lo) + np.uint64(r0)
    nrows = np.uint64(r1 - r0)
    for i in range(entries.shape[0]):
        r = np.uint64(entries[i, 0]) - base
        if r < nrows:
            r += np.uint64(r0)
            cols[np.uint64(cursor[r])] = entries[i, 1]
            cursor[r] += 1


def _by_row_range(kernel, entries: list[np.ndarray], lo: int, nrows: int, *arrays: np.ndarray) -> None:
    """Run ``kernel(e, lo, r0, r1, *arrays)`` over every entry array, one thread per row range: each
    thread reads every entry and writes only its own rows, so no atomics and no per-thread copies."""
    nt = max(1, min(numba.get_num_threads(), nrows))
    cuts = np.linspace(0, nrows, nt + 1).astype(np.int64)

    def work(t: int) -> None:
        for e in entries:
            kernel(e, lo, cuts[t], cuts[t + 1], *arrays)

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


@numba.njit(nogil=True, cache=True, inline="always")
def _radix_sort(row, scratch, width, passes):
    """LSD radix sort of the non-negative ``row`` in ``passes`` digits of ``width`` bits, through
    ``scratch`` (as long as ``row``): linear in the row's length, where a comparison sort of a hub's
    hundred thousand columns is not."""
    mask = (1 << width) - 1
    cnt = np.empty(1 << width, np.int64)
    src, dst = row, scratch
    for p in range(passes):
        shift = p * width
        cnt[:] = 0
        for x in src:
            cnt[(x >> shift) & mask] += 1
        total = 0
        for d in range(cnt.size):
            c = cnt[d]
            cnt[d] = total
            total += c
        for x in src:
            d = (x >> shift) & mask
            dst[cnt[d]] = x
            cnt[d] += 1
        src, dst = dst, src
    if passes % 2:
        row[:] = scratch


#: rows at least this long are radix sorted (shorter ones: insertion sort up to 16, else quicksort)
RADIX_MIN_ROW = 64


@numba.njit(parallel=True, nogil=True, cache=True)
def _sort_unique_rows(offsets, cols, uniq, id_bits):
    one = np.uint64(1)
    passes = max(1, (id_bits + 10) // 11)  # digits of at most 11 bits: 2048 counters stay in L1
    width = (id_bits + passes - 1) // passes
    for r in numba.prange(offsets.size - 1):
        a, b = np.uint64(offsets[r]), np.uint64(offsets[r + 1])
        if b - a <= np.uint64(16):  # most rows are short: sort in place, nothing allocated
            _insertion_sort(cols, a, b)
        elif b - a < np.uint64(RADIX_MIN_ROW):
            cols[a:b].sort()
        else:
            _radix_sort(cols[a:b], np.empty(b - a, cols.dtype), width, passes)
        k = a
        j = a
        while j < b:
            if j == a or cols[j] != cols[j - one]:
                cols[k] = cols[j]
                k += one
            j += one
        uniq[r] = k - a


@numba.njit(nogil=True, cache=True)
def _compact_in_place(offsets, cols, new_offsets):
    # forward, one row after another: a row's unique head only ever moves down (new_offsets[r] <=
    # offsets[r]), onto entries already read; in parallel a row could overwrite a lower row's unread ones
    for r in range(offsets.size - 1):
        a = np.uint64(offsets[r])
        s = np.uint64(new_offsets[r])
        if a != s:
            for j in range(np.uint64(new_offsets[r + 1]) - s):
                cols[s + j] = cols[a + j]


def csr_from_entries(entries: list[np.ndarray], lo: int, num_local: int, num_vertices: int):
    """Deduplicated CSR of rows ``lo..lo+num_local-1`` from ``(k, 2)`` ``[row, col]`` entry arrays.

    Returns ``(offsets int64[num_local+1], columns int32|int64[nnz], multiplicity int64[num_local])``
    where ``multiplicity`` counts entries per row before deduplication.
    """
    # 32-bit row counters and cursors where the entries allow: half the cache footprint of the two
    # random-access arrays (one owner of 2^26 web-crawl tuples, 66 M entries over 3 M rows: count
    # 0.27-0.29 -> 0.17-0.18 s, scatter 0.76-0.77 -> 0.66 s)
    cdt = np.int32 if sum(int(e.shape[0]) for e in entries) < (1 << 31) else np.int64
    deg = np.zeros(num_local, cdt)
    _by_row_range(_count_rows, entries, lo, num_local, deg)
    offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(deg, out=offsets[1:])
    # the columns are scattered, deduplicated and compacted in one array of the final dtype, which then
    # shrinks in place: no int64 scratch and no second column array (fresh memory is what a build pays for)
    cols = np.empty(int(offsets[-1]), column_dtype(num_vertices))
    cursor = offsets[:-1].astype(cdt)
    _by_row_range(_scatter_rows, entries, lo, num_local, cursor, cols)
    del cursor
    uniq = np.empty(num_local, np.int64)
    _sort_unique_rows(offsets, cols, uniq, max(1, (num_vertices - 1).bit_length()))
    new_offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(uniq, out=new_offsets[1:])
    del uniq
    _compact_in_place(offsets, cols, new_offsets)
    cols.resize(int(new_offsets[-1]), refcheck=False)  # realloc shrinks without copying
    return new_offsets, cols, deg.astype(np.int64, copy=False)  # the NumPy and GPU builders' dtype


def build_shard(rank: int, nparts: int, num_vertices: int, pieces: list[Piece], directed: bool = False) -> Shard:
    """Build owner ``rank``'s :class:`Shard` from the pieces every edge chunk sent it."""
    block = block_size(num_vertices, nparts)
    lo = min(rank * block, num_vertices)
    hi = min(lo + block, num_vertices)
    offsets, columns, deg_out = csr_from_entries([p.out for p in pieces], lo, hi - lo, num_vertices)
    in_offsets = in_columns = None
    if directed:
        # tuple_degree stays the OUT-tuple count: a directed search's Graph500 edge count is the tuples
        # whose tail it reached (each counted once), see bfs/graph500/driver.py
        in_offsets, in_columns, _ = csr_from_entries([p.inc for p in pieces], lo, hi - lo, num_vertices)
    loops = np.zeros(hi - lo, np.int64)
    for p in pieces:
        if p.loops.size:
            loops += np.bincount(p.loops - lo, minlength=hi - lo)
    return Shard(rank, nparts, num_vertices, lo, hi, offsets, columns,
                 deg_out.astype(np.int32), loops.astype(np.int32), in_offsets, in_columns)
