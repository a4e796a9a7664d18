"""The five Graph500 validation rules, checked on one rank's shard against the global search result.

1. The parent array is a tree rooted at ``root``: every reached vertex's parent chain ends at the root
   (no cycles, no dangling parents) and the root is its own parent.
2. Each tree edge joins levels that differ by exactly one (``level[v] == level[parent[v]] + 1``, root at 0).
3. Every graph edge joins vertices whose levels differ by at most one, or two unreached vertices.
4. The tree spans the root's whole component: no edge has exactly one reached endpoint, and a vertex
   has a parent exactly when it has a level.
5. Every vertex and its parent are joined by an edge of the graph.

Rules 2-5 read the shard's rows (the cleaned, deduplicated input edges; for directed graphs the out-edges
and, for rule 5, the in-edges), so each rank checks its own rows.  Rule 1 needs the whole parent array and
is checked once (by pointer doubling, ``O(n log depth)``).  Each rule reports its number of violations.
"""

from __future__ import annotations

import numba
import numpy as np

#: the rules' names, in the order of the module notes (1-5): the keys of :func:`validate`'s answer and of a
#: Graph500 report's per-root ``violations``
RULES = ("tree", "tree_edge_levels", "edge_levels", "spans_component", "parent_is_neighbour")


@numba.njit(parallel=True, nogil=True, cache=True)
def _row_rules(offsets, cols, in_offsets, in_cols, lo, parent, level_g, root, directed):
    n = level_g.size
    r2 = 0
    r3 = 0
    r4 = 0
    r5 = 0
    for i in numba.prange(offsets.size - 1):
        v = lo + i
        lv = level_g[v]
        p = parent[i]
        if (p >= 0) != (lv >= 0):
            r4 += 1
        for k in range(offsets[i], offsets[i + 1]):
            u = np.int64(cols[k])
            lu = level_g[u]
            if directed:
                # out-edge v -> u: a reached tail reaches its head, at most one level deeper
                if lv >= 0 and lu < 0:
                    r4 += 1
                elif lv >= 0 and lu > lv + 1:
                    r3 += 1
            elif (lv >= 0) != (lu >= 0):
                r4 += 1
            elif lv >= 0 and abs(lv - lu) > 1:
                r3 += 1
        if lv >= 0 and p >= 0:
            if v == root:
                if p != root or lv != 0:
                    r2 += 1
                continue
            if p >= n or level_g[p] != lv - 1:
                r2 += 1
            # rule 5: p must be an in-neighbour of v (binary search in the sorted row)
            a = in_offsets[i]
            b = in_offsets[i + 1]
            while a < b:
                mid = (a + b) // 2
                if in_cols[mid] < p:
                    a = mid + 1
                else:
                    b = mid
            if a == in_offsets[i + 1] or in_cols[a] != p:
                r5 += 1
    return r2, r3, r4, r5


@numba.njit(nogil=True, cache=True)
def _tree_violations(parent, root):
    # Each reached vertex's chain is walked until it meets a vertex already decided (the root is decided
    # good), then walked again to record the outcome on the path: every vertex is decided once, O(n), with a
    # byte of state per vertex and no other array (the search's caches stay warm for the next root).
    n = parent.size
    state = np.zeros(n, np.uint8)  # 0 unknown, 1 ends at the root, 2 does not, 3 on the current path
    state[root] = 1
    bad = 1 if parent[root] != root else 0
    for v in range(n):
        if parent[v] < 0:
            continue
        if parent[v] >= n:
            bad += 1
        if state[v] != 0:
            continue
        u = v
        dangling = False
        while state[u] == 0:
            state[u] = 3
            p = parent[u]
            if p < 0 or p >= n:
                dangling = True
                break
            u = p
        outcome = 1 if not dangling and state[u] == 1 else 2
        u = v
        while state[u] == 3:
            state[u] = outcome
            p = parent[u]
            if p < 0 or p >= n:
                break
            u = p
    for v in range(n):
        if parent[v] >= 0 and state[v] == 2:
            bad += 1
    return bad


def tree_violations(parent_g: np.ndarray, root: int) -> int:
    """Rule 1 on the global parent array: reached vertices whose parent chain does not end at ``root``
    (plus parents outside the graph, and a root that is not its own parent)."""
    return int(_tree_violations(np.ascontiguousarray(parent_g), root))


def row_violations(shard, parent_local: np.ndarray, level_g: np.ndarray, root: int) -> tuple[int, int, int, int]:
    """Rules 2-5 over ``shard``'s rows (``parent_local`` covers its owned vertices)."""
    in_off = shard.in_offsets if shard.directed else shard.offsets
    in_col = shard.in_columns if shard.directed else shard.columns
    # parents as the search keeps them (int32 or int64): a widened copy would only cost memory traffic
    return tuple(int(x) for x in _row_rules(shard.offsets, shard.columns, in_off, in_col, shard.lo,
                                            np.ascontiguousarray(parent_local),
                                            np.ascontiguousarray(level_g, np.int32), root, shard.directed))


def validate(shards, parent: np.ndarray, level: np.ndarray, root: int) -> dict[str, int]:
    """Check a whole search result against the five Graph500 rules, in this process.

    For results gathered on one machine (tests, small graphs); a search session checks each rank's part
    where it lives instead (the Graph500 driver).

    Parameters
    ----------
    shards : list of Shard
        Every shard of the graph (NumPy arrays), together covering ``0..n-1``.
    parent : array_like
        ``(n,)`` parents in dense ids (a root its own parent, -1 unreached).
    level : array_like
        ``(n,)`` levels (-1 unreached).
    root : int
        The search's root (dense id).

    Returns
    -------
    dict of str to int
        Each rule's name (:data:`RULES`) -> its number of violations; all 0 means valid.

    Examples
    --------
    An undirected path 0 - 1 - 2 - 3 and a vertex 4 alone, searched from 0:

    >>> import numpy as np
    >>> from breadth.bfs import Shard, validate
    >>> shard = Shard(rank=0, nparts=1, num_vertices=5, lo=0, hi=5,
    ...               offsets=np.array([0, 1, 3, 5, 6, 6]), columns=np.array([1, 0, 2, 1, 3, 2], np.int32),
    ...               tuple_degree=np.array([1, 2, 2, 1, 0], np.int32), self_loops=np.zeros(5, np.int32))
    >>> v = validate([shard], parent=[0, 0, 1, 2, -1], level=[0, 1, 2, 3, -1], root=0)
    >>> all(x == 0 for x in v.values())
    True

    Vertex 3's parent claimed to be 1, which is no neighbour of 3:

    >>> validate([shard], parent=[0, 0, 1, 1, -1], level=[0, 1, 2, 2, -1], root=0)["parent_is_neighbour"]
    1
    """
    parent = np.asarray(parent, np.int64)
    level = np.asarray(level, np.int32)
    counts = np.zeros(4, np.int64)
    for s in shards:
        counts += row_violations(s, parent[s.lo:s.hi], level, root)
    return dict(zip(RULES, [tree_violations(parent, root), *(int(c) for c in counts)]))


def validate_rank(engine, root: int) -> dict[str, int]:
    """Collective: every rank checks its rows against the all-gathered result; rank 0 checks rule 1."""
    comm = engine.comm
    b = engine.b
    on_device = b.checks_on_device  # backends that check on their device (GPU): no host copies
    to_host = (lambda a: a) if on_device else b.to_host
    xp = b.xp if on_device else np
    rows_fn = b.row_violations if on_device else row_violations
    tree_fn = b.tree_violations if on_device else tree_violations
    parent_local = to_host(engine.parent)
    level_g = to_host(engine.level) if comm.size == 1 else \
        xp.concatenate([to_host(x) for x in comm.allgather(engine.level)])
    shard = engine.shard if b.name == "cpu" or on_device else engine.shard.to(np)
    counts = np.array(rows_fn(shard, parent_local, level_g, root), np.int64)
    del level_g  # n-sized: gone before rank 0 gathers the n parents of rule 1
    tree = 0
    if comm.size == 1:
        tree = tree_fn(parent_local, root)
    else:
        # only rank 0 needs the whole parent array: the others send it theirs and receive nothing
        none = engine.parent[:0]
        parents = comm.alltoallv([engine.parent if r == 0 else none for r in range(comm.size)])
        if comm.rank == 0:
            tree = tree_fn(xp.concatenate([to_host(x) for x in parents]), root)
    total = comm.allreduce(np.concatenate([[tree], counts]).astype(np.int64))
    return dict(zip(RULES, (int(x) for x in total)))
