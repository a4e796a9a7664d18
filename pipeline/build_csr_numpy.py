"""NumPy split and CSR build: the pieces and shards of :mod:`partition` / :mod:`build_csr` without Numba.

The same array algorithm as the GPU's (:mod:`breadth.pipeline.build_csr_gpu`) on NumPy arrays: a split by
boolean masks and an owner sort, and a build that sorts packed keys ``(row - lo) << bits(n) | column``
then finds unique keys and row offsets with binary searches.  The results equal the Numba kernels' (rows
in order, columns sorted and unique within a row, ``tuple_degree`` counted before deduplication); they
are slower, but a worker that runs them never imports Numba (the preparation of ``generate`` under a
small ``--memory-limit``, see :mod:`breadth.pipeline.memory_plan`).

Memory: the split holds about 60 bytes per edge tuple of its chunk, the build about 21 bytes per entry
of its row batch (the packed keys, their unique copy, the flags and the columns) and 24 bytes per row.
"""

from __future__ import annotations

import numpy as np

from breadth.bfs.shard import column_dtype

from .piece import Piece, check_ids


def _by_owner(entries: np.ndarray, block: int, nparts: int) -> list[np.ndarray]:
    if nparts == 1:
        return [entries]
    owner = entries[:, 0] // entries.dtype.type(block)
    order = np.argsort(owner, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=nparts))))
    del owner
    entries = entries[order]
    return [entries[bounds[p]:bounds[p + 1]] for p in range(nparts)]


def split_by_owner_numpy(edges: np.ndarray, num_vertices: int, block: int, nparts: int,
                         directed: bool = False) -> list[Piece]:
    """:func:`breadth.pipeline.partition.split_by_owner` with array operations: one :class:`Piece` per owner,
    its ``(k, 2)`` entries in the graph's column dtype (int32 when ids fit) and int64 self-loop ids."""
    edges = np.asarray(edges, dtype=np.int64)
    check_ids(edges, num_vertices)
    dt = column_dtype(num_vertices)
    u, v = edges[:, 0], edges[:, 1]
    loop = u == v
    loops = u[loop]
    keep = ~loop
    del loop
    uu, vv = u[keep].astype(dt), v[keep].astype(dt)
    del keep, u, v, edges
    if directed:
        out, inc = np.stack([uu, vv], axis=1), np.stack([vv, uu], axis=1)
    else:
        out, inc = np.stack([np.concatenate([uu, vv]), np.concatenate([vv, uu])], axis=1), None
    del uu, vv
    outs = _by_owner(out, block, nparts)
    incs = _by_owner(inc, block, nparts) if directed else [None] * nparts
    lps = [loops] if nparts == 1 else [loops[loops // block == p] for p in range(nparts)]
    return [Piece(outs[p], incs[p], lps[p]) for p in range(nparts)]


def csr_from_entries_numpy(entries: list[np.ndarray], lo: int, num_local: int, num_vertices: int):
    """:func:`breadth.pipeline.build_csr.csr_from_entries` with array operations: ``(offsets
    int64[num_local + 1], columns int32|int64[nnz], multiplicity int64[num_local])`` of rows
    ``lo..lo+num_local-1`` from ``(k, 2)`` ``[row, column]`` entry arrays."""
    entries = [e for e in entries if e is not None and e.shape[0]]
    m = sum(int(e.shape[0]) for e in entries)
    cbits = max(1, int(num_vertices - 1).bit_length())
    rbits = max(1, int(num_local - 1).bit_length()) if num_local > 1 else 1
    if cbits + rbits > 64:
        raise NotImplementedError(f"the NumPy build packs (row, column) into 64 bits: {rbits} + {cbits} bits do "
                                  "not fit; use more shards (smaller num_local)")
    keys = np.empty(m, np.uint64)
    pos = 0
    for e in entries:  # pack each piece in place: no concatenated copy of the entries
        k = int(e.shape[0])
        part = keys[pos:pos + k]
        np.subtract(e[:, 0], lo, out=part, casting="unsafe")
        part <<= np.uint64(cbits)
        part |= e[:, 1].astype(np.uint64)
        pos += k
    del entries
    keys.sort()
    starts = np.arange(num_local + 1, dtype=np.uint64) << np.uint64(cbits)
    deg = np.diff(np.searchsorted(keys, starts)).astype(np.int64)
    flag = np.empty(m, bool)
    if m:
        flag[0] = True
        np.not_equal(keys[1:], keys[:-1], out=flag[1:])
    keys = keys[flag]
    del flag
    offsets = np.searchsorted(keys, starts).astype(np.int64)
    del starts
    keys &= np.uint64((1 << cbits) - 1)
    return offsets, keys.astype(column_dtype(num_vertices)), deg
