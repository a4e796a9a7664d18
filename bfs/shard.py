"""One rank's part of a graph: the CSR rows of the vertices it owns (1D partition).

Vertices are split into contiguous blocks ``[lo, hi)`` of ``block`` ids, ``block`` a multiple of 64 so
that each rank's slice of a frontier bitmap is a whole number of 64-bit words and the global bitmap is the
plain concatenation of the ranks' slices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .id_map import on_device
from .partitioning import Partitioning


def block_size(num_vertices: int, nparts: int) -> int:
    """Vertices per owner: ``ceil(n / P)`` rounded up to a multiple of 64."""
    per = -(-num_vertices // nparts)
    return max(64, -(-per // 64) * 64)


def owner_range(rank: int, nparts: int, num_vertices: int) -> tuple[int, int]:
    """The vertex ids owner ``rank`` of ``nparts`` holds, ``lo..hi-1``: its :func:`block_size` block, cut at
    ``num_vertices`` (the last owners' may be short or empty).

    Parameters
    ----------
    rank, nparts : int
        The owner and the number of owners.
    num_vertices : int
        Vertices in the graph.

    Returns
    -------
    tuple of int
        ``(lo, hi)``.

    Examples
    --------
    >>> from breadth.bfs.shard import owner_range
    >>> [owner_range(r, 3, 200) for r in range(3)]
    [(0, 128), (128, 200), (200, 200)]
    """
    block = block_size(num_vertices, nparts)
    lo = min(rank * block, num_vertices)
    return lo, min(lo + block, num_vertices)


def column_dtype(num_vertices: int) -> np.dtype:
    """32-bit column ids when every global id fits, else 64-bit."""
    return np.dtype(np.int32) if num_vertices <= np.iinfo(np.int32).max else np.dtype(np.int64)


@dataclass
class Shard:
    """CSR adjacency of the vertices ``lo..hi-1`` owned by ``rank``: one rank's part of a graph.

    Preparation (``breadth.pipeline.prepare``) or a store builds the shards, one per rank, and keeps them
    on the workers; an engine searches one.  For undirected graphs ``offsets``/``columns`` serve both
    directions (CSR is CSC); for directed graphs they are the out-edges and ``in_offsets``/``in_columns``
    the in-edges.  Arrays are NumPy on CPU ranks and CuPy on GPU ranks (:meth:`to`).

    Parameters
    ----------
    rank : int
        The owner, ``0 <= rank < nparts``.
    nparts : int
        The number of shards (ranks) of the graph.
    num_vertices : int
        ``n``, the graph's vertex count; global (dense) ids are ``0..n-1``.
    lo, hi : int
        The owned global ids ``[lo, hi)``: ``lo = rank * block`` clipped to ``n`` (see :attr:`block`).
    offsets : ndarray
        ``(hi - lo + 1,)`` int64: row ``i`` (global id ``lo + i``) is ``columns[offsets[i]:offsets[i+1]]``.
    columns : ndarray
        ``(offsets[-1],)`` int32 (int64 beyond 2**31 - 1 vertices) global ids, sorted and unique within a
        row, self-loops removed.
    tuple_degree : ndarray
        ``(hi - lo,)`` integer: the input tuples incident to each owned vertex before deduplication
        (self-loops excluded; directed graphs: out-tuples only).  The Graph500 edge count of a search is
        ``sum(tuple_degree[reached]) / 2 + sum(self_loops[reached])`` (directed:
        ``sum(tuple_degree[reached]) + sum(self_loops[reached])``, the tuples whose tail it reached).
    self_loops : ndarray
        ``(hi - lo,)`` integer: each owned vertex's input self-loops.
    in_offsets, in_columns : ndarray or None
        The in-edges (CSC) of a directed graph, laid out as ``offsets``/``columns``; None when undirected.
    meta : dict
        Derived arrays, e.g. ``"bu_columns"``: ``columns`` with each row by decreasing neighbour degree,
        which bottom-up scans.
    partitioning : Partitioning
        Where the search's adjacency entries live (:mod:`breadth.bfs.partitioning`; default 1D).
    blocks : GridBlocks or DelegateBlocks or None
        The partitioning's own block of entries; None for 1D.

    Examples
    --------
    An undirected path 0 - 1 - 2 - 3 and a vertex 4 alone, on one rank:

    >>> import numpy as np
    >>> from breadth.bfs import Shard
    >>> shard = Shard(rank=0, nparts=1, num_vertices=5, lo=0, hi=5,
    ...               offsets=np.array([0, 1, 3, 5, 6, 6]), columns=np.array([1, 0, 2, 1, 3, 2], np.int32),
    ...               tuple_degree=np.array([1, 2, 2, 1, 0], np.int32), self_loops=np.zeros(5, np.int32))
    >>> shard.num_local, shard.num_local_edges, shard.directed, shard.block
    (5, 6, False, 64)
    >>> shard.degree(np.array([1, 4])).tolist()
    [2, 0]
    """

    rank: int
    nparts: int
    num_vertices: int
    lo: int
    hi: int
    offsets: Any
    columns: Any
    tuple_degree: Any
    self_loops: Any
    in_offsets: Any = None
    in_columns: Any = None
    meta: dict = field(default_factory=dict)
    #: where the search's adjacency entries live (:mod:`breadth.bfs.partitioning`); the rows above stay the
    #: 1D rows of the owned vertices whatever it is (validation and the direction rule read them)
    partitioning: Partitioning = field(default_factory=Partitioning)
    #: the partitioning's own block of entries (:class:`~breadth.bfs.grid_blocks.GridBlocks`,
    #: :class:`~breadth.bfs.delegate_blocks.DelegateBlocks`); ``None`` for 1D
    blocks: Any = None

    @property
    def directed(self) -> bool:
        """Whether the graph is directed (the shard then holds its in-edges too)."""
        return self.in_offsets is not None

    @property
    def num_local(self) -> int:
        """The owned vertices, ``hi - lo``."""
        return self.hi - self.lo

    @property
    def num_local_edges(self) -> int:
        """The entries of the owned rows (an undirected edge counts once at each end)."""
        return int(self.offsets[-1])

    @property
    def block(self) -> int:
        """Vertices per owner (:func:`block_size`): rank ``r`` owns ``[r * block, (r + 1) * block)``."""
        return block_size(self.num_vertices, self.nparts)

    def degree(self, v: np.ndarray) -> np.ndarray:
        """Out-degrees (after cleaning) of owned vertices.

        Parameters
        ----------
        v : array_like
            ``(k,)`` global ids, each in ``[lo, hi)``.

        Returns
        -------
        ndarray
            ``(k,)`` int64 degrees, on the shard's array module (CuPy for a device shard).

        Raises
        ------
        IndexError
            For an id at or past ``hi`` on a NumPy shard; other ids outside ``[lo, hi)`` give meaningless
            degrees, so pass owned ids only.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import Shard
        >>> s = Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # one edge, 0 - 1
        ...           np.ones(2, np.int32), np.zeros(2, np.int32))
        >>> s.degree(np.array([0, 1])).tolist()
        [1, 1]
        """
        off = self.offsets
        xp = array_module(off)  # CuPy offsets answer on the device
        i = xp.asarray(v, dtype=np.int64) - self.lo
        return off[i + 1] - off[i]

    def nbytes(self) -> int:
        """The shard's size in memory.

        Returns
        -------
        int
            Bytes of its arrays: rows, in-rows, degrees and the partitioning's blocks (not ``meta``).

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import Shard
        >>> s = Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # one edge, 0 - 1
        ...           np.ones(2, np.int32), np.zeros(2, np.int32))
        >>> s.nbytes()                  # offsets 3 x 8, columns 2 x 4, two degree arrays 2 x 4 each
        48
        """
        arrays = (self.offsets, self.columns, self.tuple_degree, self.self_loops, self.in_offsets, self.in_columns)
        return sum(int(a.nbytes) for a in arrays if a is not None) + (self.blocks.nbytes() if self.blocks else 0)

    def to(self, xp) -> "Shard":
        """The same shard with its arrays on array module ``xp``.

        Parameters
        ----------
        xp : module
            ``numpy`` or ``cupy``.

        Returns
        -------
        Shard
            A new shard whose arrays (those in ``meta`` and ``blocks`` too) are ``xp`` arrays: copies where
            the module changes, the same arrays where it does not.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import Shard
        >>> s = Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # one edge, 0 - 1
        ...           np.ones(2, np.int32), np.zeros(2, np.int32))
        >>> s.to(np).offsets is s.offsets
        True
        >>> import cupy                            # doctest: +SKIP
        >>> s.to(cupy).offsets                     # doctest: +SKIP
        array([0, 1, 2])
        """
        def conv(a):
            return None if a is None else to_module(a, xp)

        meta = {k: conv(v) if isinstance(v, np.ndarray) or on_device(v) else v for k, v in self.meta.items()}
        return Shard(self.rank, self.nparts, self.num_vertices, self.lo, self.hi, conv(self.offsets),
                     conv(self.columns), conv(self.tuple_degree), conv(self.self_loops),
                     conv(self.in_offsets), conv(self.in_columns), meta, self.partitioning,
                     self.blocks.to(xp) if self.blocks is not None else None)


def to_module(a, xp):
    """Array ``a`` on array module ``xp`` (numpy or cupy; the same array when it is there already)."""
    if xp is np and on_device(a):  # CuPy -> NumPy needs an explicit copy
        return a.get()
    return xp.asarray(a)


def array_module(a):
    """The array module of ``a``: NumPy for host arrays, CuPy for device arrays (imported only when one is
    seen, so that CPU installs never need it)."""
    if isinstance(a, np.ndarray):
        return np
    import cupy

    return cupy.get_array_module(a)
