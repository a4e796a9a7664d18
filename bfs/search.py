"""``bfs``: searches from given roots on a prepared graph, results gathered in original vertex ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .id_map import as_id_map
from .session import run_session


@dataclass
class BFSResult:
    """One search.  ``parent[i]``/``level[i]`` belong to dense vertex ``i`` (``vertex_ids[i]`` in the
    source's ids): ``parent`` in original ids (the root is its own parent, -1 unreached; an object array
    with ``None`` for unreached when ids are strings or uint64), ``level`` in hops (-1 unreached)."""

    root: int
    parent: np.ndarray  # (n,) int64, original ids
    level: np.ndarray  # (n,) int32
    vertex_ids: np.ndarray | None = None  # (n,) original ids; None when they are 0..n-1

    @property
    def reached(self) -> int:
        return int((self.level >= 0).sum())

    def to_pandas(self):
        """Reached vertices only: columns ``root, vertex, parent, level`` in original ids."""
        import pandas as pd

        mask = self.level >= 0
        vid = np.flatnonzero(mask) if self.vertex_ids is None else self.vertex_ids[mask]
        return pd.DataFrame({"root": self.root, "vertex": vid, "parent": self.parent[mask],
                             "level": self.level[mask]})


def _bfs_rank(engine, setup_s, roots):
    out = []
    for r in roots:
        engine.search(int(r))
        out.append((engine.b.to_host(engine.parent).astype(np.int64), engine.b.to_host(engine.level).copy()))
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

    Returns a :class:`BFSResult` (a list of them for a list of roots).

    >>> from breadth.bfs import bfs
    >>> res = bfs(g, 0)                       # doctest: +SKIP
    >>> res.level[:5], res.parent[:5]         # doctest: +SKIP
    """
    single = np.ndim(root) == 0
    orig = np.atleast_1d(np.asarray(root))
    dense = to_dense(graph, orig)
    parts = run_session(graph, _bfs_rank, dense, protocol=protocol, timeout=timeout)
    idm = graph_id_map(graph)
    results = []
    for i, r in enumerate(orig.tolist()):
        parent = np.concatenate([p[i][0] for p in parts])
        level = np.concatenate([p[i][1] for p in parts])
        if idm is not None:  # the parents' original ids, each looked up in the part that holds it
            ok = parent >= 0
            mapped = np.full(parent.size, -1, np.int64) if idm.dtype == np.int64 else \
                np.full(parent.size, None, dtype=object)  # uint64/str: -1 is not one of their ids -> None
            mapped[ok] = idm.to_original(parent[ok])
            parent = mapped
        results.append(BFSResult(r, parent, level, None if idm is None else idm.gather()))
    return results[0] if single else results
