"""The Dask workers a session or a store runs on, asked of the scheduler (the lowest layer's one Dask query:
``breadth.bfs`` and ``breadth.io`` use it, ``breadth.pipeline.cluster.cluster`` re-exports it)."""

from __future__ import annotations


def workers_info(client) -> dict[str, dict]:
    """The scheduler's record of every worker now in the cluster, by address (``memory_limit``,
    ``nthreads``, ``status``, ...), fetched fresh.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached copy after refreshing
    it, and the client's periodic refresh (every 2 s, asking for no workers) can overwrite the copy in
    between, so a busy process sometimes reads an empty cluster.

    >>> sorted(workers_info(client))                 # doctest: +SKIP
    ['tcp://127.0.0.1:40001', 'tcp://127.0.0.1:40002']
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def worker_addresses(client) -> list[str]:
    """Worker addresses in a stable order (rank r runs on the r-th)."""
    return sorted(workers_info(client))
