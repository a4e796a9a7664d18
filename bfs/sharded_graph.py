"""The client-side handle of a prepared graph: one shard future per rank, each pinned to its worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .partitioning import Partitioning


@dataclass
class ShardedGraph:
    """A prepared graph: its shards persisted on Dask workers, ``shards[r]`` on ``workers[r]``.

    ``breadth.pipeline.prepare`` and ``breadth.io`` (a shard store) build it; :func:`~breadth.bfs.bfs`,
    :func:`~breadth.bfs.bfs_batch` and :func:`~breadth.bfs.graph500` search it, one rank per shard.  The
    client holds futures and ``O(ranks)`` numbers only.

    Parameters
    ----------
    client : distributed.Client
        The client of the cluster that holds the shards.
    shards : list of distributed.Future
        One future of a :class:`~breadth.bfs.shard.Shard` per rank, in rank order.
    workers : list of str
        The worker address of each shard (rank ``r`` runs on ``workers[r]``).
    num_vertices : int
        ``n``: dense ids are ``0..n-1``.
    num_input_edges : int
        The source's edge tuples, self-loops and duplicates included.
    num_edges : int
        The undirected (or directed) edges left after cleaning (no self-loops, no duplicates).
    num_self_loops : int
        The source's self-loop tuples.
    directed : bool
        Whether edges have a direction (the shards then hold in-edges too).
    construction_time : float
        Seconds taken to build the shards (Graph500's construction time).
    source : dict
        What the graph came from (``{"kind": "kronecker", "scale": ..., "edgefactor": ...}``, a path, ...).
    id_map : PartitionedIdMap or ndarray or None
        Dense id -> original id (:mod:`breadth.bfs.id_map`); None when they coincide.
    backend : str
        ``"cpu"`` (NumPy shards) or ``"gpu"`` (CuPy shards on dask-cuda workers).
    partitioning : Partitioning
        Where the search's adjacency entries live (1D, 2D or delegates); the shards carry the same.

    Examples
    --------
    >>> from breadth.pipeline import kronecker, local_cluster, prepare
    >>> g = prepare(kronecker(16, seed=1), local_cluster())    # doctest: +SKIP
    >>> g                                                      # doctest: +SKIP
    ShardedGraph(65,536 vertices, ... undirected edges, 1 shard(s), cpu)
    >>> g.release()                                            # doctest: +SKIP
    """

    client: Any
    shards: list
    workers: list[str]
    num_vertices: int
    num_input_edges: int
    num_edges: int
    num_self_loops: int
    directed: bool
    construction_time: float
    source: dict = field(default_factory=dict)
    id_map: Any = None
    backend: str = "cpu"
    #: where the search's adjacency entries live; the shards carry the same (with its blocks)
    partitioning: Partitioning = field(default_factory=Partitioning)

    @property
    def nparts(self) -> int:
        """The number of shards, one per search rank."""
        return len(self.shards)

    def release(self) -> None:
        """Drop the shards from the workers' memory (the graph cannot be searched afterwards)."""
        for f in self.shards:
            f.release()
        self.shards = []

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return (f"ShardedGraph({self.num_vertices:,} vertices, {self.num_edges:,} {kind} edges, "
                f"{self.nparts} shard(s), {self.backend}"
                + (f", {self.partitioning}" if self.partitioning.kind != "1d" else "") + ")")
