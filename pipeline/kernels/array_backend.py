"""The array calls of the shuffle to owners that differ between NumPy (CPU) and CuPy (GPU).

Everything else in :mod:`breadth.pipeline.shuffle.shuffle_tiers` and :mod:`breadth.pipeline.build.build_owner` is
written once over an array module ``xp``; :func:`backend` binds the few calls that are not (CuPy is
imported only for ``device="gpu"``).  Also here: grouping one owner's ``[row, column]`` entries by row
batch, the step that lets an owner build its shard one row batch at a time.

>>> import numpy as np
>>> local, offsets = sort_by_batch_xp(np.array([[5, 1], [4, 2], [7, 0]]), 4, 2, 2, np.int32, np)
>>> local.tolist(), offsets.tolist()
([[1, 1], [0, 2], [3, 0]], [0, 2, 3])

No Numba here (the CPU's counting sort is :mod:`breadth.pipeline.kernels.batch_sort`): GPU workers, and CPU workers
of the NumPy backend, never load it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from breadth.bfs.shard import column_dtype


def local_dtype(n: int) -> np.dtype:
    """Dtype of local ``[row - lo, column]`` pairs: the shard's column dtype (int32 when every id of ``n``
    vertices fits), since a pair holds a column id."""
    return column_dtype(n)


def sort_by_batch_xp(entries, lo: int, batch_rows: int, nbatches: int, dtype, xp) -> tuple[Any, np.ndarray]:
    """Group ``(k, 2)`` ``[row, column]`` entries (global rows of one owner) by row batch
    ``(row - lo) // batch_rows`` with array operations (an argsort of the batch ids), for any ``xp``.

    Returns ``(local, offsets)``: ``(k, 2)`` ``dtype`` entries ``[row - lo, column]`` in batch order (the
    order within a batch is unspecified: the builder sorts rows) and int64 host ``(nbatches + 1,)`` batch
    offsets.  :func:`sort_by_batch_numpy` is the CPU's faster counting sort with the same result.
    """
    k = int(entries.shape[0])
    local = xp.empty((k, 2), dtype)
    rows = entries[:, 0] - entries.dtype.type(lo)  # same dtype as the entries: no widening copy
    offsets = np.zeros(nbatches + 1, np.int64)
    if nbatches == 1 or k == 0:
        local[:, 0] = rows
        local[:, 1] = entries[:, 1]
        offsets[1:] = k
        return local, offsets
    # rows < num_local <= the dtype's max, so a batch size clamped to that max still gives batch 0
    batch = rows // entries.dtype.type(min(batch_rows, np.iinfo(entries.dtype).max))
    order = xp.argsort(batch)
    counts = xp.bincount(batch, minlength=nbatches)
    del batch
    local[:, 0] = rows[order]
    local[:, 1] = entries[order, 1]
    np.cumsum(to_numpy(counts), out=offsets[1:])
    return local, offsets


def to_numpy(a) -> np.ndarray:
    """A host NumPy array of ``a`` (a CuPy array is copied to the host)."""
    return a.get() if type(a).__module__.partition(".")[0] == "cupy" else np.asarray(a)


class Backend(NamedTuple):
    """The calls that differ between NumPy and CuPy; everything else is written over ``xp``."""

    xp: Any  # numpy or cupy
    split: Callable  # split_by_owner(edges, n, block, nparts, directed) -> list[Piece] (entries on the device)
    sort_by_batch: Callable  # (entries, lo, batch_rows, nbatches, dtype) -> (local entries, int64 host offsets)
    csr: Callable  # csr_from_entries(entries, lo, num_local, n) -> (offsets, columns, multiplicity)
    to_device: Callable  # host NumPy (or device) array -> xp array
    to_host: Callable  # xp array -> host NumPy
    sync: Callable | None  # waits for the device (stage timings), None on the CPU
    finish: Callable | None  # shard -> shard: extra structure built with the shard (GPU bottom-up order)


def backend(device: str, jit: bool = True) -> Backend:
    """The :class:`Backend` of ``device`` (``"cpu"`` or ``"gpu"``; CuPy is imported only for the GPU).
    ``jit=False`` on the CPU: the NumPy twins of the Numba kernels (:mod:`breadth.pipeline.kernels.build_csr_numpy`),
    so that the worker never imports Numba (the GPU path never does)."""
    if device == "gpu":
        import cupy as cp

        from .build_csr_gpu import csr_from_entries_gpu, split_by_owner_gpu

        return Backend(cp, split_by_owner_gpu,
                       lambda e, lo, br, nb, dt: sort_by_batch_xp(e, lo, br, nb, dt, cp),
                       csr_from_entries_gpu, cp.asarray, cp.asnumpy, cp.cuda.get_current_stream().synchronize,
                       _gpu_bottom_up_order)
    if device != "cpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    if not jit:
        from .build_csr_numpy import csr_from_entries_numpy, split_by_owner_numpy

        return Backend(np, split_by_owner_numpy, lambda e, lo, br, nb, dt: sort_by_batch_xp(e, lo, br, nb, dt, np),
                       csr_from_entries_numpy, np.asarray, np.asarray, None, None)
    from .batch_sort import sort_by_batch_numpy
    from .build_csr import csr_from_entries
    from .partition import split_by_owner

    return Backend(np, split_by_owner, sort_by_batch_numpy, csr_from_entries, np.asarray, np.asarray, None, None)


def _gpu_bottom_up_order(shard):
    """As :func:`~breadth.pipeline.kernels.build_csr_gpu.build_shard_gpu` does for one rank: bottom-up's
    degree-ordered rows, built with the shard so that construction time counts them (several ranks get
    theirs from :func:`~breadth.pipeline.prepare`, which gathers every owner's degrees)."""
    if shard.nparts == 1:
        from breadth.bfs.search_order import with_bottom_up_order

        return with_bottom_up_order(shard)
    return shard
