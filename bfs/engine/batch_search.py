"""``bfs_batch``: many independent searches, up to 64 per pass (MS-BFS), results as the single searches'.

The roots are cut into batches of at most 64; each batch is one level-synchronous pass of
:class:`~breadth.bfs.engine.batch_engine.BatchEngine` on every rank, all batches in one session.  Each root's
result is a :class:`~breadth.bfs.results.BFSResult` like :func:`~breadth.bfs.engine.search.bfs`'s: the same
levels as a single-root search (parents may differ; each is a neighbour one level up), data left on the workers.
"""

from __future__ import annotations

from ..results import BFSResult
from ..search_config import SearchConfig
from .batch_engine import MAX_BATCH, BatchEngine
from .search import _as_ids, _pick, graph_id_map, to_dense
from .session import run_session


def batches(n: int, size: int = MAX_BATCH) -> list[slice]:
    """``n`` roots cut into consecutive batches of ``size`` (the last one shorter)."""
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def _batch_rank(engine: BatchEngine, setup_s, roots, depth_limit, batch_size):
    """Per root: ``(lo, parent, level)`` of this rank's vertices (dense ids), left on the worker."""
    out = []
    lo = int(engine.shard.lo)
    for sl in batches(len(roots), batch_size):
        engine.search(roots[sl], depth_limit)
        for i in range(sl.stop - sl.start):
            # parents in the search's own dtype (int32 below 2^31 vertices), as ``bfs`` keeps them
            parent, level = engine.device_result(i)
            out.append((lo, engine.k.to_host(parent).copy(), engine.k.to_host(level).copy()))
    return out


def bfs_batch(graph, roots, *, depth_limit: int | None = None, batch_size: int = MAX_BATCH,
              protocol: str = "auto", timeout: float = 60.0, config: SearchConfig | None = None) -> list[BFSResult]:
    """Independent breadth-first searches from ``roots``, up to 64 per level-synchronous pass (MS-BFS).

    A batch's searches share each level's edge reads (one bit per search in each vertex's words), so many
    roots cost far less than as many :func:`~breadth.bfs.engine.search.bfs` calls; the levels are the same
    as single searches', the parents may differ (each a neighbour one level up).  CPU graphs run the Numba
    kernels, GPU graphs the CUDA kernels of :mod:`breadth.bfs.gpu.batch_kernels`.

    Memory on each rank: a pass holds ``3 + B`` 64-bit words per owned vertex (``B`` level planes, 4 up to
    depth 15) and each (vertex, root)'s parent as the steps find them (CPUs: with its level's low byte, 5
    bytes; GPUs: 4 bytes below 2**31 vertices, or derived after the pass where the device lacks room); each
    root's parents and levels are then laid out per root (at most ``BatchEngine.result_bytes`` at once) and
    kept in the worker's host memory: 8 bytes per owned vertex and root (int32 parents below 2**31 vertices;
    int64 where a GPU derived them), as :func:`~breadth.bfs.engine.search.bfs` keeps them.

    Parameters
    ----------
    graph : ShardedGraph
        The prepared graph.
    roots : list
        Original ids, one search each; a repeated root is searched again.
    depth_limit : int, optional
        Stop after that many levels: vertices farther away are left unreached.
    batch_size : int
        Searches per pass, 1 to 64.
    protocol : str
        The ranks' transport (:func:`~breadth.bfs.engine.session.run_session`).
    timeout : float
        Seconds a rank waits for a silent peer before the search fails.
    config : SearchConfig, optional
        The search's tunables (default: :meth:`SearchConfig.from_config`).

    Returns
    -------
    list of BFSResult
        One :class:`~breadth.bfs.results.BFSResult` per root, in order (empty for no roots).

    Raises
    ------
    KeyError
        For a root that is not in the graph.
    ValueError
        For a ``batch_size`` outside 1..64 or a negative ``depth_limit``.
    RankError
        When a rank fails during the searches.

    Examples
    --------
    >>> from breadth.bfs import bfs_batch
    >>> res = bfs_batch(g, [0, 5, 9])                 # doctest: +SKIP
    >>> [r.summary() for r in res]                    # doctest: +SKIP
    >>> write_results_dataset(res, "out/batch")       # doctest: +SKIP
    """
    from .engine import check_depth_limit

    check_depth_limit(depth_limit)
    if not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be in 1..{MAX_BATCH}, got {batch_size}")
    orig = _as_ids(roots)
    if orig.size == 0:
        return []
    dense = to_dense(graph, orig)
    ranks = run_session(graph, _batch_rank, dense, depth_limit, batch_size, protocol=protocol, timeout=timeout,
                        config=config,
                        gather=False, engine_class=BatchEngine)
    client, idm = graph.client, graph_id_map(graph)
    ids = orig.tolist() if orig.dtype != object else list(orig)
    return [BFSResult(r, [client.submit(_pick, f, i, pure=False) for f in ranks], idm, client, workers=graph.workers)
            for i, r in enumerate(ids)]


__all__ = ["batches", "bfs_batch"]
