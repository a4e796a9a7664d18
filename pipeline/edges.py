"""The edge-list handle that every source produces and :func:`~breadth.pipeline.prepare` consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class EdgeList:
    """A lazy ``(m, 2)`` Dask array of ``[source, target]`` tuples in ids ``0..num_vertices-1``: int64, or
    int32 where a source relabeled its ids and they fit (:func:`~breadth.bfs.shard.column_dtype`).

    ``id_map``, when present, maps dense ids back to the source's original ids (``id_map[i]`` is the
    original id of vertex ``i``); results are reported in original ids through it.
    """

    edges: Any  # dask.array.Array, shape (m, 2), int64 or int32
    num_vertices: int
    directed: bool = False
    source: dict = field(default_factory=dict)
    id_map: Any = None
    #: the source's own chunks (futures or delayed objects) that ``edges`` was assembled from, and that
    #: array: preparation takes them as they are while ``edges`` is still that array (the assembled
    #: array's chunks are alias tasks, two a chunk, each scheduled like any task)
    blocks: list | None = field(default=None, repr=False)
    blocks_of: Any = field(default=None, repr=False)
    #: the workers whose tasks the chunks were made by and may be made again by (hash relabeling's owners,
    #: pinned there): preparation refuses to start without one of them (it would wait for it forever)
    workers: list | None = field(default=None, repr=False)

    @property
    def num_edges(self) -> int:
        return int(self._array().shape[0])

    def _array(self):
        """``edges``, or a clear error for a list whose chunks were let go (:meth:`release`)."""
        if self.edges is None:
            raise ValueError("this edge list is empty: its chunks were released (prepare(..., keep_edges=False) "
                             "hands them to the shuffle); read or build it again")
        return self.edges

    def chunk_objects(self) -> list:
        """The edge chunks as Dask objects (delayed or futures of ``(k, 2)`` arrays), in order: the
        source's own where ``edges`` is still the array made of them, else ``edges``' chunks."""
        if self.blocks is not None and self.edges is self.blocks_of:
            return list(self.blocks)
        return self._array().to_delayed().ravel().tolist()

    def release(self) -> None:
        """Let go of the chunks (``edges`` becomes ``None``): what they hold on the workers is freed once
        no task needs it.  :func:`~breadth.pipeline.prepare.prepare` does this with ``keep_edges=False``."""
        self.edges = self.blocks = self.blocks_of = self.workers = None

    @property
    def npartitions(self) -> int:
        return len(self._array().chunks[0])


def from_dask_array(edges, num_vertices: int | None = None, directed: bool = False) -> EdgeList:
    """Wrap an ``(m, 2)`` integer Dask (or NumPy) array of dense vertex ids.

    ``num_vertices`` defaults to ``max id + 1`` (computed).

    >>> import numpy as np
    >>> from breadth.pipeline import from_dask_array
    >>> g = from_dask_array(np.array([[0, 1], [1, 2]]))
    >>> g.num_vertices
    3
    """
    import dask.array as da

    arr = edges if isinstance(edges, da.Array) else da.from_array(np.asarray(edges), chunks=(1 << 22, 2))
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"edges must have shape (m, 2), got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"edge ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if num_vertices is None:
        num_vertices = int(arr.max().compute()) + 1 if arr.shape[0] else 0
    return EdgeList(arr, num_vertices=num_vertices, directed=directed, source={"kind": "array"})
