"""The edge-list handle that every source produces and :func:`~breadth.pipeline.prepare` consumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class EdgeList:
    """An edge list in dense vertex ids, lazy: what every source returns and :func:`~breadth.pipeline.prepare`
    consumes.

    Parameters
    ----------
    edges : dask.array.Array
        ``(m, 2)`` ``[source, target]`` tuples in ids ``0..num_vertices-1``: int64, or int32 where a source
        relabeled its ids and they fit (:func:`~breadth.bfs.shard.column_dtype`).  Self-loops and
        duplicates are kept (preparation counts and removes them).  ``None`` once :meth:`release` ran.
    num_vertices : int
        ``n``: the ids lie in ``[0, n)``; vertices that no tuple names are isolated.
    directed : bool, default False
        Whether a tuple ``(u, v)`` is the arc ``u -> v`` only, or an undirected edge.
    source : dict, optional
        What the edges came from (``"kind"``, file paths, generator parameters, skipped lines), recorded
        in the prepared graph and in stores.
    id_map : array-like or PartitionedIdMap, optional
        The source's original ids: ``id_map[i]`` is the original id of dense vertex ``i``; results are
        reported in original ids through it.  ``None``: the ids are the originals.
    blocks, blocks_of : optional
        The source's own chunks (futures or delayed objects) that ``edges`` was assembled from, and that
        array (see :meth:`chunk_objects`).

    Examples
    --------
    >>> import dask.array as da
    >>> el = EdgeList(da.from_array(np.array([[0, 1], [1, 2], [2, 0]]), chunks=(2, 2)), num_vertices=3)
    >>> el.num_edges, el.npartitions, len(el.chunk_objects())
    (3, 2, 2)
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
        """Edge tuples ``m`` (self-loops and duplicates included), without computing anything.

        Raises
        ------
        ValueError
            The chunks were released (:meth:`release`).

        Examples
        --------
        >>> from breadth.pipeline import kronecker
        >>> kronecker(8, edgefactor=4).num_edges
        1024
        """
        return int(self._array().shape[0])

    def _array(self):
        """``edges``, or a clear error for a list whose chunks were let go (:meth:`release`)."""
        if self.edges is None:
            raise ValueError("this edge list is empty: its chunks were released (prepare(..., keep_edges=False) "
                             "hands them to the shuffle); read or build it again")
        return self.edges

    def chunk_objects(self) -> list:
        """The edge chunks as Dask objects, in order: the source's own (``blocks``) where ``edges`` is still
        the array made of them, else ``edges``' chunks.

        Preparation takes these rather than ``edges``' chunks, which are alias tasks of the source's (two a
        chunk, each scheduled like any task).

        Returns
        -------
        list
            Delayed objects or futures, each of a ``(k, 2)`` array of tuples; their ``k`` add up to
            :attr:`num_edges`.

        Raises
        ------
        ValueError
            The chunks were released (:meth:`release`).

        Examples
        --------
        >>> from breadth.pipeline import from_dask_array
        >>> len(from_dask_array(np.zeros((10, 2), np.int64), num_vertices=1).chunk_objects())
        1
        """
        if self.blocks is not None and self.edges is self.blocks_of:
            return list(self.blocks)
        return self._array().to_delayed().ravel().tolist()

    def release(self) -> None:
        """Let go of the chunks (``edges`` becomes ``None``): what they hold on the workers is freed once
        no task needs it.  :func:`~breadth.pipeline.prepare.prepare` does this with ``keep_edges=False``.

        Afterwards :attr:`num_edges`, :attr:`npartitions` and :meth:`chunk_objects` raise ``ValueError``;
        ``num_vertices``, ``source`` and ``id_map`` stay.

        Examples
        --------
        >>> from breadth.pipeline import from_dask_array
        >>> el = from_dask_array(np.array([[0, 1]]))
        >>> el.release()
        >>> el.edges is None, el.num_vertices
        (True, 2)
        """
        self.edges = self.blocks = self.blocks_of = self.workers = None

    @property
    def npartitions(self) -> int:
        """Chunks of ``edges`` (Dask's partitions along the tuples).

        Raises
        ------
        ValueError
            The chunks were released (:meth:`release`).

        Examples
        --------
        >>> from breadth.pipeline import kronecker
        >>> kronecker(10, chunk_edges=4096).npartitions
        4
        """
        return len(self._array().chunks[0])


def from_dask_array(edges, num_vertices: int | None = None, directed: bool = False) -> EdgeList:
    """An :class:`EdgeList` of an ``(m, 2)`` integer array of tuples whose ids are already dense.

    Parameters
    ----------
    edges : dask.array.Array or array-like
        ``(m, 2)`` ``[source, target]`` integer ids in ``[0, num_vertices)``; a NumPy array becomes a Dask
        array of 2^22-tuple chunks.  Ids are not relabeled: for sparse or string ids use
        :func:`~breadth.pipeline.from_dask_dataframe` or a file reader.
    num_vertices : int, optional
        ``n``; default ``max id + 1``, which computes ``edges`` once.  An id outside ``[0, n)`` is
        reported by :func:`~breadth.pipeline.prepare`, naming the chunk and row.
    directed : bool, default False
        Whether a tuple ``(u, v)`` is the arc ``u -> v`` only.

    Returns
    -------
    EdgeList
        ``edges`` as an int64 Dask array (chunks as given), ``source={"kind": "array"}``, no id map.

    Raises
    ------
    ValueError
        ``edges`` is not of shape ``(m, 2)``, or its dtype is not an integer one.

    Examples
    --------
    >>> import dask.array as da
    >>> from breadth.pipeline import from_dask_array
    >>> arr = da.from_array(np.array([[0, 1], [1, 2], [2, 0]], np.int32), chunks=(2, 2))
    >>> el = from_dask_array(arr)
    >>> el.num_vertices, el.num_edges, el.npartitions, el.edges.dtype
    (3, 3, 2, dtype('int64'))
    >>> from_dask_array(np.array([[0, 1]]), num_vertices=10, directed=True).num_vertices
    10
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
