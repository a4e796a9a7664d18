"""Batched bottom-up step (CPU): every owned vertex looks, for all its unfinished searches at once, for
neighbours in the global frontier words.

Algorithm (the bottom-up half of MS-BFS, Then et al., VLDB 2015, with Beamer's early exit made per word):
``frontier[u]`` over all global ids holds the searches that reached ``u`` at the last level and
``active`` the searches that still have a frontier.  A vertex ``v`` is missing the searches
``active & ~seen[v]``; it scans its in-neighbours and takes from each the missing searches it is in::

    for v owned:
        missing = active & ~seen[v]
        for u in in_neighbours(v) while missing:
            got = frontier[u] & missing
            parent[v, i] = u, level[v, i] = depth   for each bit i of got
            missing &= ~got
        next[v] = what was found; seen[v] |= next[v]

The scan stops once every missing search has been found, the batch's version of bottom-up's "stop at
the first parent"; a search that ended (no frontier) is left out of ``missing`` so it never keeps a vertex
scanning.  Unlike a single search, a vertex rarely finds all its missing searches early, so most levels
read most in-edges: each neighbour is first tested in a bitmap of the non-zero frontier words (one bit
per vertex, in cache) and its 64-bit word read only when set.  Each thread owns whole vertices, so no
word is shared between threads.
"""

from __future__ import annotations

import numba
import numpy as np

from .bit_ops import ctz


@numba.njit(parallel=True, nogil=True, cache=True)
def bottom_up_step(offsets, cols, frontier, nonzero, active, seen, nxt, parent, level, depth):
    """One batched bottom-up level.

    ``offsets``/``cols``: this rank's in-edge rows (CSR of an undirected graph, CSC of a directed one),
    global column ids.  ``frontier``: ``(n,)`` uint64 over all global ids; ``nonzero``: its ``(ceil(n/64),)``
    uint64 bitmap of non-zero words (:func:`.batch_frontier.nonzero_bits`).  ``active``: uint64 mask of the
    searches with a non-empty frontier.  ``seen``/``nxt``: ``(nloc,)`` uint64, ``nxt`` overwritten with the
    searches that reached each vertex now.  ``parent``/``level``: ``(nloc, 64)``.  Returns the number of
    (vertex, search) pairs found.

    >>> found = bottom_up_step(off, cols, fg, nonzero_bits(fg), np.uint64(3), seen, nxt, par, lev,
    ...                        np.int32(2))                                           # doctest: +SKIP
    """
    one = np.uint64(1)
    zero = np.uint64(0)
    found_pairs = 0
    for v in numba.prange(seen.size):
        missing = active & ~seen[v]
        got_all = zero
        if missing:
            k = np.uint64(offsets[v])
            stop = np.uint64(offsets[v + 1])
            while k < stop:
                u = np.uint64(cols[k])
                # the bitmap (n / 8 bytes) stays in cache where the words (8 n bytes) do not: most
                # neighbours are not in the frontier and cost no read of their word
                if (nonzero[u >> np.uint64(6)] >> (u & np.uint64(63))) & one == zero:
                    k += one
                    continue
                got = frontier[u] & missing
                if got:
                    got_all |= got
                    missing &= ~got
                    while got:
                        i = ctz(got)
                        parent[v, i] = u
                        level[v, i] = depth
                        found_pairs += 1
                        got &= got - one
                    if missing == zero:
                        break
                k += one
            seen[v] |= got_all
        nxt[v] = got_all
    return found_pairs
