"""Per-owner CSR construction by row blocks: place entries by block, then count, scatter, sort and
deduplicate each block's rows in parallel while its span is in cache.

gapbs' builder counts and scatters straight to rows; with millions of rows each scattered entry lands in a
different cache line.  Here the first pass moves each entry to its row block's span of the final column
array (a few hundred blocks of consecutive rows: a few hundred write streams), and the second builds each
block within its span.  The entries arrive as pieces from every edge chunk; no piece is concatenated with
another, so peak memory is the pieces plus one column array (of the shard's column dtype, shrunk in place
after deduplication), a 16-bit row number per entry and, per thread, a copy of the block being built (and
a radix sort's scratch as long as its longest row).  The first pass is split among threads by
runs of consecutive entries, each thread writing after the previous ones' entries of each block.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from breadth.bfs.shard import Shard, column_dtype, owner_range

from .partition import Piece


@numba.njit(nogil=True, cache=True)
def _count_blocks(entries, lo, shift, counts):
    """Count the entries of each row block (``2**shift`` rows)."""
    # unsigned indices: Numba checks signed ones for wraparound on every access (see bfs/cpu/bottom_up.py)
    base = np.uint64(lo)
    s = np.uint64(shift)
    for i in range(entries.shape[0]):
        counts[(np.uint64(entries[i, 0]) - base) >> s] += 1


@numba.njit(nogil=True, cache=True)
def _scatter_blocks(entries, lo, shift, cursor, row_in_block, cols):
    """Move each entry to its block's next free place in ``cols`` (its row within the block to
    ``row_in_block``)."""
    base = np.uint64(lo)
    s = np.uint64(shift)
    mask = (np.uint64(1) << s) - np.uint64(1)
    for i in range(entries.shape[0]):
        r = np.uint64(entries[i, 0]) - base
        b = r >> s
        p = np.uint64(cursor[b])
        row_in_block[p] = r & mask
        cols[p] = entries[i, 1]
        cursor[b] += 1


def _slices(entries: list[np.ndarray], parts: int) -> list[list[np.ndarray]]:
    """The entries cut into ``parts`` runs of consecutive entries, about equal, as views."""
    total = sum(int(e.shape[0]) for e in entries)
    cuts = [total * t // parts for t in range(parts + 1)]
    out: list[list[np.ndarray]] = [[] for _ in range(parts)]
    pos = 0
    for e in entries:
        for t in range(parts):
            a, b = max(cuts[t], pos), min(cuts[t + 1], pos + e.shape[0])
            if a < b:
                out[t].append(e[a - pos:b - pos])
        pos += e.shape[0]
    return out


def _place_by_block(entries: list[np.ndarray], lo: int, shift: int, nblocks: int, cols: np.ndarray,
                    row_in_block: np.ndarray) -> np.ndarray:
    """Every entry's column moved to its row block's span of ``cols``; returns the spans' int64 offsets
    ``(nblocks + 1,)``.  Threads take runs of consecutive entries, each read once: a thread's entries of a
    block follow the previous thread's, so the spans hold the entries in the order read."""
    nt = max(1, min(numba.get_num_threads(), sum(int(e.shape[0]) for e in entries) >> 16))
    runs = _slices(entries, nt)
    counts = np.zeros((nt, nblocks), np.int64)

    def count(t: int) -> None:
        for e in runs[t]:
            _count_blocks(e, lo, shift, counts[t])

    def scatter(t: int) -> None:
        for e in runs[t]:
            _scatter_blocks(e, lo, shift, cursors[t], row_in_block, cols)

    offsets = np.zeros(nblocks + 1, np.int64)
    ex = ThreadPoolExecutor(nt) if nt > 1 else None
    run = (lambda f: list(ex.map(f, range(nt)))) if ex else (lambda f: f(0))  # noqa: E731
    try:
        run(count)
        np.cumsum(counts.sum(axis=0), out=offsets[1:])
        cursors = offsets[:-1] + np.cumsum(counts, axis=0) - counts  # thread t after threads < t
        run(scatter)
    finally:
        if ex:
            ex.shutdown()
    return offsets


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
def _build_blocks(block_offsets, row_in_block, cols, shift, num_local, deg, uniq, id_bits):
    """Each row block in turn, its span of ``cols`` hot in cache: count its rows into ``deg``, scatter them
    in place (through a copy of the span), sort each row and keep its unique head (count in ``uniq``)."""
    one = np.uint64(1)
    passes = max(1, (id_bits + 10) // 11)  # digits of at most 11 bits: 2048 counters stay in L1
    width = (id_bits + passes - 1) // passes
    for blk in numba.prange(block_offsets.size - 1):
        s, e = block_offsets[blk], block_offsets[blk + 1]
        r0 = blk << shift
        nr = min(num_local, r0 + (1 << shift)) - r0
        start = np.zeros(nr + 1, np.int64)
        for i in range(s, e):
            start[row_in_block[i] + 1] += 1
        for r in range(nr):
            deg[r0 + r] = start[r + 1]
        start[0] = s
        for r in range(nr):
            start[r + 1] += start[r]
        span = cols[s:e].copy()
        cursor = start[:nr].copy()
        for i in range(e - s):
            r = row_in_block[s + i]
            cols[cursor[r]] = span[i]
            cursor[r] += 1
        for r in range(nr):
            a, b = np.uint64(start[r]), np.uint64(start[r + 1])
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
            uniq[r0 + r] = k - a


#: a row block's entries, on average: its span of columns (and its row numbers) stays in L2 while it is built
BLOCK_ENTRIES = 1 << 19


def block_shift(num_local: int, entries: int) -> int:
    """log2 of the rows per block: about :data:`BLOCK_ENTRIES` entries a block on average, between 2^6 and
    2^16 rows (rows within a block are 16-bit)."""
    rows = BLOCK_ENTRIES * max(1, num_local) // max(1, entries)
    return min(16, max(6, rows.bit_length() - 1))


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
    # Two passes, both mostly in cache.  First the entries move to their row block's span of the column
    # array (a block's span is where its rows end up: blocks are consecutive rows); then each block counts,
    # scatters and sorts its rows within its span.  Scattering straight to rows would miss the cache on
    # nearly every entry and take half as long again (one owner of 2^26 web-crawl tuples, 66 M entries over
    # 3 M rows: 1.3-1.4 s).
    total = sum(int(e.shape[0]) for e in entries)
    shift = block_shift(num_local, total)
    nblocks = max(1, -(-num_local >> shift))
    # the columns are placed, deduplicated and compacted in one array of the final dtype, which then
    # shrinks in place: no second column array (fresh memory is what a build pays for)
    cols = np.empty(total, column_dtype(num_vertices))
    row_in_block = np.empty(total, np.uint16)
    block_offsets = _place_by_block(entries, lo, shift, nblocks, cols, row_in_block)
    deg = np.empty(num_local, np.int64)
    uniq = np.empty(num_local, np.int64)
    _build_blocks(block_offsets, row_in_block, cols, shift, num_local, deg, uniq,
                  max(1, (num_vertices - 1).bit_length()))
    del row_in_block
    offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(deg, out=offsets[1:])
    new_offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(uniq, out=new_offsets[1:])
    del uniq
    _compact_in_place(offsets, cols, new_offsets)
    cols.resize(int(new_offsets[-1]), refcheck=False)  # realloc shrinks without copying
    return new_offsets, cols, deg


def build_shard(rank: int, nparts: int, num_vertices: int, pieces: list[Piece], directed: bool = False) -> Shard:
    """Build owner ``rank``'s :class:`Shard` from the pieces every edge chunk sent it."""
    lo, hi = owner_range(rank, nparts, num_vertices)
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
