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


def _blocks_on(shards, kind, module):
    """Every rank's 2D (2 x 2 grid) or delegates (degree >= 16) blocks, cut and built in this process from
    ``shards`` moved to array ``module``, as the ranks' workers do (:mod:`breadth.bfs.partitioned`)."""
    from breadth.bfs.delegate_blocks import build_delegate_blocks, delegate_pieces, owned_delegates
    from breadth.bfs.grid_blocks import build_grid_blocks, grid_pieces

    shards = [s.to(module) for s in shards]
    if kind == "2d":
        grid = (2, 2)
        cut = [grid_pieces(s, grid) for s in shards]
        return [build_grid_blocks(s, grid, *[cut[k * 2 + r % 2][r // 2] for k in range(2)]).blocks
                for r, s in enumerate(shards)]
    delegates = np.concatenate([owned_delegates(s, 16) for s in shards])
    cut = [delegate_pieces(s, delegates) for s in shards]
    return [build_delegate_blocks(s, delegates, 16, *[cut[q][r] for q in range(len(shards))]).blocks
            for r, s in enumerate(shards)]


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("kind", ["2d", "delegates"])
def test_blocks_built_on_the_device_equal_the_host_ones(cluster, kind, directed):
    """A GPU rank cuts and builds its blocks in device memory: the same arrays as the host build."""
    edges = kronecker(12, seed=9).edges.compute(scheduler="sync")
    g = prepare(from_dask_array(edges, 1 << 12, directed=directed), cluster, nparts=4)
    shards = cluster.gather(g.shards)
    host, device = _blocks_on(shards, kind, np), _blocks_on(shards, kind, cp)
    for h, d in zip(host, device):
        for name, a in vars(h).items():
            if hasattr(a, "shape"):
                assert isinstance(getattr(d, name), cp.ndarray), name
                np.testing.assert_array_equal(cp.asnumpy(getattr(d, name)), a, err_msg=name)
            else:
                assert getattr(d, name) == a, name
    g.release()
