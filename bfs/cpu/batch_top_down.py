"""Batched top-down step (CPU): up to 64 searches expand their frontiers together, one bit per search.

Algorithm (MS-BFS, Then et al., "The More the Merrier: Efficient Multi-Source Graph Traversal", VLDB 2015):
every owned vertex ``v`` has three 64-bit words -- ``seen[v]`` (bit ``i``: search ``i`` has reached ``v``),
``frontier[v]`` (``v`` was reached by search ``i`` at the last level) and ``next[v]`` (reached now).  A
top-down level visits each frontier vertex ``u`` once for all the searches it is in::

    for u with frontier[u] != 0:              # one queue entry per vertex, not per (vertex, search)
        for v in out_neighbours(u):
            next[v] |= frontier[u] & ~seen[v]

so an edge is read once per level however many of the 64 searches cross it -- the sharing that makes
a batch cheaper than its searches one by one.  ``seen`` is not written during the level (the end-of-level
pass, :func:`.batch_frontier.finish_touched`, adds ``next`` to it and records the level), and no parent is
written: parents are derived from the levels afterwards (:mod:`.batch_results`), so the step needs no
claim of a (vertex, search) by one thread, only that no bit is lost.  The step lists the vertices it
touches (those whose ``next`` word it made non-zero), so the end of a top-down level
(:func:`.batch_frontier.finish_touched`) costs the level's vertices, not a pass over all of them.

Threads take contiguous slices of the frontier queue with equal edge counts (:func:`.top_down.edge_chunks`).
Two threads may OR into the same ``next[v]``: the OR is atomic (:func:`.bit_ops.fetch_or`; a plain
read-modify-write could lose one thread's bits), and a plain read first skips it when nothing is new (most
edges of a big level).  ``v`` owned by another rank becomes a ``(v, bits)`` pair for its owner, filtered on
the sender by ``sent[v]`` (bits already sent for ``v`` in this batch), so each (vertex, search) leaves a
rank at most once; :func:`claim_pairs` applies what arrives.
"""

from __future__ import annotations

import numba
import numpy as np

from .bit_ops import fetch_or
from .top_down import edge_chunks, gather_chunks


@numba.njit(parallel=True, nogil=True, cache=True)
def _expand(offsets, cols, lo, nloc, queue, frontier, seen, nxt, sent, bounds, pre, tl, rv, rb, cnt_l, cnt_r):
    # Unsigned indices: Numba checks every signed index for wraparound (see bottom_up.py).
    one = np.uint64(1)
    zero = np.uint64(0)
    ulo = np.uint64(lo)
    unloc = np.uint64(nloc)
    for c in numba.prange(bounds.size - 1):
        base = np.uint64(pre[bounds[c]])
        kl = np.uint64(0)
        kr = np.uint64(0)
        for idx in range(bounds[c], bounds[c + 1]):
            u = np.uint64(queue[idx])
            f = frontier[u]
            k = np.uint64(offsets[u])
            stop = np.uint64(offsets[u + one])
            while k < stop:
                v = np.uint64(cols[k])
                j = v - ulo  # wraps to a huge value below lo: one comparison tests ownership
                if j < unloc:
                    cand = f & ~(seen[j] | nxt[j])
                    # the one OR that finds the word empty lists the vertex: each touched vertex once
                    if cand and fetch_or(nxt, j, cand) == zero:
                        tl[base + kl] = j
                        kl += one
                else:
                    cand = f & ~sent[v]
                    if cand:
                        new = cand & ~fetch_or(sent, v, cand)
                        if new:
                            rv[base + kr] = v
                            rb[base + kr] = new
                            kr += one
                k += one
        cnt_l[c] = kl
        cnt_r[c] = kr


def top_down_step(offsets, cols, lo: int, queue: np.ndarray, frontier: np.ndarray, seen: np.ndarray,
                  nxt: np.ndarray, sent: np.ndarray, nchunks: int) -> tuple[np.ndarray, np.ndarray]:
    """One batched top-down level over this rank's rows.

    ``queue``: int64 local ids of the vertices whose ``frontier`` word (``(nloc,)`` uint64) is non-zero.
    ``nxt`` (``(nloc,)`` uint64, zero before the level's first step) gets the searches that reach each
    owned vertex now.  ``sent``: ``(n,)`` uint64 over global ids (empty on one rank).  Returns
    ``(touched, pairs)``: the int64 local ids whose ``nxt`` word this step made non-zero (each once), and the
    ``(k, 2)`` int64 pairs ``(vertex, bits)`` for other ranks (global ids; ``bits`` the searches' word viewed
    as int64).

    >>> touched, pairs = top_down_step(off, cols, 0, q, fr, seen, nxt, sent, 16)   # doctest: +SKIP
    """
    nloc = frontier.size
    pre, bounds, total = edge_chunks(offsets, queue, nchunks)
    tl = np.empty(total, np.int64)
    remote = total if sent.size else 0  # one rank owns everything: nothing is remote
    rv = np.empty(remote, np.uint64)
    rb = np.empty(remote, np.uint64)
    cnt_l = np.zeros(bounds.size - 1, np.int64)
    cnt_r = np.zeros(bounds.size - 1, np.int64)
    _expand(offsets, cols, lo, nloc, queue, frontier, seen, nxt, sent, bounds, pre, tl, rv, rb, cnt_l, cnt_r)
    touched = np.empty(int(cnt_l.sum()), np.int64)
    gather_chunks(tl, pre, bounds, cnt_l, touched)
    nr = int(cnt_r.sum())
    out = np.empty((nr, 2), np.uint64)
    if nr:
        gather_chunks(rv, pre, bounds, cnt_r, out[:, 0])
        gather_chunks(rb, pre, bounds, cnt_r, out[:, 1])
    return touched, out.view(np.int64)


@numba.njit(nogil=True, cache=True)
def claim_pairs(pairs, lo, seen, nxt):
    """Apply ``(vertex, bits)`` pairs (``(k, 2)`` int64, global ids) received from other ranks: the searches
    of ``bits`` that had not reached the vertex reach it now (``nxt |= bits & ~seen``).  Returns the local
    ids whose ``nxt`` word this made non-zero (int64, each once)."""
    out = np.empty(pairs.shape[0], np.int64)
    k = 0
    for t in range(pairs.shape[0]):
        j = pairs[t, 0] - lo
        bits = np.uint64(pairs[t, 1]) & ~seen[j]
        if bits:
            if nxt[j] == 0:
                out[k] = j
                k += 1
            nxt[j] |= bits
    return out[:k]


def pairs_by_owner(pairs: np.ndarray, block: int, nparts: int) -> list[np.ndarray]:
    """``pairs`` (``(k, 2)`` int64) split into one array per owner rank (``vertex // block``)."""
    if nparts == 1:
        return [pairs]
    owner = pairs[:, 0] // block
    order = np.argsort(owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(nparts + 1))
    srt = pairs[order]
    return [srt[cuts[r]:cuts[r + 1]] for r in range(nparts)]
