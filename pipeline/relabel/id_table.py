"""The table relabeling's kernels (Numba): presence bitmaps and lookup tables over a small id span.

Used by :mod:`breadth.pipeline.relabel.relabel` for int64 ids whose span is small next to their count (SNAP
files): sorted unique ids by marking a byte per id of the span, and dense ids by a table indexed by
``id - lo``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _minmax(a):
    lo = a[0]
    hi = a[0]
    for i in range(1, a.size):
        x = a[i]
        if x < lo:
            lo = x
        elif x > hi:
            hi = x
    return lo, hi


@numba.njit(nogil=True, cache=True)
def _mark(seen, a, lo):
    for i in range(a.size):
        seen[a[i] - lo] = 1


@numba.njit(nogil=True, cache=True)
def _collect(seen, lo):
    n = 0
    for j in range(seen.size):
        n += seen[j]
    out = np.empty(n, np.int64)
    k = 0
    for j in range(seen.size):
        if seen[j]:
            out[k] = lo + j
            k += 1
    return out


@numba.njit(nogil=True, cache=True)
def _build_lut(id_map, lo, lut):
    for i in range(id_map.size):
        lut[id_map[i] - lo] = i


@numba.njit(nogil=True, cache=True)
def _map_lut(edges, lo, lut, out):
    for i in range(edges.shape[0]):
        out[i, 0] = lut[edges[i, 0] - lo]
        out[i, 1] = lut[edges[i, 1] - lo]
