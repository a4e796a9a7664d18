"""Grouping one owner's ``[row, column]`` entries by row batch on the CPU (a Numba counting sort), so that
an owner builds its shard one row batch at a time; :func:`breadth.pipeline.kernels.array_backend.sort_by_batch_xp`
is the array-module version (CuPy on GPUs) with the same result.

>>> import numpy as np
>>> local, offsets = sort_by_batch_numpy(np.array([[5, 1], [4, 2], [7, 0]]), 4, 2, 2, np.int32)
>>> local.tolist(), offsets.tolist()
([[1, 1], [0, 2], [3, 0]], [0, 2, 3])
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _counting_sort_by_batch(entries, lo, batch_rows, nbatches, out):
    """Counting sort of ``[row, col]`` entries by ``(row - lo) // batch_rows`` into ``out`` (local rows)."""
    cnt = np.zeros(nbatches + 1, np.int64)
    for i in range(entries.shape[0]):
        cnt[(entries[i, 0] - lo) // batch_rows + 1] += 1
    for b in range(nbatches):
        cnt[b + 1] += cnt[b]
    cur = cnt[:-1].copy()
    for i in range(entries.shape[0]):
        b = (entries[i, 0] - lo) // batch_rows
        out[cur[b], 0] = entries[i, 0] - lo
        out[cur[b], 1] = entries[i, 1]
        cur[b] += 1
    return cnt


def sort_by_batch_numpy(entries: np.ndarray, lo: int, batch_rows: int, nbatches: int, dtype) -> tuple:
    """The CPU's grouping by row batch (a Numba counting sort): ``(local, offsets)`` as
    :func:`sort_by_batch_xp` returns them, in one pass over the entries."""
    out = np.empty(entries.shape, dtype)
    return out, _counting_sort_by_batch(entries, lo, batch_rows, nbatches, out)
