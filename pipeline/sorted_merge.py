"""Linear merges of sorted, unique integer id arrays (Numba): the CPU relabeling's unions and lookups.

Owners of :mod:`breadth.pipeline.hash_relabel` keep their ids sorted, so the union of the pieces the
chunks send them, and a chunk's lookup of its sorted piece, are single walks instead of hash tables or
binary searches.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _union2(a, b):
    """Sorted union of two sorted unique arrays."""
    out = np.empty(a.size + b.size, a.dtype)
    i = j = k = 0
    while i < a.size and j < b.size:
        if a[i] < b[j]:
            out[k] = a[i]
            i += 1
        elif b[j] < a[i]:
            out[k] = b[j]
            j += 1
        else:
            out[k] = a[i]
            i += 1
            j += 1
        k += 1
    while i < a.size:
        out[k] = a[i]
        i += 1
        k += 1
    while j < b.size:
        out[k] = b[j]
        j += 1
        k += 1
    return out[:k].copy()


@numba.njit(nogil=True, cache=True)
def _merge_lookup(part, offset, keys, out):
    """Dense ids of sorted ``keys`` in sorted ``part`` by one merge walk (-1 where absent)."""
    j = 0
    for i in range(keys.size):
        k = keys[i]
        while j < part.size and part[j] < k:
            j += 1
        out[i] = offset + j if j < part.size and part[j] == k else -1


def union_sorted(arrs: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted unique numeric arrays (non-empty list), by pairwise linear merges."""
    while len(arrs) > 1:
        arrs = [_union2(arrs[i], arrs[i + 1]) if i + 1 < len(arrs) else arrs[i] for i in range(0, len(arrs), 2)]
    return arrs[0]


def merge_lookup(part: np.ndarray, offset: int, keys: np.ndarray) -> np.ndarray:
    """Dense ids (``(k,)`` int64) of sorted ``keys`` in sorted ``part`` (whose first id is ``offset``), -1
    where absent, by one merge walk."""
    out = np.empty(keys.size, np.int64)
    _merge_lookup(part, np.int64(offset), keys, out)
    return out
