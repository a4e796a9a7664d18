"""Many searches through the API in one process leave its memory flat: the process of a
:func:`~breadth.pipeline.cluster.cluster.local_cluster`, which hosts the scheduler, keeps nothing per search beyond
Dask's bounded logs (:func:`~breadth.pipeline.cluster.cluster.scheduler_memory_settings`)."""

from __future__ import annotations

import gc

import pytest


def test_searches_in_one_process_do_not_grow_it():
    psutil = pytest.importorskip("psutil")
    from breadth.bfs import bfs
    from breadth.pipeline import kronecker, local_cluster, prepare

    client = local_cluster(workers=1)
    try:
        g = prepare(kronecker(8, seed=1), client)
        for i in range(60):  # Dask's bounded logs fill (100 entries, two a search) and its caches warm up
            bfs(g, i)
        proc, n = psutil.Process(), 200
        gc.collect()
        before = proc.memory_info().rss
        for i in range(n):
            bfs(g, i % 256)
        gc.collect()
        per_search = (proc.memory_info().rss - before) / n
        # measured: 0.2-1.2 KiB; with Dask's defaults 20-30 KiB over these searches (its spans and event log)
        assert per_search < 4096, f"{per_search / 1024:.1f} KiB a search"
    finally:
        client.close()
        client.cluster.close()
