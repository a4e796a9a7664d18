"""``bfs``: searches from given roots on a prepared graph; results stay on the workers, in original ids."""

from __future__ import annotations

import numpy as np

from .id_map import as_id_map
from .results import BFSResult, write_results_dataset
from .session import run_session

__all__ = ["BFSResult", "bfs", "to_dense", "write_results_dataset"]


def _bfs_rank(engine, setup_s, roots):
    """Per root: ``(lo, parent, level)`` of this rank's vertices (dense ids), left on the worker."""
    out = []
    lo = int(engine.shard.lo)
    for r in roots:
        engine.search(int(r))
        out.append((lo, engine.b.to_host(engine.parent).astype(np.int64), engine.b.to_host(engine.level).copy()))
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
        dense = idm.to_dense(ids)
        bad = dense < 0
    if bad.any():
        raise KeyError(f"vertex {ids[bad][0]!r} is not in the graph")
    return dense.astype(np.int64)


def bfs(graph, root, *, protocol: str = "tcp", timeout: float = 60.0):
    """Breadth-first search from ``root`` (an original id, or a list of them).

    Returns a :class:`~breadth.bfs.results.BFSResult` (a list of them for a list of roots) whose data
    stay on the workers until asked for.

    >>> from breadth.bfs import bfs
    >>> res = bfs(g, 0)                       # doctest: +SKIP
    >>> res.level[:5], res.parent[:5]         # doctest: +SKIP
    >>> res.to_parquet("out/bfs-0")           # doctest: +SKIP
    """
    single = np.ndim(root) == 0
    orig = np.atleast_1d(np.asarray(root))
    dense = to_dense(graph, orig)
    ranks = run_session(graph, _bfs_rank, dense, protocol=protocol, timeout=timeout, gather=False)
    client = graph.client
    idm = graph_id_map(graph)
    roots = orig.tolist() if orig.dtype != object else list(orig)
    results = []
    for i, r in enumerate(roots):
        per_rank = [client.submit(_pick, f, i, pure=False) for f in ranks]
        results.append(BFSResult(r, per_rank, idm, client))
    return results[0] if single else results


def _pick(rank_out: list, i: int) -> tuple:
    return rank_out[i]
