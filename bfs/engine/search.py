"""``bfs``: searches from given roots on a prepared graph; results stay on the workers, in original ids."""

from __future__ import annotations

import numpy as np

from ..id_map import as_id_map
from ..results import BFSResult, write_results_dataset
from ..search_config import SearchConfig
from .session import run_session

__all__ = ["BFSResult", "bfs", "to_dense", "write_results_dataset"]


def _bfs_rank(engine, setup_s, roots, depth_limit=None):
    """Per root: ``(lo, parent, level)`` of this rank's vertices (dense ids), left on the worker."""
    out = []
    lo = int(engine.shard.lo)
    for r in roots:
        engine.search(int(r), depth_limit)
        # parents in the search's own dtype (int32 below 2^31 vertices): half the bytes kept per root
        out.append((lo, engine.b.to_host(engine.parent).copy(), engine.b.to_host(engine.level).copy()))
    return out


def graph_id_map(graph):
    """The graph's id map as a :class:`~breadth.bfs.id_map.PartitionedIdMap` (None without one); a
    classic single-array map is wrapped once."""
    idm = as_id_map(graph.id_map, graph.client)
    if idm is not None and idm is not graph.id_map:
        graph.id_map = idm
    return idm


def to_dense(graph, ids) -> np.ndarray:
    """Dense ids (``(k,)`` int64) of original ids (the identity when the graph has no id map).  Each id is
    looked up in the id-map part that owns it; raises KeyError for an id not in the graph.

    >>> to_dense(g, [30, 7])          # doctest: +SKIP
    array([ 2, 11])
    """
    ids = np.atleast_1d(np.asarray(ids))
    idm = graph_id_map(graph)
    if idm is None:
        if ids.dtype.kind not in "iu":
            raise KeyError(f"vertex {ids[0]!r} is not in the graph")
        dense = ids.astype(np.int64)
        bad = (dense < 0) | (dense >= graph.num_vertices)
    else:
        from ..worker_loss import watch_workers

        with watch_workers(graph.client, "id lookup", graph.workers):  # the map's parts are on the workers
            dense = idm.to_dense(ids)
        bad = dense < 0
    if bad.any():
        raise KeyError(f"vertex {ids[bad][0]!r} is not in the graph")
    return dense.astype(np.int64)


def bfs(graph, root=None, *, sources=None, depth_limit: int | None = None, protocol: str = "auto",
        timeout: float = 60.0, config: SearchConfig | None = None):
    """Breadth-first search on a prepared graph, one session of all its ranks; results stay on the workers.

    Give exactly one of ``root`` (independent searches, one per root) and ``sources`` (one search from all
    of them together).  The ranks search with the direction-optimizing engine of the graph's backend and
    partitioning; each keeps its vertices' parents and levels in host memory (8 bytes per owned vertex and
    search, 12 on GPU ranks, whose parents are int64) until the result is dropped.

    Parameters
    ----------
    graph : ShardedGraph
        The prepared graph (:class:`~breadth.bfs.sharded_graph.ShardedGraph`).
    root : int or str or list, optional
        An original id -> one :class:`~breadth.bfs.results.BFSResult`; a list of original ids -> a list of
        independent searches, one result each, searched one after another in one session (see
        :func:`~breadth.bfs.engine.batch_search.bfs_batch` to run up to 64 of them in one pass).
    sources : list, optional
        Original ids searched *together*, all at level 0 -> one result in which each reached vertex's level
        is its distance to the nearest source and its parent chain ends in one source (a source is its own
        parent).  Repeated sources count once.  The result's ``root`` (and the ``root`` column of its
        frames) is the first source; ``.sources`` lists them all.
    depth_limit : int, optional
        Stop after that many levels: vertices farther away are left unreached (0 keeps only the roots or
        sources).
    protocol : str
        The ranks' transport (:func:`~breadth.bfs.engine.session.run_session`): ``"auto"``, ``"tcp"``,
        ``"ucx"`` or ``"nccl"``.
    timeout : float
        Seconds a rank waits for a silent peer before the search fails.
    config : SearchConfig, optional
        The search's tunables (default: :meth:`SearchConfig.from_config`).

    Returns
    -------
    BFSResult or list of BFSResult
        One result for one ``root`` or for ``sources``; a list, in order, for a list of roots.

    Raises
    ------
    TypeError
        When both or neither of ``root`` and ``sources`` are given.
    KeyError
        For an id that is not in the graph.
    ValueError
        For an empty ``sources`` or a negative ``depth_limit``.
    RankError
        When a rank fails during the search (:func:`~breadth.bfs.engine.session.run_session`).

    Examples
    --------
    >>> from breadth.bfs import bfs
    >>> res = bfs(g, 0)                                     # doctest: +SKIP
    >>> res.level[:5], res.parent[:5]                       # doctest: +SKIP
    >>> near = bfs(g, sources=[3, 17, 40], depth_limit=2)   # doctest: +SKIP
    >>> near.to_parquet("out/near")                         # doctest: +SKIP
    """
    from .engine import check_depth_limit

    if (root is None) == (sources is None):
        raise TypeError("bfs() needs exactly one of root (one search per root) or sources= (one search "
                        "from all of them together)")
    check_depth_limit(depth_limit)
    client, idm = graph.client, graph_id_map(graph)
    if sources is not None:
        orig = _as_ids(sources)
        if orig.size == 0:
            raise ValueError("sources is empty: a search needs at least one source")
        dense = to_dense(graph, orig)
        ranks = run_session(graph, _multi_source_rank, dense, depth_limit, protocol=protocol, timeout=timeout,
                            config=config, gather=False)
        ids = orig.tolist() if orig.dtype != object else list(orig)
        return BFSResult(ids[0], ranks, idm, client, sources=ids, workers=graph.workers)
    single = np.ndim(root) == 0
    orig = _as_ids(root)
    dense = to_dense(graph, orig)
    ranks = run_session(graph, _bfs_rank, dense, depth_limit, protocol=protocol, timeout=timeout, config=config,
                        gather=False)
    roots = orig.tolist() if orig.dtype != object else list(orig)
    results = []
    for i, r in enumerate(roots):
        per_rank = [client.submit(_pick, f, i, pure=False) for f in ranks]
        results.append(BFSResult(r, per_rank, idm, client, workers=graph.workers))
    return results[0] if single else results


def _as_ids(ids) -> np.ndarray:
    """Original ids as a 1-D array (object for strings)."""
    return np.atleast_1d(np.asarray(list(ids) if not np.isscalar(ids) and not isinstance(ids, np.ndarray)
                                    else ids))


def _multi_source_rank(engine, setup_s, sources, depth_limit):
    """``(lo, parent, level)`` of this rank's vertices after one search from all ``sources``."""
    engine.search(np.asarray(sources, np.int64), depth_limit)
    return (int(engine.shard.lo), engine.b.to_host(engine.parent).copy(), engine.b.to_host(engine.level).copy())


def _pick(rank_out: list, i: int) -> tuple:
    return rank_out[i]
