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
    nloc = offsets.size - 1
    awake = 0
    awake_edges = 0
    for w in numba.prange(next_bits.size):
        word = np.uint64(0)
        end = min(nloc, (w + 1) * 64)
        for i in range(w * 64, end):
            if parent[i] >= 0:
                continue
            for k in range(offsets[i], offsets[i + 1]):
                u = np.int64(cols[k])
                if (frontier_bits[u >> 6] >> np.uint64(u & 63)) & np.uint64(1):
                    parent[i] = u
                    level[i] = depth
                    word |= np.uint64(1) << np.uint64(i - w * 64)
                    awake += 1
                    awake_edges += offsets[i + 1] - offsets[i]
                    break
        next_bits[w] = word
    return awake, awake_edges
