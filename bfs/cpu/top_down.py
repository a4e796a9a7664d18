"""Top-down step (CPU): expand the frontier queue, claim unvisited owned neighbours, collect remote ones.

Threads take contiguous frontier slices of equal edge counts and write into disjoint regions of output
buffers sized by those edge counts, so no atomics are needed.  Two threads may both claim the same vertex
in one level; each writes a valid parent of the same level, and the vertex appears twice in the next
queue, which costs a little repeated work and nothing in correctness (gapbs accepts the same race).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, nogil=True, cache=True)
def _reset(parent, level):
    for i in numba.prange(parent.size):
        parent[i] = -1
        level[i] = -1


def start_search(parent, level, root_local: int) -> None:
    """Engine hook: ``parent = level = -1`` on all threads (the engine then writes the root)."""
    _reset(parent, level)


def _buffer(workspace: dict | None, name: str, size: int, dtype=np.int64) -> np.ndarray:
    """A ``size``-element view of a buffer kept in ``workspace`` and grown by half again when too small."""
    if workspace is None:
        return np.empty(size, dtype)
    buf = workspace.get(name)
    if buf is None or buf.size < size:
        buf = np.empty(max(size, int(1.5 * (buf.size if buf is not None else 0))), dtype)
        workspace[name] = buf
    return buf[:size]


@numba.njit(parallel=True, nogil=True, cache=True)
def degree_sum(offsets, queue):
    """Sum of the out-degrees of local ids ``queue``."""
    s = 0
    for i in numba.prange(queue.size):
        u = queue[i]
        s += offsets[u + 1] - offsets[u]
    return s


@numba.njit(parallel=True, nogil=True, cache=True)
def _expand(offsets, cols, lo, hi, queue, parent, level, depth, sent, bounds, pre, nxt, rv, rp, cnt_l, cnt_r):
    # Unsigned indices: Numba checks every signed index for wraparound (see bottom_up.py).
    one = np.uint64(1)
    ulo = np.uint64(lo)
    nloc = np.uint64(hi - lo)
    for c in numba.prange(bounds.size - 1):
        base = np.uint64(pre[bounds[c]])
        kl = np.uint64(0)
        kr = np.uint64(0)
        for idx in range(bounds[c], bounds[c + 1]):
            u = np.uint64(queue[idx])
            ug = u + ulo
            k = np.uint64(offsets[u])
            stop = np.uint64(offsets[u + one])
            while k < stop:
                v = np.uint64(cols[k])
                j = v - ulo  # wraps to a huge value below lo: one comparison tests both bounds
                if j < nloc:
                    if parent[j] < 0:
                        parent[j] = ug
                        level[j] = depth
                        nxt[base + kl] = j
                        kl += one
                else:
                    # Sender-side filter: each remote vertex goes out once per search.  A lost bit
                    # (racing read-modify-write) only means a duplicate message.
                    w = v >> np.uint64(6)
                    bit = one << (v & np.uint64(63))
                    if (sent[w] & bit) == 0:
                        sent[w] |= bit
                        rv[base + kr] = v
                        rp[base + kr] = ug
                        kr += one
                k += one
        cnt_l[c] = kl
        cnt_r[c] = kr


def edge_chunks(offsets, queue: np.ndarray, nchunks: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Cut a frontier's edges into about ``nchunks`` equal chunks for the threads: ``(pre, bounds, total)``
    with ``pre`` ``(len(queue)+1,)`` the prefix of the queue's degrees, ``bounds`` the first queue index of
    each chunk (and the end), ``total`` the number of edges."""
    deg = offsets[queue + 1] - offsets[queue]
    pre = np.zeros(queue.size + 1, np.int64)
    np.cumsum(deg, out=pre[1:])
    total = int(pre[-1])
    nchunks = max(1, min(nchunks, queue.size))
    bounds = np.searchsorted(pre, np.linspace(0, total, nchunks + 1)).astype(np.int64)
    bounds[0], bounds[-1] = 0, queue.size
    return pre, np.unique(bounds), total


@numba.njit(nogil=True, cache=True)
def gather_chunks(buf, pre, bounds, cnt, out):
    """Concatenate into ``out`` the first ``cnt[c]`` items each chunk ``c`` wrote at ``buf[pre[bounds[c]]:]``."""
    k = 0
    for c in range(bounds.size - 1):
        base = pre[bounds[c]]
        for j in range(cnt[c]):
            out[k] = buf[base + j]
            k += 1


def top_down_step(offsets, cols, lo: int, hi: int, queue: np.ndarray, parent: np.ndarray, level: np.ndarray,
                  depth: int, sent: np.ndarray, nchunks: int, workspace: dict | None = None):
    """One top-down level.

    ``queue``: int64 local ids of the frontier.  Returns ``(next_queue, remote_v, remote_parent, scanned)``:
    newly claimed local ids, remote vertices (global ids) reached with their parents (global ids), and the
    number of edges examined.
    """
    pre, bounds, total = edge_chunks(offsets, queue, nchunks)
    # Each thread's region holds as many entries as its edges, so these hold 3 per edge scanned (a level
    # before bottom-up takes over may scan a twentieth of the graph): in the columns' own dtype, which
    # every local and global id fits, they cost half of int64's.
    nxt = _buffer(workspace, "next", total, cols.dtype)
    rv = _buffer(workspace, "remote_v", total if sent.size else 0, cols.dtype)  # one rank: nothing is remote
    rp = _buffer(workspace, "remote_p", rv.size, cols.dtype)
    cnt_l = np.zeros(bounds.size - 1, np.int64)
    cnt_r = np.zeros(bounds.size - 1, np.int64)
    _expand(offsets, cols, lo, hi, queue, parent, level, depth, sent, bounds, pre, nxt, rv, rp, cnt_l, cnt_r)
    out = np.empty(int(cnt_l.sum()), np.int64)
    gather_chunks(nxt, pre, bounds, cnt_l, out)
    nr = int(cnt_r.sum())
    out_v = np.empty(nr, np.int64)
    out_p = np.empty(nr, np.int64)
    if nr:
        gather_chunks(rv, pre, bounds, cnt_r, out_v)
        gather_chunks(rp, pre, bounds, cnt_r, out_p)
    return out, out_v, out_p, total


@numba.njit(nogil=True, cache=True)
def claim_remote(v, p, lo, parent, level, depth):
    """Apply (vertex, parent) pairs received from other ranks; return the newly claimed local ids."""
    out = np.empty(v.size, np.int64)
    k = 0
    for i in range(v.size):
        j = v[i] - lo
        if parent[j] < 0:
            parent[j] = p[i]
            level[j] = depth
            out[k] = j
            k += 1
    return out[:k]
