"""1D partition: send each adjacency entry of a chunk of edge tuples to the owner of its row vertex.

An undirected tuple ``(u, v)`` becomes the entries ``u -> v`` (for owner(u)) and ``v -> u`` (for
owner(v)); a directed one becomes the out-entry ``u -> v`` (owner(u)) and the in-entry ``v -> u``
(owner(v)), kept apart so that owners build CSR and CSC.  Self-loops are not entries: their vertex goes
to its owner's loop list, which only feeds the Graph500 edge count.
"""

from __future__ import annotations

import numba
import numpy as np

from breadth.bfs.shard import column_dtype

from .piece import Piece, check_ids  # noqa: F401  (re-exported: the pieces this module cuts, the id check)


@numba.njit(nogil=True, cache=True)
def _count(edges, block, nparts, symmetric, cnt_out, cnt_in, cnt_loop):
    for i in range(edges.shape[0]):
        u = edges[i, 0]
        v = edges[i, 1]
        if u == v:
            cnt_loop[u // block] += 1
        else:
            cnt_out[u // block] += 1
            if symmetric:
                cnt_out[v // block] += 1
            else:
                cnt_in[v // block] += 1


@numba.njit(nogil=True, cache=True)
def _scatter(edges, block, symmetric, cur_out, cur_in, cur_loop, out, inc, loops):
    for i in range(edges.shape[0]):
        u = edges[i, 0]
        v = edges[i, 1]
        if u == v:
            p = u // block
            loops[cur_loop[p]] = u
            cur_loop[p] += 1
            continue
        p = u // block
        out[cur_out[p], 0] = u
        out[cur_out[p], 1] = v
        cur_out[p] += 1
        q = v // block
        if symmetric:
            out[cur_out[q], 0] = v
            out[cur_out[q], 1] = u
            cur_out[q] += 1
        else:
            inc[cur_in[q], 0] = v
            inc[cur_in[q], 1] = u
            cur_in[q] += 1


#: chunk dtypes split as they are: relabeled sources give int32 dense ids while they fit
#: (:func:`~breadth.bfs.shard.column_dtype`), and a 64-bit copy would cost 16 MB and a few ms per 2^20 tuples
_READ_AS_IS = (np.dtype(np.int32), np.dtype(np.int64))


def split_by_owner(edges: np.ndarray, num_vertices: int, block: int, nparts: int,
                   directed: bool = False) -> list[Piece]:
    """Split a ``(k, 2)`` chunk of edge tuples (int32 or int64; other integers are read as int64) into one
    :class:`Piece` per owner."""
    edges = np.asarray(edges)
    edges = np.ascontiguousarray(edges, dtype=edges.dtype if edges.dtype in _READ_AS_IS else np.int64)
    check_ids(edges, num_vertices)
    cnt_out = np.zeros(nparts, np.int64)
    cnt_in = np.zeros(nparts, np.int64)
    cnt_loop = np.zeros(nparts, np.int64)
    _count(edges, block, nparts, not directed, cnt_out, cnt_in, cnt_loop)
    starts = lambda c: np.concatenate(([0], np.cumsum(c)))  # noqa: E731
    s_out, s_in, s_loop = starts(cnt_out), starts(cnt_in), starts(cnt_loop)
    # entries in the shard's column dtype: 32-bit when every id fits, half the bytes to write, send and read
    dt = column_dtype(num_vertices)
    out = np.empty((s_out[-1], 2), dt)
    inc = np.empty((s_in[-1], 2), dt)
    loops = np.empty(s_loop[-1], np.int64)
    _scatter(edges, block, not directed, s_out[:-1].copy(), s_in[:-1].copy(), s_loop[:-1].copy(), out, inc, loops)
    return [Piece(out[s_out[p]:s_out[p + 1]], inc[s_in[p]:s_in[p + 1]] if directed else None,
                  loops[s_loop[p]:s_loop[p + 1]]) for p in range(nparts)]
