"""Per-search levels and parents of a batched pass (CPU): laid out from what the steps recorded
(:func:`unpack`, what the CPU engine runs), or derived from the pass's words afterwards (:func:`derive`, the
algorithm of the GPU's kernels, kept here as their CPU twin and checked against :func:`unpack` by the tests).

The pass (:mod:`~breadth.bfs.engine.batch_engine`) leaves, for every vertex, ``seen`` (bit ``i``: search
``i`` reached it) and the bit-sliced levels ``planes`` (bit ``b`` of search ``i``'s level is bit ``i`` of
``planes[v, b]``).  A group of searches ``first .. first+count-1`` is turned into ``(count, nloc)`` level and
parent arrays in one pass over the owned vertices, all the group's searches at once::

    for v owned:
        level[i, v] = sum_b bit_i(planes[v, b]) << b       (-1 where bit i of seen[v] is clear)
        missing = the group's searches that reached v at level >= 1
        M = level(v) - 1, bit-sliced (a borrow rippled through the planes: one word op per plane)
        parent[i, v] = root i where level[i, v] == 1, and for the other searches of missing:
        for u in in_neighbours(v) while missing:
            eq = seen[u] & missing & ~OR_b (planes[u, b] ^ M_b)    # searches with level(u) == level(v) - 1
            parent[i, v] = u for each bit i of eq; missing &= ~eq

so one in-neighbour read tests all the group's searches, and the scan stops once each has a parent (a
BFS parent: an in-neighbour one level up; for a reached vertex one always exists).  A search's root
(level 0) is its own parent.  ``seen``/``planes`` are global (all-gathered on several ranks: a
neighbour may be owned elsewhere).
"""

from __future__ import annotations

import numba
import numpy as np

from .batch_frontier import LEVEL_BLOCK, PARENT_BLOCK
from .bit_ops import ctz, prefetch, store_fence, stream_store


def word_table(seen: np.ndarray, planes: np.ndarray) -> np.ndarray:
    """``seen`` (``(n,)`` uint64) and ``planes`` (``(n, B)`` uint64) side by side in one ``(n, W)`` uint64 table,
    ``W = max(8, B + 1)``, rows aligned to 64 bytes: while ``B <= 7`` a row is one cache line, so the scan for
    parents reads one line per neighbour instead of two."""
    n, nplanes = planes.shape
    width = max(8, nplanes + 1)
    buf = np.empty(n * width + 8, np.uint64)
    start = (-(buf.ctypes.data // 8)) % 8
    table = buf[start:start + n * width].reshape(n, width)
    table[:, 0] = seen
    table[:, 1:1 + nplanes] = planes
    table[:, 1 + nplanes:] = 0
    return table


#: vertices per tile: a tile's results are gathered in per-thread scratch, then written search by search
#: as runs of TILE consecutive entries (whole cache lines) instead of 2 * count scattered stores a vertex
TILE = 64


@numba.njit(parallel=True, nogil=True, cache=True)
def derive(in_offsets, in_cols, lo, table, nplanes, roots, first, count, bounds, parent, level):
    """Levels and parents of searches ``first .. first+count-1`` for this rank's vertices.

    ``in_offsets``/``in_cols``: the in-edge rows (CSR of an undirected graph, CSC of a directed one; global
    column ids).  ``table``: ``(n, W)`` uint64 over global ids, ``seen`` in column 0 and the ``nplanes`` planes
    in columns ``1 .. nplanes`` (:func:`word_table`: one cache line a neighbour).  ``roots``: the batch's
    ``(k,)`` int64 roots, the parents at level 1 (no scan: a hub next to many roots would otherwise scan
    its whole row for each of them).  ``bounds``: the
    threads' vertex chunks (:func:`.batch_frontier.vertex_chunks`).  Writes ``parent`` (``(count, nloc)``,
    global ids, -1 unreached) and ``level`` (``(count, nloc)`` int32, -1 unreached).

    >>> derive(off, cols, 0, word_table(seen, planes), 4, roots, 0, 64, bounds, parent, level)  # doctest: +SKIP
    """
    one = np.uint64(1)
    zero = np.uint64(0)
    group = np.uint64(0xFFFFFFFFFFFFFFFF) if count == 64 else ((one << np.uint64(count)) - one) << np.uint64(first)
    for c in numba.prange(bounds.size - 1):
        # per-thread scratch: a tile's words (seen, planes) and its parents, search-major (-1 where none)
        words = np.empty((nplanes + 1, TILE), np.uint64)
        par = np.full((64, TILE), -1, parent.dtype)
        target = np.empty(max(nplanes, 1), np.uint64)
        lvl = np.empty(TILE, np.int32)
        j0 = bounds[c]
        while j0 < bounds[c + 1]:
            j1 = min(j0 + TILE, bounds[c + 1])
            for j in range(j0, j1):
                t = j - j0
                v = lo + j
                s = table[v, 0] & group
                words[0, t] = s
                deeper = zero  # searches with level >= 1 at v
                for b in range(nplanes):
                    p = table[v, 1 + b]
                    words[1 + b, t] = p
                    deeper |= p & s
                if s == zero:
                    continue
                # level - 1, bit-sliced, for the searches of ``deeper``
                borrow = deeper
                for b in range(nplanes):
                    p = words[1 + b, t]
                    target[b] = p ^ borrow
                    borrow &= ~p
                # level 1 (plane 0 alone): the root is the parent
                first_level = deeper & words[1, t]
                for b in range(1, nplanes):
                    first_level &= ~words[1 + b, t]
                x = first_level
                while x:
                    i = ctz(x)
                    par[i, t] = roots[i]
                    x &= x - one
                missing = deeper & ~first_level
                k = in_offsets[j]
                stop = in_offsets[j + 1]
                while missing and k < stop:
                    # the rows' reads are random and most rows are short: ask for the row of the
                    # neighbour 16 entries on, whichever vertex it belongs to (one thread's scan at scale
                    # 20: 0.4 s so, 0.65 s without)
                    if k + 16 < in_cols.size:
                        prefetch(table, np.int64(in_cols[k + 16]) * table.shape[1])
                    u = in_cols[k]
                    differ = zero
                    for b in range(nplanes):
                        differ |= table[u, 1 + b] ^ target[b]
                    eq = table[u, 0] & missing & ~differ
                    if eq:
                        missing &= ~eq
                        while eq:
                            par[ctz(eq), t] = u
                            eq &= eq - one
                    k += 1
                x = s & ~deeper
                while x:
                    par[ctz(x), t] = v
                    x &= x - one
            # search by search, a run of the tile's vertices: levels unsliced from the planes (-1 where not
            # reached: ``reached - 1`` is 0 or all ones), parents copied and their scratch reset
            w = j1 - j0
            for i in range(count):
                bit = np.uint64(first + i)
                # loops over the tile innermost: they vectorise
                for t in range(w):
                    lvl[t] = np.int32((words[0, t] >> bit) & one) - 1
                for b in range(nplanes):
                    for t in range(w):
                        lvl[t] |= np.int32((words[1 + b, t] >> bit) & one) << b
                for t in range(w):
                    level[i, j0 + t] = lvl[t]
                    parent[i, j0 + t] = par[first + i, t]
                    par[first + i, t] = -1
            j0 = j1





#: blocks of LEVEL_BLOCK (64) vertices per tile of :func:`unpack`: the tile's records (256 KB of int32 parents
#: and 64 KB of levels' bytes at 64 searches) stay in the L2 cache while each search's runs of the tile are
#: written
UNPACK_TILE_BLOCKS = 16


@numba.njit(parallel=True, nogil=True, cache=True)
def unpack(seen, planes, found_by, found_at, bounds, first, parent, level):
    """Per-search parents and levels of a pass whose steps recorded them (CPU).

    ``seen``: ``(nloc,)`` uint64; ``planes``: ``(nloc, B)`` uint64 bit-sliced levels; ``found_by``/``found_at``:
    the blocked records of :func:`.batch_frontier.record_arrays` (parents in global ids, each search's root its
    own; uint8 low bytes of the levels, the planes giving bits 8 and up where a search is that deep), valid
    where the search's bit of ``seen`` is set.  Writes searches ``first .. first+count-1`` into ``parent``
    (``(count, nloc)``, -1 unreached) and ``level`` (``(count, nloc)`` int32, -1 unreached), search-major
    as the single search gives them.  ``bounds``: the threads' vertex chunks
    (:func:`.batch_frontier.vertex_chunks`), each taken from the 64-vertex block where it starts.

    A search's entries of a 64-vertex block are contiguous runs in the records (8 of 8 parents, one of 64
    bytes), copied to contiguous runs of its rows, a tile of blocks at a time: the pass is bound by memory
    traffic (scale 20, 64 searches, two cores: ~155 ms with a vertex's searches side by side, one entry per
    cache line read; ~93 ms with the runs written by normal stores; 53-60 ms streamed past the caches, since a
    normal store reads the line before writing it).  ``reached - 1`` (0 or all ones) ORed in makes unreached
    entries -1 whatever the records hold."""
    one = np.uint64(1)
    count = parent.shape[0]
    nplanes = planes.shape[1]
    nloc = seen.size
    # a block: LEVEL_BLOCK vertices, one run of a search's levels' bytes and runs of PARENT_BLOCK parents
    runs = LEVEL_BLOCK // PARENT_BLOCK
    whole = nloc - nloc % LEVEL_BLOCK
    last = bounds.size - 2
    pflat, lflat = parent.reshape(-1), level.reshape(-1)
    by_flat, at_flat = found_by.reshape(-1), found_at.reshape(-1)
    nsearch = found_by.shape[1]
    full_blocks = whole // LEVEL_BLOCK
    for c in numba.prange(bounds.size - 1):
        unreached = np.empty(LEVEL_BLOCK, np.int32)
        lrun = np.empty(LEVEL_BLOCK, np.int32)
        prun = np.empty(LEVEL_BLOCK, parent.dtype)
        a = bounds[c] - bounds[c] % LEVEL_BLOCK
        end = whole if c == last else bounds[c + 1] - bounds[c + 1] % LEVEL_BLOCK
        while a < end:
            e = min(a + UNPACK_TILE_BLOCKS * LEVEL_BLOCK, end)
            for i in range(count):
                s = first + i
                bit = np.uint64(s)
                for j0 in range(a, e, LEVEL_BLOCK):
                    b = j0 // LEVEL_BLOCK
                    # this search's runs of the next tile, asked for now: the records are read once, in
                    # runs 2 KB apart that the hardware does not foresee (scale 20, 64 searches: 53 ms, 60
                    # without)
                    nb = b + UNPACK_TILE_BLOCKS
                    if nb < full_blocks:
                        for q in range(runs):
                            prefetch(by_flat, ((runs * nb + q) * nsearch + s) * PARENT_BLOCK)
                        prefetch(at_flat, (nb * nsearch + s) * LEVEL_BLOCK)
                    # loops of constant length over a whole block: they vectorise
                    for t in range(LEVEL_BLOCK):
                        unreached[t] = np.int32((seen[j0 + t] >> bit) & one) - 1
                    for t in range(LEVEL_BLOCK):
                        lrun[t] = np.int32(found_at[b, s, t]) | unreached[t]
                    for q in range(runs):
                        for t in range(PARENT_BLOCK):
                            prun[PARENT_BLOCK * q + t] = (found_by[runs * b + q, s, t]
                                                          | unreached[PARENT_BLOCK * q + t])
                    if nplanes > 8:
                        for t in range(LEVEL_BLOCK):
                            for p in range(8, nplanes):
                                lrun[t] |= np.int32((planes[j0 + t, p] >> bit) & one) << p
                    # the runs are whole lines of the outputs, written once: past the caches
                    out = i * nloc + j0
                    for t in range(LEVEL_BLOCK):
                        stream_store(lflat, out + t, lrun[t])
                    for t in range(LEVEL_BLOCK):
                        stream_store(pflat, out + t, prun[t])
            a = e
        store_fence()
        if c == last:  # the partial block at the end
            for i in range(count):
                s = first + i
                bit = np.uint64(s)
                for j in range(whole, nloc):
                    u = np.int32((seen[j] >> bit) & one) - 1
                    lv = np.int32(found_at[j // LEVEL_BLOCK, s, j % LEVEL_BLOCK])
                    for p in range(8, nplanes):
                        lv |= np.int32((planes[j, p] >> bit) & one) << p
                    level[i, j] = lv | u
                    parent[i, j] = found_by[j // PARENT_BLOCK, s, j % PARENT_BLOCK] | u
