"""A dask-cuda worker's device memory limit, as the worker itself keeps it.

Read by the shuffle, which sizes its tier to it (:func:`breadth.pipeline.shuffle.shuffle.cluster_memory`), and by
the GPU build, which sorts bottom-up's degree order in ranges sized to it
(:func:`breadth.bfs.search_order.order_sort_entries`).
"""

from __future__ import annotations


def device_memory_limit(data) -> int | None:
    """The ``device_memory_limit`` (bytes) of a dask-cuda worker whose data store is ``data``; ``None``
    without one (or off dask-cuda).  dask-cuda keeps it as the threshold of the zict ``Buffer`` between its
    device and host stores (``DeviceHostFile.device_buffer``); a worker without a limit has a dict there."""
    try:
        import zict
        from dask_cuda.device_host_file import DeviceHostFile
    except ImportError:
        return None
    if isinstance(data, DeviceHostFile) and isinstance(data.device_buffer, zict.Buffer):
        return int(data.device_buffer.n)
    return None


def worker_device_memory_limit() -> int | None:
    """The ``device_memory_limit`` (bytes) of the dask-cuda worker running the calling task; ``None`` outside
    a task, off dask-cuda, or without a limit."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return None
    return device_memory_limit(worker.data)
