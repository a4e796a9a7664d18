"""Out-of-core preparation through the one shuffle: a worker whose memory limit is far below the edge list
gets the disk tier by itself and builds the same shards as the memory tier, its memory growing by less than
the edge list; every tier (memory, host batches, disk) gives the same shards, bit for bit."""

import resource

import dask
import numpy as np
import pytest

from breadth.pipeline import kronecker, prepare


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _tier(name: str):
    """Force the shuffle's tier (the default follows the workers' memory limit)."""
    return dask.config.set({"breadth.shuffle.tier": name})


def _shards_equal(a, b):
    for x, y in zip(a, b):
        for f in ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns"):
            u, v = getattr(x, f), getattr(y, f)
            assert (u is None and v is None) or (u.dtype == v.dtype and np.array_equal(u, v)), f


@pytest.fixture(scope="module")
def small_worker():
    from distributed import Client, LocalCluster

    # 40 MB: far below the scale-18 edge list (64 MB of tuples, 128 MB symmetrized).  Dask may spill its
    # own task outputs; it must not kill the worker, whose interpreter alone is larger than the limit.
    with dask.config.set({"distributed.worker.memory.terminate": False, "distributed.worker.memory.pause": False}):
        cluster = LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="40MB", dashboard_address=None)
        client = Client(cluster)
        yield client
        client.close()
        cluster.close()


def test_spilled_preparation_is_bounded_and_identical(small_worker, tmp_path):
    """No tier is asked for: the 40 MB limit, read from the cluster, gets the disk tier."""
    c = small_worker
    prepare(kronecker(8, seed=1), c, spill_dir=str(tmp_path)).release()  # compile kernels first
    before = list(c.run(_maxrss).values())[0]
    el = kronecker(18, seed=1, chunk_edges=1 << 16)
    stages: dict = {}
    spilled = prepare(el, c, spill_dir=str(tmp_path), batch_entries=1 << 18, stages=stages)
    grown = list(c.run(_maxrss).values())[0] - before
    assert stages["path"] == "disk" and stages["tier"]["limit_bytes"] == 40_000_000
    shards = c.gather(spilled.shards)
    edge_list_bytes = el.num_edges * 16
    assert grown < 2 * edge_list_bytes * 0.6, f"worker grew {grown >> 20} MiB"
    assert not list(tmp_path.iterdir()), "spill files left behind"
    spilled.release()
    with _tier("memory"):
        in_memory = prepare(el, c)
    _shards_equal(c.gather(in_memory.shards), shards)
    in_memory.release()


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("nparts", [1, 3])
def test_every_tier_gives_the_same_shards(small_worker, tmp_path, directed, nparts):
    """The same graph through the memory, host and disk tiers: identical shards and counts, and the host and
    disk tiers built over several row batches, every entry the chunks sent built once."""
    el = kronecker(12, seed=7, chunk_edges=5000)
    el.directed = directed
    got = {}
    for tier in ("memory", "host", "disk"):
        stages: dict = {}
        with _tier(tier):
            g = prepare(el, small_worker, nparts=nparts, spill_dir=str(tmp_path), batch_entries=3000, stages=stages)
        got[tier] = (small_worker.gather(g.shards), g.num_edges, g.num_self_loops)
        assert stages["path"] == tier
        entries = 2 * (el.num_edges - g.num_self_loops)  # both directions, or an out- and an in-entry
        assert sum(c["entries"] for c in stages["chunks"]) == entries
        assert sum(o["entries"] for o in stages["owners"]) == entries
        if tier != "memory":
            assert all(len(o["batches"]) > 1 for o in stages["owners"]), "expected several row batches per owner"
        g.release()
    assert not list(tmp_path.iterdir()), "spill files left behind"
    for tier in ("host", "disk"):
        _shards_equal(got["memory"][0], got[tier][0])
        assert got["memory"][1:] == got[tier][1:]


def test_tier_follows_the_memory_limit(small_worker, lclient):
    """prepare decides the tier from the cluster's memory_limit by the CLI's rule: the same graph is built
    in memory on workers of several GB and on disk on the 40 MB worker."""
    from breadth.pipeline.shuffle.memory_plan import choose_tier
    from breadth.pipeline.shuffle.shuffle import cluster_memory

    el = kronecker(12, seed=3, chunk_edges=5000)
    for c, expected in ((lclient, "memory"), (small_worker, "disk")):
        mem = cluster_memory(c)
        rule = choose_tier(mem.limit, el.num_vertices, el.num_edges, mem.workers, mem.workers, mem.threads,
                           chunk_edges=5000).tier
        stages: dict = {}
        g = prepare(el, c, stages=stages)
        assert stages["path"] == rule == expected
        g.release()


def test_trimmed_rss_leaves_out_freed_heap_memory(lclient):
    """The RSS a memory plan counts (``cluster_memory(trim=True)``, the CLI's plan after relabeling) is what
    the workers hold, not what their tasks freed into the C heap, where it can wait behind blocks still in
    use; untrimmed, such holes once raised a 2^30-tuple ingest's minimum past its limit by chance."""
    from breadth.pipeline.shuffle.shuffle import cluster_memory, malloc_trim

    if not malloc_trim():
        pytest.skip("the C library has no malloc_trim")
    held, freed = [], []
    for _ in range(3000):  # in-process workers: this process's heap
        freed.append(np.ones(12_000))  # 96 KB: below glibc's mmap threshold, from the heap
        held.append(np.ones(200))  # a block after each, so that the freed ones are holes, not the heap's top
    del freed
    before = cluster_memory(lclient).resident
    after = cluster_memory(lclient, trim=True).resident
    assert after < before - (150 << 20), (before, after)
    assert len(held) == 3000


def test_spilled_stages_account_for_every_entry(small_worker, tmp_path):
    """The stage record of the disk tier: every chunk's generate time is found, and the entries the
    owners built batch by batch are exactly those the chunks wrote."""
    el = kronecker(12, seed=3, chunk_edges=5000)
    stages: dict = {}
    g = prepare(el, small_worker, nparts=2, spill_dir=str(tmp_path), batch_entries=3000, stages=stages)
    assert stages["path"] == "disk" and stages["chunk_tasks"] == el.npartitions
    assert all(c["source_s"] > 0 and c["split_s"] > 0 for c in stages["chunks"])
    written = sum(c.get("entries", 0) for c in stages["chunks"])
    built = sum(b[0] for o in stages["owners"] for b in o["batches"])
    assert written == built == 2 * (el.num_edges - g.num_self_loops)
    assert stages["chunk_task_s_total"]["bytes_written"] >= 8 * written  # 32-bit pairs
    assert all(len(o["batches"]) > 1 and o["peak_rss_bytes"] > 0 for o in stages["owners"])
    assert stages["wall_s"]["chunks"] > 0 and stages["wall_s"]["build"] > 0
    g.release()


def test_old_keyword_is_refused(small_worker):
    with pytest.raises(TypeError, match="host_batches.*memory limit.*breadth.shuffle.tier"):
        prepare(kronecker(8, seed=1), small_worker, host_batches=True)
    with pytest.raises(ValueError, match="breadth.shuffle.tier"), dask.config.set({"breadth.shuffle.tier": "ram"}):
        prepare(kronecker(8, seed=1), small_worker)


@pytest.mark.parametrize("tier", ["host", "disk"])
def test_duplicate_heavy_columns_are_given_back(small_worker, tmp_path, tier):
    """Every tuple three times: the owner's column array, sized for all entries, is two-thirds slack and
    shrinks in place; the shard is still the memory tier's."""
    from breadth.pipeline import from_dask_array

    rng = np.random.default_rng(5)
    base = rng.integers(0, 500, size=(2000, 2))
    el = from_dask_array(np.concatenate([base, base[::-1], base]), num_vertices=500)
    with _tier("memory"):
        a = prepare(el, small_worker, nparts=2)
    stages: dict = {}
    with _tier(tier):
        b = prepare(el, small_worker, nparts=2, batch_entries=700, stages=stages, spill_dir=str(tmp_path))
    shards = small_worker.gather(b.shards)
    _shards_equal(small_worker.gather(a.shards), shards)
    assert all(o["columns_resized"] == 1 for o in stages["owners"])
    assert stages["owner_task_s_total"]["column_slack_entries"] > stages["owner_task_s_total"]["entries"] // 2
    assert all(s.columns.size == s.offsets[-1] for s in shards)  # no slack kept
    a.release()
    b.release()


def _disk_write_bytes(dask_worker) -> float:
    return sum(v for (label, unit), v in dask_worker.data.cumulative_metrics.items()
               if label == "disk-write" and unit == "bytes")


def test_host_tier_on_a_spilling_worker(small_worker):
    """Scale 18 on the 40 MB worker through the host tier: the pieces (64 MB) exceed its memory limit, so
    Dask spills them to its disk; the shard is still the memory tier's."""
    el = kronecker(18, seed=1, chunk_edges=1 << 16)
    before = list(small_worker.run(_disk_write_bytes).values())[0]
    stages: dict = {}
    with _tier("host"):
        b = prepare(el, small_worker, batch_entries=1 << 18, stages=stages)
    spilled = list(small_worker.run(_disk_write_bytes).values())[0] - before
    assert spilled > 16 << 20, f"Dask spilled only {spilled / 2**20:.1f} MiB"
    assert len(stages["owners"][0]["batches"]) > 8
    shards = small_worker.gather(b.shards)
    b.release()
    with _tier("memory"):
        a = prepare(el, small_worker)
    _shards_equal(small_worker.gather(a.shards), shards)
    a.release()


@pytest.mark.parametrize("nbatches,batch_rows", [(1, 4096), (7, 600), (64, 64)])
def test_sort_by_batch_array_module_matches_counting_sort(nbatches, batch_rows):
    """The argsort grouping that the GPU runs (here on NumPy) and the CPU's Numba counting sort agree:
    same batch offsets, same entries in each batch."""
    from breadth.pipeline.kernels.array_backend import sort_by_batch_xp
    from breadth.pipeline.kernels.batch_sort import sort_by_batch_numpy

    rng = np.random.default_rng(nbatches)
    lo, nloc = 4096, min(4096, nbatches * batch_rows)
    entries = np.stack([rng.integers(lo, lo + nloc, 20000), rng.integers(0, 1 << 20, 20000)], axis=1)
    a, offs_a = sort_by_batch_xp(entries.astype(np.int32), lo, batch_rows, nbatches, np.int32, np)
    b, offs_b = sort_by_batch_numpy(entries, lo, batch_rows, nbatches, np.int32)
    assert a.dtype == b.dtype == np.int32
    assert np.array_equal(offs_a, offs_b) and offs_a[-1] == len(entries)
    for i in range(nbatches):
        x, y = a[offs_a[i]:offs_a[i + 1]], b[offs_b[i]:offs_b[i + 1]]
        assert np.all(x[:, 0] // batch_rows == i)
        assert np.array_equal(x[np.lexsort(x.T[::-1])], y[np.lexsort(y.T[::-1])])


@pytest.mark.parametrize("scale,seed", [(6, 1), (18, 5), (33, 2)])
def test_numpy_generator_matches_numba(scale, seed):
    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges, generate_edges_numpy

    p = KroneckerParams.make(scale, seed, 0.57, 0.19, 0.19)
    start = 123_457  # blocks of the NumPy generator start mid-way: the tuples depend on e alone
    assert np.array_equal(generate_edges_numpy(p, start, start + 40_000), generate_edges(p, start, start + 40_000))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("nparts", [1, 3])
def test_numpy_split_and_build_match_numba(directed, nparts):
    from breadth.bfs.shard import block_size
    from breadth.pipeline.kernels.build_csr import csr_from_entries
    from breadth.pipeline.kernels.build_csr_numpy import csr_from_entries_numpy, split_by_owner_numpy
    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges
    from breadth.pipeline.kernels.partition import split_by_owner

    n = 1 << 12
    edges = generate_edges(KroneckerParams.make(12, 9, 0.57, 0.19, 0.19), 0, 16 * n)
    edges[::97, 1] = edges[::97, 0]  # self-loops
    block = block_size(n, nparts)
    ours, numba_pieces = split_by_owner_numpy(edges, n, block, nparts, directed), split_by_owner(edges, n, block,
                                                                                               nparts, directed)
    for r, (a, b) in enumerate(zip(ours, numba_pieces)):
        lo = r * block
        assert np.array_equal(np.sort(a.loops), np.sort(b.loops))
        for kind in ("out", "inc")[:2 if directed else 1]:
            x, y = getattr(a, kind), getattr(b, kind)
            got = csr_from_entries_numpy([x[:1000], x[1000:]], lo, min(block, n - lo), n)
            want = csr_from_entries([y], lo, min(block, n - lo), n)
            for u, v in zip(got, want):
                assert u.dtype == v.dtype and np.array_equal(u, v)


@pytest.mark.parametrize("directed", [False, True])
def test_numpy_path_builds_the_same_shards_to_files(small_worker, tmp_path, directed):
    """jit=False and shard_dir: the same shards as the Numba path in memory, mapped from files that were never
    read into the worker, and a store byte-for-byte the in-memory graph's."""
    import json

    from breadth.io.shard_store import write_store

    el = kronecker(12, seed=4, chunk_edges=5000)
    el.directed = directed
    shard_dir = tmp_path / "shards"
    shard_dir.mkdir()
    with _tier("disk"):
        mapped = prepare(kronecker(12, seed=4, chunk_edges=5000, jit=False), small_worker, nparts=2,
                         spill_dir=str(tmp_path / "spill"), batch_entries=3000, jit=False, shard_dir=str(shard_dir),
                         directed=directed)
    with _tier("memory"):
        held = prepare(el, small_worker, nparts=2, directed=directed)
    files = small_worker.gather(mapped.shards)
    assert all(isinstance(s.columns, np.memmap) and isinstance(s.offsets, np.memmap) for s in files)
    _shards_equal(small_worker.gather(held.shards), files)
    assert (mapped.num_edges, mapped.num_self_loops) == (held.num_edges, held.num_self_loops)
    records = []
    for g, name in ((mapped, "a"), (held, "b")):
        m = write_store(g, str(tmp_path / name), parameters={"graph": 12})
        records.append([s["files"] for s in m["shards"]])
        g.release()
    assert records[0] == records[1]  # every file's size and sha256
    assert not list((tmp_path / "spill").iterdir())
    with open(tmp_path / "a" / "manifest.json") as f:
        assert json.load(f)["num_edges"] == mapped.num_edges


def test_numpy_path_needs_a_cpu():
    with pytest.raises(ValueError, match="CPU workers"):
        prepare(kronecker(6, seed=1), object(), jit=False, device="gpu")


def test_numpy_path_workers_never_import_numba(tmp_path):
    """The point of the NumPy path: fresh worker processes generate, split, build to files and write a store
    without importing Numba (its import and first kernel cost ~110 MiB each)."""
    from distributed import Client, LocalCluster

    from breadth.io.shard_store import write_store

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as c:
        with _tier("disk"):
            g = prepare(kronecker(12, seed=2, chunk_edges=5000, jit=False), c, spill_dir=str(tmp_path / "spill"),
                        batch_entries=3000, jit=False, shard_dir=str(tmp_path))
        write_store(g, str(tmp_path / "store"))
        assert g.num_edges > 0
        assert not any(c.run(eval, "'numba' in __import__('sys').modules").values())
