"""Shared fixtures: a one-worker local Dask cluster and helpers for independent oracles."""

from __future__ import annotations

import gzip
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def gpu_module(min_devices: int = 1):
    """``(cupy, pytestmark)`` for a GPU test module: the module is skipped where CuPy does not import, its
    tests where CuPy sees fewer than ``min_devices`` CUDA devices (none without a driver) -- skipped, not
    faked, as on CI.

    >>> cp, pytestmark = gpu_module()                                # doctest: +SKIP
    """
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (GPU tests run on a GPU machine)")
    try:
        ndev = cp.cuda.runtime.getDeviceCount()
    except Exception:  # CuPy without a driver
        ndev = 0
    reason = "no CUDA device visible" if min_devices == 1 else f"fewer than {min_devices} CUDA devices visible"
    return cp, pytest.mark.skipif(ndev < min_devices, reason=reason)


@pytest.fixture(scope="session")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def lclient():
    """Two in-process workers, one thread each: several chunks and owners without process start-up."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def data_file(name: str) -> Path:
    """``../shared/data/NAME``; the calling test is skipped, with the reason, when the file is absent (a clone
    without the shared data beside it)."""
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} not present (the shared real graphs are not beside this checkout)")
    return path


def load_snap(name: str) -> np.ndarray:
    """A SNAP file of ../shared/data as an (m, 2) int64 array, read independently of breadth.io."""
    path = data_file(name)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        rows = [ln.split()[:2] for ln in f if ln.strip() and not ln.startswith("#")]
    return np.array(rows, dtype=np.int64)


def scipy_levels(edges: np.ndarray, n: int, root: int, directed: bool = False) -> np.ndarray:
    """Hop distance from ``root`` by scipy.sparse.csgraph (-1 unreached): the BFS oracle."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import shortest_path

    a = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n)).tocsr()
    d = shortest_path(a, directed=directed, unweighted=True, indices=root)
    return np.where(np.isinf(d), -1, d).astype(np.int64)


def scipy_multi_levels(edges: np.ndarray, n: int, sources, directed: bool = False,
                       depth_limit: int | None = None) -> np.ndarray:
    """Hop distance from the nearest of ``sources`` (-1 unreached, or farther than ``depth_limit``), by
    scipy.sparse.csgraph from a super-source: an extra vertex ``n`` with an edge to every source, so that
    its distances minus one are the distances to the nearest source."""
    src = np.unique(np.asarray(sources, np.int64))
    extra = np.stack([np.full(src.size, n, np.int64), src], axis=1)
    lv = scipy_levels(np.concatenate([np.asarray(edges, np.int64).reshape(-1, 2), extra]), n + 1, n, directed)
    lv = np.where(lv >= 1, lv - 1, -1)[:n]
    if depth_limit is not None:
        lv[lv > depth_limit] = -1
    return lv


def assert_bfs_parents(edges: np.ndarray, n: int, level: np.ndarray, parent: np.ndarray, sources,
                       directed: bool = False) -> None:
    """``parent`` is a BFS forest of ``level``: each source its own parent, every other reached vertex's
    parent joined to it by an edge (parent -> vertex when directed) one level up, so that every parent
    chain ends in a source; unreached vertices have parent -1."""
    import scipy.sparse as sp

    level, parent = np.asarray(level), np.asarray(parent, np.int64)
    src = np.unique(np.asarray(sources, np.int64))
    assert (parent[src] == src).all() and (level[src] == 0).all()
    assert (parent[level < 0] == -1).all()
    v = np.flatnonzero(level > 0)
    p = parent[v]
    assert (p >= 0).all(), "a reached vertex without a parent"
    np.testing.assert_array_equal(level[p], level[v] - 1)
    e = np.asarray(edges, np.int64)
    a = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    if not directed:
        a = a + a.T
    if v.size:
        assert (np.asarray(a[p, v]).ravel() > 0).all(), "a parent that is not an in-neighbour"


def one_shard(edges: np.ndarray, n: int, directed: bool):
    """The single rank's shard of ``(m, 2)`` edges on ``n`` vertices, built as preparation builds it."""
    from breadth.bfs.shard import block_size
    from breadth.pipeline.kernels.build_csr import build_shard
    from breadth.pipeline.kernels.partition import split_by_owner

    return build_shard(0, 1, n, split_by_owner(edges, n, block_size(n, 1), 1, directed), directed)


def roots_with_edges(edges: np.ndarray, n: int, k: int, seed: int = 0) -> np.ndarray:
    """``k`` distinct random vertices that have an edge other than a self-loop."""
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    return np.random.default_rng(seed).choice(np.flatnonzero(deg), k, replace=False)


def closing(client):
    """A module fixture's body for a client of breadth's cluster helpers (``local_cluster``,
    ``local_cuda_cluster``): yield it, then close it and its cluster.

    >>> @pytest.fixture(scope="module")
    ... def client():
    ...     yield from closing(local_cuda_cluster(workers=2))
    """
    yield client
    cluster = client.cluster
    client.close()
    cluster.close()


def kill_rank1_mid_search(engine, setup_s, roots, after_s: float = 1.0, until_s: float = 60.0) -> int:
    """A session body (``run_session(g, kill_rank1_mid_search, roots, ...)``): rank 1's worker process is
    SIGKILLed ``after_s`` seconds in while every rank searches ``roots`` in turn, the same number of searches
    on every rank (the loop ends on the ranks' common clock, after ``until_s`` seconds at most)."""
    comm = engine.comm
    if comm.rank == 1:
        threading.Timer(after_s, os.kill, (os.getpid(), signal.SIGKILL)).start()
    t0, i = time.perf_counter(), 0
    while comm.allreduce(np.array([time.perf_counter() - t0]), "max")[0] < until_s:
        engine.search(int(roots[i % len(roots)]))
        i += 1
    return i
