"""Preparation on Dask: shards equal the cleaned adjacency computed independently with scipy."""

import numpy as np
import pytest
import scipy.sparse as sp

from breadth.pipeline import from_dask_array, kronecker, prepare
from breadth.pipeline.kernels.build_csr import build_shard
from breadth.pipeline.kernels.partition import split_by_owner

from conftest import load_snap


def _oracle_csr(edges, n):
    """Symmetric, deduplicated, loop-free adjacency as a scipy CSR matrix."""
    e = edges[edges[:, 0] != edges[:, 1]]
    a = sp.coo_matrix((np.ones(len(e), np.int8), (e[:, 0], e[:, 1])), shape=(n, n)).tocsr()
    a = ((a + a.T) > 0).astype(np.int8).tocsr()
    a.sort_indices()
    return a


def _check_shards(shards, edges, n):
    ref = _oracle_csr(edges, n)
    loops = np.bincount(edges[edges[:, 0] == edges[:, 1], 0], minlength=n)
    tdeg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    assert shards[0].lo == 0 and shards[-1].hi == n
    for s in shards:
        assert s.hi - s.lo == s.offsets.size - 1
        np.testing.assert_array_equal(s.offsets - s.offsets[0], ref.indptr[s.lo:s.hi + 1] - ref.indptr[s.lo])
        np.testing.assert_array_equal(s.columns, ref.indices[ref.indptr[s.lo]:ref.indptr[s.hi]])
        np.testing.assert_array_equal(s.tuple_degree, tdeg[s.lo:s.hi])
        np.testing.assert_array_equal(s.self_loops, loops[s.lo:s.hi])
        assert s.columns.dtype == np.int32


@pytest.mark.parametrize("nparts", [1, 3])
def test_kronecker_shards_match_scipy(client, nparts):
    el = kronecker(12, seed=4, chunk_edges=10_000)
    g = prepare(el, client, nparts=nparts)
    edges = el.edges.compute(scheduler="sync")
    shards = client.gather(g.shards)
    assert len(shards) == nparts
    _check_shards(shards, edges, 1 << 12)
    assert g.num_input_edges == 16 << 12
    assert g.num_self_loops == int((edges[:, 0] == edges[:, 1]).sum())
    assert g.num_edges == _oracle_csr(edges, 1 << 12).nnz // 2
    g.release()


def test_real_graph_shards_match_scipy(client):
    edges = load_snap("CA-CondMat.txt")  # symmetric listing, 58 self-loops, ids with gaps
    n = int(edges.max()) + 1
    g = prepare(from_dask_array(edges, n), client, nparts=2)
    _check_shards(client.gather(g.shards), edges, n)
    assert g.num_self_loops == 58
    g.release()


def test_out_of_range_ids_are_named():
    with pytest.raises(ValueError, match=r"row 1 has vertex id \[3, 9\] outside \[0, 8\)"):
        split_by_owner(np.array([[0, 1], [3, 9]]), 8, 64, 1)


@pytest.mark.parametrize("directed", [False, True])
def test_split_reads_int32_chunks_as_int64_ones(directed):
    """Relabeled chunks reach the split as int32 dense ids; their pieces equal those of the same ids in int64
    (and of uint16, read as int64), self-loops included."""
    rng = np.random.default_rng(3)
    e = rng.integers(0, 1000, size=(5000, 2))
    e[::50, 1] = e[::50, 0]
    want = split_by_owner(e, 1000, 334, 3, directed)
    for dt in (np.int32, np.uint16):
        got = split_by_owner(e.astype(dt), 1000, 334, 3, directed)
        for a, b in zip(want, got):
            for x, y in zip(a, b):
                assert (x is None) == (y is None)
                if x is not None:
                    assert x.dtype == y.dtype
                    np.testing.assert_array_equal(x, y)


def test_builder_handles_empty_and_isolated():
    s = build_shard(0, 1, 100, [p for p in split_by_owner(np.empty((0, 2), np.int64), 100, 128, 1)])
    assert s.num_local == 100 and s.num_local_edges == 0


def test_prepare_warns_naming_the_owners_without_the_degree_order():
    """A GPU owner whose device had no room for bottom-up's degree order says why in its summary; prepare
    warns once naming those owners (searches stay right, bottom-up levels slower) and records them in
    ``stages``; with every order built it stays silent.  (tests/test_gpu.py makes a real device short.)"""
    import warnings

    from breadth.pipeline.prepare import _warn_dropped_order

    why = "device memory short or ids too wide for its sort keys"
    stages: dict = {}
    with pytest.warns(RuntimeWarning, match=r"owner\(s\) \[1, 3\] \(device memory short"):
        _warn_dropped_order([(10, 0, 10, 80, None), (9, 0, 9, 70, why), (8, 1, 8, 60, None), (7, 0, 7, 50, why)],
                            stages)
    assert stages["bottom_up_order_dropped"] == [1, 3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_dropped_order([(10, 0, 10, 80, None)], stages)
    assert stages["bottom_up_order_dropped"] == []
