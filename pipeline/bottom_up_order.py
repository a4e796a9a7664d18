"""Bottom-up's degree-ordered rows for CPU shards, built during preparation so that Graph500's construction
time counts them (the GPU builds its own in :mod:`breadth.pipeline.build_csr_gpu`).

A rank's bottom-up step scans each unvisited vertex's in-neighbours until one is in the frontier; with the
neighbours of highest degree first it meets one sooner (Kronecker scale 20, one rank: the bottom-up levels
about a fifth faster).  The copy costs 4 bytes per adjacency entry (8 for 64-bit ids), next to the 12 that
the memory tier's build holds at its peak, so it is built for shards prepared in that tier only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from breadth.bfs.shard import Shard


#: ``shard.meta`` key of the reason a shard went without its degree order (a GPU shard whose device lacked
#: memory for the order's sort); :func:`breadth.pipeline.prepare.prepare` warns naming those owners
ORDER_DROPPED = "bottom_up_order_dropped"


def _bottom_up_rows(shard: Shard):
    # bottom-up looks for parents among in-neighbours: the CSC rows of a directed graph
    return (shard.in_offsets, shard.in_columns) if shard.directed else (shard.offsets, shard.columns)


def shard_degree_buckets(shard: Shard) -> np.ndarray:
    """uint8 ``(num_local,)``: the degree bucket of each owned vertex in bottom-up's rows
    (:func:`breadth.bfs.cpu.bottom_up.degree_buckets`), to be gathered by every owner of a several-rank graph."""
    from breadth.bfs.cpu.bottom_up import degree_buckets

    return degree_buckets(_bottom_up_rows(shard)[0])


def with_bottom_up_order(shard: Shard, buckets: list[np.ndarray] | None = None) -> Shard:
    """The shard with ``meta["bu_columns"]``: its bottom-up rows with each row's neighbours by decreasing
    degree.  ``buckets``: every owner's :func:`shard_degree_buckets` in rank order (one byte per vertex of
    the graph); ``None`` for a one-rank graph, whose own rows give every degree."""
    from breadth.bfs.cpu.bottom_up import degree_ordered_columns

    off, col = _bottom_up_rows(shard)
    ordered = degree_ordered_columns(off, col, None if buckets is None else np.concatenate(buckets))
    return dataclasses.replace(shard, meta={**shard.meta, "bu_columns": ordered})
