"""Shared fixtures: a one-worker local Dask cluster and helpers for independent oracles."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
