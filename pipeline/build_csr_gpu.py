"""GPU split and CSR build: the same pieces and shards as :mod:`partition` / :mod:`build_csr`, on CuPy arrays.

Splitting keeps the CPU's rules (self-loops set aside for the edge count, undirected tuples sent both ways,
directed ones as out- and in-entries) with array operations.  Building replaces the per-row sort of the CPU
builder by one device radix sort of packed keys ``(row - lo) << bits(n) | column`` (a 64-bit key when
``bits(num_local) + bits(n) <= 64``, which holds up to scale 32), then a unique pass and binary searches
for the row offsets, so the result is the CPU's shard exactly: rows in order, columns sorted and unique
within a row, ``tuple_degree`` counted before deduplication.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from breadth.bfs.shard import Shard, block_size

from .bottom_up_order import ORDER_DROPPED
from .build_csr_numpy import packed_csr, split_pieces
from .piece import Piece

_pack = cp.ElementwiseKernel(
    "T row, T col, int64 lo, int32 cbits", "uint64 key",
    "key = ((unsigned long long)(row - lo) << cbits) | (unsigned long long)col",
    "breadth_pack_key")
_unpack_col = cp.ElementwiseKernel(
    "uint64 key, uint64 mask", "C col", "col = (C)(key & mask)", "breadth_unpack_col")
_neq_prev = cp.ElementwiseKernel(
    "raw uint64 keys", "bool flag", "flag = i == 0 || keys[i] != keys[i - 1]", "breadth_neq_prev")


def _check_ids(edges: cp.ndarray, num_vertices: int, where: str = "edge chunk") -> None:
    """Raise ``ValueError`` naming the first id outside ``[0, num_vertices)`` (one device round trip)."""
    if edges.size == 0:
        return
    lo, hi = (int(x) for x in cp.stack([edges.min(), edges.max()]).get())
    if lo < 0 or hi >= num_vertices:
        bad = int(cp.flatnonzero(((edges < 0) | (edges >= num_vertices)).any(axis=1))[0].get())
        raise ValueError(f"{where}: row {bad} has vertex id {edges[bad].get().tolist()} outside "
                         f"[0, {num_vertices}); relabel the ids or pass num_vertices")


def split_by_owner_gpu(edges, num_vertices: int, block: int, nparts: int, directed: bool = False) -> list[Piece]:
    """:func:`breadth.pipeline.partition.split_by_owner` on the device.

    ``edges``: ``(k, 2)`` integer tuples (NumPy or CuPy; moved to the device).  The pieces hold CuPy
    ``(k, 2)`` entries in the graph's column dtype (int32 when ids fit, which halves the shuffle's memory)
    and int64 self-loop ids.
    """
    edges = cp.ascontiguousarray(cp.asarray(edges), dtype=cp.int64)
    _check_ids(edges, num_vertices)
    return split_pieces(cp, edges, num_vertices, block, nparts, directed)


def csr_from_entries_gpu(entries: list, lo: int, num_local: int, num_vertices: int):
    """:func:`breadth.pipeline.build_csr.csr_from_entries` on the device: ``(offsets int64[num_local + 1],
    columns int32|int64[nnz], multiplicity int64[num_local])`` as CuPy arrays (the one sort of packed keys of
    :func:`~breadth.pipeline.build_csr_numpy.packed_csr`, with fused kernels for its steps; a device radix
    sort)."""
    entries = [cp.asarray(e) for e in entries if e is not None and e.shape[0]]
    return packed_csr(cp, entries, lo, num_local, num_vertices,
                      lambda e, lo, cbits, out: _pack(e[:, 0], e[:, 1], np.int64(lo), np.int32(cbits), out),
                      lambda keys: _neq_prev(keys, size=keys.size) if keys.size else cp.empty(0, bool),
                      lambda keys, cbits, dtype: _unpack_col(keys, np.uint64((1 << cbits) - 1),
                                                             cp.empty(keys.size, dtype)),
                      "GPU build")


def build_shard_gpu(rank: int, nparts: int, num_vertices: int, pieces: list[Piece], directed: bool = False) -> Shard:
    """:func:`breadth.pipeline.build_csr.build_shard` on the device: the same shard, arrays in device memory."""
    block = block_size(num_vertices, nparts)
    lo = min(rank * block, num_vertices)
    hi = min(lo + block, num_vertices)
    offsets, columns, deg_out = csr_from_entries_gpu([p.out for p in pieces], lo, hi - lo, num_vertices)
    in_offsets = in_columns = None
    if directed:
        # tuple_degree stays the OUT-tuple count, as on the CPU: a directed search's Graph500 edge count is
        # the tuples whose tail was reached
        in_offsets, in_columns, _ = csr_from_entries_gpu([p.inc for p in pieces], lo, hi - lo, num_vertices)
    loops = [cp.asarray(p.loops) for p in pieces if p.loops.size]
    if loops:
        self_loops = cp.bincount(cp.concatenate(loops) - lo, minlength=hi - lo)
    else:
        self_loops = cp.zeros(hi - lo, cp.int64)
    shard = Shard(rank, nparts, num_vertices, lo, hi, offsets, columns,
                  deg_out.astype(cp.int32), self_loops.astype(cp.int32), in_offsets, in_columns)
    if nparts == 1:
        # Bottom-up's degree-ordered copy of its rows is part of the structure a search uses, so it is
        # built here and counted in construction time (one rank: every neighbour's degree is local).
        attach_bottom_up_order(shard)
    return shard


#: bytes of a device memory limit per entry of one sort of the degree order (keys, scratch and headroom)
ORDER_BYTES_PER_ENTRY = 32


def order_sort_entries() -> int | None:
    """Entries per sort of bottom-up's degree order on this worker
    (:func:`~breadth.bfs.gpu.kernels.degree_ordered_columns`): ranges sized to the worker's device memory
    limit (8 GB: 250 M entries, 2 GB of keys), or to the device's free memory where less is free (the
    shuffle's pairs may still wait in device memory beside the new shard), so that a limited worker's build
    peaks near its shard instead of three times its columns; one sort where the worker has no limit, or
    where the limit holds it (dask-cuda's default, 80 % of an H200: up to 3.8 G entries, a scale-27
    graph's).  Ranges cost little (scale 26 on one H200: construction about 15 % longer in ranges of 2^27).
    Free memory counts because a sort sized to the limit alone can run out of memory beside the shuffle's
    pairs (17 GB of them on an 80 GB H100), and the shard then goes without its degree order."""
    from breadth.bfs.gpu.kernels import free_device_bytes

    from .device_memory import worker_device_memory_limit

    limit = worker_device_memory_limit()
    if limit is None:
        return None
    return max(1 << 20, min(limit, free_device_bytes()) // ORDER_BYTES_PER_ENTRY)


def _bottom_up_rows(shard: Shard):
    # bottom-up looks for parents among in-neighbours: the CSC rows of a directed graph
    return (shard.in_offsets, shard.in_columns) if shard.directed else (shard.offsets, shard.columns)


def shard_degree_buckets(shard: Shard) -> np.ndarray:
    """Host uint8 ``(num_local,)``: the degree bucket of each owned vertex in bottom-up's rows
    (:func:`breadth.bfs.gpu.kernels.degree_buckets`), to be gathered by every owner."""
    from breadth.bfs.gpu.kernels import degree_buckets

    return cp.asnumpy(degree_buckets(_bottom_up_rows(shard)[0]))


def with_bottom_up_order(shard: Shard, buckets: list[np.ndarray]) -> Shard:
    """Add bottom-up's degree-ordered rows to a shard of a several-rank graph: ``buckets`` are every
    owner's :func:`shard_degree_buckets` in rank order (one byte per vertex of the graph).  Built during
    preparation, as for one rank, so that Graph500's construction time includes it."""
    return attach_bottom_up_order(shard, cp.asarray(np.concatenate(buckets)))


def attach_bottom_up_order(shard: Shard, buckets=None) -> Shard:
    """``shard.meta["bu_columns"]``: bottom-up's rows by decreasing neighbour degree
    (:func:`~breadth.bfs.gpu.kernels.degree_ordered_columns`; ``buckets`` of every global id, ``None`` for a
    one-rank shard).  Where it cannot be built -- the device lacks memory for its sort, or ids are too wide
    for the sort keys -- the shard goes without it (searches stay right, bottom-up levels slower: scale 26's
    third level takes almost twice as long on an H100) and ``meta[ORDER_DROPPED]`` says why, so that
    :func:`~breadth.pipeline.prepare.prepare` can warn the user instead of leaving it unsaid."""
    from breadth.bfs.gpu.kernels import degree_ordered_columns

    off, col = _bottom_up_rows(shard)
    ordered = degree_ordered_columns(off, col, buckets, sort_entries=order_sort_entries())
    if ordered is not None:
        shard.meta["bu_columns"] = ordered
    else:
        shard.meta[ORDER_DROPPED] = "device memory short or ids too wide for its sort keys"
    return shard
