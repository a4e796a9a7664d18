"""GPU path against the CPU path: same edges, same shards, same BFS levels, valid trees.

Skipped (not faked) where CuPy or a CUDA device is absent, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module()

from breadth.bfs.engine.device_engine import DeviceEngine  # noqa: E402
from breadth.bfs.engine.engine import Engine  # noqa: E402
from breadth.bfs.engine.session import _engine_class, make_communicator  # noqa: E402
from breadth.bfs.graph500.validate import validate, validate_rank  # noqa: E402
from breadth.bfs.transport.solo_gpu import SoloGpuCommunicator  # noqa: E402
from breadth.pipeline.kernels.build_csr import build_shard  # noqa: E402
from breadth.pipeline.kernels.build_csr_gpu import build_shard_gpu, split_by_owner_gpu  # noqa: E402
from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges  # noqa: E402
from breadth.pipeline.sources.kronecker_gpu import generate_edges_gpu  # noqa: E402
from breadth.pipeline.kernels.partition import split_by_owner  # noqa: E402

ARRAYS = ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns")


@pytest.mark.parametrize("scale,seed,start,stop", [(10, 1, 0, 16 << 10), (16, 7, 12345, 12345 + 100_003),
                                                   (20, 3, (16 << 20) - 50_000, 16 << 20), (33, 5, 1 << 36, (1 << 36) + 4096)])
def test_kronecker_edges_identical(scale, seed, start, stop):
    p = KroneckerParams.make(scale, seed, 0.57, 0.19, 0.19)
    cpu = generate_edges(p, start, stop)
    gpu = generate_edges_gpu(p, start, stop)
    assert gpu.dtype == np.int64 and gpu.shape == cpu.shape
    np.testing.assert_array_equal(gpu.get(), cpu)


def _cpu_and_gpu_shards(scale, seed, nparts, directed, rank):
    n = 1 << scale
    p = KroneckerParams.make(scale, seed, 0.57, 0.19, 0.19)
    chunks = [(0, 5 << scale), (5 << scale, 16 << scale)]  # two chunks: pieces from several sources
    block = -(-n // nparts)
    block = max(64, -(-block // 64) * 64)
    cpu_pieces, gpu_pieces = [], []
    for a, b in chunks:
        e = generate_edges(p, a, b)
        cpu_pieces.append(split_by_owner(e, n, block, nparts, directed)[rank])
        gpu_pieces.append(split_by_owner_gpu(cp.asarray(e), n, block, nparts, directed)[rank])
    return (build_shard(rank, nparts, n, cpu_pieces, directed),
            build_shard_gpu(rank, nparts, n, gpu_pieces, directed))


@pytest.mark.parametrize("scale,nparts,directed,rank", [(14, 1, False, 0), (13, 3, False, 1), (13, 2, True, 1)])
def test_shards_identical(scale, nparts, directed, rank):
    cpu, gpu = _cpu_and_gpu_shards(scale, 11, nparts, directed, rank)
    assert (gpu.lo, gpu.hi, gpu.directed) == (cpu.lo, cpu.hi, cpu.directed)
    for name in ARRAYS:
        a, b = getattr(cpu, name), getattr(gpu, name)
        if a is None:
            assert b is None
            continue
        assert isinstance(b, cp.ndarray) and b.dtype == a.dtype, name
        np.testing.assert_array_equal(b.get(), a, err_msg=name)


def _levels_cpu_vs_gpu(shard, roots, alpha=15.0, beta=18.0, device_engine=False):
    cpu = Engine(shard, alpha=alpha, beta=beta)
    if device_engine:  # what a one-GPU session runs: captured levels over the lone rank's device rounds
        gpu = DeviceEngine(shard, SoloGpuCommunicator(), alpha=alpha, beta=beta, backend="gpu")
    else:
        gpu = Engine(shard, alpha=alpha, beta=beta, backend="gpu")
    dirs = set()
    for r in roots:
        cpu.search(int(r))
        recs = gpu.search(int(r))
        dirs |= {x.direction for x in recs}
        np.testing.assert_array_equal(gpu.level.get(), cpu.level)
        # the GPU tree is checked by the CPU's rules and by the device's own, which must agree
        host = validate([shard], gpu.parent.get(), gpu.level.get(), int(r))
        assert all(v == 0 for v in host.values()), host
        assert all(v == 0 for v in validate_rank(gpu, int(r)).values())
    return gpu, dirs


def test_bfs_levels_identical_and_valid():
    cpu_shard, _ = _cpu_and_gpu_shards(15, 4, 1, False, 0)
    deg = np.diff(cpu_shard.offsets)
    roots = np.random.default_rng(0).choice(np.flatnonzero(deg > 0), 12, replace=False)
    roots[0] = int(np.argmax(deg))  # the hub: the first level is a single huge top-down expansion
    _, dirs = _levels_cpu_vs_gpu(cpu_shard, roots)
    assert dirs == {"td", "bu"}  # both kernels exercised
    _, dirs = _levels_cpu_vs_gpu(cpu_shard, roots[:3], alpha=1e-9, beta=1e9)
    assert dirs == {"td"}
    _, dirs = _levels_cpu_vs_gpu(cpu_shard, roots[:3], alpha=1e9, beta=1e-9)
    assert "bu" in dirs


@pytest.mark.parametrize("alpha,beta,want", [(15.0, 18.0, {"td", "bu"}), (1e-9, 1e9, {"td"}), (1e9, 1e-9, {"bu"})])
def test_one_gpu_session_runs_the_device_engine_with_the_cpu_levels(alpha, beta, want):
    comm = make_communicator(0, 1, "s", "tcp", 1.0, backend="gpu")
    assert _engine_class("gpu", comm) is DeviceEngine
    cpu_shard, _ = _cpu_and_gpu_shards(15, 4, 1, False, 0)
    deg = np.diff(cpu_shard.offsets)
    roots = np.random.default_rng(1).choice(np.flatnonzero(deg > 0), 6, replace=False)
    roots[0] = int(np.argmax(deg))
    gpu, dirs = _levels_cpu_vs_gpu(cpu_shard, roots, alpha=alpha, beta=beta, device_engine=True)
    assert want <= dirs
    assert gpu.graphs is not None and sum(gpu.graphs.launches.values()) > 0  # the captured levels ran
    gpu.close()


def test_device_validation_finds_violations():
    cpu_shard, _ = _cpu_and_gpu_shards(12, 2, 1, False, 0)
    root = int(np.argmax(np.diff(cpu_shard.offsets)))
    gpu = Engine(cpu_shard, backend="gpu")
    gpu.search(root)
    assert all(v == 0 for v in validate_rank(gpu, root).values())
    reached = np.flatnonzero(gpu.level.get() >= 2)
    v = int(reached[0])
    gpu.parent[v] = v  # a self-parent: breaks the tree, the tree-edge levels and the parent-is-neighbour rule
    dev = validate_rank(gpu, root)
    host = validate([cpu_shard], gpu.parent.get(), gpu.level.get(), root)
    assert dev == host
    assert dev["tree"] > 0 and dev["tree_edge_levels"] > 0


def test_prepare_and_graph500_on_gpu_through_dask():
    distributed = pytest.importorskip("distributed")
    from breadth.bfs import bfs, graph500
    from breadth.pipeline import kronecker, prepare

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        g_gpu = prepare(kronecker(13, seed=3, chunk_edges=1 << 15, device="gpu"), client, device="gpu")
        g_cpu = prepare(kronecker(13, seed=3, chunk_edges=1 << 14), client, device="cpu")
        assert g_gpu.backend == "gpu" and g_cpu.backend == "cpu"
        assert (g_gpu.num_edges, g_gpu.num_self_loops) == (g_cpu.num_edges, g_cpu.num_self_loops)
        sg, sc = client.gather(g_gpu.shards)[0], client.gather(g_cpu.shards)[0]
        for name in ("offsets", "columns", "tuple_degree", "self_loops"):
            np.testing.assert_array_equal(getattr(sg, name).get(), getattr(sc, name))
        res = graph500(g_gpu, nroots=4, seed=5)
        ref = graph500(g_cpu, nroots=4, seed=5)
        assert res.valid
        assert [r["root"] for r in res.rows] == [r["root"] for r in ref.rows]
        assert [r["nedge"] for r in res.rows] == [r["nedge"] for r in ref.rows]
        root = res.rows[0]["root"]
        np.testing.assert_array_equal(bfs(g_gpu, root).level, bfs(g_cpu, root).level)


def test_several_sources_depth_limit_and_batches_on_gpu_match_the_cpu():
    """bfs(sources=..., depth_limit=...) and bfs_batch on a GPU graph give the CPU graph's levels."""
    distributed = pytest.importorskip("distributed")
    from breadth.bfs import bfs, bfs_batch
    from breadth.pipeline import kronecker, prepare

    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        g_gpu = prepare(kronecker(12, seed=4, device="gpu"), client, device="gpu")
        g_cpu = prepare(kronecker(12, seed=4), client, device="cpu")
        deg = np.diff(client.gather(g_cpu.shards)[0].offsets)
        roots = np.flatnonzero(deg)[[0, 5, 17, 40, 41, 99, 300]].tolist()
        for kw in ({"sources": roots[:3]}, {"sources": roots[:3], "depth_limit": 1}, {"root": roots[3], "depth_limit": 2}):
            np.testing.assert_array_equal(bfs(g_gpu, **kw).level, bfs(g_cpu, **kw).level, err_msg=str(kw))
        for size in (1, 7):
            got = bfs_batch(g_gpu, roots[:size])
            want = bfs_batch(g_cpu, roots[:size])
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a.level, b.level)
        got = bfs_batch(g_gpu, roots, depth_limit=2)
        for r, a in zip(roots, got):
            np.testing.assert_array_equal(a.level, bfs(g_cpu, r, depth_limit=2).level)


@pytest.mark.parametrize("nwords", [0, 1, 1023, 1024, 1025, 5000])
def test_bits_to_queue_gives_the_set_bits_ascending(nwords):
    from breadth.bfs.gpu.backend import GpuBackend

    rng = np.random.default_rng(nwords)
    words = rng.integers(0, 2**63, nwords, dtype=np.uint64) & rng.integers(0, 2**63, nwords, dtype=np.uint64)
    if nwords > 2:
        words[1] = 0  # empty words and a full one
        words[2] = np.uint64(2**64 - 1)
    want = np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))
    got = GpuBackend().bits_to_queue(cp.asarray(words))
    np.testing.assert_array_equal(got.get(), want)


def test_degree_order_sorted_a_row_range_at_a_time_equals_one_sort():
    from breadth.bfs.cpu.bottom_up import degree_ordered_columns as cpu_order
    from breadth.bfs.gpu.kernels import degree_ordered_columns

    p = KroneckerParams.make(14, 9, 0.57, 0.19, 0.19)
    shard = build_shard(0, 1, 1 << 14, split_by_owner(generate_edges(p, 0, 16 << 14), 1 << 14, 1 << 14, 1))
    off, col = cp.asarray(shard.offsets), cp.asarray(shard.columns)
    whole = degree_ordered_columns(off, col)  # one sort
    ranged = degree_ordered_columns(off, col, sort_entries=1000)  # a few hundred ranges, hubs alone in theirs
    assert ranged.dtype == col.dtype
    np.testing.assert_array_equal(ranged.get(), whole.get())
    deg = np.diff(shard.offsets)
    for r in range(0, deg.size, 97):  # each row: a permutation of its sorted row, by decreasing degree
        a, b = shard.offsets[r], shard.offsets[r + 1]
        np.testing.assert_array_equal(np.sort(ranged.get()[a:b]), shard.columns[a:b])
        assert np.all(np.diff(np.floor(np.log2(deg[ranged.get()[a:b]]))) <= 0)
    np.testing.assert_array_equal(ranged.get(), cpu_order(shard.offsets, shard.columns))


def test_degree_order_sorts_by_ranges_sized_to_the_device_memory_limit():
    from breadth.bfs.search_order import order_sort_entries
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    assert order_sort_entries() is None  # outside a worker: one sort
    client = local_cuda_cluster(workers=1, device_memory_limit="640MB")
    try:
        assert client.submit(order_sort_entries, pure=False).result() == 20_000_000
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()


@pytest.mark.parametrize("nparts", [1, 2])
@pytest.mark.parametrize("directed", [False, True])
def test_gpu_tiers_give_the_same_shards(directed, nparts, tmp_path):
    """On a dask-cuda worker, the memory tier, the host tier with its 32-bit pairs left in device memory (a
    small graph fits) and the disk tier build the same shards with the same degree-ordered bottom-up rows,
    over several row batches where batched."""
    import dask

    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=1)
    try:
        el = kronecker(14, seed=3, chunk_edges=40_000, device="gpu")
        el.directed = directed
        got = {}
        for tier in ("memory", "host", "disk"):
            stages: dict = {}
            with dask.config.set({"breadth.shuffle.tier": tier}):
                g = prepare(el, client, device="gpu", nparts=nparts, spill_dir=str(tmp_path), batch_entries=50_000,
                            stages=stages)
            assert stages["tier"]["on_device"] == (tier == "host")
            if tier != "memory":
                assert all(len(o["batches"]) > 1 for o in stages["owners"])
            got[tier] = ([s.to(np) for s in client.gather(g.shards)], g.num_edges, g.num_self_loops)
            g.release()
        for tier in ("host", "disk"):
            assert got[tier][1:] == got["memory"][1:]
            for a, b in zip(got["memory"][0], got[tier][0]):
                np.testing.assert_array_equal(a.offsets, b.offsets)
                np.testing.assert_array_equal(a.columns, b.columns)
                np.testing.assert_array_equal(a.meta["bu_columns"], b.meta["bu_columns"])  # the degree order
                if directed:
                    np.testing.assert_array_equal(a.in_offsets, b.in_offsets)
                    np.testing.assert_array_equal(a.in_columns, b.in_columns)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()


def test_a_device_without_room_for_the_degree_order_goes_without_it_and_says_so():
    """Bottom-up's degree order needs a sort of the rows' keys; where the device has no room for it (here:
    CuPy's pool capped just above what the shard holds) the shard goes without it, its meta says why (prepare
    warns with it), searches give the CPU's levels; with room again the same order is built."""
    from breadth.bfs.search_order import ORDER_DROPPED, with_bottom_up_order

    cpu_shard, gpu_shard = _cpu_and_gpu_shards(14, 4, 1, False, 0)
    assert "bu_columns" in gpu_shard.meta and ORDER_DROPPED not in gpu_shard.meta
    ordered = gpu_shard.meta.pop("bu_columns").get()
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    pool.set_limit(size=pool.used_bytes() + 1024)  # the order's keys alone are 8 bytes an entry
    try:
        gpu_shard = with_bottom_up_order(gpu_shard)
    finally:
        pool.set_limit(size=0)  # no limit
    assert "bu_columns" not in gpu_shard.meta and "memory short" in gpu_shard.meta[ORDER_DROPPED]
    deg = np.diff(cpu_shard.offsets)
    roots = np.random.default_rng(1).choice(np.flatnonzero(deg > 0), 4, replace=False)
    cpu, gpu = Engine(cpu_shard), Engine(gpu_shard, backend="gpu")
    dirs = set()
    for r in roots:
        cpu.search(int(r))
        dirs |= {x.direction for x in gpu.search(int(r))}
        np.testing.assert_array_equal(gpu.level.get(), cpu.level)
    assert "bu" in dirs
    gpu_shard = with_bottom_up_order(gpu_shard)
    assert ORDER_DROPPED not in gpu_shard.meta
    np.testing.assert_array_equal(gpu_shard.meta["bu_columns"].get(), ordered)


@pytest.mark.parametrize("nparts", [1, 2])
def test_search_order_false_builds_no_degree_order_on_gpu_owners(nparts):
    """prepare(search_order=False) (what generate and ingest use: a store never keeps the order) leaves it out on
    GPU owners, one owner included (whose build adds it itself when asked); by default every owner has it and
    prepare records no owner without it."""
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=1)
    try:
        el = kronecker(13, seed=5, device="gpu")
        for search_order in (True, False):
            stages: dict = {}
            g = prepare(el, client, device="gpu", nparts=nparts, search_order=search_order, stages=stages)
            shards = client.gather(g.shards)
            assert [("bu_columns" in s.meta) for s in shards] == [search_order] * nparts
            assert stages["bottom_up_order_dropped"] == []
            if nparts == 1:  # one owner orders its rows in its build (several get theirs from prepare after)
                assert ("bottom_up_order_s" in stages["owners"][0]) == search_order
            g.release()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
