"""Batched top-down step (CPU): up to 64 searches expand their frontiers together, one bit per search.

Algorithm (MS-BFS, Then et al., "The More the Merrier: Efficient Multi-Source Graph Traversal", VLDB 2015):
every owned vertex ``v`` has three 64-bit words -- ``seen[v]`` (bit ``i``: search ``i`` has reached ``v``),
``frontier[v]`` (``v`` was reached by search ``i`` at the last level) and ``next[v]`` (reached now).  A
top-down level visits each frontier vertex ``u`` once for all the searches it is in::

    for u with frontier[u] != 0:              # one queue entry per vertex, not per (vertex, search)
        for v in out_neighbours(u):
            new = frontier[u] & ~(seen[v] | next[v])
            next[v] |= new; found_by[v, i] = u for each bit i of new

so an edge is read once per level however many of the 64 searches cross it -- the sharing that makes
a batch cheaper than its searches one by one.  ``seen`` is not written during the level (the end-of-level
pass, :func:`.batch_frontier.finish_touched`, adds ``next`` to it and records the level).  ``found_by``
(blocks of 8 vertices, :func:`.batch_frontier.record_arrays`) keeps each (vertex, search)'s parent, laid out
per search after the pass (:func:`.batch_results.unpack`).  The step lists the vertices it touches (those whose
``next`` word it made non-zero), so the end of a top-down level costs the level's vertices, not a pass
over all of them.

Each thread owns a contiguous range of the target vertices and reads every frontier edge, writing only
its own targets: no word is shared, so the ORs and parent writes are plain stores.  Threads cutting the
frontier's edges instead would need an atomic fetch-or per word, each of which fences the thread's random
reads: at scale 20, 64 roots, the level of 2 M (vertex, search) pairs takes 40 ms on 2 threads this way
(reading the edges twice), 93 ms with the atomics.  ``v`` owned by another rank becomes a ``(v, bits,
parent)`` row for its owner, filtered on the sender by ``sent[v]`` (bits already sent for ``v`` in this
batch), so each (vertex, search) leaves a rank at most once; :func:`claim_pairs` applies what arrives.
"""

from __future__ import annotations

import numba
import numpy as np

from .batch_frontier import record_parent
from .bit_ops import ctz, prefetch

#: edges between a prefetch of a target's words and their use (16 and 32 measured alike)
AHEAD = 16


@numba.njit(parallel=True, nogil=True, cache=True)
def _expand(offsets, cols, lo, n, queue, frontier, seen, nxt, sent, found_by, nparts, cap, tl, rv, rb, rp, cnt_l,
            cnt_r):
    # Unsigned indices: Numba checks every signed index for wraparound (see bottom_up.py).
    one = np.uint64(1)
    ahead = np.uint64(AHEAD)
    ulo = np.uint64(lo)
    unloc = np.uint64(nxt.size)
    for c in numba.prange(nparts):
        # part c owns local ids [jlo, jhi) and remote global ids [vlo, vhi): it alone writes their words; it
        # lists a touched local id once (at tl[jlo:]) and a remote one once per frontier vertex bringing it new
        # bits (at rv[c * cap:], ``cap`` the frontier's edges)
        jlo = np.uint64(c * nxt.size // nparts)
        jhi = np.uint64((c + 1) * nxt.size // nparts)
        vlo = np.uint64(c * n // nparts)
        vhi = np.uint64((c + 1) * n // nparts)
        kl = jlo
        kr = np.uint64(c * cap)
        for idx in range(queue.size):
            u = np.uint64(queue[idx])
            f = frontier[u]
            gu = u + ulo
            k = np.uint64(offsets[u])
            stop = np.uint64(offsets[u + one])
            while k < stop:
                # the targets' words are random reads: ask for those of the edge AHEAD on (where this part
                # owns it) while this one is handled (scale 20, 64 roots: the second level 34 ms, 37 without)
                if k + ahead < stop:
                    jj = np.uint64(cols[k + ahead]) - ulo
                    if jlo <= jj < jhi:
                        prefetch(seen, jj)
                        prefetch(nxt, jj)
                v = np.uint64(cols[k])
                j = v - ulo  # wraps to a huge value below lo: one comparison tests ownership
                if j < unloc:
                    if jlo <= j < jhi:
                        old = nxt[j]
                        new = f & ~(seen[j] | old)
                        if new:
                            if old == 0:  # the first bits make the vertex touched: listed once
                                tl[kl] = j
                                kl += one
                            nxt[j] = old | new
                            while new:
                                record_parent(found_by, j, ctz(new), gu)
                                new &= new - one
                elif vlo <= v < vhi:
                    new = f & ~sent[v]
                    if new:
                        sent[v] |= new
                        rv[kr] = v
                        rb[kr] = new
                        rp[kr] = gu
                        kr += one
                k += one
        cnt_l[c] = kl - jlo
        cnt_r[c] = kr - np.uint64(c * cap)


@numba.njit(cache=True)
def _gather(buf, starts, cnt, out):
    """Concatenate into ``out`` the first ``cnt[c]`` items part ``c`` wrote at ``buf[starts[c]:]``."""
    k = 0
    for c in range(cnt.size):
        base = starts[c]
        for j in range(cnt[c]):
            out[k] = buf[base + j]
            k += 1


def top_down_step(offsets, cols, lo: int, queue: np.ndarray, frontier: np.ndarray, seen: np.ndarray,
                  nxt: np.ndarray, sent: np.ndarray, found_by: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One batched top-down level over this rank's rows.

    ``queue``: int64 local ids of the vertices whose ``frontier`` word (``(nloc,)`` uint64) is non-zero.
    ``nxt`` (``(nloc,)`` uint64, zero before the level's first step) gets the searches that reach each
    owned vertex now, and ``found_by`` (:func:`.batch_frontier.record_arrays`, global ids) the
    frontier vertex that brought each of them.  ``sent``: ``(n,)`` uint64 over global ids (empty on one
    rank).  Returns ``(touched, pairs)``: the int64 local ids whose ``nxt`` word this step made non-zero
    (each once), and the ``(k, 3)`` int64 rows ``(vertex, bits, parent)`` for other ranks (global ids;
    ``bits`` the searches' word viewed as int64).

    >>> touched, pairs = top_down_step(off, cols, 0, q, fr, seen, nxt, sent, found_by)   # doctest: +SKIP
    """
    nloc = frontier.size
    n = sent.size
    nparts = max(1, min(numba.get_num_threads(), nloc))
    # one rank owns everything: nothing is remote
    cap = int((offsets[queue + 1] - offsets[queue]).sum()) if n else 0
    tl = np.empty(nloc, np.int64)
    rv = np.empty(nparts * cap, np.uint64)
    rb = np.empty(nparts * cap, np.uint64)
    rp = np.empty(nparts * cap, np.uint64)
    cnt_l = np.zeros(nparts, np.int64)
    cnt_r = np.zeros(nparts, np.int64)
    _expand(offsets, cols, lo, n, queue, frontier, seen, nxt, sent, found_by, nparts, cap, tl, rv, rb, rp, cnt_l,
            cnt_r)
    parts = np.arange(nparts, dtype=np.int64)
    touched = np.empty(int(cnt_l.sum()), np.int64)
    _gather(tl, parts * nloc // nparts, cnt_l, touched)
    nr = int(cnt_r.sum())
    out = np.empty((nr, 3), np.uint64)
    if nr:
        for col, buf in enumerate((rv, rb, rp)):
            _gather(buf, parts * cap, cnt_r, out[:, col])
    return touched, out.view(np.int64)


@numba.njit(nogil=True, cache=True)
def claim_pairs(pairs, lo, seen, nxt, found_by):
    """Apply ``(vertex, bits, parent)`` rows (``(k, 3)`` int64, global ids) received from other ranks: the
    searches of ``bits`` that had not reached the vertex reach it now (``nxt |= bits & ~seen``), with that
    parent.  Returns the local ids whose ``nxt`` word this made non-zero (int64, each once)."""
    one = np.uint64(1)
    out = np.empty(pairs.shape[0], np.int64)
    k = 0
    for t in range(pairs.shape[0]):
        j = pairs[t, 0] - lo
        old = nxt[j]
        new = np.uint64(pairs[t, 1]) & ~(seen[j] | old)
        if new:
            if old == 0:
                out[k] = j
                k += 1
            nxt[j] = old | new
            while new:
                record_parent(found_by, j, ctz(new), pairs[t, 2])
                new &= new - one
    return out[:k]


def pairs_by_owner(pairs: np.ndarray, block: int, nparts: int) -> list[np.ndarray]:
    """``pairs`` (``(k, 2)`` or ``(k, 3)`` int64 rows, the vertex first) split into one array per owner rank
    (``vertex // block``), each in the rows' order."""
    if nparts == 1:
        return [pairs]
    owner = pairs[:, 0] // block
    if owner.size and owner.min() == owner.max():  # one owner (always so on two ranks): no sort, no copy
        out = [pairs[:0]] * nparts
        out[int(owner[0])] = pairs
        return out
    # owners as int16 where they fit: NumPy sorts those by radix (1.2 M rows: 3.7 ms, 25-30 as int64)
    order = np.argsort(owner.astype(np.int16) if nparts <= np.iinfo(np.int16).max else owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(nparts + 1))
    srt = pairs[order]
    return [srt[cuts[r]:cuts[r + 1]] for r in range(nparts)]
