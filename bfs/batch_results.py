"""Per-search levels and parents of a batched pass (CPU), derived from its words after the pass.

The pass (:mod:`.batch_engine`) leaves, for every vertex, ``seen`` (bit ``i``: search ``i`` reached it) and
the bit-sliced levels ``planes`` (bit ``b`` of search ``i``'s level is bit ``i`` of ``planes[v, b]``).  A
group of searches ``first .. first+count-1`` is turned into ``(count, nloc)`` level and parent arrays in
one pass over the owned vertices, all the group's searches at once::

    for v owned:
        level[i, v] = sum_b bit_i(planes[v, b]) << b       (-1 where bit i of seen[v] is clear)
        missing = the group's searches that reached v at level >= 1
        M = level(v) - 1, bit-sliced (a borrow rippled through the planes: one word op per plane)
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

from .bit_ops import ctz


#: vertices per tile: a tile's results are gathered in per-thread scratch, then written search by search
#: as runs of TILE consecutive entries (whole cache lines) instead of 2 * count scattered stores a vertex
TILE = 64


@numba.njit(parallel=True, nogil=True, cache=True)
def derive(in_offsets, in_cols, lo, seen, planes, first, count, bounds, parent, level):
    """Levels and parents of searches ``first .. first+count-1`` for this rank's vertices.

    ``in_offsets``/``in_cols``: the in-edge rows (CSR of an undirected graph, CSC of a directed one; global
    column ids).  ``seen``: ``(n,)`` uint64, ``planes``: ``(n, B)`` uint64, over global ids.  ``bounds``: the
    threads' vertex chunks (:func:`.batch_frontier.vertex_chunks`).  Writes ``parent`` (``(count, nloc)``,
    global ids, -1 unreached) and ``level`` (``(count, nloc)`` int32, -1 unreached).

    >>> derive(off, cols, 0, seen, planes, 0, 64, bounds, parent, level)          # doctest: +SKIP
    """
    one = np.uint64(1)
    zero = np.uint64(0)
    nplanes = planes.shape[1]
    group = np.uint64(0xFFFFFFFFFFFFFFFF) if count == 64 else ((one << np.uint64(count)) - one) << np.uint64(first)
    for c in numba.prange(bounds.size - 1):
        # per-thread scratch, search-major: a tile's levels and parents (-1 where not reached)
        lv = np.full((64, TILE), -1, np.int32)
        par = np.full((64, TILE), -1, parent.dtype)
        reached = np.zeros(TILE, np.uint64)
        target = np.empty(max(nplanes, 1), np.uint64)
        j0 = bounds[c]
        while j0 < bounds[c + 1]:
            j1 = min(j0 + TILE, bounds[c + 1])
            for j in range(j0, j1):
                t = j - j0
                v = lo + j
                s = seen[v] & group
                reached[t] = s
                if s == zero:
                    continue
                x = s
                while x:
                    lv[ctz(x), t] = 0
                    x &= x - one
                deeper = zero  # searches with level >= 1 at v
                for b in range(nplanes):
                    p = planes[v, b] & s
                    deeper |= p
                    while p:
                        lv[ctz(p), t] |= np.int32(1) << b
                        p &= p - one
                # level - 1, bit-sliced, for the searches of ``deeper``
                borrow = deeper
                for b in range(nplanes):
                    p = planes[v, b]
                    target[b] = p ^ borrow
                    borrow &= ~p
                missing = deeper
                k = in_offsets[j]
                stop = in_offsets[j + 1]
                while missing and k < stop:
                    u = in_cols[k]
                    eq = seen[u] & missing
                    b = 0
                    while eq and b < nplanes:
                        eq &= ~(planes[u, b] ^ target[b])
                        b += 1
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
            w = j1 - j0
            for i in range(count):
                for t in range(w):
                    level[i, j0 + t] = lv[first + i, t]
                    parent[i, j0 + t] = par[first + i, t]
            for t in range(w):
                x = reached[t]
                while x:
                    i = ctz(x)
                    lv[i, t] = -1
                    par[i, t] = -1
                    x &= x - one
            j0 = j1
