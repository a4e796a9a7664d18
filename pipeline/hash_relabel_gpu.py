"""Hash-owner relabeling on the GPU: :mod:`hash_relabel`'s per-chunk and per-owner steps on CuPy arrays.

The orchestration (:func:`~breadth.pipeline.hash_relabel.relabel_hashed`) is the CPU's; only the array
steps differ, because a GPU sorts faster than it hashes into a table:

* **split**: the chunk's endpoints are sorted once (``cupy.unique`` with the inverse): the distinct ids
  come out sorted, their codes are the inverse; owners by :func:`~breadth.bfs.id_map.owner_of` (the same
  splitmix64 hash as on the CPU, so a map built here is looked up like any other); pieces are cut by a
  sort on ``owner << 40 | rank`` (grouped by owner, sorted by id inside).
* **own**: an owner's part is the sorted union of its pieces (``cupy.unique`` of their concatenation).
* **look up**: dense ids of a chunk's piece by ``cupy.searchsorted`` in the owner's part.
* **densify**: the chunk's table of dense ids indexed by its codes.

Integer ids (int64, uint64) only: string ids from cuDF go through the host path.  The parts end on the
host (:func:`part_to_host`), the form the id map, the store and result mapping use.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from breadth.bfs.id_map import owner_of


def chunk_split(edges, nowners: int, dtype) -> tuple:
    """A chunk's ``(k, 2)`` edges (CuPy or NumPy) -> ``(codes, order, pieces)`` on the device, as
    :func:`breadth.pipeline.hash_relabel.chunk_split` gives them: ``codes`` ``(k, 2)`` int32 index the
    sorted distinct ids ``u``; ``pieces[p]`` are the ids owner ``p`` numbers, sorted; ``order`` lists
    ``u``'s positions piece after piece."""
    flat = cp.asarray(edges).ravel()
    if flat.dtype != dtype:
        flat = flat.astype(dtype)
    uniq, codes = cp.unique(flat, return_inverse=True)
    codes = codes.ravel().astype(cp.int32 if uniq.size < (1 << 31) else cp.int64).reshape(-1, 2)
    if nowners == 1:
        return codes, cp.arange(uniq.size, dtype=cp.int64), [uniq]
    owner = owner_of(uniq, nowners)
    # uniq is sorted: a key of (owner, position) groups by owner and keeps ids sorted inside a group
    order = cp.argsort((owner.astype(cp.uint64) << np.uint64(40)) | cp.arange(uniq.size, dtype=cp.uint64))
    cuts = np.cumsum(cp.bincount(owner, minlength=nowners).get())[:-1]
    return codes, order, cp.split(uniq[order], cuts.tolist())


def owner_part(dtype, *pieces) -> "cp.ndarray":
    """Owner ``p``'s part: the sorted union of the pieces the chunks sent it (device array)."""
    arrs = [cp.asarray(p).astype(dtype, copy=False) for p in pieces if len(p)]
    if not arrs:
        return cp.empty(0, dtype)
    return cp.unique(cp.concatenate(arrs)) if len(arrs) > 1 else arrs[0]


def lookup_piece(part, offset: int, piece) -> "cp.ndarray":
    """Dense ids (int64) of a chunk's piece in its owner's part (every id of the piece is there)."""
    return cp.searchsorted(part, cp.asarray(piece)).astype(cp.int64) + offset


def chunk_dense(split: tuple, *looked_up) -> "cp.ndarray":
    """The chunk's ``(k, 2)`` int64 dense edges on the device."""
    codes, order, _ = split
    table = cp.empty(order.size, cp.int64)
    if looked_up:
        table[order] = cp.concatenate(looked_up) if len(looked_up) > 1 else looked_up[0]
    return table[codes]


def part_to_host(part) -> np.ndarray:
    """An owner's part as the host array the id map keeps (its share of the ids, once)."""
    return cp.asnumpy(part)
