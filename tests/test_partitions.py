"""2D R x C and delegate partitions: levels against scipy on 1, 2, 4 and 6 CPU ranks, directed and undirected,
Kronecker and real graphs, every search validated; the partitioning's description and its errors.

One 6-worker local cluster serves the module (a graph of P shards runs its ranks on the first P workers).
"""

from __future__ import annotations

import numpy as np
import pytest

from breadth.bfs import run_session
from breadth.bfs.graph500.validate import validate_rank
from breadth.bfs.partitioning import Partitioning, default_grid, parse_grid
from breadth.pipeline import from_dask_array, kronecker, prepare

from conftest import load_snap, scipy_levels

NWORKERS = 6
KINDS = ["2d", "delegates"]


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    lc = LocalCluster(n_workers=NWORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"NUMBA_NUM_THREADS": "1"})
    c = Client(lc)
    yield c
    c.close()
    lc.close()


def _search_body(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((engine.level.copy(), engine.parent.copy(), [r.direction for r in recs],
                    validate_rank(engine, int(root)), sum(r.bytes_sent for r in recs)))
    return out


def _run(graph, roots, **engine_kw):
    """Per root: global levels and parents, the directions taken, validation counts, bytes sent (all ranks)."""
    parts = run_session(graph, _search_body, roots, protocol="tcp", timeout=30.0, engine_kw=engine_kw)
    return [(np.concatenate([p[i][0] for p in parts]), np.concatenate([p[i][1] for p in parts]), parts[0][i][2],
             parts[0][i][3], sum(p[i][4] for p in parts)) for i in range(len(roots))]


def _roots(edges: np.ndarray, n: int) -> list[int]:
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    nz = np.flatnonzero(deg)
    return [int(nz[0]), int(nz[len(nz) // 3]), int(np.argmax(deg))]


def _check(graph, edges, n, roots, directed, **engine_kw):
    res = _run(graph, roots, **engine_kw)
    for root, (level, parent, _, viol, _) in zip(roots, res):
        np.testing.assert_array_equal(level, scipy_levels(edges, n, root, directed=directed))
        assert not any(viol.values()), viol
        assert parent[root] == root
    return res


@pytest.fixture(scope="module", params=[False, True], ids=["undirected", "directed"])
def kron11(request):
    directed = request.param
    edges = kronecker(11, seed=5).edges.compute(scheduler="sync")
    n = 1 << 11
    return from_dask_array(edges, n, directed=directed), edges, n, directed


@pytest.mark.parametrize("nparts", [1, 2, 4, 6])
@pytest.mark.parametrize("kind", KINDS)
def test_kronecker_levels_against_scipy(cluster, kron11, kind, nparts):
    el, edges, n, directed = kron11
    kw = {"delegate_degree": 16} if kind == "delegates" else {}
    g = prepare(el, cluster, nparts=nparts, partition=kind, **kw)
    assert g.partitioning.kind == kind and g.nparts == nparts
    res = _check(g, edges, n, _roots(edges, n), directed)
    assert (res[2][4] > 0) == (nparts > 1)  # ranks exchanged data (one rank sends nothing)
    g.release()


@pytest.mark.parametrize("grid", [(1, 4), (4, 1), (2, 3), (3, 2)])
def test_every_grid_shape(cluster, kron11, grid):
    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=grid[0] * grid[1], partition="2d", grid=grid)
    assert g.partitioning.grid == grid
    _check(g, edges, n, _roots(edges, n), directed)
    g.release()


@pytest.mark.parametrize("bottom_up", ["row", "owner"])
@pytest.mark.parametrize("alpha,beta,expect", [(1e-9, 18.0, {"td"}), (1e9, 1e9, {"bu"}), (None, None, {"td", "bu"})])
def test_2d_directions(cluster, kron11, alpha, beta, expect, bottom_up):
    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=4, partition="2d")
    for _, _, dirs, _, _ in _check(g, edges, n, _roots(edges, n), directed, alpha=alpha, beta=beta,
                                   bottom_up=bottom_up)[2:]:
        assert set(dirs) == expect  # the biggest root
    g.release()


@pytest.mark.parametrize("degree", [1, 4, 10 ** 9])
def test_delegate_thresholds(cluster, kron11, degree):
    """Every vertex a delegate, some, none: the same levels."""
    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=4, partition="delegates", delegate_degree=degree)
    _check(g, edges, n, _roots(edges, n), directed)
    g.release()


@pytest.mark.parametrize("name,directed", [("facebook_combined.txt.gz", False), ("Wiki-Vote.txt", True)])
@pytest.mark.parametrize("nparts", [4, 6])
@pytest.mark.parametrize("kind", KINDS)
def test_real_graphs(cluster, name, directed, kind, nparts):
    edges = load_snap(name)  # sparse ids stay as they are: isolated vertices
    n = int(edges.max()) + 1
    g = prepare(from_dask_array(edges, n, directed=directed), cluster, nparts=nparts, partition=kind)
    _check(g, edges, n, _roots(edges, n), directed)
    g.release()


@pytest.mark.parametrize("kind", KINDS)
def test_multi_source_and_depth_limit(cluster, kron11, kind):
    from breadth.bfs import bfs

    from conftest import scipy_multi_levels

    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=4, partition=kind)
    src = _roots(edges, n)
    np.testing.assert_array_equal(bfs(g, sources=src).level, scipy_multi_levels(edges, n, src, directed=directed))
    np.testing.assert_array_equal(bfs(g, sources=src, depth_limit=1).level,
                                  scipy_multi_levels(edges, n, src, directed=directed, depth_limit=1))
    g.release()


def test_partitioning_description():
    assert Partitioning("2d").resolved(6).grid == (2, 3) and default_grid(7) == (1, 7) and default_grid(4) == (2, 2)
    assert parse_grid("3x2") == (3, 2)
    p = Partitioning("delegates").resolved(4)
    assert Partitioning.from_dict(p.as_dict()) == p and Partitioning.from_dict(None) == Partitioning()
    with pytest.raises(ValueError, match="--grid 3x2 needs 6 workers, got 4"):
        Partitioning("2d", (3, 2)).resolved(4)
    for bad in ("3", "0x2", "ax2", "2x2x2"):
        with pytest.raises(ValueError, match="ROWSxCOLUMNS"):
            parse_grid(bad)
    with pytest.raises(ValueError, match="unknown partition"):
        Partitioning("3d")
    with pytest.raises(ValueError, match="for partition '2d'"):
        Partitioning("delegates", grid=(2, 2))


def test_prepare_refuses_a_grid_that_does_not_fit(cluster, kron11):
    el, *_ = kron11
    with pytest.raises(ValueError, match="--grid 3x2 needs 6 workers, got 4"):
        prepare(el, cluster, nparts=4, partition="2d", grid=(3, 2))


@pytest.mark.parametrize("kind,grid", [("2d", (1, 4)), ("delegates", None)])
def test_store_written_partitioned_is_searched_so(cluster, kron11, tmp_path, kind, grid):
    from breadth.io.errors import StoreError
    from breadth.io.shard_store import load_store, read_manifest, write_store

    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=4, partition=kind, grid=grid)
    write_store(g, str(tmp_path / "s"))
    g.release()
    assert read_manifest(str(tmp_path / "s"))["partitioning"] == g.partitioning.as_dict()
    h = load_store(str(tmp_path / "s"), cluster, nparts=4)
    assert h.partitioning == g.partitioning
    _check(h, edges, n, _roots(edges, n), directed)
    h.release()
    if kind == "2d":
        with pytest.raises(StoreError, match="1x4 grid .* needs 4 workers, got 3"):
            load_store(str(tmp_path / "s"), cluster, nparts=3)


def test_partition_graph_again(cluster, kron11):
    """A partitioned graph cut another way (bench STORE --partition): 2D -> delegates -> 1D."""
    from breadth.bfs.partitioned import partition_graph
    from breadth.bfs.partitioning import Partitioning

    el, edges, n, directed = kron11
    g = prepare(el, cluster, nparts=4, partition="2d")
    for p in (Partitioning("delegates", delegate_degree=8), Partitioning()):
        h = partition_graph(g, p)
        assert h.partitioning.kind == p.kind
        kinds = cluster.gather([cluster.submit(lambda s: (s.partitioning.kind, s.blocks is None), f, pure=False)
                                for f in h.shards])
        assert kinds == [(p.kind, p.kind == "1d")] * 4
        _check(h, edges, n, _roots(edges, n), directed)
    g.release()
