"""Frontier words of a batched search (CPU): the end-of-level pass and the words' compact form for exchange.

After a level, the words found (``next``) become the frontier and ``next`` is cleared, in one pass that
also counts what the direction rule needs (see :mod:`.batch_engine`).  For the bottom-up all-gather a rank
sends its frontier as ``(local id, word)`` pairs when fewer than half of its words are non-zero, else the
dense words (Bisson et al.'s list-or-bitmap choice, per word instead of per bit).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, nogil=True, cache=True)
def advance(nxt, frontier, seen, active, out_offsets, in_offsets):
    """``frontier = nxt; nxt = 0`` over this rank's ``(nloc,)`` uint64 words.

    Returns ``(vertices, pairs, out_degree_sum, unfinished_in_degree_sum)``: non-zero frontier words, set
    bits in them ((vertex, search) pairs), the out-degree sum of those vertices (a top-down level's edges),
    and the in-degree sum of the vertices that still miss a search of ``active`` (a bottom-up level's
    worst case)."""
    zero = np.uint64(0)
    nv = 0
    pairs = 0
    fdeg = 0
    unfinished = 0
    for v in numba.prange(nxt.size):
        w = nxt[v]
        frontier[v] = w
        nxt[v] = zero
        if w != zero:
            nv += 1
            x = w
            c = 0
            while x:
                x &= x - np.uint64(1)
                c += 1
            pairs += c
            fdeg += out_offsets[v + 1] - out_offsets[v]
        if active & ~seen[v]:
            unfinished += in_offsets[v + 1] - in_offsets[v]
    return nv, pairs, fdeg, unfinished


@numba.njit(parallel=True, nogil=True, cache=True)
def nonzero_bits(words):
    """``(ceil(n/64),)`` uint64 bitmap with bit ``v`` set where ``words[v] != 0``."""
    n = words.size
    out = np.empty((n + 63) // 64, np.uint64)
    for w in numba.prange(out.size):
        x = np.uint64(0)
        for b in range(min(64, n - 64 * w)):
            if words[64 * w + b] != 0:
                x |= np.uint64(1) << np.uint64(b)
        out[w] = x
    return out


def or_words(words: np.ndarray) -> np.uint64:
    """Bitwise OR of all ``words`` (the searches present in them)."""
    return np.bitwise_or.reduce(words) if words.size else np.uint64(0)


def encode(frontier: np.ndarray, nonzero: int) -> np.ndarray:
    """What a rank sends of its ``(nloc,)`` frontier words: ``(k, 2)`` uint64 ``(local id, word)`` pairs
    when ``2 * nonzero < nloc``, else the words themselves (``decode`` tells them apart from ``nonzero``)."""
    if 2 * nonzero < frontier.size:
        idx = np.flatnonzero(frontier)
        return np.stack([idx.astype(np.uint64), frontier[idx]], axis=1).ravel()
    return frontier


def decode(part: np.ndarray, nonzero: int, nloc: int, out: np.ndarray) -> None:
    """Write a rank's frontier words (as sent by :func:`encode`) into ``out`` (``(nloc,)`` uint64)."""
    if 2 * nonzero < nloc:
        out[:] = 0
        pairs = part.reshape(-1, 2)
        out[pairs[:, 0].astype(np.int64)] = pairs[:, 1]
    else:
        out[:] = part
