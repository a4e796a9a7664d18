"""Linear merges of sorted, unique Arrow string arrays (Numba): the CPU relabeling's unions and lookups of
string ids, the twins of :mod:`breadth.pipeline.sorted_merge` for integers.

The kernels read the arrays' buffers (:func:`breadth.bfs.arrow_strings.buffers`) and compare by UTF-8
bytes (:func:`breadth.bfs.arrow_strings.compare`): no Python string is made.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from breadth.bfs.arrow_strings import as_strings, buffers, compare, from_buffers


@numba.njit(inline="always")
def _copy(src_off, src, i, out_off, out, k, pos):
    s = src_off[i]
    n = src_off[i + 1] - s
    for t in range(n):
        out[pos + t] = src[s + t]
    out_off[k + 1] = pos + n
    return pos + n


@numba.njit(nogil=True, cache=True)
def _union2(ao, ad, bo, bd, oo, od):
    """Sorted union of two sorted unique string arrays into ``(oo, od)``; returns how many strings."""
    na, nb = ao.size - 1, bo.size - 1
    i = j = k = 0
    pos = 0
    oo[0] = 0
    while i < na and j < nb:
        c = compare(ao, ad, i, bo, bd, j)
        if c <= 0:
            pos = _copy(ao, ad, i, oo, od, k, pos)
            i += 1
            if c == 0:
                j += 1
        else:
            pos = _copy(bo, bd, j, oo, od, k, pos)
            j += 1
        k += 1
    while i < na:
        pos = _copy(ao, ad, i, oo, od, k, pos)
        i += 1
        k += 1
    while j < nb:
        pos = _copy(bo, bd, j, oo, od, k, pos)
        j += 1
        k += 1
    return k


@numba.njit(nogil=True, cache=True)
def _gallop_lookup(po, pd, qo, qd, offset, out):
    """Dense ids of sorted strings ``q`` in sorted ``p``: one forward walk that gallops (doubling steps,
    then a binary search) past the part's ids that the piece skips; -1 where absent."""
    n = po.size - 1
    j = 0
    for i in range(qo.size - 1):
        if j < n and compare(po, pd, j, qo, qd, i) < 0:
            lo, step = j, 1  # p[lo] < q[i]: the answer is in (lo, hi]
            hi = j + 1
            while hi < n and compare(po, pd, hi, qo, qd, i) < 0:
                lo = hi
                step *= 2
                hi = lo + step
            hi = min(hi, n)
            lo += 1
            while lo < hi:
                mid = (lo + hi) >> 1
                if compare(po, pd, mid, qo, qd, i) < 0:
                    lo = mid + 1
                else:
                    hi = mid
            j = lo
        out[i] = offset + j if j < n and compare(po, pd, j, qo, qd, i) == 0 else -1


def _union_two(a: pa.Array, b: pa.Array) -> pa.Array:
    ao, ad = buffers(a)
    bo, bd = buffers(b)
    oo = np.empty(ao.size + bo.size - 1, np.int64)
    od = np.empty(int(ao[-1] - ao[0]) + int(bo[-1] - bo[0]), np.uint8)
    k = _union2(ao, ad, bo, bd, oo, od)
    # copies: the buffers were sized for no common ids, and a part lives as long as the graph
    return from_buffers(oo[:k + 1].copy(), od[:int(oo[k])].copy())


def union_strings(arrays: list) -> pa.Array:
    """The sorted union of sorted unique string arrays, by pairwise linear merges: ``(u,)`` strings."""
    arrs = [as_strings(a) for a in arrays if len(a)]
    if not arrs:
        return pa.array([], pa.string())
    while len(arrs) > 1:
        arrs = [_union_two(arrs[i], arrs[i + 1]) if i + 1 < len(arrs) else arrs[i] for i in range(0, len(arrs), 2)]
    return arrs[0]


def lookup_strings(part, offset: int, piece) -> np.ndarray:
    """Dense ids (int64, ``(k,)``) of a sorted piece of strings in the owner's sorted part whose first id
    is dense ``offset`` (-1 where absent), by one galloping walk."""
    po, pd = buffers(as_strings(part))
    qo, qd = buffers(as_strings(piece))
    out = np.empty(qo.size - 1, np.int64)
    _gallop_lookup(po, pd, qo, qd, np.int64(offset), out)
    return out
