"""Each Graph500 validation rule fails on a result broken to violate it."""

import numpy as np
import pytest

from breadth.bfs import RULES, validate
from breadth.bfs.engine.engine import Engine
from breadth.bfs.shard import block_size
from breadth.pipeline import kronecker
from breadth.pipeline.kernels.build_csr import build_shard
from breadth.pipeline.kernels.partition import split_by_owner

# 0-1-2-3-0 is a 4-cycle; 3-4 and 4-5 hang a path off it; 6-7 is another component.
EDGES = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [3, 4], [4, 5], [6, 7]])
N = 8


def _shards(edges, n, nparts):
    block = block_size(n, nparts)
    pieces = [split_by_owner(edges, n, block, nparts)]
    return [build_shard(r, nparts, n, [p[r] for p in pieces]) for r in range(nparts)]


def _good():
    # BFS from 0: levels 0:0 1:1 3:1 2:2 4:2 5:3
    parent = np.array([0, 0, 1, 0, 3, 4, -1, -1])
    level = np.array([0, 1, 2, 1, 2, 3, -1, -1])
    return parent, level


def test_correct_result_passes():
    parent, level = _good()
    assert validate(_shards(EDGES, N, 1), parent, level, 0) == dict.fromkeys(RULES, 0)


def _broken(rule):
    parent, level = _good()
    if rule == "tree":  # a cycle 4 -> 5 -> 4, detached from the root
        parent[4], parent[5] = 5, 4
    elif rule == "tree_edge_levels":  # vertex 5's level is not its parent's + 1
        level[5] = 4
    elif rule == "edge_levels":  # a valid tree that is not breadth-first: 0-1-2-3 as a path
        parent[3], level[3] = 2, 3
        level[4], level[5] = 4, 5
    elif rule == "spans_component":  # leaf 5 left unreached
        parent[5], level[5] = -1, -1
    elif rule == "parent_is_neighbour":  # 4's parent is 1 (level 1, but 1-4 is no edge)
        parent[4] = 1
    return parent, level


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("nparts", [1, 3])
def test_each_rule_catches_its_violation(rule, nparts):
    parent, level = _broken(rule)
    v = validate(_shards(EDGES, N, nparts), parent, level, 0)
    assert v[rule] > 0, v


def test_root_must_be_its_own_parent():
    parent, level = _good()
    parent[0] = 1
    assert validate(_shards(EDGES, N, 1), parent, level, 0)["tree"] > 0


def test_engine_results_pass_on_many_roots():
    n = 1 << 11
    edges = kronecker(11, seed=21).edges.compute(scheduler="sync")
    shards = _shards(edges, n, 1)
    eng = Engine(shards[0])
    for root in np.flatnonzero(np.diff(shards[0].offsets))[:20]:
        eng.search(int(root))
        assert not any(validate(shards, eng.parent, eng.level, int(root)).values())


def test_tree_violations_counts_each_bad_chain():
    from breadth.bfs.graph500.validate import tree_violations

    # 0 is the root; 1 -> 0 and 2 -> 1 are good; 3 <-> 4 is a cycle; 5 -> 6 -> (unreached 7) dangles;
    # 8's parent is outside the graph (counted once as outside and once as not ending at the root)
    parent = np.array([0, 0, 1, 4, 3, 6, 7, -1, 99, -1], np.int32)
    assert tree_violations(parent, 0) == 2 + 2 + 2
    assert tree_violations(parent.astype(np.int64)[:8], 0) == 4
    parent[0] = 1  # a root that is not its own parent counts once; chains that reach it still end there
    assert tree_violations(parent[:3], 0) == 1
