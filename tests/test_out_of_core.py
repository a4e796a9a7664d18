"""Out-of-core preparation: a worker whose memory limit is far below the edge list builds the same shards
as the in-memory path, and its memory grows by less than the edge list."""

import resource

import dask
import numpy as np
import pytest

from breadth.pipeline import kronecker, prepare


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


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
    c = small_worker
    prepare(kronecker(8, seed=1), c, spill_dir=str(tmp_path)).release()  # compile kernels first
    before = list(c.run(_maxrss).values())[0]
    el = kronecker(18, seed=1, chunk_edges=1 << 16)
    spilled = prepare(el, c, spill_dir=str(tmp_path), batch_entries=1 << 18)
    grown = list(c.run(_maxrss).values())[0] - before
    shards = c.gather(spilled.shards)
    edge_list_bytes = el.num_edges * 16
    assert grown < 2 * edge_list_bytes * 0.6, f"worker grew {grown >> 20} MiB"
    assert not list(tmp_path.iterdir()), "spill files left behind"
    spilled.release()
    in_memory = prepare(el, c)
    _shards_equal(c.gather(in_memory.shards), shards)
    in_memory.release()


@pytest.mark.parametrize("directed", [False, True])
def test_spilled_multi_owner_matches_in_memory(small_worker, tmp_path, directed):
    el = kronecker(12, seed=7, chunk_edges=5000)
    el.directed = directed
    a = prepare(el, small_worker, nparts=3)
    b = prepare(el, small_worker, nparts=3, spill_dir=str(tmp_path), batch_entries=3000)
    _shards_equal(small_worker.gather(a.shards), small_worker.gather(b.shards))
    assert (a.num_edges, a.num_self_loops) == (b.num_edges, b.num_self_loops)


def test_spilled_stages_account_for_every_entry(small_worker, tmp_path):
    """The stage record of the spill path: every chunk's generate time is found, and the entries the
    owners built batch by batch are exactly those the chunks wrote."""
    el = kronecker(12, seed=3, chunk_edges=5000)
    stages: dict = {}
    g = prepare(el, small_worker, nparts=2, spill_dir=str(tmp_path), batch_entries=3000, stages=stages)
    assert stages["path"] == "spill" and stages["chunk_tasks"] == el.npartitions
    assert all(c["source_s"] > 0 and c["split_s"] > 0 for c in stages["chunks"])
    written = sum(c.get("entries", 0) for c in stages["chunks"])
    built = sum(b[0] for o in stages["owners"] for b in o["batches"])
    assert written == built == 2 * (el.num_edges - g.num_self_loops)
    assert all(len(o["batches"]) > 1 and o["peak_rss_bytes"] > 0 for o in stages["owners"])
    assert stages["wall_s"]["chunks"] > 0 and stages["wall_s"]["build"] > 0
    g.release()
