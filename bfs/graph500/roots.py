"""Search roots: distinct vertices of degree >= 1 (self-loops not counted), reproducible from a seed."""

from __future__ import annotations

import numpy as np

from ..id_map import on_device


def _degrees_of(shard, ids):
    ids = np.asarray(ids, np.int64)
    mine = (ids >= shard.lo) & (ids < shard.hi)
    out = np.zeros(ids.size, np.int64)
    deg = shard.degree(ids[mine])
    out[mine] = np.asarray(deg.get() if on_device(deg) else deg)
    return out


def degrees(graph, ids) -> np.ndarray:
    """Cleaned out-degrees of dense ids ``ids``, asked of the shards that own them."""
    futs = [graph.client.submit(_degrees_of, s, ids, workers=[w], pure=False)
            for s, w in zip(graph.shards, graph.workers)]
    return np.sum(graph.client.gather(futs), axis=0)


def choose_roots(graph, nroots: int = 64, seed: int = 2, *, count: int | None = None) -> np.ndarray:
    """Graph500 search roots: distinct vertices of degree >= 1, drawn uniformly, reproducible from a seed.

    Candidates are drawn with ``numpy.random.default_rng(seed)`` in rounds and their degrees asked of the
    shards that own them (a few numbers per candidate travel), so the same seed gives the same roots for
    any number of shards.

    Parameters
    ----------
    graph : ShardedGraph
        The prepared graph.
    nroots : int
        How many roots.
    seed : int
        The random generator's seed.
    count : int, optional
        Draw that many instead, in the same order (the first ``nroots`` are this call's roots without it),
        as candidates that a rule then screens (:func:`~breadth.bfs.graph500.driver.graph500`'s
        ``min_component``); fewer come back without a warning.

    Returns
    -------
    ndarray
        ``(nroots,)`` int64 dense ids, in draw order; fewer (with a warning) only when the graph has fewer
        vertices of degree >= 1.

    Raises
    ------
    ValueError
        For ``nroots < 1``, or when no vertex has degree >= 1 (the graph has no edge but self-loops, and a
        search has no root).

    Examples
    --------
    >>> from breadth.bfs import choose_roots
    >>> roots = choose_roots(g, 64, seed=2)          # doctest: +SKIP
    >>> roots.shape, roots.dtype                     # doctest: +SKIP
    ((64,), dtype('int64'))
    """
    if nroots < 1:
        raise ValueError(f"nroots must be >= 1, got {nroots}")
    want = nroots if count is None else max(count, nroots)
    n = graph.num_vertices
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    seen: set[int] = set()
    draws = 0
    while len(chosen) < want and draws < 64 * n + 1024:
        cand = rng.integers(0, n, size=max(4 * nroots, 256))
        draws += cand.size
        for v, d in zip(cand.tolist(), degrees(graph, cand).tolist()):
            if d > 0 and v not in seen:
                seen.add(v)
                chosen.append(v)
                if len(chosen) == want:
                    break
    if len(chosen) < want:
        # Tiny graphs: every non-isolated vertex, in the seed's order (candidates: those drawn first)
        allv = np.arange(n)
        nz = allv[degrees(graph, allv) > 0]
        if nz.size == 0:
            raise ValueError("the graph has no edges (no vertex of degree >= 1, self-loops not counted): "
                             "no root to search from")
        if count is not None:
            rest = np.setdiff1d(nz, np.asarray(chosen, np.int64))
            rng.shuffle(rest)
            return np.asarray(chosen + rest.tolist(), np.int64)
        rng.shuffle(nz)
        chosen = nz[:nroots].tolist()
        import warnings

        warnings.warn(f"graph has only {nz.size} vertices of degree >= 1; using {len(chosen)} roots")
    return np.asarray(chosen, np.int64)
