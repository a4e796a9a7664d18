"""NumPy split and CSR build: the pieces and shards of :mod:`partition` / :mod:`build_csr` without Numba.

The same array algorithm as the GPU's (:mod:`breadth.pipeline.kernels.build_csr_gpu`) on NumPy arrays: a split by
boolean masks and an owner sort, and a build that sorts packed keys ``(row - lo) << bits(n) | column``
then finds unique keys and row offsets with binary searches.  The results equal the Numba kernels' (rows
in order, columns sorted and unique within a row, ``tuple_degree`` counted before deduplication); they
are slower, but a worker that runs them never imports Numba (the preparation of ``generate`` under a
small ``--memory-limit``, see :mod:`breadth.pipeline.shuffle.memory_plan`).

Memory: the split holds about 60 bytes per edge tuple of its chunk, the build about 21 bytes per entry
of its row batch (the packed keys, their unique copy, the flags and the columns) and 24 bytes per row.
"""

from __future__ import annotations

import numpy as np

from breadth.bfs.shard import column_dtype

from .piece import Piece, check_ids


def _by_owner(xp, entries, block: int, nparts: int) -> list:
    """``entries`` (``(k, 2)``, module ``xp``) grouped by the owner of their row, in order, one array each."""
    if nparts == 1:
        return [entries]
    owner = entries[:, 0] // entries.dtype.type(block)
    order = xp.argsort(owner, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(xp.bincount(owner, minlength=nparts).tolist())))
    del owner
    entries = entries[order]
    return [entries[bounds[p]:bounds[p + 1]] for p in range(nparts)]


def split_pieces(xp, edges, num_vertices: int, block: int, nparts: int, directed: bool) -> list[Piece]:
    """Checked int64 ``(k, 2)`` tuples ``edges`` of module ``xp`` (NumPy or CuPy) -> one :class:`Piece` per
    owner: its out- (and for directed graphs in-) entries in the graph's column dtype (int32 when ids fit,
    which halves the shuffle's memory) and its int64 self-loop ids.  Undirected tuples give both
    directions."""
    dt = column_dtype(num_vertices)
    u, v = edges[:, 0], edges[:, 1]
    loop = u == v
    loops = u[loop]
    keep = ~loop
    del loop
    uu, vv = u[keep].astype(dt), v[keep].astype(dt)
    del keep, u, v, edges
    if directed:
        out, inc = xp.stack([uu, vv], axis=1), xp.stack([vv, uu], axis=1)
    else:
        out, inc = xp.stack([xp.concatenate([uu, vv]), xp.concatenate([vv, uu])], axis=1), None
    del uu, vv
    outs = _by_owner(xp, out, block, nparts)
    incs = _by_owner(xp, inc, block, nparts) if directed else [None] * nparts
    if nparts == 1:
        lps = [loops]
    else:
        loop_owner = loops // block
        lps = [loops[loop_owner == p] for p in range(nparts)]
    return [Piece(outs[p], incs[p], lps[p]) for p in range(nparts)]


def split_by_owner_numpy(edges: np.ndarray, num_vertices: int, block: int, nparts: int,
                         directed: bool = False) -> list[Piece]:
    """:func:`breadth.pipeline.kernels.partition.split_by_owner` with array operations (:func:`split_pieces`)."""
    edges = np.asarray(edges, dtype=np.int64)
    check_ids(edges, num_vertices)
    return split_pieces(np, edges, num_vertices, block, nparts, directed)


def packed_csr(xp, entries: list, lo: int, num_local: int, num_vertices: int, pack, distinct, unpack,
               who: str):
    """CSR of rows ``lo..lo+num_local-1`` from ``(k, 2)`` ``[row, column]`` entry arrays of module ``xp``
    (NumPy or CuPy), by one sort of ``(row - lo) << cbits | column`` keys: ``(offsets int64[num_local + 1],
    columns int32|int64[nnz], multiplicity int64[num_local])``.  The backend gives three steps:
    ``pack(entries, lo, cbits, out)`` writes a piece's keys into ``out``, ``distinct(keys)`` flags each key
    unlike the one before, ``unpack(keys, cbits, dtype)`` returns the keys' columns.  ``who`` names the
    build in the error when the keys would not fit 64 bits."""
    m = sum(int(e.shape[0]) for e in entries)
    cbits = max(1, int(num_vertices - 1).bit_length())
    rbits = max(1, int(num_local - 1).bit_length()) if num_local > 1 else 1
    if cbits + rbits > 64:
        raise NotImplementedError(f"{who} packs (row, column) into 64 bits: {rbits} + {cbits} bits do "
                                  "not fit; use more shards (smaller num_local)")
    keys = xp.empty(m, xp.uint64)
    pos = 0
    for e in entries:  # pack each piece in place: no concatenated copy of the entries
        k = int(e.shape[0])
        pack(e, lo, cbits, keys[pos:pos + k])
        pos += k
    entries.clear()
    keys.sort()
    # row starts before and after deduplication by binary search of the packed row boundaries
    starts = xp.arange(num_local + 1, dtype=xp.uint64) << np.uint64(cbits)
    deg = xp.diff(xp.searchsorted(keys, starts)).astype(xp.int64)
    keys = keys[distinct(keys)]
    offsets = xp.searchsorted(keys, starts).astype(xp.int64)
    del starts
    return offsets, unpack(keys, cbits, column_dtype(num_vertices)), deg


def _pack_numpy(e: np.ndarray, lo: int, cbits: int, out: np.ndarray) -> None:
    np.subtract(e[:, 0], lo, out=out, casting="unsafe")
    out <<= np.uint64(cbits)
    out |= e[:, 1].astype(np.uint64)


def _distinct_numpy(keys: np.ndarray) -> np.ndarray:
    flag = np.empty(keys.size, bool)
    if keys.size:
        flag[0] = True
        np.not_equal(keys[1:], keys[:-1], out=flag[1:])
    return flag


def _unpack_numpy(keys: np.ndarray, cbits: int, dtype) -> np.ndarray:
    keys &= np.uint64((1 << cbits) - 1)
    return keys.astype(dtype)


def csr_from_entries_numpy(entries: list[np.ndarray], lo: int, num_local: int, num_vertices: int):
    """:func:`breadth.pipeline.kernels.build_csr.csr_from_entries` with array operations: ``(offsets
    int64[num_local + 1], columns int32|int64[nnz], multiplicity int64[num_local])`` of rows
    ``lo..lo+num_local-1`` from ``(k, 2)`` ``[row, column]`` entry arrays (:func:`packed_csr`)."""
    entries = [e for e in entries if e is not None and e.shape[0]]
    return packed_csr(np, entries, lo, num_local, num_vertices, _pack_numpy, _distinct_numpy, _unpack_numpy,
                      "the NumPy build")
