"""Bottom-up's degree-ordered rows: the structure a search adds to a shard beyond its CSR.

A rank's bottom-up step scans each unvisited vertex's in-neighbours until one is in the frontier; with the
neighbours of highest degree first it meets one sooner (Kronecker scale 20 on one CPU rank: bottom-up levels
about a fifth faster; scale 26 on an H100: the third level 1.7 ms instead of 3.1).  The copy
(``shard.meta["bu_columns"]``) costs 4 bytes per adjacency entry (8 for 64-bit ids).

It is built wherever a graph comes to be searched -- by :func:`~breadth.pipeline.prepare` for a graph
prepared in memory, by :func:`~breadth.io.load_store` for a stored one -- on the device that holds the shard
(CuPy arrays: the GPU kernels of :mod:`breadth.bfs.gpu.kernels`; NumPy: :mod:`breadth.bfs.cpu.bottom_up`),
so that both give the engine the same rows.  A rank of a several-rank graph orders its rows by the *global*
degree of each neighbour: every owner first publishes a byte per owned vertex (its degree bucket) and each
owner gathers all of them (one byte per vertex of the graph).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .id_map import on_device
from .shard import Shard

#: ``shard.meta`` key of the reason a shard went without its degree order (a GPU shard whose device lacked
#: memory for the order's sort); :func:`breadth.pipeline.prepare` and :func:`breadth.io.load_store` warn
#: naming those owners
ORDER_DROPPED = "bottom_up_order_dropped"

#: bytes of a device memory limit per entry of one sort of the degree order (keys, scratch and headroom)
ORDER_BYTES_PER_ENTRY = 32

#: a CPU worker with a memory limit builds the order only while its process stays within this share of the
#: limit, as the shuffle's storage tiers leave room for what their model does not count
#: (:data:`breadth.pipeline.shuffle.memory_plan.TIER_SAFETY`)
HOST_SAFETY = 0.8


def bottom_up_rows(shard: Shard):
    """``(offsets, columns)`` that bottom-up scans: a vertex's in-neighbours, the CSC rows of a directed
    graph (CSR is CSC for an undirected one)."""
    return (shard.in_offsets, shard.in_columns) if shard.directed else (shard.offsets, shard.columns)


def shard_degree_buckets(shard: Shard) -> np.ndarray:
    """The degree bucket of each owned vertex in bottom-up's rows, to be gathered by every owner.

    Parameters
    ----------
    shard : Shard
        A shard with NumPy or CuPy arrays.

    Returns
    -------
    numpy.ndarray
        Host ``uint8`` array of shape ``(shard.num_local,)``: ``63 - bitlength(degree)`` per owned vertex,
        the sort key that puts high-degree neighbours first.
    """
    off = bottom_up_rows(shard)[0]
    if on_device(off):
        import cupy

        from .gpu.kernels import degree_buckets

        return cupy.asnumpy(degree_buckets(off))
    from .cpu.bottom_up import degree_buckets

    return degree_buckets(off)


def order_sort_entries() -> int | None:
    """Entries per sort of a GPU shard's degree order on this worker: ranges sized to the dask-cuda worker's
    device memory limit (8 GB: 250 M entries, 2 GB of keys), or to the device's free memory where less is
    free (the shuffle's pairs may still wait in device memory beside the new shard), so that a limited
    worker's build peaks near its shard instead of three times its columns; ``None`` (one sort) where the
    worker has no limit.  Scale 26 on one H200: 0.63-0.70 s of construction with one sort, 0.75-0.78 s in
    ranges of 2^27 entries."""
    from .device_memory import worker_device_memory_limit
    from .gpu.kernels import free_device_bytes

    limit = worker_device_memory_limit()
    if limit is None:
        return None
    return max(1 << 20, min(limit, free_device_bytes()) // ORDER_BYTES_PER_ENTRY)


def with_bottom_up_order(shard: Shard, buckets: list[np.ndarray] | None = None) -> Shard:
    """The shard with ``meta["bu_columns"]``: its bottom-up rows with each row's neighbours by decreasing
    degree, on the device that holds the shard.

    Parameters
    ----------
    shard : Shard
        NumPy or CuPy arrays; the result's order lives beside them.
    buckets : list of numpy.ndarray, optional
        Every owner's :func:`shard_degree_buckets` in rank order (one byte per vertex of the graph); ``None``
        for a one-rank graph, whose own rows give every degree.

    Returns
    -------
    Shard
        A shallow copy whose ``meta`` holds ``"bu_columns"`` (same length and dtype as the rows' columns).
        Where a GPU cannot build it (its device lacks memory for the sort, or ids are too wide for the sort
        keys) the copy's ``meta[ORDER_DROPPED]`` says why instead: its searches stay right, bottom-up levels
        slower.

    Examples
    --------
    >>> import numpy as np
    >>> from breadth.bfs import Shard
    >>> s = Shard(0, 1, 3, 0, 3, np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0], np.int32),
    ...           np.array([2, 1, 1], np.int32), np.zeros(3, np.int32))
    >>> with_bottom_up_order(s).meta["bu_columns"].tolist()
    [1, 2, 0, 0]
    """
    off, col = bottom_up_rows(shard)
    if on_device(off):
        import cupy

        from .gpu.kernels import degree_ordered_columns

        every = None if buckets is None else cupy.asarray(np.concatenate(buckets))
        ordered = degree_ordered_columns(off, col, every, sort_entries=order_sort_entries())
        if ordered is None:
            return dataclasses.replace(
                shard, meta={**shard.meta, ORDER_DROPPED: "device memory short or ids too wide for its sort keys"})
    else:
        from .cpu.bottom_up import degree_ordered_columns

        if not _host_room_for(col.nbytes + shard.num_vertices):  # the copy, and every vertex's bucket
            return dataclasses.replace(
                shard, meta={**shard.meta, ORDER_DROPPED: "the worker's memory limit leaves no room for it"})
        ordered = degree_ordered_columns(off, col, None if buckets is None else np.concatenate(buckets))
    meta = {k: v for k, v in shard.meta.items() if k != ORDER_DROPPED}
    return dataclasses.replace(shard, meta={**meta, "bu_columns": ordered})


def _host_room_for(nbytes: int) -> bool:
    """Whether the Dask worker running this task stays within :data:`HOST_SAFETY` of its memory limit after
    allocating ``nbytes`` more (always, outside a worker or without a limit)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return True
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return True
    import psutil

    return psutil.Process().memory_info().rss + nbytes <= HOST_SAFETY * limit


def add_bottom_up_order(client, shards: list, workers: list[str], token: str) -> list:
    """Bottom-up's degree-ordered rows on every shard of a graph, each built on its rank's worker.

    Parameters
    ----------
    client : distributed.Client
    shards : list of distributed.Future
        Rank ``r``'s :class:`~breadth.bfs.Shard`, held by worker ``workers[r % len(workers)]``.
    workers : list of str
        Worker addresses.
    token : str
        Makes the new tasks' keys unique to this graph.

    Returns
    -------
    list of distributed.Future
        The ordered shards, finished, in rank order (the given futures are left as they were).
    """
    from distributed import wait

    where = [dict(workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False)
             for r in range(len(shards))]
    if len(shards) == 1:
        ordered = [client.submit(with_bottom_up_order, shards[0], key=f"bu-shard-{token}-0", **where[0])]
    else:
        buckets = [client.submit(shard_degree_buckets, s, key=f"buckets-{token}-{r}", **where[r])
                   for r, s in enumerate(shards)]
        ordered = [client.submit(with_bottom_up_order, s, buckets, key=f"bu-shard-{token}-{r}", **where[r])
                   for r, s in enumerate(shards)]
    wait(ordered)
    return ordered


def warn_dropped_order(reasons: list, stacklevel: int = 1) -> list[int]:
    """One ``RuntimeWarning`` naming the ranks whose shards went without the order, and why.

    Parameters
    ----------
    reasons : list of str or None
        Each rank's ``shard.meta.get(ORDER_DROPPED)``, in rank order.
    stacklevel : int
        As :func:`warnings.warn`'s, counted from the function that calls this one (1: the calling line).

    Returns
    -------
    list of int
        The ranks without the order (empty: no warning).
    """
    dropped = [r for r, why in enumerate(reasons) if why]
    if dropped:
        warnings.warn(f"bottom-up's degree-ordered rows were not built for owner(s) {dropped} "
                      f"({reasons[dropped[0]]}): their searches are right but slower in bottom-up levels",
                      RuntimeWarning, stacklevel=stacklevel + 1)
    return dropped
