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

from breadth.bfs.search_order import with_bottom_up_order
from breadth.bfs.shard import Shard, owner_range

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
    """:func:`breadth.pipeline.kernels.partition.split_by_owner` on the device.

    ``edges``: ``(k, 2)`` integer tuples (NumPy or CuPy; moved to the device).  The pieces hold CuPy
    ``(k, 2)`` entries in the graph's column dtype (int32 when ids fit, which halves the shuffle's memory)
    and int64 self-loop ids.
    """
    edges = cp.ascontiguousarray(cp.asarray(edges), dtype=cp.int64)
    _check_ids(edges, num_vertices)
    return split_pieces(cp, edges, num_vertices, block, nparts, directed)


def csr_from_entries_gpu(entries: list, lo: int, num_local: int, num_vertices: int):
    """:func:`breadth.pipeline.kernels.build_csr.csr_from_entries` on the device: ``(offsets int64[num_local + 1],
    columns int32|int64[nnz], multiplicity int64[num_local])`` as CuPy arrays (the one sort of packed keys of
    :func:`~breadth.pipeline.kernels.build_csr_numpy.packed_csr`, with fused kernels for its steps; a device radix
    sort)."""
    entries = [cp.asarray(e) for e in entries if e is not None and e.shape[0]]
    return packed_csr(cp, entries, lo, num_local, num_vertices,
                      lambda e, lo, cbits, out: _pack(e[:, 0], e[:, 1], np.int64(lo), np.int32(cbits), out),
                      lambda keys: _neq_prev(keys, size=keys.size) if keys.size else cp.empty(0, bool),
                      lambda keys, cbits, dtype: _unpack_col(keys, np.uint64((1 << cbits) - 1),
                                                             cp.empty(keys.size, dtype)),
                      "GPU build")


def build_shard_gpu(rank: int, nparts: int, num_vertices: int, pieces: list[Piece], directed: bool = False) -> Shard:
    """:func:`breadth.pipeline.kernels.build_csr.build_shard` on the device: the same shard, arrays in device memory."""
    lo, hi = owner_range(rank, nparts, num_vertices)
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
        shard = with_bottom_up_order(shard)
    return shard
