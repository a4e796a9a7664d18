"""Connecting to a Dask cluster, or starting the embedded default: a local cluster on this machine."""

from __future__ import annotations

import os


def local_cluster(workers: int = 1, threads_per_worker: int | None = None, protocol: str = "tcp",
                  memory_limit: str | int = "auto", local_directory: str | None = None):
    """Start a ``distributed.LocalCluster`` of ``workers`` processes and return a connected Client.

    Threads default to ``cores // workers`` (at least one): a BFS rank runs Numba kernels on all of
    its worker's threads.

    >>> from breadth.pipeline import local_cluster
    >>> client = local_cluster(workers=2)          # doctest: +SKIP
    """
    from distributed import Client, LocalCluster

    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // workers)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True, protocol=protocol,
                           memory_limit=memory_limit, dashboard_address=None, local_directory=local_directory,
                           env={"NUMBA_NUM_THREADS": str(threads)} if threads else None)
    return Client(cluster)


def connect(scheduler: str | None = None, workers: int = 1, **kw):
    """Client for ``scheduler`` (an address), or for a new local cluster when it is ``None``."""
    if scheduler:
        from distributed import Client

        return Client(scheduler)
    return local_cluster(workers=workers, **kw)


def worker_addresses(client) -> list[str]:
    """Worker addresses in a stable order (rank r runs on the r-th)."""
    return sorted(client.scheduler_info()["workers"])
