"""Unions and lookups of sorted, unique integer id arrays (Numba): the CPU relabeling's owner steps.

Owners of :mod:`breadth.pipeline.relabel.hash_relabel` keep their ids sorted: the union of the pieces the chunks
send them is one in-place sort of their concatenation, and a chunk's lookup of its sorted piece is one walk
through the owner's part that gallops past long gaps (``O(log gap)`` steps), so that a piece much smaller
than the part (a chunk holds a sliver of an owner's ids, the more so the more chunks) costs
``O(piece * log(part / piece))``, not a step per id of the part.  Parts of hash keys, which are uniform,
also have a :func:`key_index` by their top bits (built once per owner): each key is then found in its
run of equal top bits, a step or two long, independently of the others.
"""

from __future__ import annotations

import numba
import numpy as np


#: ids a lookup walks one by one before it gallops: short gaps stay a sequential walk
WALK_STEPS = 32


@numba.njit(nogil=True, cache=True)
def _dedupe_sorted(a):
    """Keep the first of each run of equal ids of sorted ``a`` at its head, in place: their number."""
    if a.size == 0:
        return 0
    n = 1
    for i in range(1, a.size):
        if a[i] != a[n - 1]:
            a[n] = a[i]
            n += 1
    return n


@numba.njit(nogil=True, cache=True)
def _key_index(part, bits, index):
    shift = np.uint64(64 - bits)
    t = 0
    for i in range(part.size):
        b = part[i] >> shift
        while t <= b:
            index[t] = i
            t += 1
    while t < index.size:
        index[t] = part.size
        t += 1


@numba.njit(nogil=True, cache=True, inline="always")
def _walk(part, k, j):
    """The first position ``>= j`` of sorted ``part`` whose id is ``>= k``: a sequential walk over short
    gaps, which the prefetcher follows, and a gallop past long ones (``O(log gap)`` steps)."""
    n = part.size
    stop = min(j + WALK_STEPS, n)
    while j < stop and part[j] < k:
        j += 1
    if j == stop and j < n and part[j] < k:
        # gallop: the first index in part[j:] whose id is >= k lies in (j + step // 2, j + step]
        step = 1
        while j + step < n and part[j + step] < k:
            step *= 2
        lo = j + step // 2 + 1
        hi = min(j + step, n)
        while lo < hi:  # binary search in part[lo:hi] for the first id >= k
            mid = (lo + hi) >> 1
            if part[mid] < k:
                lo = mid + 1
            else:
                hi = mid
        j = lo
    return j


@numba.njit(nogil=True, cache=True)
def _merge_lookup(part, offset, keys, out):
    """Dense ids of sorted ``keys`` in sorted ``part`` by one walk that gallops past long gaps (-1 where
    absent)."""
    j = 0
    n = part.size
    for i in range(keys.size):
        k = keys[i]
        j = _walk(part, k, j)
        out[i] = offset + j if j < n and part[j] == k else -1


@numba.njit(nogil=True, cache=True)
def _indexed_lookup(part, offset, keys, out, index, bits):
    """:func:`_merge_lookup` with the part's :func:`key_index`: a first pass reads where each key's run of
    equal top bits starts, a second finds the key in its run (a key or two where keys are uniform; a
    binary search in a long run).  No key's search waits for the one before, so the processor overlaps
    the cache misses of many keys, where a walk that goes on from the last key's place makes every miss
    wait for the previous one: a quarter less time a key in a part that misses the cache (a piece of 400 k
    keys in a part of 26 M, as the 2^30 crawl's owners hold: 39 ns a key)."""
    n = part.size
    shift = np.uint64(64 - bits)
    for i in range(keys.size):
        out[i] = index[keys[i] >> shift]
    for i in range(keys.size):
        k = keys[i]
        j = out[i]
        e = index[(k >> shift) + np.uint64(1)]
        if e - j > WALK_STEPS:  # keys that are not uniform
            while j < e:
                mid = (j + e) >> 1
                if part[mid] < k:
                    j = mid + 1
                else:
                    e = mid
        else:
            while j < e and part[j] < k:
                j += 1
        out[i] = offset + j if j < n and part[j] == k else -1


def union_sorted(arrs: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted unique numeric arrays of one dtype (non-empty list): their concatenation
    sorted in place and deduplicated in place, then shrunk in place.  The sort is NumPy's stable one, a
    timsort for 64-bit integers, which finds the pieces as sorted runs and merges them: about five times
    as fast as NumPy's default (vectorised) sort, which sees only values (16 pieces of 180 k hashed ids:
    41 ms).  Pairwise merges (a fresh array per pass) and a heap's k-way merge (a mispredicted branch per
    id) are slower than even the default sort."""
    arrs = [a for a in arrs if a.size] or arrs[:1]
    if len(arrs) == 1:
        return arrs[0]
    out = np.concatenate(arrs)
    out.sort(kind="stable")  # merges the pieces' sorted runs
    n = _dedupe_sorted(out)
    out.resize(n, refcheck=False)  # realloc shrinks in place: no second copy of the union
    return out


def key_index(part: np.ndarray) -> np.ndarray:
    """Where each run of equal top bits starts in a sorted uint64 ``part``: ``index[t]`` (``(2**b + 1,)``,
    int32 or int64) is the first position whose key has top ``b`` bits ``>= t``, with ``2**b`` about the
    part's size (a key or two per run where keys are uniform, as hash keys are; 2-4 bytes a key).

    >>> key_index(np.array([0, 1 << 62, 1 << 63, 3 << 62], np.uint64)).tolist()  # runs of the top 2 bits
    [0, 1, 2, 3, 4]
    """
    bits = min(32, max(1, part.size.bit_length() - 1))
    index = np.empty((1 << bits) + 1, np.int32 if part.size < (1 << 31) else np.int64)
    _key_index(part, bits, index)
    return index


def merge_lookup(part: np.ndarray, offset: int, keys: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Dense ids (``(k,)`` int64) of sorted ``keys`` in sorted ``part`` (whose first id is ``offset``), -1
    where absent, by one merge walk; ``index``: the part's :func:`key_index` (uint64 parts), which finds
    each key in its run of equal top bits instead: about 10 ns a key, a third of the walk's time, for hash
    keys (a chunk's piece of 390 k keys in an owner's part of 3 M; the walk crosses about 8 keys of the part
    per key)."""
    out = np.empty(keys.size, np.int64)
    if index is None:
        _merge_lookup(part, np.int64(offset), keys, out)
    else:
        _indexed_lookup(part, np.int64(offset), keys, out, index, (index.size - 1).bit_length() - 1)
    return out
