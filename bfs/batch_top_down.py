"""Batched top-down step (CPU): up to 64 searches expand their frontiers together, one bit per search.

Algorithm (MS-BFS, Then et al., "The More the Merrier: Efficient Multi-Source Graph Traversal", VLDB 2015):
every owned vertex ``v`` has three 64-bit words -- ``seen[v]`` (bit ``i``: search ``i`` has reached ``v``),
``frontier[v]`` (``v`` was reached by search ``i`` at the last level) and ``next[v]`` (reached now).  A
top-down level visits each frontier vertex ``u`` once for all the searches it is in::

    for u with frontier[u] != 0:              # one queue entry per vertex, not per (vertex, search)
        for v in out_neighbours(u):
            new = frontier[u] & ~seen[v]      # the searches that reach v through u first
            seen[v] |= new; next[v] |= new
            parent[v, i] = u, level[v, i] = depth   for each bit i of new

so an edge is read once per level however many of the 64 searches cross it -- the sharing that makes
a batch cheaper than its searches one by one.

Threads take contiguous slices of the frontier queue with equal edge counts (as :mod:`.top_down`).  Two
threads may update the same ``seen[v]``: the update is an atomic fetch-or (:func:`.bit_ops.fetch_or`) and
``new`` is computed from the word it returns, so each (vertex, search) is claimed by exactly one thread
and its parent written once; a plain read first skips the atomic when nothing is new (most edges of a
big level).  ``v`` owned by another rank becomes a ``(v, u, bits)`` triple for its owner, filtered on
the sender by ``sent[v]`` (bits already sent for ``v`` in this batch), so each (vertex, search) leaves a
rank at most once; :func:`claim_triples` applies what arrives.
"""

from __future__ import annotations

import numba
import numpy as np

from .bit_ops import ctz, fetch_or
from .top_down import edge_chunks, gather_chunks


@numba.njit(parallel=True, nogil=True, cache=True)
def _expand(offsets, cols, lo, nloc, queue, frontier, seen, nxt, parent, level, depth, sent, bounds, pre,
            rv, rp, rb, cnt_r):
    # Unsigned indices: Numba checks every signed index for wraparound (see bottom_up.py).
    one = np.uint64(1)
    ulo = np.uint64(lo)
    unloc = np.uint64(nloc)
    for c in numba.prange(bounds.size - 1):
        base = np.uint64(pre[bounds[c]])
        kr = np.uint64(0)
        for idx in range(bounds[c], bounds[c + 1]):
            u = np.uint64(queue[idx])
            f = frontier[u]
            ug = u + ulo
            k = np.uint64(offsets[u])
            stop = np.uint64(offsets[u + one])
            while k < stop:
                v = np.uint64(cols[k])
                j = v - ulo  # wraps to a huge value below lo: one comparison tests ownership
                if j < unloc:
                    cand = f & ~seen[j]
                    if cand:
                        new = cand & ~fetch_or(seen, j, cand)
                        if new:
                            fetch_or(nxt, j, new)
                            while new:
                                i = ctz(new)
                                parent[j, i] = ug
                                level[j, i] = depth
                                new &= new - one
                else:
                    cand = f & ~sent[v]
                    if cand:
                        new = cand & ~fetch_or(sent, v, cand)
                        if new:
                            rv[base + kr] = v
                            rp[base + kr] = ug
                            rb[base + kr] = new
                            kr += one
                k += one
        cnt_r[c] = kr


def top_down_step(offsets, cols, lo: int, queue: np.ndarray, frontier: np.ndarray, seen: np.ndarray,
                  nxt: np.ndarray, parent: np.ndarray, level: np.ndarray, depth: int, sent: np.ndarray,
                  nchunks: int) -> np.ndarray:
    """One batched top-down level over this rank's rows.

    ``queue``: int64 local ids of the vertices whose ``frontier`` word (``(nloc,)`` uint64) is non-zero.
    ``seen``/``nxt`` (``(nloc,)`` uint64) are updated in place, ``parent``/``level`` (``(nloc, 64)``) at the
    claimed (vertex, search) entries.  ``sent``: ``(n,)`` uint64 over global ids (empty on one rank).
    Returns the ``(k, 3)`` int64 triples ``(vertex, parent, bits)`` for other ranks (global ids; ``bits``
    the searches' word viewed as int64).

    >>> trip = top_down_step(off, cols, 0, q, fr, seen, nxt, par, lev, 1, sent, 16)   # doctest: +SKIP
    """
    nloc = frontier.size
    pre, bounds, total = edge_chunks(offsets, queue, nchunks)
    remote = total if sent.size else 0  # one rank owns everything: nothing is remote
    rv = np.empty(remote, np.uint64)
    rp = np.empty(remote, np.uint64)
    rb = np.empty(remote, np.uint64)
    cnt_r = np.zeros(bounds.size - 1, np.int64)
    _expand(offsets, cols, lo, nloc, queue, frontier, seen, nxt, parent, level, np.int32(depth), sent, bounds,
            pre, rv, rp, rb, cnt_r)
    nr = int(cnt_r.sum())
    out = np.empty((nr, 3), np.uint64)
    if nr:
        gather_chunks(rv, pre, bounds, cnt_r, out[:, 0])
        gather_chunks(rp, pre, bounds, cnt_r, out[:, 1])
        gather_chunks(rb, pre, bounds, cnt_r, out[:, 2])
    return out.view(np.int64)


@numba.njit(nogil=True, cache=True)
def claim_triples(trip, lo, seen, nxt, parent, level, depth):
    """Apply ``(vertex, parent, bits)`` triples (``(k, 3)`` int64, global ids) received from other ranks:
    the searches of ``bits`` that had not reached the vertex claim it with that parent.  Returns the
    number of (vertex, search) pairs claimed."""
    one = np.uint64(1)
    claimed = 0
    for t in range(trip.shape[0]):
        j = trip[t, 0] - lo
        new = np.uint64(trip[t, 2]) & ~seen[j]
        if new:
            seen[j] |= new
            nxt[j] |= new
            while new:
                i = ctz(new)
                parent[j, i] = trip[t, 1]
                level[j, i] = depth
                claimed += 1
                new &= new - one
    return claimed


def triples_by_owner(trip: np.ndarray, block: int, nparts: int) -> list[np.ndarray]:
    """``trip`` (``(k, 3)`` int64) split into one array per owner rank (``vertex // block``)."""
    if nparts == 1:
        return [trip]
    owner = trip[:, 0] // block
    order = np.argsort(owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(nparts + 1))
    srt = trip[order]
    return [srt[cuts[r]:cuts[r + 1]] for r in range(nparts)]
