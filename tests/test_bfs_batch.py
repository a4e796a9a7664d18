"""Batched searches (MS-BFS): per-root levels against scipy.sparse.csgraph and the single-root engine,
parents checked edge by edge; batches of 1, 7 and 64 roots, directed and undirected, 1-3 worker processes."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from breadth.bfs import BatchEngine, bfs_batch
from breadth.bfs.engine.batch_search import batches
from breadth.bfs.results import write_results_dataset
from breadth.pipeline import from_dask_array, kronecker, prepare

from conftest import assert_bfs_parents, closing, one_shard, roots_with_edges, scipy_levels

SCALE = 11
N = 1 << SCALE


@pytest.fixture(scope="module")
def edges():
    return kronecker(SCALE, seed=33).edges.compute(scheduler="sync")


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("alpha,beta,dirs", [(15.0, 18.0, None), (0.0, 18.0, {"td"}), (1e9, 1e9, {"bu"})])
@pytest.mark.parametrize("k", [1, 7, 64])
def test_batch_engine_levels_equal_scipy(edges, directed, alpha, beta, dirs, k):
    eng = BatchEngine(one_shard(edges, N, directed), alpha=alpha, beta=beta)
    roots = roots_with_edges(edges, N, k, seed=k)
    recs = eng.search(roots)
    for i, r in enumerate(roots):
        parent, level = eng.result(i)
        np.testing.assert_array_equal(level, scipy_levels(edges, N, int(r), directed))
        assert_bfs_parents(edges, N, level, parent, [r], directed)
    if dirs is not None:
        assert {x.direction for x in recs} == dirs
    assert recs[0].frontier == k  # every root is in the first frontier


def test_batch_engine_uses_both_directions_and_repeated_roots(edges):
    """A batch on the Kronecker graph goes top-down, bottom-up and back; a repeated root is two searches
    with the same levels; an isolated root reaches only itself."""
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=N)
    iso = int(np.flatnonzero(deg == 0)[0])
    some = roots_with_edges(edges, N, 30, seed=3)
    roots = np.concatenate([some, some[:1], [iso]])
    eng = BatchEngine(one_shard(edges, N, False))
    recs = eng.search(roots)
    assert [x.direction for x in recs][0] == "td" and "bu" in {x.direction for x in recs}
    np.testing.assert_array_equal(eng.result(0)[1], eng.result(30)[1])
    p, lv = eng.result(31)
    assert (lv >= 0).sum() == 1 and lv[iso] == 0 and p[iso] == iso


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_batch_engine_depth_limit(edges, limit):
    roots = roots_with_edges(edges, N, 7, seed=limit)
    eng = BatchEngine(one_shard(edges, N, True))
    eng.search(roots, depth_limit=limit)
    for i, r in enumerate(roots):
        want = scipy_levels(edges, N, int(r), True)
        want[want > limit] = -1
        np.testing.assert_array_equal(eng.result(i)[1], want)


def test_batch_engine_refuses_bad_batches(edges):
    eng = BatchEngine(one_shard(edges, N, False))
    with pytest.raises(ValueError, match="1 to 64"):
        eng.search(np.arange(65))
    with pytest.raises(ValueError, match="1 to 64"):
        eng.search([])
    with pytest.raises(ValueError, match="outside"):
        eng.search([N])
    with pytest.raises(ValueError, match="depth_limit"):
        eng.search([0], depth_limit=-1)
    eng.search([1, 2])
    with pytest.raises(IndexError):
        eng.result(2)
    assert [(s.start, s.stop) for s in batches(130)] == [(0, 64), (64, 128), (128, 130)]


def test_batch_results_in_groups_equal_one_group(edges):
    """Results laid out a few searches at a time (``result_bytes`` for 3: 4-byte parents and levels here)
    equal those laid out all at once; ``result`` copies; bad ranges are refused; the CPU steps cannot run
    without recording parents."""
    roots = roots_with_edges(edges, N, 20, seed=5)
    whole = BatchEngine(one_shard(edges, N, True))
    whole.search(roots)
    parent_all, level_all = (a.copy() for a in whole.results())
    small = BatchEngine(one_shard(edges, N, True), result_bytes=3 * N * 8)
    small.search(roots)
    assert small.group_size() == 3 and whole.group_size() == 64
    kept = [small.result(i) for i in range(len(roots))]
    for i, r in enumerate(roots):
        np.testing.assert_array_equal(kept[i][1], level_all[i])
        np.testing.assert_array_equal(kept[i][1], scipy_levels(edges, N, int(r), True))
        assert_bfs_parents(edges, N, kept[i][1], kept[i][0], [r], True)
        assert kept[i][0].dtype == np.int64 and kept[i][1].dtype == np.int32
    np.testing.assert_array_equal(whole.results(5, 3)[1], level_all[5:8])
    for first, count in ((-1, 2), (19, 2), (0, 0)):
        with pytest.raises(IndexError):
            whole.results(first, count)
    with pytest.raises(ValueError, match="record parents"):
        BatchEngine(one_shard(edges, N, True), record_parents=False)


@pytest.mark.parametrize("directed", [False, True])
def test_batch_recorded_parents_agree_with_derived(edges, directed):
    """The parents the CPU steps record during the pass and those derived afterwards from the level planes
    (what GPUs run, ``derive``) give the same levels, and both are BFS parents."""
    from breadth.bfs.cpu.batch_frontier import vertex_chunks
    from breadth.bfs.cpu.batch_results import derive, word_table

    roots = roots_with_edges(edges, N, 64, seed=9)
    eng = BatchEngine(one_shard(edges, N, directed), alpha=15.0)
    eng.search(roots)
    parent, level = (a.copy() for a in eng.results())
    dparent, dlevel = np.empty_like(parent), np.empty_like(level)
    off, cols = eng._bu
    derive(off, cols, 0, word_table(eng.seen, eng.planes), eng.planes.shape[1], roots, 0, 64,
           vertex_chunks(off, 4), dparent, dlevel)
    np.testing.assert_array_equal(level, dlevel)
    for i, r in enumerate(roots):
        assert parent[i, r] == r and level[i, r] == 0
        assert_bfs_parents(edges, N, level[i], parent[i], [r], directed)
        assert_bfs_parents(edges, N, dlevel[i], dparent[i], [r], directed)


@pytest.mark.parametrize("directed", [False, True])
def test_batch_engine_deep_levels_grow_the_planes(directed):
    """A path of 70 vertices and a cycle beside it: levels up to 69 need 7 level planes (4 at first), and
    every level and parent still equals the oracle's."""
    path = np.stack([np.arange(69), np.arange(1, 70)], axis=1)
    cycle = np.stack([np.arange(70, 100), np.r_[np.arange(71, 100), 70]], axis=1)
    e = np.concatenate([path, cycle])
    n = 128
    roots = np.array([0, 69, 35, 70, 99, 120])
    eng = BatchEngine(one_shard(e, n, directed))
    eng.search(roots)
    assert eng.planes.shape[1] == 7
    for i, r in enumerate(roots):
        parent, level = eng.result(i)
        np.testing.assert_array_equal(level, scipy_levels(e, n, int(r), directed))
        assert_bfs_parents(e, n, level, parent, [r], directed)


def test_batch_top_down_lists_a_remote_vertex_once_per_frontier_vertex():
    """64 owned frontier vertices, each in its own search, all with an edge to the same vertex of another
    rank: the step sends 64 ``(vertex, bits, parent)`` rows for it (more than the vertices its thread owns),
    each search's bit with its own parent, and marks them sent."""
    from breadth.bfs.cpu.batch_frontier import record_arrays
    from breadth.bfs.cpu.batch_top_down import top_down_step

    frontier = np.uint64(1) << np.arange(64, dtype=np.uint64)
    sent = np.zeros(66, np.uint64)
    found_by = record_arrays(64, 64, np.int32)[0]
    found_by.fill(-1)
    touched, pairs = top_down_step(np.arange(65, dtype=np.int64), np.full(64, 65, np.int64), 0, np.arange(64),
                                   frontier, frontier.copy(), np.zeros(64, np.uint64), sent, found_by)
    assert touched.size == 0 and (found_by == -1).all()
    rows = pairs[np.argsort(pairs[:, 2])]
    np.testing.assert_array_equal(rows[:, 0], np.full(64, 65))
    np.testing.assert_array_equal(rows[:, 1].view(np.uint64), frontier)
    np.testing.assert_array_equal(rows[:, 2], np.arange(64))
    assert sent[65] == np.uint64(0xFFFFFFFFFFFFFFFF) and not sent[:65].any()


def test_batch_engine_levels_past_255():
    """A path of 600 vertices: the steps record a level's low byte per (vertex, search) and the planes give
    the rest (10 planes), so levels past 255 still equal the oracle's."""
    e = np.stack([np.arange(599), np.arange(1, 600)], axis=1)
    roots = np.array([0, 599, 300, 256])
    eng = BatchEngine(one_shard(e, 640, False))
    eng.search(roots)
    assert eng.planes.shape[1] == 10
    for i, r in enumerate(roots):
        parent, level = eng.result(i)
        np.testing.assert_array_equal(level, scipy_levels(e, 640, int(r), False))
        assert_bfs_parents(e, 640, level, parent, [r], False)


def test_batch_gpu_kernel_source_parses(tmp_path):
    """bfs/gpu/batch_kernels.cu's CUDA C++ parses (g++ -fsyntax-only with the shim of tests/test_gpu_source.py),
    for 32- and 64-bit column ids and recorded parents: NVRTC compiles it only on a GPU machine."""
    import shutil
    import subprocess

    from test_gpu_source import ROOT, _kernel_source

    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    src = tmp_path / "batch.cu"
    shim = os.path.join(ROOT, "tests", "cuda_syntax_shim.h")
    src.write_text(f'#include "{shim}"\n' + _kernel_source("batch_kernels.cu"))
    for defines in ([], ["-DCOL64"], ["-DREC64"], ["-DCOL64", "-DREC64"]):
        res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", *defines, str(src)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("directed", [False, True])
def test_batch_engine_on_gpu_equals_cpu(edges, directed):
    """The CuPy kernels (bfs/gpu/batch_kernels.py) give the CPU's levels and valid parents, also with results
    derived a few searches at a time; skipped without CuPy and a GPU."""
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no GPU")
    roots = roots_with_edges(edges, N, 64, seed=9)
    cpu = BatchEngine(one_shard(edges, N, directed))
    for record in (True, False):  # parents recorded in the pass, or derived after it a group at a time
        gpu = BatchEngine(one_shard(edges, N, directed), backend="gpu", result_bytes=5 * N * 12,
                          record_parents=record)
        for alpha in (4.0, 0.0, 1e9):  # both directions, top-down only, bottom-up only
            cpu.alpha = gpu.alpha = alpha
            cpu.search(roots)
            gpu.search(roots)
            assert (gpu._found is not None) == record
            assert gpu.group_size() == (15 if record else 5)  # levels only (4 bytes) when parents are in place
            for i, r in enumerate(roots):
                parent, level = gpu.result(i)
                np.testing.assert_array_equal(level, cpu.result(i)[1])
                assert_bfs_parents(edges, N, level, parent, [r], directed)


def test_batch_gpu_long_rows_equal_cpu():
    """A graph with rows of thousands of entries (a star of hubs joined in a ring, plus random edges): the
    GPU's warps over long rows' tasks (several a row) record parents once per search and give the CPU's
    levels, also where several warps find a search in the same row; skipped without CuPy and a GPU."""
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no GPU")
    rng = np.random.default_rng(3)
    n, hubs = 6000, 4
    leaves = np.arange(hubs, n)
    star = np.stack([leaves % hubs, leaves], axis=1)  # hub h joined to the leaves congruent to h: 1,500 each
    star = np.concatenate([star, star[:, ::-1]])  # both ways: long in-rows when directed too
    ring = np.stack([np.arange(hubs), (np.arange(hubs) + 1) % hubs], axis=1)
    extra = rng.integers(hubs, n, (4000, 2))
    e = np.concatenate([star, ring, extra])
    e = e[e[:, 0] != e[:, 1]].astype(np.int64)
    roots = np.concatenate([np.arange(hubs), rng.choice(leaves, 60, replace=False)])
    for directed in (False, True):
        cpu = BatchEngine(one_shard(e, n, directed))
        gpu = BatchEngine(one_shard(e, n, directed), backend="gpu")
        assert int(gpu.chunks.tasks.size) > int(gpu.chunks.rows.size) >= hubs  # several tasks a hub row
        for alpha in (4.0, 1e9):
            cpu.alpha = gpu.alpha = alpha
            cpu.search(roots)
            gpu.search(roots)
            for i, r in enumerate(roots):
                parent, level = gpu.result(i)
                np.testing.assert_array_equal(level, cpu.result(i)[1])
                assert_bfs_parents(e, n, level, parent, [r], directed)


# -- through Dask, 1-3 ranks --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster():
    from breadth.pipeline.cluster.cluster import local_cluster

    yield from closing(local_cluster(workers=3, threads_per_worker=1))  # one Numba thread each


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("nparts", [1, 2, 3])
def test_bfs_batch_on_ranks_equals_scipy(cluster, edges, directed, nparts, tmp_path):
    g = prepare(from_dask_array(edges, N, directed=directed), cluster, nparts=nparts)
    try:
        # 70 roots: one batch of 64 and one of 6; a small batch_size splits them further
        roots = roots_with_edges(edges, N, 70, seed=nparts).tolist()
        res = bfs_batch(g, roots)
        assert [r.root for r in res] == roots
        for r in res[::9] + [res[-1]]:
            np.testing.assert_array_equal(r.level, scipy_levels(edges, N, r.root, directed))
            assert_bfs_parents(edges, N, r.level, r.parent, [r.root], directed)
        small = bfs_batch(g, roots[:7], batch_size=3, depth_limit=2)
        for r in small:
            want = scipy_levels(edges, N, r.root, directed)
            want[want > 2] = -1
            np.testing.assert_array_equal(r.level, want)
        # results stay distributed as the single searches': Dask DataFrame, Parquet, pandas
        rows = write_results_dataset(res[:3], str(tmp_path / "out"))
        back = pd.read_parquet(tmp_path / "out")
        assert rows == len(back) == sum(int((r.level >= 0).sum()) for r in res[:3])
        assert sorted(back["root"].unique()) == sorted(roots[:3])
        assert len(os.listdir(tmp_path / "out")) == 3 * nparts
        ddf = res[0].to_dask_dataframe()
        assert ddf.npartitions == nparts and int(ddf.level.max().compute()) == int(res[0].level.max())
    finally:
        g.release()


def test_bfs_batch_arguments(cluster, edges):
    g = prepare(from_dask_array(edges, N), cluster, nparts=2)
    try:
        assert bfs_batch(g, []) == []
        with pytest.raises(ValueError, match="batch_size"):
            bfs_batch(g, [0], batch_size=65)
        with pytest.raises(KeyError):
            bfs_batch(g, [0, N])
    finally:
        g.release()


# -- the command line: bfs --batch, bench --batch --plot ----------------------------------------------
def _cli(*args, timeout=300):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_bfs_batch_equals_scipy(tmp_path):
    st = tmp_path / "k9.store"
    assert _cli("generate", "--scale", 9, "--seed", 6, "--out", st).returncode == 0
    n = 1 << 9
    edges = kronecker(9, seed=6).edges.compute(scheduler="sync")
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    roots = np.flatnonzero(deg)[[1, 9, 77]]
    args = [x for r in roots for x in ("--root", r)]
    r = _cli("bfs", st, *args, "--batch", "--out", tmp_path / "out", "--workers", 2, "--threads", 1)
    assert r.returncode == 0, r.stderr[-2000:]
    df = pd.read_parquet(tmp_path / "out")
    for root in roots:
        part = df[df["root"] == root]
        level = np.full(n, -1)
        level[part["vertex"].to_numpy()] = part["level"].to_numpy()
        np.testing.assert_array_equal(level, scipy_levels(edges, n, int(root)))


def test_cli_bench_batch_plot(tmp_path):
    """``bench --batch --plot``: a valid batched run and a PNG of the expected size that is not blank
    (several colours over a good part of it)."""
    mpl = pytest.importorskip("matplotlib")
    import json

    import matplotlib.image as mpimg

    png, js = tmp_path / "bench.png", tmp_path / "bench.json"
    r = _cli("bench", "--scale", 10, "--roots", 70, "--batch", "--plot", png, "--json", js,
             "--workers", 2, "--threads", 1)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(js.read_text())
    assert data["valid"] and len(data["roots"]) == 70
    assert {row["batch_size"] for row in data["roots"]} == {64, 6}
    img = mpimg.imread(png)
    assert img.shape[:2] == (800, 1200), img.shape
    rgb = img[..., :3].reshape(-1, 3)
    assert (rgb.min(axis=1) < 0.9).mean() > 0.02  # ink on more than 2 % of the pixels
    assert len(np.unique((rgb * 8).astype(int), axis=0)) >= 5  # bars, markers of both directions, text
    assert mpl is not None


def test_cli_plot_without_matplotlib_is_one_line(tmp_path):
    """Without matplotlib importable, ``--plot`` is refused before any work, in one line (exit 2)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['matplotlib'] = None; from breadth.pipeline.cli.cli import main; "
            f"sys.exit(main(['bench', '--scale', '8', '--plot', {str(tmp_path / 'p.png')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "breadth: error: --plot: matplotlib is not installed; pip install 'breadth[plot]'"
