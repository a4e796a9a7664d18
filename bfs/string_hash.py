"""XXH64 (seed 0) of string ids' UTF-8 bytes, vectorised over an Arrow string array (Numba).

The standard 64-bit xxHash (https://github.com/Cyan4973/xxHash, ``XXH64(bytes, len, 0)``), so that any
process -- and a GPU, with cuDF's ``Series.hash_values(method="xxhash64")`` -- computes the same value for
the same string.  String ids are owned by ``xxh64 % P`` (:func:`breadth.bfs.id_map.owner_of`).
"""

from __future__ import annotations

import numba
import numpy as np

from .arrow_strings import as_strings, buffers

#: the hash string ids are partitioned by, as a store's manifest names it
STRING_HASH = "xxh64"

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


@numba.njit(inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@numba.njit(inline="always")
def _read64(d, p):
    v = np.uint64(0)
    for t in range(8):
        v |= np.uint64(d[p + t]) << np.uint64(8 * t)
    return v


@numba.njit(inline="always")
def _read32(d, p):
    v = np.uint64(0)
    for t in range(4):
        v |= np.uint64(d[p + t]) << np.uint64(8 * t)
    return v


@numba.njit(inline="always")
def _round(acc, x):
    acc = acc + x * _P2
    return _rotl(acc, 31) * _P1


@numba.njit(inline="always")
def _merge(acc, v):
    acc ^= _round(np.uint64(0), v)
    return acc * _P1 + _P4


@numba.njit(inline="always")
def xxh64_at(d, p, n):
    """XXH64 with seed 0 of ``d[p:p+n]`` (uint8)."""
    end = p + n
    if n >= 32:
        v1 = _P1 + _P2
        v2 = _P2
        v3 = np.uint64(0)
        v4 = np.uint64(0) - _P1
        limit = end - 32
        while p <= limit:
            v1 = _round(v1, _read64(d, p))
            v2 = _round(v2, _read64(d, p + 8))
            v3 = _round(v3, _read64(d, p + 16))
            v4 = _round(v4, _read64(d, p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = _P5
    h += np.uint64(n)
    while p + 8 <= end:
        h ^= _round(np.uint64(0), _read64(d, p))
        h = _rotl(h, 27) * _P1 + _P4
        p += 8
    if p + 4 <= end:
        h ^= _read32(d, p) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        p += 4
    while p < end:
        h ^= np.uint64(d[p]) * _P5
        h = _rotl(h, 11) * _P1
        p += 1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


@numba.njit(nogil=True, cache=True)
def _hash_all(off, data, out):
    for i in range(off.size - 1):
        out[i] = xxh64_at(data, off[i], off[i + 1] - off[i])


def xxh64(ids) -> np.ndarray:
    """XXH64 (seed 0) of each string's UTF-8 bytes: ``(k,)`` strings (Arrow, object or ``U`` array) ->
    ``(k,)`` uint64.

    >>> hex(int(xxh64(["abc"])[0]))
    '0x44bc2cf5ad770999'
    """
    off, data = buffers(as_strings(ids))
    out = np.empty(off.size - 1, np.uint64)
    _hash_all(off, data, out)
    return out
