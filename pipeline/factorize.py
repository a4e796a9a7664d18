"""Chunk-local numbering of integer ids by an open-addressing hash table (Numba).

``factorize(a)`` gives what ``pandas.factorize(a)`` gives -- codes in first-seen order and the distinct
ids in that order -- two to three times faster on 64-bit ids, because the table stores the ids
themselves with linear probing on a multiplicative hash, and a power-law chunk's hubs stay in cache.
A slot is an id and its code plus one (0: empty) side by side, so a probe reads one cache line.  The first
table is sized from the distinct ids that strided samples of the chunk predict (:func:`_start_bits`),
and it doubles when half full (the ids seen so far are inserted again, the input is not read again).  A
chunk with few distinct ids never allocates for many: the estimate never exceeds the input's size, so the
table holds at most 64 bytes per input id (as when it began at an eighth of the input and doubled), or 32
to 64 per distinct id once it has doubled (96 for a moment while it doubles); the distinct ids 8 more.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15  # multiplicative hashing (Fibonacci): the top ``bits`` bits are the slot


@numba.njit(nogil=True, cache=True)
def _reinsert(table, uniq, nu, bits):
    """Insert ``uniq[:nu]`` (distinct) with codes ``0..nu-1`` into an empty ``table`` of ``2**bits`` slots."""
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    for j in range(nu):
        x = uniq[j]
        h = np.int64((np.uint64(x) * np.uint64(_GOLDEN)) >> shift)
        while table[h, 1] != 0:
            h = (h + 1) & mask
        table[h, 0] = x
        table[h, 1] = j + 1


@numba.njit(nogil=True, cache=True)
def _factorize(a, codes, bits):
    """Number ``a`` into ``codes`` starting with a table of ``2**bits`` slots; returns the distinct ids in
    first-seen order."""
    table = np.zeros((1 << bits, 2), a.dtype)  # [id, code + 1]
    uniq = np.empty(a.size, a.dtype)
    nu = 0
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    for i in range(a.size):
        x = a[i]
        h = np.int64((np.uint64(x) * np.uint64(_GOLDEN)) >> shift)
        while True:
            s = table[h, 1]
            if s == 0:
                table[h, 0] = x
                table[h, 1] = nu + 1
                uniq[nu] = x
                codes[i] = nu
                nu += 1
                break
            if table[h, 0] == x:
                codes[i] = s - 1
                break
            h = (h + 1) & mask
        if 2 * nu > mask:  # half full: twice the slots
            bits += 1
            table = np.zeros((1 << bits, 2), a.dtype)
            _reinsert(table, uniq, nu, bits)
            mask = (1 << bits) - 1
            shift = np.uint64(64 - bits)
    return uniq[:nu].copy()


def factorize(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniq)`` of a 1-D int64 or uint64 array: ``uniq[codes] == a``, ``uniq`` in first-seen
    order; ``codes`` int32 (a chunk has far fewer than 2^31 ids).

    >>> factorize(np.array([30, 20, 30, 10]))[0].tolist()
    [0, 1, 0, 2]
    """
    a = np.ascontiguousarray(a)
    if a.size >= (1 << 31):
        raise ValueError(f"factorize: {a.size} ids in one chunk; chunks hold fewer than 2**31")
    codes = np.empty(a.size, np.int32)
    return codes, _factorize(a, codes, _start_bits(a))


#: ids read by :func:`_start_bits` to estimate a chunk's share of distinct ids
SAMPLE = 1 << 16
#: below this growth exponent a chunk repeats ids, and the estimate overshoots (see :func:`_start_bits`)
REPEATS_G = 0.9


def _start_bits(a: np.ndarray) -> int:
    """log2 of the first table's slots, from the distinct ids of two strided samples of ``a`` (``SAMPLE``
    ids and a quarter of them): distinct ids grow as ``size ** g`` with ``g`` from the two counts (1 when
    all are distinct, less the more ids repeat), extrapolated to the chunk.

    Where ids repeat (``g`` below :data:`REPEATS_G`) the extrapolation overshoots -- a power law's distinct ids grow
    ever slower -- by 1.3-3.8x on chunks of 2 M and 8 M web-crawl ids (``2 ** 18 .. 2 ** 28`` vertices), so the
    table gets the estimate itself rounded up to a power of two (were the estimate right, the table would pass half
    full and double once; it never was right there); where (nearly) all ids are distinct it is right, and the table
    gets twice the estimate, as it would double at the end otherwise.  The samples are 64 K and 16 K ids (1-2 ms a
    chunk): 16 K and 4 K overshot 1.4-8.4x.  Measured on this 2-core machine, one 2^21-id chunk, before (a 16 K
    sample, twice the estimate) and after: 266 K distinct ids (a 2^20-vertex crawl) 48 -> 30 ms, 625 K (2^23) 78 ->
    60 ms, 1.3 M of an 8 M-id chunk 312 -> 195 ms; crawls of 2^24-2^28 vertices and all-distinct ids as before (the
    same table).  ``bench_ingest_sparse.py`` at 2^24 tuples over 2^21 ids, 3 alternating rounds of 3: the API's
    ingest 3.86 -> 3.46 s (median of 9), ``breadth ingest`` 4.80 -> 4.48 s.
    """
    if a.size <= 4 * SAMPLE:
        return max(10, int(a.size).bit_length() - 3)
    sample = np.ascontiguousarray(a[::a.size // SAMPLE][:SAMPLE])
    few = np.ascontiguousarray(sample[::4])
    d = _factorize(sample, np.empty(sample.size, np.int32), SAMPLE.bit_length()).size
    d4 = _factorize(few, np.empty(few.size, np.int32), SAMPLE.bit_length() - 2).size
    g = min(1.0, max(0.0, math.log(d / d4, 4)))
    estimate = max(1, int(d * (a.size / sample.size) ** g))
    # the smallest power of two above the table's target: it doubles only once past half of it
    return max(10, int(estimate if g < REPEATS_G else 2 * estimate).bit_length())
