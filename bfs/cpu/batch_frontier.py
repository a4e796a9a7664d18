"""Frontier words and level planes of a batched search (CPU): the end of a top-down level, thread chunks,
and the words' compact form for exchange.

The pass keeps, per owned vertex, 64-bit words with one bit per search: ``seen`` (reached), ``frontier``
(reached at the last level) and ``next`` (being reached now).  Levels are not stored per (vertex, search):
bit ``b`` of search ``i``'s level at ``v`` is bit ``i`` of ``planes[v, b]`` (bit-sliced levels, ``B`` planes
hold levels below ``2**B``), so recording a level costs one OR per set bit of the depth for each vertex
reached, whatever the number of searches that reached it.  :mod:`.batch_results` turns them into
per-search levels and parents.

After a top-down level the words found (``next``) become the frontier and ``next`` is cleared, over the
vertices the level touched only, counting what the direction rule needs (see
:mod:`~breadth.bfs.engine.batch_engine`; a bottom-up level does the same for its vertices in its own loop).  For
the bottom-up all-gather a rank sends its frontier as ``(local id, word)`` pairs when fewer than half of its
words are non-zero, else the dense words (Bisson et al.'s list-or-bitmap choice, per word instead of per bit).
"""

from __future__ import annotations

import numba
import numpy as np

from .bit_ops import ctz, popcount

#: counters of a level, one row per thread chunk: non-zero frontier words, set bits in them ((vertex,
#: search) pairs), their vertices' out-degree sum (a top-down level's edges) and the in-degree sum of the
#: vertices still missing a running search (a bottom-up level's worst case)
COUNTERS = ("vertices", "pairs", "out_degree_sum", "unfinished_in_degree_sum")


@numba.njit(inline="always")
def record_level(planes, v, new, depth):
    """``planes[v, b] |= new`` for every set bit ``b`` of ``depth`` (``depth < 2**planes.shape[1]``)."""
    b = 0
    d = depth
    while d:
        if d & 1:
            planes[v, b] |= new
        d >>= 1
        b += 1


#: vertices per block of the pass's records (:func:`record_arrays`): a block's parents of one search are one
#: run of 8 entries (half a cache line of int32), its levels' low bytes one run of 64 (a line of uint8)
PARENT_BLOCK = 8
LEVEL_BLOCK = 64


def record_arrays(nloc: int, count: int, parent_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The pass's records of ``count`` searches over ``nloc`` owned vertices, blocked: ``found_by``
    ``(ceil(nloc / 8), count, 8)`` parents (vertex ``v``, search ``i`` at ``[v >> 3, i, v & 7]``) and
    ``found_at`` ``(ceil(nloc / 64), count, 64)`` uint8 levels' low bytes (``[v >> 6, i, v & 63]``).

    Laying out a search's results then copies runs (:func:`.batch_results.unpack`), where ``(nloc, k)``
    rows (a vertex's searches side by side) would give one entry per cache line read.  A step finding
    searches of vertex ``v`` writes within one block of parents (2 KB at 64 searches), the next vertices'
    into the same lines; blocks of 16 vertices (4 KB) make the bottom-up levels about a seventh slower (scale
    20, 64 roots: their lines leave the L1 cache between the vertices that write them), blocks of 8 do not."""
    return (np.empty((-(-nloc // PARENT_BLOCK), count, PARENT_BLOCK), parent_dtype),
            np.empty((-(-nloc // LEVEL_BLOCK), count, LEVEL_BLOCK), np.uint8))


@numba.njit(inline="always")
def record_parent(found_by, v, i, u):
    """``u`` as vertex ``v``'s parent in search ``i`` (the blocked layout of :func:`record_arrays`)."""
    j = np.uint64(v)
    pb = np.uint64(PARENT_BLOCK)
    found_by[j // pb, i, j % pb] = u


@numba.njit(inline="always")
def record_depth(found_at, v, i, depth_byte):
    """``depth_byte`` (a level's low byte) as vertex ``v``'s entry of ``found_at`` in search ``i``."""
    j = np.uint64(v)
    lb = np.uint64(LEVEL_BLOCK)
    found_at[j // lb, i, j % lb] = depth_byte


@numba.njit(inline="always")
def record_found(planes, found_at, v, new, depth):
    """:func:`record_level`, and the depth's low byte as vertex ``v``'s entry of ``found_at`` for every
    search in ``new`` (the high bits are the planes')."""
    record_level(planes, v, new, depth)
    one = np.uint64(1)
    depth_byte = np.uint8(depth & 255)
    while new:
        record_depth(found_at, v, ctz(new), depth_byte)
        new &= new - one


@numba.njit(parallel=True, nogil=True, cache=True)
def finish_touched(touched, queue, nxt, frontier, seen, planes, depth, out_offsets, bounds, ctr, orw, found_at):
    """After a top-down level, over the vertices it touched only: the old frontier (local ids ``queue``)
    cleared, then for each of ``touched`` (distinct local ids whose ``nxt`` word is non-zero, and not yet in
    ``seen``) ``frontier = next``, ``seen |= next``, the level into ``planes``, ``next = 0``; ``touched`` is the
    next queue.  Writes chunk ``c`` (``touched[bounds[c]:bounds[c+1]]``)'s :data:`COUNTERS` to ``ctr[c]``,
    but for the unfinished in-degree sum (left 0: it needs a pass over all vertices; the engine keeps the
    last one, an overestimate, which only keeps it top-down longer), and its OR to ``orw[c]``.  ``found_at``:
    the uint8 low bytes of the levels (:func:`record_arrays`), ``depth``'s for each search that reached a
    vertex now."""
    zero = np.uint64(0)
    for i in numba.prange(queue.size):
        frontier[queue[i]] = zero
    for c in numba.prange(bounds.size - 1):
        pairs = 0
        fdeg = 0
        o = zero
        for i in range(bounds[c], bounds[c + 1]):
            v = touched[i]
            w = nxt[v]
            nxt[v] = zero
            frontier[v] = w
            seen[v] |= w
            record_found(planes, found_at, v, w, depth)
            pairs += popcount(w)
            fdeg += out_offsets[v + 1] - out_offsets[v]
            o |= w
        ctr[c, 0] = bounds[c + 1] - bounds[c]
        ctr[c, 1] = pairs
        ctr[c, 2] = fdeg
        ctr[c, 3] = 0
        orw[c] = o


@numba.njit(parallel=True, nogil=True, cache=True)
def nonzero_ids(words, nchunks, out):
    """Write the ids of ``words``' non-zero entries into ``out`` (as many), in increasing order: two sweeps
    over ``words`` in ``nchunks`` ranges (count, then fill)."""
    n = words.size
    cnt = np.zeros(nchunks + 1, np.int64)
    for c in numba.prange(nchunks):
        k = 0
        for v in range(c * n // nchunks, (c + 1) * n // nchunks):
            if words[v]:
                k += 1
        cnt[c + 1] = k
    for c in range(nchunks):
        cnt[c + 1] += cnt[c]
    for c in numba.prange(nchunks):
        k = cnt[c]
        for v in range(c * n // nchunks, (c + 1) * n // nchunks):
            if words[v]:
                out[k] = v
                k += 1


def vertex_chunks(offsets: np.ndarray, nchunks: int) -> np.ndarray:
    """``nchunks`` contiguous vertex ranges of about equal work (edges plus vertices) for the threads of a
    pass over all owned vertices: ``(k + 1,)`` int64 bounds over local ids, ``k <= nchunks``."""
    nloc = offsets.size - 1
    work = np.asarray(offsets, np.int64) + np.arange(nloc + 1, dtype=np.int64)
    bounds = np.searchsorted(work, np.linspace(0, int(work[-1]), max(1, nchunks) + 1)).astype(np.int64)
    bounds[0], bounds[-1] = 0, nloc
    return np.unique(bounds)


@numba.njit(parallel=True, nogil=True, cache=True)
def nonzero_bits(words):
    """``(ceil(n/64),)`` uint64 bitmap with bit ``v`` set where ``words[v] != 0``."""
    n = words.size
    out = np.empty((n + 63) // 64, np.uint64)
    for w in numba.prange(out.size):
        x = np.uint64(0)
        for b in range(min(64, n - 64 * w)):
            if words[64 * w + b] != 0:
                x |= np.uint64(1) << np.uint64(b)
        out[w] = x
    return out


def encode(frontier: np.ndarray, nonzero: int) -> np.ndarray:
    """What a rank sends of its ``(nloc,)`` frontier words: ``(k, 2)`` uint64 ``(local id, word)`` pairs
    when ``2 * nonzero < nloc``, else the words themselves (``decode`` tells them apart from ``nonzero``)."""
    if 2 * nonzero < frontier.size:
        idx = np.flatnonzero(frontier)
        return np.stack([idx.astype(np.uint64), frontier[idx]], axis=1).ravel()
    return frontier


def decode(part: np.ndarray, nonzero: int, nloc: int, out: np.ndarray) -> None:
    """Write a rank's frontier words (as sent by :func:`encode`) into ``out`` (``(nloc,)`` uint64)."""
    if 2 * nonzero < nloc:
        out[:] = 0
        pairs = part.reshape(-1, 2)
        out[pairs[:, 0].astype(np.int64)] = pairs[:, 1]
    else:
        out[:] = part
