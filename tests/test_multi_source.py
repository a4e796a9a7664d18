"""Several sources searched together and depth limits: levels against scipy.sparse.csgraph through a
super-source vertex, parents checked edge by edge, on one shard and on 1-3 worker processes."""

from __future__ import annotations

import numpy as np
import pytest

from breadth.bfs import Engine, bfs
from breadth.pipeline import from_dask_array, kronecker, prepare

from conftest import assert_bfs_parents, closing, one_shard, roots_with_edges, scipy_levels, scipy_multi_levels

SCALE = 11
N = 1 << SCALE


@pytest.fixture(scope="module")
def edges():
    return kronecker(SCALE, seed=21).edges.compute(scheduler="sync")


def _sources(edges, k, seed=0):
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=N)
    # one isolated vertex among the sources when there is one: it is reached (by itself) and reaches nothing
    iso = np.flatnonzero(deg == 0)[:1]
    return np.concatenate([roots_with_edges(edges, N, k, seed), iso])


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("alpha,beta", [(15.0, 18.0), (0.0, 18.0), (1e9, 1e9)])  # mixed, top-down, bottom-up
@pytest.mark.parametrize("k", [1, 5, 40])
def test_engine_several_sources_equal_super_source(edges, directed, alpha, beta, k):
    shard = one_shard(edges, N, directed)
    eng = Engine(shard, alpha=alpha, beta=beta)
    src = _sources(edges, k, seed=k)
    recs = eng.search(src)
    want = scipy_multi_levels(edges, N, src, directed)
    np.testing.assert_array_equal(eng.level, want)
    assert_bfs_parents(edges, N, eng.level, eng.parent, src, directed)
    assert recs[0].frontier == np.unique(src).size  # the sources are level 0 together
    if alpha == 0.0:
        assert {r.direction for r in recs} == {"td"}
    if alpha == 1e9:
        assert {r.direction for r in recs} == {"bu"}


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("limit", [0, 1, 2, 3])
def test_engine_depth_limit(edges, directed, limit):
    shard = one_shard(edges, N, directed)
    src = _sources(edges, 3, seed=7)
    eng = Engine(shard)
    recs = eng.search(src, depth_limit=limit)
    np.testing.assert_array_equal(eng.level, scipy_multi_levels(edges, N, src, directed, depth_limit=limit))
    assert len(recs) <= limit
    assert_bfs_parents(edges, N, eng.level, eng.parent, src, directed)
    # a single root with a limit, and the same engine without one afterwards (the limit does not stick)
    eng.search(int(src[0]), depth_limit=limit)
    want = scipy_levels(edges, N, int(src[0]), directed)
    want[want > limit] = -1
    np.testing.assert_array_equal(eng.level, want)
    eng.search(int(src[0]))
    np.testing.assert_array_equal(eng.level, scipy_levels(edges, N, int(src[0]), directed))


def test_engine_refuses_bad_arguments(edges):
    eng = Engine(one_shard(edges, N, False))
    with pytest.raises(ValueError, match="depth_limit"):
        eng.search(0, depth_limit=-1)
    with pytest.raises(ValueError, match="outside"):
        eng.search([0, N])
    with pytest.raises(ValueError, match="at least one source"):
        eng.search(np.array([], np.int64))


# -- through Dask, 1-3 ranks --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    from breadth.pipeline.cluster.cluster import local_cluster

    yield from closing(local_cluster(workers=3, threads_per_worker=1))  # one Numba thread each


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("nparts", [1, 2, 3])
def test_sources_and_depth_limit_on_ranks(cluster, edges, directed, nparts):
    g = prepare(from_dask_array(edges, N, directed=directed), cluster, nparts=nparts)
    try:
        src = _sources(edges, 6, seed=nparts)
        res = bfs(g, sources=src.tolist())
        np.testing.assert_array_equal(res.level, scipy_multi_levels(edges, N, src, directed))
        assert_bfs_parents(edges, N, res.level, res.parent, src, directed)
        assert res.sources == src.tolist() and res.root == src[0]
        df = res.to_pandas()
        assert len(df) == int((res.level >= 0).sum()) and (df["root"] == src[0]).all()
        lim = bfs(g, sources=src.tolist(), depth_limit=2)
        np.testing.assert_array_equal(lim.level, scipy_multi_levels(edges, N, src, directed, depth_limit=2))
        # a list of roots still means one independent search per root (the meaning bfs() always had)
        per_root = bfs(g, src[:2].tolist(), depth_limit=1)
        assert isinstance(per_root, list) and len(per_root) == 2
        for r, root in zip(per_root, src[:2]):
            want = scipy_levels(edges, N, int(root), directed)
            want[want > 1] = -1
            np.testing.assert_array_equal(r.level, want)
    finally:
        g.release()


def test_bfs_argument_errors(cluster, edges):
    g = prepare(from_dask_array(edges, N), cluster, nparts=2)
    try:
        with pytest.raises(TypeError, match="exactly one"):
            bfs(g)
        with pytest.raises(TypeError, match="exactly one"):
            bfs(g, 0, sources=[1])
        with pytest.raises(ValueError, match="empty"):
            bfs(g, sources=[])
        with pytest.raises(ValueError, match="depth_limit"):
            bfs(g, sources=[0], depth_limit=-2)
        with pytest.raises(KeyError, match=str(N + 5)):
            bfs(g, sources=[0, N + 5])
    finally:
        g.release()


# -- the command line ---------------------------------------------------------------------------------
def _cli(*args, timeout=300):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = tmp_path_factory.mktemp("ms") / "k9.store"
    r = _cli("generate", "--scale", 9, "--seed", 4, "--out", st, "--workers", 2, "--threads", 1)
    assert r.returncode == 0, r.stderr[-2000:]
    return st


def test_cli_sources_file_and_depth_limit(store, tmp_path):
    import pandas as pd

    n = 1 << 9
    edges = kronecker(9, seed=4).edges.compute(scheduler="sync")
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    src = np.flatnonzero(deg)[[3, 50, 200]]
    f = tmp_path / "seeds.txt"
    f.write_text(f"# three seeds\n{src[0]}\n\n{src[1]}\n")
    out = tmp_path / "near"
    r = _cli("bfs", store, "--sources", f, "--source", src[2], "--depth-limit", 2, "--out", out,
             "--workers", 2, "--threads", 1)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "3 sources:" in r.stdout
    df = pd.read_parquet(out)
    level = np.full(n, -1)
    level[df["vertex"].to_numpy()] = df["level"].to_numpy()
    np.testing.assert_array_equal(level, scipy_multi_levels(edges, n, src, depth_limit=2))
    parent = np.full(n, -1)
    parent[df["vertex"].to_numpy()] = df["parent"].to_numpy()
    assert_bfs_parents(edges, n, level, parent, src)


@pytest.mark.parametrize("args,needle", [
    (["--source", "abc"], "--source abc: expected an integer vertex id"),
    (["--source", "600"], "--source 600: vertex 600 is not in the graph (its ids are 0..511)"),
    (["--source", "1", "--depth-limit", "-1"], "--depth-limit must be >= 0, got -1"),
    (["--sources", "{tmp}/empty.txt"], "--sources {tmp}/empty.txt: no vertex ids in the file"),
    (["--sources", "{tmp}/absent.txt"], "--sources {tmp}/absent.txt: no such file"),
    (["--sources", "{tmp}/bad.txt"], "--sources {tmp}/bad.txt:3: expected an integer vertex id"),
    (["--sources", "{tmp}/two.txt"], "--sources {tmp}/two.txt:1: expected one vertex id per line"),
    ([], "bfs needs --root ID"),
    (["--root", "1", "--source", "2"], "--root and --source/--sources do not combine"),
    (["--source", "1", "--batch"], "--batch batches independent searches: it needs --root"),
])
def test_cli_bad_sources_exit_2_with_one_line(store, tmp_path, args, needle):
    (tmp_path / "empty.txt").write_text("# nothing\n\n")
    (tmp_path / "bad.txt").write_text("1\n2\nthree\n")
    (tmp_path / "two.txt").write_text("1 2\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    r = _cli("bfs", store, *args, "--out", tmp_path / "o")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle.replace("{tmp}", str(tmp_path)) in r.stderr
    assert r.stderr.startswith("breadth: error: ") and len(r.stderr.strip().splitlines()) == 1
