"""Frontier representations and conversions: a queue of local ids (top-down) or a bitmap (bottom-up)."""

from __future__ import annotations

import numba
import numpy as np


def num_words(nbits: int) -> int:
    return (nbits + 63) // 64


@numba.njit(nogil=True, cache=True)
def queue_to_bits(queue, nwords):
    """uint64 bitmap of ``nwords`` words with the bits of local ids ``queue`` set."""
    bits = np.zeros(nwords, np.uint64)
    for i in range(queue.size):
        u = queue[i]
        bits[u >> 6] |= np.uint64(1) << np.uint64(u & 63)
    return bits


@numba.njit(nogil=True, cache=True)
def bits_to_queue(bits):
    """int64 local ids of the set bits, ascending."""
    n = 0
    for w in range(bits.size):
        x = bits[w]
        while x:
            x &= x - np.uint64(1)
            n += 1
    out = np.empty(n, np.int64)
    k = 0
    for w in range(bits.size):
        x = bits[w]
        while x:
            low = x & (~x + np.uint64(1))
            b = 0
            t = low
            while t > np.uint64(1):
                t >>= np.uint64(1)
                b += 1
            out[k] = w * 64 + b
            k += 1
            x ^= low
    return out


@numba.njit(nogil=True, cache=True)
def popcount(bits):
    n = 0
    for w in range(bits.size):
        x = bits[w]
        while x:
            x &= x - np.uint64(1)
            n += 1
    return n


@numba.njit(nogil=True, cache=True)
def pairs_by_owner(v, p, block, nparts):
    """Counting-sort (vertex, parent) pairs by owner ``v // block``: ``(k, 2)`` int64 and offsets."""
    cnt = np.zeros(nparts + 1, np.int64)
    for i in range(v.size):
        cnt[v[i] // block + 1] += 1
    for r in range(nparts):
        cnt[r + 1] += cnt[r]
    cur = cnt[:-1].copy()
    out = np.empty((v.size, 2), np.int64)
    for i in range(v.size):
        r = v[i] // block
        out[cur[r], 0] = v[i]
        out[cur[r], 1] = p[i]
        cur[r] += 1
    return out, cnt
