"""Give a prepared graph's shards the blocks of a 2D or delegates partitioning, on their workers.

The 1D shards are what preparation builds and what a store holds; a partitioning's blocks are cut from them
in one exchange of entries between workers (each owner cuts its rows into pieces, each rank builds its block
from the pieces meant for it).  Preparation (``prepare(..., partition=)``) and loading a store written with a
partitioning both call :func:`partition_graph`, so a store written 2D is searched 2D.  The client holds
futures only, ``O(P * R)`` of them for 2D and ``O(P ** 2)`` for delegates; the delegates' sorted ids (one
array, ``O(#delegates)``) stay on the workers.
"""

from __future__ import annotations

import operator
import uuid
from dataclasses import replace

import numpy as np

from .partitioning import Partitioning
from .sharded_graph import ShardedGraph


def partition_graph(graph: ShardedGraph, partitioning: Partitioning) -> ShardedGraph:
    """``graph`` with shards that carry ``partitioning``'s blocks (none for 1D).  ``ValueError`` when
    the partitioning does not fit the graph's shard count (a grid whose product is not the shard count)."""
    from distributed import wait

    p = partitioning.resolved(graph.nparts)
    if p.kind == "1d" and graph.partitioning.kind == "1d":
        return replace(graph, partitioning=p)
    client, token = graph.client, uuid.uuid4().hex[:8]

    def on(r: int) -> dict:
        return dict(workers=[graph.workers[r]], allow_other_workers=False, pure=False)

    if p.kind == "1d":  # the shards drop another partitioning's blocks
        shards = [client.submit(_one_d, s, key=f"one-d-{token}-{r}", **on(r)) for r, s in enumerate(graph.shards)]
    elif p.kind == "2d":
        from .grid_blocks import build_grid_blocks, grid_pieces

        rows, cols = p.grid
        cut = [client.submit(grid_pieces, s, p.grid, key=f"grid-cut-{token}-{r}", **on(r))
               for r, s in enumerate(graph.shards)]
        piece = [[client.submit(operator.getitem, cut[r], i, key=f"grid-piece-{token}-{r}-{i}", **on(r))
                  for i in range(rows)] for r in range(graph.nparts)]
        shards = [client.submit(build_grid_blocks, s, p.grid, *[piece[k * cols + r % cols][r // cols]
                                                                  for k in range(rows)],
                                key=f"grid-shard-{token}-{r}", **on(r))
                  for r, s in enumerate(graph.shards)]
    else:
        from .delegate_blocks import build_delegate_blocks, delegate_pieces, owned_delegates

        owned = [client.submit(owned_delegates, s, p.delegate_degree, key=f"dlg-own-{token}-{r}", **on(r))
                 for r, s in enumerate(graph.shards)]
        delegates = client.submit(_concatenate, *owned, key=f"dlg-all-{token}", **on(0))
        size = graph.nparts
        cut = [client.submit(delegate_pieces, s, delegates, key=f"dlg-cut-{token}-{r}", **on(r))
               for r, s in enumerate(graph.shards)]
        piece = [[client.submit(operator.getitem, cut[r], q, key=f"dlg-piece-{token}-{r}-{q}", **on(r))
                  for q in range(size)] for r in range(size)]
        shards = [client.submit(build_delegate_blocks, s, delegates, p.delegate_degree,
                                *[piece[q][r] for q in range(size)], key=f"dlg-shard-{token}-{r}", **on(r))
                  for r, s in enumerate(graph.shards)]
    wait(shards)
    for f in shards:
        if f.status == "error":
            f.result()
    return replace(graph, shards=shards, partitioning=p)


def _one_d(shard):
    """``shard`` without another partitioning's blocks."""
    return replace(shard, partitioning=Partitioning(), blocks=None)


def _concatenate(*parts: np.ndarray) -> np.ndarray:
    """The owners' delegate ids (each sorted, owners in order): every delegate, sorted."""
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
