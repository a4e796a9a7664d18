"""2D and delegate partitions searched by GPU ranks (CuPy arrays, the same engines as CPU ranks): 1, 2 and 4
ranks sharing one GPU over TCP, directed and undirected, levels against scipy and every search validated on
the device.  The shards are prepared on the CPU and moved to the GPU by the engines (``Shard.to``).

Skipped (not faked) where CuPy or a CUDA device is absent, as on CI; run on a GPU machine.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module()

from breadth.bfs import run_session  # noqa: E402
from breadth.bfs.graph500.validate import validate_rank  # noqa: E402
from breadth.pipeline import from_dask_array, kronecker, prepare  # noqa: E402

from conftest import scipy_levels  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    # four CPU worker processes that all see GPU 0: GPU ranks sharing one device, as TCP allows
    lc = LocalCluster(n_workers=4, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"NUMBA_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "0"})
    c = Client(lc)
    yield c
    c.close()
    lc.close()


def _body(engine, setup_s, roots):
    assert engine.b.name == "gpu"
    out = []
    for root in roots:
        engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root))))
    return out


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("nparts", [1, 2, 4])
@pytest.mark.parametrize("kind", ["2d", "delegates"])
def test_gpu_ranks_levels_against_scipy(cluster, kind, nparts, directed):
    edges = kronecker(12, seed=9).edges.compute(scheduler="sync")
    n = 1 << 12
    kw = {"delegate_degree": 16} if kind == "delegates" else {}
    g = prepare(from_dask_array(edges, n, directed=directed), cluster, nparts=nparts, partition=kind, **kw)
    g = replace(g, backend="gpu")  # CPU-built shards, searched by GPU ranks
    deg = np.bincount(edges.ravel(), minlength=n)
    roots = [int(np.flatnonzero(deg)[0]), int(np.argmax(deg))]
    parts = run_session(g, _body, roots, protocol="tcp", timeout=60.0)
    for i, root in enumerate(roots):
        level = np.concatenate([p[i][0] for p in parts])
        np.testing.assert_array_equal(level, scipy_levels(edges, n, root, directed=directed))
        for p in parts:
            assert not any(p[i][1].values()), p[i][1]
    g.release()
