"""The client-side handle of a prepared graph: one shard future per rank, each pinned to its worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .partitioning import Partitioning


@dataclass
class ShardedGraph:
    """Shards persisted on Dask workers (``shards[r]`` lives on ``workers[r]``).

    ``num_input_edges`` counts the source's edge tuples (self-loops and duplicates included),
    ``num_edges`` the undirected (or directed) edges left after cleaning.  ``id_map`` maps dense ids
    back to original ids (``None`` when they coincide).
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
        return len(self.shards)

    def release(self) -> None:
        """Drop the shards from the workers' memory."""
        for f in self.shards:
            f.release()
        self.shards = []

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        return (f"ShardedGraph({self.num_vertices:,} vertices, {self.num_edges:,} {kind} edges, "
                f"{self.nparts} shard(s), {self.backend}"
                + (f", {self.partitioning}" if self.partitioning.kind != "1d" else "") + ")")
