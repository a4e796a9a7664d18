"""Bottom-up's degree-ordered rows on CPU shards: a per-row permutation of the sorted rows, highest
degree first, built by preparation, and searches over them still equal scipy's levels."""

import numpy as np

from breadth.bfs import bfs
from breadth.bfs.cpu.bottom_up import degree_buckets, degree_ordered_columns
from breadth.pipeline import kronecker, prepare

from conftest import one_shard, scipy_levels


def _check_order(offsets, cols, ordered, degree):
    for r in range(offsets.size - 1):
        a, b = offsets[r], offsets[r + 1]
        np.testing.assert_array_equal(np.sort(ordered[a:b]), cols[a:b])
        bits = np.floor(np.log2(degree[ordered[a:b]])).astype(int)  # every neighbour has degree >= 1
        assert np.all(np.diff(bits) <= 0)


def test_degree_ordered_columns_permute_rows_by_degree():
    edges = kronecker(10, seed=4).edges.compute(scheduler="sync")
    shard = one_shard(edges, 1 << 10, False)
    deg = np.diff(shard.offsets)
    bitlength = np.where(deg > 0, np.floor(np.log2(np.maximum(deg, 1))) + 1, 0)
    np.testing.assert_array_equal(degree_buckets(shard.offsets), (63 - bitlength).astype(np.uint8))
    _check_order(shard.offsets, shard.columns, degree_ordered_columns(shard.offsets, shard.columns), deg)


def test_prepared_cpu_shards_carry_the_order_and_search_right(lclient):
    scale, n = 11, 1 << 11
    edges = kronecker(scale, seed=5).edges.compute(scheduler="sync")
    for nparts in (1, 2):
        g = prepare(kronecker(scale, seed=5), lclient, nparts=nparts)
        shards = lclient.gather(g.shards)
        deg = np.concatenate([np.diff(s.offsets) for s in shards])
        for s in shards:
            assert "bu_columns" in s.meta
            _check_order(s.offsets, s.columns, s.meta["bu_columns"], deg)
        roots = np.flatnonzero(deg)[[0, 99, 500]]
        for res in bfs(g, roots.tolist()):
            np.testing.assert_array_equal(res.level, scipy_levels(edges, n, res.root))
        g.release()
