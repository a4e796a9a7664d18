"""Bottom-up step (CPU): every unvisited owned vertex looks for a parent in the global frontier bitmap.

Threads own whole 64-bit words of the next-frontier bitmap (64 consecutive local vertices each), so
each word is built in a register and stored once, without atomics.  A vertex stops at its first
neighbour in the frontier, which is what makes this direction cheap on the big middle levels.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros


@numba.njit(parallel=True, nogil=True, cache=True)
def unvisited_words(offsets, parent, out):
    """``out`` (uint64 words over the local ids): bit ``i`` set when local vertex ``i`` has an edge and no
    parent yet -- the only vertices bottom-up needs to look at."""
    one = np.uint64(1)
    nloc = np.uint64(offsets.size - 1)
    for w in numba.prange(out.size):
        word = np.uint64(0)
        base = np.uint64(w) * np.uint64(64)
        end = min(nloc, base + np.uint64(64))
        i = base
        while i < end:
            if parent[i] < 0 and offsets[i + one] > offsets[i]:
                word |= one << (i - base)
            i += one
        out[w] = word


@numba.njit(parallel=True, nogil=True, cache=True)
def bottom_up_step(offsets, cols, frontier_bits, parent, level, depth, next_bits, unvisited):
    """One bottom-up level.

    ``frontier_bits``: uint64 words over all global ids (bit ``v`` set when ``v`` is in the frontier).
    ``next_bits``: uint64 words over this rank's local ids, overwritten with the vertices found now.
    ``unvisited``: :func:`unvisited_words` of the parents before this level; the found vertices' bits are
    cleared, so that consecutive bottom-up levels keep it without another pass over the parents.
    Returns ``(awake, awake_edges)``: vertices found and the sum of their degrees.
    """
    # Indices are unsigned on purpose: Numba adds a negative-index (wraparound) check to every signed
    # index, which costs this loop a third of its time.  Only the set bits of `unvisited` are visited:
    # isolated vertices (a third of a Kronecker graph's) and those found earlier cost nothing.
    one = np.uint64(1)
    awake = 0
    awake_edges = 0
    for w in numba.prange(next_bits.size):
        cand = unvisited[w]
        word = np.uint64(0)
        base = np.uint64(w) * np.uint64(64)
        x = cand
        while x:
            b = np.uint64(trailing_zeros(x))
            x &= x - one
            i = base + b
            k = np.uint64(offsets[i])
            stop = np.uint64(offsets[i + one])
            while k < stop:
                u = np.uint64(cols[k])
                if (frontier_bits[u >> np.uint64(6)] >> (u & np.uint64(63))) & one:
                    parent[i] = u
                    level[i] = depth
                    word |= one << b
                    awake += 1
                    awake_edges += stop - np.uint64(offsets[i])
                    break
                k += one
        next_bits[w] = word
        unvisited[w] = cand & ~word
    return awake, awake_edges


@numba.njit(parallel=True, nogil=True, cache=True)
def degree_buckets(offsets):
    """uint8 ``63 - bitlength(degree)`` per row of ``offsets`` (``(num_local,)``): the sort key that puts
    high-degree neighbours first (the GPU's :func:`~breadth.bfs.gpu.kernels.degree_buckets`, on the CPU);
    owners exchange theirs so that every rank orders by global degree."""
    n = offsets.size - 1
    out = np.empty(n, np.uint8)
    for i in numba.prange(n):
        d = offsets[i + 1] - offsets[i]
        bits = 0
        while d > 0:
            d >>= 1
            bits += 1
        out[i] = 63 - bits
    return out


#: entries whose buckets a thread gathers at once, before it orders their rows (fits L1 and L2)
ORDER_BUFFER = 1 << 14


@numba.njit(nogil=True, cache=True, inline="always")
def _order_row(a, b, cols, tb, base, out, start):
    """Row ``cols[a:b]`` into ``out[a:b]`` by bucket (``tb[k - base]`` the bucket of entry ``k``): a counting
    sort over the few buckets a row of a few dozen ids holds; the counters are zeroed where used."""
    lo = 64
    hi = 0
    for k in range(a, b):
        t = tb[k - base]
        start[t + 1] += 1
        lo = min(lo, t)
        hi = max(hi, t)
    if lo > hi:
        return
    start[lo] = a
    for t in range(lo, hi + 1):
        start[t + 1] += start[t]
    for k in range(a, b):
        t = tb[k - base]
        out[start[t]] = cols[k]
        start[t] += 1
    for t in range(lo, hi + 2):
        start[t] = 0


@numba.njit(parallel=True, nogil=True, cache=True)
def _order_rows(offsets, cols, buckets, out, nchunks, buffer):
    # Each thread takes runs of rows of up to ``buffer`` entries: it gathers their buckets first, in one
    # loop of independent loads from the n-byte bucket array, and then sorts the rows from that copy in
    # cache.  One owner of the 2^26-tuple web crawl (66 M entries), the whole call: 0.42-0.50 s on one
    # thread and 0.23 s on two, where gathering inside the sort (each load feeding a counter) takes 0.55 and
    # 0.28 s.
    nrows = offsets.size - 1
    for c in numba.prange(nchunks):
        start = np.zeros(66, np.int64)
        tb = np.empty(buffer, np.uint8)
        i = c * nrows // nchunks
        end = (c + 1) * nrows // nchunks
        while i < end:
            a = offsets[i]
            j = i + 1
            while j < end and offsets[j + 1] - a <= buffer:
                j += 1
            b = offsets[j]
            row = tb if b - a <= buffer else np.empty(b - a, np.uint8)  # a row longer than the buffer
            for k in range(a, b):
                row[k - a] = buckets[cols[k]]
            for r in range(i, j):
                _order_row(offsets[r], offsets[r + 1], cols, row, a, out, start)
            i = j


def degree_ordered_columns(offsets: np.ndarray, cols: np.ndarray, buckets: np.ndarray | None = None) -> np.ndarray:
    """A copy of ``cols`` with each row's neighbours by decreasing degree (ties in id order): bottom-up then
    meets a frontier neighbour after fewer probes -- any frontier neighbour is a valid parent, so the order
    changes which one is found, never the levels.  The shard's sorted rows stay as they are (validation
    and the batch search read them).  ``buckets``: :func:`degree_buckets` of every global id (uint8
    ``(num_vertices,)``); ``None`` for a one-rank shard, whose rows are all the ids."""
    if buckets is None:
        buckets = degree_buckets(offsets)
    out = np.empty_like(cols)
    _order_rows(offsets, cols, buckets, out, max(1, min(1024, (offsets.size - 1) // 64)), ORDER_BUFFER)
    return out
