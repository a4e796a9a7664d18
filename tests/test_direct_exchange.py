"""The memory tier's pieces sent owner to owner over the ranks' own transport
(:mod:`breadth.pipeline.build.direct_exchange`) give the shards of Dask's path, bit for bit, on CPU ranks over TCP;
the setting refuses a graph it cannot serve; a worker lost during the exchange ends it in bounded time.
(GPU ranks sharing one GPU, over UCX: ``tests/test_gpu_shared_ranks.py``.)"""

from __future__ import annotations

import dask
import numpy as np
import pytest

ARRAYS = ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns")


def _prepare(el, client, how: str, **kw):
    stages: dict = {}
    with dask.config.set({"breadth.shuffle.exchange": how}):
        g = __import__("breadth.pipeline", fromlist=["prepare"]).prepare(el, client, stages=stages, **kw)
    return g, stages["exchange"]


@pytest.mark.parametrize("directed", [False, True])
def test_direct_exchange_gives_the_dask_paths_shards(lclient, directed):
    from breadth.bfs import bfs
    from breadth.pipeline import kronecker

    el = kronecker(13, seed=6, chunk_edges=20_000)  # several chunks on each worker
    el.directed = directed
    a, how_a = _prepare(el, lclient, "dask")
    b, how_b = _prepare(el, lclient, "direct")
    assert (how_a, how_b) == ("dask", "direct (tcp)")
    for x, y in zip(lclient.gather(a.shards), lclient.gather(b.shards)):
        for k in ARRAYS:
            u, v = getattr(x, k), getattr(y, k)
            assert (u is None) == (v is None) and (u is None or np.array_equal(u, v)), k
        assert np.array_equal(x.meta["bu_columns"], y.meta["bu_columns"])
    assert (a.num_edges, a.num_self_loops) == (b.num_edges, b.num_self_loops)
    np.testing.assert_array_equal(bfs(a, 5).level, bfs(b, 5).level)
    a.release()
    b.release()


def test_cpu_workers_take_dasks_path_unless_told(lclient):
    from breadth.pipeline import kronecker

    g, how = _prepare(kronecker(10, seed=1), lclient, "auto")
    assert how == "dask"  # on CPUs Dask's comm is the ranks' TCP already
    g.release()


def test_direct_refuses_a_graph_it_cannot_serve(lclient):
    from breadth.pipeline import kronecker

    with pytest.raises(ValueError, match=r"breadth.shuffle.exchange='direct' needs the memory tier and one owner "
                                         r"per worker \(tier 'memory', 1 owners on 2 workers\)"):
        _prepare(kronecker(10, seed=1), lclient, "direct", nparts=1)
    with pytest.raises(ValueError, match="must be one of auto, direct, dask"):
        _prepare(kronecker(10, seed=1), lclient, "sideways")
