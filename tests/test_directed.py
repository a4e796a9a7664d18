"""Directed graphs: out-edges CSR + in-edges CSC, BFS follows out-edges in both directions of the engine."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import scipy_levels

# 0 -> 1 -> 2 -> 3, 2 -> 0, 4 -> 0 (4 only reaches in), 5 <-> 6 elsewhere, 1 -> 1 self-loop, 0 -> 1 twice
EDGES = np.array([[0, 1], [1, 2], [2, 3], [2, 0], [4, 0], [5, 6], [6, 5], [1, 1], [0, 1]], np.int64)
N = 7


def _shard(directed):
    from breadth.pipeline.kernels.build_csr import build_shard
    from breadth.pipeline.kernels.partition import split_by_owner
    from breadth.bfs.shard import block_size

    pieces = split_by_owner(EDGES, N, block_size(N, 1), 1, directed)
    return build_shard(0, 1, N, pieces, directed)


def test_csr_and_csc():
    s = _shard(True)
    rows = lambda off, col: [col[off[i]:off[i + 1]].tolist() for i in range(N)]  # noqa: E731
    assert rows(s.offsets, s.columns) == [[1], [2], [0, 3], [], [0], [6], [5]]
    assert rows(s.in_offsets, s.in_columns) == [[2, 4], [0], [1], [2], [], [6], [5]]
    u = _shard(False)
    assert u.in_offsets is None
    assert rows(u.offsets, u.columns) == [[1, 2, 4], [0, 2], [0, 1, 3], [2], [0], [6], [5]]


@pytest.mark.parametrize("alpha", [1e-9, 1e9])  # top-down only / bottom-up from the first level on
@pytest.mark.parametrize("directed", [True, False])
def test_levels_directed_vs_undirected(directed, alpha):
    from breadth.bfs import Engine, validate

    s = _shard(directed)
    eng = Engine(s, alpha=alpha, beta=1e9)
    for root in range(N):
        recs = eng.search(root)
        if len(recs) > 1:  # the root has out-edges: the first level runs in the forced direction
            assert {r.direction for r in recs} == ({"bu"} if alpha > 1 else {"td"})
        want = scipy_levels(EDGES, N, root, directed=directed)
        np.testing.assert_array_equal(eng.level, want)
        assert not any(validate([s], eng.parent, eng.level, root).values())
    eng.search(4)
    if directed:
        assert eng.level.tolist() == [1, 2, 3, 4, 0, -1, -1]
    else:
        assert eng.level.tolist() == [1, 2, 2, 3, 0, -1, -1]


def test_directed_validation_catches_an_unfollowed_out_edge():
    from breadth.bfs import Engine, validate

    s = _shard(True)
    eng = Engine(s)
    eng.search(0)
    parent, level = eng.parent.copy(), eng.level.copy()
    parent[3], level[3] = -1, -1  # 2 -> 3 not followed
    v = validate([s], parent, level, 0)
    assert v["spans_component"] > 0
    parent2, level2 = eng.parent.copy(), eng.level.copy()
    parent2[1] = 2  # 2 -> 1 is not an edge (1 -> 2 is)
    assert validate([s], parent2, level2, 0)["parent_is_neighbour"] > 0 or \
        validate([s], parent2, level2, 0)["tree_edge_levels"] > 0


def test_directed_teps_edge_count():
    """Directed nedge: input tuples whose tail was reached (self-loops and duplicates included)."""
    from distributed import Client, LocalCluster

    from breadth.bfs import graph500
    from breadth.pipeline import from_dask_array, prepare

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as c:
        g = prepare(from_dask_array(EDGES, N, directed=True), c)
        assert g.directed and g.num_edges == 7  # duplicate 0->1 merged, self-loop dropped
        res = graph500(g, nroots=7, validate=True)
        assert res.valid
        for row in res.rows:
            reached = scipy_levels(EDGES, N, row["root"], directed=True) >= 0
            assert row["nedge"] == int(reached[EDGES[:, 0]].sum())
