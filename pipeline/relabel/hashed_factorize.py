"""Chunk-local numbering of integer ids in the order of their hash (Numba): the CPU relabeling's split.

``hashed_factorize(a)`` gives the distinct *keys* ``k = id_hash(a)`` of a chunk's ids sorted, and each
id's code (the position of its key there).  The hash (:func:`breadth.bfs.id_map.id_hash`, splitmix64) is a
bijection of 64-bit integers, so distinct keys are distinct ids and :func:`breadth.bfs.id_map.ids_of_keys`
gives the ids back; hash owners keep their part of the id map in this order
(:mod:`breadth.pipeline.relabel.hash_relabel`).

Ordering by key rather than by value is what makes the split cheap.  Keys are uniform, so one counting
pass cuts the chunk into buckets by the key's top bits (a few thousand ids each); each bucket is
deduplicated in a hash table small enough for the L2 cache, and its distinct keys are sorted by a second
counting pass on the next bits (groups of one or two keys, put in order by insertion).  The buckets follow
each other in key order, so the whole is sorted.  A 2^21-id chunk of a web crawl (0.77 M distinct ids)
takes 33-55 ms on 2 cores, a third of the time of a global open-addressing table plus NumPy's argsort of
the distinct ids by value, whose table (32 MB) misses the cache on nearly every probe.
"""

from __future__ import annotations

import numba
import numpy as np

#: ids per bucket the first pass aims at (1-2x this): the bucket's table (12 bytes a slot, twice the
#: ids) stays in L2
BUCKET_IDS = 1 << 12
#: at most this many buckets (write streams of the scatter pass)
MAX_BUCKET_BITS = 11
#: groups of a bucket's second pass longer than this are sorted by NumPy's sort, shorter ones by insertion
INSERTION_MAX = 48


@numba.njit(nogil=True, cache=True, inline="always")
def _key(x):
    """splitmix64's finaliser of ``x + golden``: :func:`breadth.bfs.id_map.id_hash` of one integer."""
    z = np.uint64(x) + np.uint64(0x9E3779B97F4A7C15)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


@numba.njit(nogil=True, cache=True, inline="always")
def _insertion_sort(a, lo, hi):
    i = lo + 1
    while i < hi:
        x = a[i]
        j = i
        while j > lo and a[j - 1] > x:
            a[j] = a[j - 1]
            j -= 1
        a[j] = x
        i += 1


@numba.njit(nogil=True, cache=True)
def _sort_bucket(src, m, dst, cnt, low_bits):
    """``src[:m]`` (distinct keys equal above their ``low_bits`` low bits, uniform below) sorted into
    ``dst[:m]`` by one counting pass on the next bits (about one key per group) and insertion sorts."""
    s = 1
    while (1 << s) < m:
        s += 1
    s = min(s, low_bits)
    shift = np.uint64(low_bits - s)
    mask = np.uint64((1 << s) - 1)
    groups = 1 << s
    cnt[:groups + 1] = 0
    for i in range(m):
        cnt[((src[i] >> shift) & mask) + np.uint64(1)] += 1
    for d in range(groups):
        cnt[d + 1] += cnt[d]
    for i in range(m):
        d = (src[i] >> shift) & mask
        dst[cnt[d]] = src[i]
        cnt[d] += 1
    lo = 0  # cnt[d] is now group d's end
    for d in range(groups):
        hi = cnt[d]
        if hi - lo > INSERTION_MAX:  # only where keys are not uniform
            dst[lo:hi] = np.sort(dst[lo:hi])
        elif hi - lo > 1:
            _insertion_sort(dst, lo, hi)
        lo = hi


@numba.njit(nogil=True, cache=True)
def _hashed_factorize(a, bits):
    n = a.size
    nb = 1 << bits
    top = np.uint64(64 - bits)
    start = np.zeros(nb + 1, np.int64)
    for i in range(n):
        start[(_key(a[i]) >> top) + np.uint64(1)] += 1
    for b in range(nb):
        start[b + 1] += start[b]
    cursor = start[:-1].copy()
    bkeys = np.empty(n, np.uint64)  # the keys bucket after bucket, with their positions in a
    where = np.empty(n, np.int32)
    for i in range(n):  # hashing again costs less than a pass over a stored array of keys
        k = _key(a[i])
        b = k >> top
        j = cursor[b]
        bkeys[j] = k
        where[j] = i
        cursor[b] = j + 1
    most = 0
    for b in range(nb):
        most = max(most, start[b + 1] - start[b])
    tbits = 4
    while (1 << tbits) < 2 * most:
        tbits += 1
    mask = np.uint64((1 << tbits) - 1)
    tshift = np.uint64(64 - tbits)
    tkey = np.empty(1 << tbits, np.uint64)
    tval = np.full(1 << tbits, -1, np.int32)  # a bucket's local code, then its key's rank; -1: empty
    slot = np.empty(most, np.int32)
    found = np.empty(most, np.uint64)
    cnt = np.empty(2 * most + 2, np.int64)
    codes = np.empty(n, np.int32)
    nu = 0
    for b in range(nb):
        s, e = start[b], start[b + 1]
        m = 0
        for j in range(s, e):
            k = bkeys[j]
            # a multiplicative hash of the key: its top bits are the bucket's, and keys chosen to differ in
            # a few bits (ids picked by inverting id_hash) must not pile into one run of the table
            h = (k * np.uint64(0x9E3779B97F4A7C15)) >> tshift
            while True:
                if tval[h] < 0:
                    tval[h] = m
                    tkey[h] = k
                    found[m] = k
                    m += 1
                    break
                if tkey[h] == k:
                    break
                h = (h + np.uint64(1)) & mask
            slot[j - s] = h
        # the sorted distinct keys go to the head of bkeys, whose buckets up to this one are read (nu <= s)
        out = bkeys[nu:nu + m]
        _sort_bucket(found, m, out, cnt, 64 - bits)
        for r in range(m):  # each slot's value becomes its key's rank in the sorted bucket
            k = out[r]
            h = (k * np.uint64(0x9E3779B97F4A7C15)) >> tshift
            while tkey[h] != k:
                h = (h + np.uint64(1)) & mask
            tval[h] = r
        for j in range(s, e):
            codes[where[j]] = nu + tval[slot[j - s]]
        for j in range(s, e):
            tval[slot[j - s]] = -1
        nu += m
    return codes, bkeys[:nu].copy()


def hashed_factorize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, keys)`` of a 1-D int64 or uint64 array: ``keys`` the sorted distinct ``id_hash`` values
    (uint64, ``(u,)``), ``codes`` (int32, ``a.shape``) with ``keys[codes] == id_hash(a)``.

    >>> codes, keys = hashed_factorize(np.array([30, 20, 30, 10]))
    >>> bool(codes[0] == codes[2]), keys.size, bool((keys[1:] > keys[:-1]).all())
    (True, 3, True)
    """
    a = np.ascontiguousarray(a)
    if a.size >= (1 << 31):
        raise ValueError(f"hashed_factorize: {a.size} ids in one chunk; chunks hold fewer than 2**31")
    # at least two buckets: a shift by all 64 bits is undefined
    bits = min(MAX_BUCKET_BITS, max(1, int(a.size // BUCKET_IDS).bit_length() - 1))
    return _hashed_factorize(a, bits)


@numba.njit(nogil=True, cache=True)
def _owner_pieces(keys, nowners, order, flat, bounds):
    p = np.uint64(nowners)
    owner = np.empty(keys.size, np.int32)  # one division a key
    for i in range(keys.size):
        o = keys[i] % p
        owner[i] = o
        bounds[o + np.uint64(1)] += 1
    for o in range(nowners):
        bounds[o + 1] += bounds[o]
    cursor = bounds[:-1].copy()
    for i in range(keys.size):
        o = owner[i]
        j = cursor[o]
        order[j] = i
        flat[j] = keys[i]
        cursor[o] = j + 1


def owner_pieces(keys: np.ndarray, nowners: int, index_dtype=np.int32) -> tuple[np.ndarray, list[np.ndarray]]:
    """Sorted distinct ``keys`` cut by owner (``key % nowners``): ``(order, pieces)``, ``pieces[p]`` owner
    ``p``'s keys (sorted: a stable cut) and ``order`` (``(u,)`` of ``index_dtype``) the positions in
    ``keys`` that list them piece after piece.  One counting pass (0.77 M keys: 3-4 ms), half the time of
    NumPy's stable argsort of the owners plus a gather.

    >>> order, pieces = owner_pieces(np.array([2, 3, 4, 7], np.uint64), 2)
    >>> order.tolist(), [p.tolist() for p in pieces]
    ([0, 2, 1, 3], [[2, 4], [3, 7]])
    """
    order = np.empty(keys.size, index_dtype)
    flat = np.empty(keys.size, np.uint64)
    bounds = np.zeros(nowners + 1, np.int64)
    _owner_pieces(keys, nowners, order, flat, bounds)
    return order, [flat[bounds[p]:bounds[p + 1]] for p in range(nowners)]
