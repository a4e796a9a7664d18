"""Bottom-up step (CPU): every unvisited owned vertex looks for a parent in the global frontier bitmap.

Threads own whole 64-bit words of the next-frontier bitmap (64 consecutive local vertices each), so
each word is built in a register and stored once, without atomics.  A vertex stops at its first
neighbour in the frontier, which is what makes this direction cheap on the big middle levels.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, nogil=True, cache=True)
def bottom_up_step(offsets, cols, frontier_bits, parent, level, depth, next_bits):
    """One bottom-up level.

    ``frontier_bits``: uint64 words over all global ids (bit ``v`` set when ``v`` is in the frontier).
    ``next_bits``: uint64 words over this rank's local ids, overwritten with the vertices found now.
    Returns ``(awake, awake_edges)``: vertices found and the sum of their degrees.
    """
    # Indices are unsigned on purpose: Numba adds a negative-index (wraparound) check to every signed
    # index, which costs this loop a third of its time.
    one = np.uint64(1)
    nloc = np.uint64(offsets.size - 1)
    awake = 0
    awake_edges = 0
    for w in numba.prange(next_bits.size):
        word = np.uint64(0)
        base = np.uint64(w) * np.uint64(64)
        end = min(nloc, base + np.uint64(64))
        i = base
        while i < end:
            if parent[i] < 0:
                k = np.uint64(offsets[i])
                stop = np.uint64(offsets[i + one])
                while k < stop:
                    u = np.uint64(cols[k])
                    if (frontier_bits[u >> np.uint64(6)] >> (u & np.uint64(63))) & one:
                        parent[i] = u
                        level[i] = depth
                        word |= one << (i - base)
                        awake += 1
                        awake_edges += stop - np.uint64(offsets[i])
                        break
                    k += one
            i += one
        next_bits[w] = word
    return awake, awake_edges
