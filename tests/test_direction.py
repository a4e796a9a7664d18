"""The direction rule (:mod:`breadth.bfs.engine.direction`): its boundaries, and the CPU engine's levels going the way
the rule says for the frontiers its searches made."""

from __future__ import annotations

import numpy as np
import pytest

from breadth.bfs.engine.direction import next_direction, top_down_bound
from breadth.bfs.engine.engine import Engine
from breadth.pipeline import kronecker

from conftest import one_shard, roots_with_edges


def _rule(direction, **kw):
    counts = dict(frontier_edges=0, edges_to_check=0, frontier=0, previous=0, num_vertices=1000, alpha=15.0,
                  beta=10.0)
    return next_direction(direction, **{**counts, **kw})


def test_top_down_boundaries():
    assert _rule("td", frontier_edges=100, edges_to_check=1500) == "td"  # equal: stays
    assert _rule("td", frontier_edges=101, edges_to_check=1500) == "bu"
    assert _rule("td", frontier_edges=10 ** 12, edges_to_check=1, alpha=0.0) == "td"  # alpha 0: never bottom-up
    assert _rule("td", frontier_edges=1, edges_to_check=10 ** 12, alpha=float("inf")) == "bu"
    assert _rule("td", frontier_edges=0, edges_to_check=0, alpha=float("inf")) == "td"  # (inf * 0 is nan)
    assert _rule("td", frontier_edges=1, edges_to_check=0, frontier=5, previous=900) == "bu"  # counts of bu unread


def test_bottom_up_boundaries():
    assert _rule("bu", frontier=99, previous=100) == "td"  # shrinking, below 1000 / 10
    assert _rule("bu", frontier=100, previous=200) == "bu"  # not below n / beta
    assert _rule("bu", frontier=50, previous=50) == "bu"  # not shrinking
    assert _rule("bu", frontier=0, previous=50) == "bu"  # an empty frontier ends the search, in either direction
    assert _rule("bu", frontier=5, previous=900, frontier_edges=0, edges_to_check=10 ** 9) == "td"  # td's unread


@pytest.mark.parametrize("edges_to_check,alpha,parts", [(10_000, 15.0, 2), (12_345, 7.5, 3), (99, 50.0, 4),
                                                         (0, 15.0, 2)])
def test_top_down_bound_keeps_top_down(edges_to_check, alpha, parts):
    bound = top_down_bound(edges_to_check, alpha, parts, cap=1 << 18)
    kw = dict(edges_to_check=edges_to_check, frontier=0, previous=0, num_vertices=1 << 20, alpha=alpha, beta=18.0)
    assert next_direction("td", frontier_edges=parts * bound, **kw) == "td"
    assert next_direction("td", frontier_edges=parts * (bound + 1), **kw) == "bu"  # (the bound is tight)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("alpha,beta", [(None, None), (2.0, 4.0), (100.0, 100.0), (1e9, 1e9)])
def test_engine_levels_follow_the_rule(directed, alpha, beta):
    """Replay the rule on the frontiers a search made (from its levels: each frontier's vertices and out-edges) and
    check each level's direction, including where bottom-up turns top-down and the rule is asked again at once."""
    scale = 12
    n = 1 << scale
    edges = kronecker(scale, seed=3).edges.compute(scheduler="sync")
    shard = one_shard(edges, n, directed)
    eng = Engine(shard, alpha=alpha, beta=beta, nchunks=1)  # one chunk: no racing claims, exact counts
    outdeg = np.diff(shard.offsets)
    seen = set()
    for root in roots_with_edges(edges, n, 6, seed=1):
        records = eng.search(int(root))
        sizes = np.bincount(eng.level[eng.level >= 0], minlength=len(records) + 1)
        degs = np.bincount(eng.level[eng.level >= 0], weights=outdeg[eng.level >= 0], minlength=len(records) + 1)
        rule = dict(num_vertices=n, alpha=eng.alpha, beta=eng.beta)
        direction, edges_to_check, scout, frontier, previous = "td", eng.total_edges, int(degs[0]), 1, 0
        for d, rec in enumerate(records, start=1):
            assert (rec.frontier, rec.found) == (frontier, int(sizes[d])), (root, d)
            if direction == "td":
                direction = next_direction("td", frontier_edges=scout, edges_to_check=edges_to_check,
                                           frontier=frontier, previous=previous, **rule)
            assert rec.direction == direction, (root, d)
            if direction == "td":
                edges_to_check = max(edges_to_check - scout, 0)
            else:
                direction = next_direction("bu", frontier_edges=scout, edges_to_check=edges_to_check,
                                           frontier=rec.found, previous=frontier, **rule)
            scout, previous, frontier = int(degs[d]), frontier, rec.found
        seen.add("".join(r.direction[0] for r in records))
    if alpha is None:
        assert any("tb" in s for s in seen) and any("bt" in s for s in seen)  # both turns taken
