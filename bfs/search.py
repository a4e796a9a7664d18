"""``bfs``: searches from given roots on a prepared graph, results gathered in original vertex ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def to_dense(graph, ids) -> np.ndarray:
    """Dense ids of original ids (the identity when the graph has no id map)."""
    ids = np.atleast_1d(np.asarray(ids))
    if graph.id_map is None:
        dense = ids.astype(np.int64)
        bad = (dense < 0) | (dense >= graph.num_vertices)
    else:
        idm = np.asarray(graph.id_map)
        dense = np.searchsorted(idm, ids)
        bad = (dense >= idm.size) | (idm[np.minimum(dense, idm.size - 1)] != ids)
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
    idm = None if graph.id_map is None else np.asarray(graph.id_map)
    results = []
    for i, r in enumerate(orig.tolist()):
        parent = np.concatenate([p[i][0] for p in parts])
        level = np.concatenate([p[i][1] for p in parts])
        if idm is not None and idm.dtype.kind == "i":
            parent = np.where(parent >= 0, idm[np.maximum(parent, 0)], -1)
        elif idm is not None:  # uint64 or string ids: -1 is not one of their ids, so unreached -> None
            reached = parent >= 0
            mapped = np.full(parent.size, None, dtype=object)
            mapped[reached] = idm[parent[reached]]
            parent = mapped
        results.append(BFSResult(r, parent, level, idm))
    return results[0] if single else results
