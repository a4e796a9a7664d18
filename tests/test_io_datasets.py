"""Every file in ../shared/data ingests to its README's counts, and BFS from it matches scipy."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DATA, load_snap, scipy_levels

# name -> (edges, vertices, directed) as ../shared/data/README.md states them
DATASETS = {
    "facebook_combined.txt.gz": (88_234, 4_039, False),
    "Wiki-Vote.txt": (103_689, 7_115, True),
    "p2p-Gnutella31.txt": (147_892, 62_586, True),
    "CA-CondMat.txt": (186_936, 23_133, False),
    "Email-Enron.txt": (367_662, 36_692, False),
    "soc-Slashdot0902.txt.gz": (948_464, 82_168, True),
    "cnr-2000.txt.gz": (3_216_152, 325_557, True),
}


@pytest.mark.parametrize("name", list(DATASETS))
def test_counts_and_bfs_levels(name, lclient):
    from breadth.bfs import bfs
    from breadth.pipeline import read_edges
    from breadth.pipeline import prepare

    m, n, directed = DATASETS[name]
    if not (DATA / name).exists():
        pytest.skip(f"{DATA / name} not present")
    el = read_edges(str(DATA / name), directed=directed, client=lclient, chunk_bytes=1 << 20)
    assert el.num_edges == m
    assert el.num_vertices == n
    assert el.source["skipped_lines"] == 0
    # the id map is the sorted distinct original ids, and dense ids map back to them
    raw = load_snap(name)
    ids = np.unique(raw)
    np.testing.assert_array_equal(el.id_map, ids)
    g = prepare(el, lclient)
    assert g.num_input_edges == m and g.num_vertices == n
    dense = np.searchsorted(ids, raw)
    rng = np.random.default_rng(len(name))
    roots = ids[rng.choice(n, 3, replace=False)]
    results = bfs(g, roots.tolist())
    for root, res in zip(roots, results):
        expect = scipy_levels(dense, n, int(np.searchsorted(ids, root)), directed=directed)
        np.testing.assert_array_equal(res.level, expect)
        # parents are original ids of vertices one level up
        reached = res.level > 0
        par_dense = np.searchsorted(ids, res.parent[reached])
        np.testing.assert_array_equal(res.level[par_dense], res.level[reached] - 1)
    g.release()
