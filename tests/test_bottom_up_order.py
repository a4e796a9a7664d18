"""Bottom-up's degree-ordered rows on CPU shards: a per-row permutation of the sorted rows, highest
degree first, built by preparation, and searches over them still equal scipy's levels."""

import numpy as np
import pytest

from breadth.bfs import bfs
from breadth.bfs.cpu import bottom_up
from breadth.bfs.cpu.bottom_up import degree_buckets, degree_ordered_columns
from breadth.pipeline import kronecker, prepare

from conftest import one_shard, scipy_levels


def _check_order(offsets, cols, ordered, degree):
    for r in range(offsets.size - 1):
        a, b = offsets[r], offsets[r + 1]
        np.testing.assert_array_equal(np.sort(ordered[a:b]), cols[a:b])
        bits = np.floor(np.log2(degree[ordered[a:b]])).astype(int)  # every neighbour has degree >= 1
        assert np.all(np.diff(bits) <= 0)


@pytest.mark.parametrize("buffer", [bottom_up.ORDER_BUFFER, 64])
def test_degree_ordered_columns_permute_rows_by_degree(monkeypatch, buffer):
    """Each row by decreasing degree bucket, ties in id order; with a buffer of 64 entries the rows go in many
    runs, and the hubs' rows (hundreds of entries) are longer than a run."""
    monkeypatch.setattr(bottom_up, "ORDER_BUFFER", buffer)
    edges = kronecker(10, seed=4).edges.compute(scheduler="sync")
    shard = one_shard(edges, 1 << 10, False)
    deg = np.diff(shard.offsets)
    assert deg.max() > 4 * 64 and (deg == 0).any()
    bitlength = np.where(deg > 0, np.floor(np.log2(np.maximum(deg, 1))) + 1, 0)
    np.testing.assert_array_equal(degree_buckets(shard.offsets), (63 - bitlength).astype(np.uint8))
    ordered = degree_ordered_columns(shard.offsets, shard.columns)
    _check_order(shard.offsets, shard.columns, ordered, deg)
    rows = np.repeat(np.arange(deg.size), deg)
    # by bucket (the degree's bit length, longest first), then id
    want = shard.columns[np.lexsort((shard.columns, -bitlength[shard.columns], rows))]
    np.testing.assert_array_equal(ordered, want)


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
