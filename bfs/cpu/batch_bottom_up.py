"""Batched bottom-up step (CPU): every owned vertex looks, for all its unfinished searches at once, for
neighbours in the global frontier words.

Algorithm (the bottom-up half of MS-BFS, Then et al., VLDB 2015, with Beamer's early exit made per word):
``frontier[u]`` over all global ids holds the searches that reached ``u`` at the last level and
``active`` the searches that still have a frontier.  A vertex ``v`` is missing the searches
``active & ~seen[v]``; it ORs its in-neighbours' frontier words until it has them all::

    for v owned:
        missing = active & ~seen[v]
        got = 0
        for u in in_neighbours(v) while got != missing:
            new = frontier[u] & missing & ~got
            got |= new; found_by[v, i] = u, found_at[v, i] = depth for each bit i of new
        next[v] = got; seen[v] |= got; the depth into the planes for got (record_level)

The scan stops once every missing search has been found, the batch's version of bottom-up's "stop at
the first parent"; a search that ended (no frontier) is left out of ``missing`` so it never keeps a vertex
scanning.  The level goes into the bit-sliced ``planes`` (see :mod:`.batch_frontier`) and each found
(vertex, search)'s parent and level's low byte into ``found_by``/``found_at`` (blocks of consecutive
vertices, :func:`.batch_frontier.record_arrays`; laid out per search after the pass,
:func:`.batch_results.unpack`).  The rows are the shard's degree-ordered ones where it has them (hubs, in
most searches' frontiers, first).  When the frontier is sparse each neighbour is first tested in a bitmap
of the non-zero frontier words (one bit per vertex, in cache) and its word read only when set.  Each
thread owns a contiguous range of whole vertices, so no word is shared between threads, and the end-of-level
pass (``frontier = next``, counters) is done in the same loop.
"""

from __future__ import annotations

import numba
import numpy as np

from .batch_frontier import record_depth, record_level, record_parent
from .bit_ops import ctz, popcount, prefetch

#: vertices between a prefetch of the first neighbour's frontier word and the scan of its row (4, 8 and 16
#: measured alike)
AHEAD = 8
#: entries between a prefetch of a neighbour's frontier word and its read
SCAN_AHEAD = 32


@numba.njit(parallel=True, nogil=True, cache=True)
def bottom_up_step(offsets, cols, frontier, nonzero, sparse, active, seen, nxt, planes, depth, out_offsets,
                   bounds, ctr, orw, found_by, found_at):
    """One batched bottom-up level, with the end of the level.

    ``offsets``/``cols``: this rank's in-edge rows (CSR of an undirected graph, CSC of a directed one),
    global column ids.  ``frontier``: ``(n,)`` uint64 over all global ids; ``nonzero``: its ``(ceil(n/64),)``
    uint64 bitmap of non-zero words (:func:`.batch_frontier.nonzero_bits`), read only when ``sparse``.
    ``active``: uint64 mask of the searches with a non-empty frontier.  ``seen``/``nxt``: ``(nloc,)`` uint64;
    ``nxt`` is overwritten with the searches that reached each vertex now (the next frontier), ``seen`` and
    ``planes`` (``(nloc, B)`` uint64) updated.  ``out_offsets``: the out-edge offsets (for the counters).
    ``bounds``: the threads' vertex chunks (:func:`.batch_frontier.vertex_chunks`); ``ctr``/``orw`` as
    :func:`.batch_frontier.finish_touched` writes them (with the unfinished in-degree sum counted).
    ``found_by``/``found_at``: the records (:func:`.batch_frontier.record_arrays`); for each search ``i`` that
    reaches ``v`` now, ``v``'s parent in ``i`` is the first in-neighbour found in its frontier (global id) and
    its level's low byte the depth's.

    >>> bottom_up_step(off, cols, fg, nonzero_bits(fg), True, np.uint64(3), seen, nxt, planes, 2, off,
    ...                bounds, ctr, orw, found_by, found_at)                          # doctest: +SKIP
    """
    one = np.uint64(1)
    zero = np.uint64(0)
    depth_byte = np.uint8(depth & 255)
    scan_ahead = np.uint64(SCAN_AHEAD)
    ncols = np.uint64(cols.size)
    six = np.uint64(6)
    low = np.uint64(63)
    for c in numba.prange(bounds.size - 1):
        nv = 0
        pairs = 0
        fdeg = 0
        unfinished = 0
        o = zero
        last = bounds[c + 1]
        for v in range(bounds[c], last):
            # a dense frontier's words are random reads, and most late-level rows stop at their first
            # neighbour: ask for that word a few rows ahead (scale 20, 64 roots: the fourth level 29 ms, 40
            # without)
            if not sparse and v + AHEAD < last:
                w = offsets[v + AHEAD]
                if w < offsets[v + AHEAD + 1]:
                    prefetch(frontier, cols[w])
            s = seen[v]
            missing = active & ~s
            got = zero
            if missing:
                # Unsigned indices: Numba checks every signed index for wraparound (see bottom_up.py).
                k = np.uint64(offsets[v])
                stop = np.uint64(offsets[v + 1])
                while k < stop:
                    # and the word of the entry SCAN_AHEAD on, whichever row it is in (scale 20, 64 roots,
                    # random ids: a few percent off the third level; 8 ahead within the row only is slower)
                    if not sparse and k + scan_ahead < ncols:
                        prefetch(frontier, cols[k + scan_ahead])
                    u = np.uint64(cols[k])
                    # the bitmap (n / 8 bytes) stays in cache where the words (8 n bytes) do not: most
                    # neighbours are not in a sparse frontier and cost no read of their word
                    if not sparse or (nonzero[u >> six] >> (u & low)) & one:
                        new = frontier[u] & missing & ~got
                        if new:
                            # u is the parent of the searches it is the first to bring, and the level's low
                            # byte is recorded in the same walk over their bits
                            got |= new
                            while new:
                                i = ctz(new)
                                record_parent(found_by, v, i, u)
                                record_depth(found_at, v, i, depth_byte)
                                new &= new - one
                            if got == missing:
                                break
                    k += one
                if got:
                    s |= got
                    seen[v] = s
                    record_level(planes, v, got, depth)
                    nv += 1
                    pairs += popcount(got)
                    fdeg += out_offsets[v + 1] - out_offsets[v]
                    o |= got
                if active & ~s:
                    unfinished += offsets[v + 1] - offsets[v]
            nxt[v] = got
        ctr[c, 0] = nv
        ctr[c, 1] = pairs
        ctr[c, 2] = fdeg
        ctr[c, 3] = unfinished
        orw[c] = o
