"""Edge lists as decimal text, fast enough to write the benchmarks' gigabyte inputs (SNAP files for the
readers, GAP's ``.el`` files): Numba formats a chunk of edges into a byte buffer."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def format_edges(edges, out, sep):
    """``u<sep>v\\n`` lines of the non-negative ids ``edges`` (``(m, 2)``) into the uint8 buffer ``out``
    (at least ``m * (2 * digits + 2)`` bytes); ``sep`` a byte (9 tab, 32 space).  Returns the bytes used."""
    pos = 0
    tmp = np.empty(24, np.uint8)
    for i in range(edges.shape[0]):
        for j in range(2):
            x = edges[i, j]
            k = 0
            while True:
                tmp[k] = 48 + x % 10
                x //= 10
                k += 1
                if x == 0:
                    break
            for t in range(k - 1, -1, -1):
                out[pos] = tmp[t]
                pos += 1
            out[pos] = sep if j == 0 else 10
            pos += 1
    return pos
