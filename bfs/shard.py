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


def column_dtype(num_vertices: int) -> np.dtype:
    """32-bit column ids when every global id fits, else 64-bit."""
    return np.dtype(np.int32) if num_vertices <= np.iinfo(np.int32).max else np.dtype(np.int64)


@dataclass
class Shard:
    """CSR adjacency of the vertices ``lo..hi-1`` owned by ``rank``.

    ``offsets`` (int64, ``hi - lo + 1``) index ``columns`` (int32 or int64 global ids, sorted and unique
    within a row, self-loops removed).  For directed graphs ``offsets``/``columns`` are out-edges and
    ``in_offsets``/``in_columns`` the in-edges (CSC); for undirected graphs they are ``None`` because
    CSR is CSC.  ``tuple_degree`` counts the input tuples incident to each vertex before deduplication
    (self-loops excluded, each counted in ``self_loops``): the Graph500 edge count of a search is
    ``sum(tuple_degree[reached]) / 2 + sum(self_loops[reached])``.  For directed graphs ``tuple_degree``
    counts out-tuples only (``v`` the tail), and a search's edge count is the tuples whose tail it reached,
    ``sum(tuple_degree[reached]) + sum(self_loops[reached])``.
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
        return self.in_offsets is not None

    @property
    def num_local(self) -> int:
        return self.hi - self.lo

    @property
    def num_local_edges(self) -> int:
        return int(self.offsets[-1])

    @property
    def block(self) -> int:
        return block_size(self.num_vertices, self.nparts)

    def degree(self, v: np.ndarray) -> np.ndarray:
        """Out-degree (after cleaning) of owned global ids ``v``."""
        off = self.offsets
        xp = np if isinstance(off, np.ndarray) else _array_module(off)  # CuPy offsets answer on the device
        i = xp.asarray(v, dtype=np.int64) - self.lo
        return off[i + 1] - off[i]

    def nbytes(self) -> int:
        arrays = (self.offsets, self.columns, self.tuple_degree, self.self_loops, self.in_offsets, self.in_columns)
        return sum(int(a.nbytes) for a in arrays if a is not None) + (self.blocks.nbytes() if self.blocks else 0)

    def to(self, xp) -> "Shard":
        """The same shard with its arrays moved to array module ``xp`` (numpy or cupy), those in ``meta``
        (the degree-ordered bottom-up rows) too."""
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


def _array_module(a):
    """The array module of ``a`` (CuPy for device arrays; imported only when one is seen)."""
    import cupy

    return cupy.get_array_module(a)
