"""Distributed relabeling by hash ownership: original ids (sparse int64, uint64, strings) -> dense ``0..n-1``.

No process holds all the ids.  With ``P`` owners (one per worker by default) the steps are Dask tasks:

1. **split** (one task per chunk, where the chunk is): factorize the chunk's endpoints
   (:mod:`breadth.pipeline.factorize`; ``pandas.factorize`` for strings) into
   codes and its unique ids (a chunk-local table), and cut the unique ids into ``P`` sorted pieces by
   :func:`~breadth.bfs.id_map.owner_of` (a hash of the id's value).
2. **own** (a merge tree per owner, pinned round-robin to the workers): owner ``p`` receives its piece
   of every chunk (the shuffle), and keeps their sorted union -- part ``p`` of the id map.
3. **offsets**: the client gathers the ``P`` part sizes; owner ``p``'s ids get dense ids
   ``offsets[p] .. offsets[p+1]-1`` in sorted order.
4. **look up** (one small task per chunk and owner, next to the owner's part): the chunk's piece for
   ``p`` -> dense ids by a merge walk through part ``p`` (binary search for strings).
5. **densify** (one task per chunk): the chunk's table (its unique ids, now with dense ids) maps the
   chunk's codes to dense ids.

Each worker holds its share of the map plus what its chunks need; the client holds ``O(P + chunks)``
numbers.  The map back stays where step 2 left it, as a :class:`~breadth.bfs.id_map.PartitionedIdMap`.
The array operations are the pure functions of :mod:`breadth.bfs.id_map` plus the ones below (sorted
merges in Numba for integer ids, :mod:`breadth.pipeline.sorted_merge`); :mod:`hash_relabel_gpu` has their
CuPy twins (sort, searchsorted), and :func:`relabel_hashed` runs either set with one orchestration.
This module itself imports no Numba, so that GPU workers never load it.
"""

from __future__ import annotations

from typing import Any

import dask
import numpy as np

from breadth.bfs.id_map import PartitionedIdMap, lookup_sorted, owner_of, unique_ids

MERGE_FANIN = 8  # pieces (or partial unions) per task of an owner's merge tree


# ---------------------------------------------------------------- per-chunk / per-owner pure functions

def _as_dtype(a: np.ndarray, dtype) -> np.ndarray:
    return a.astype(dtype, copy=False) if a.dtype != dtype else a


def chunk_split(edges: np.ndarray, nowners: int, dtype) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """A chunk's ``(k, 2)`` edges -> ``(codes, order, pieces)``.

    ``codes`` (``(k, 2)`` int32, int64 past 2^31 distinct ids) index the chunk's unique ids ``u``;
    ``pieces[p]`` are the ids of ``u`` that owner ``p`` numbers, sorted, and ``order`` (``(len(u),)``)
    is the permutation of ``u`` that lists them piece after piece.

    >>> codes, order, pieces = chunk_split(np.array([[30, 20], [20, 10]]), 1, np.int64)
    >>> codes.tolist(), [p.tolist() for p in pieces]
    ([[0, 1], [1, 2]], [[10, 20, 30]])
    """
    flat = _as_dtype(np.ascontiguousarray(edges).ravel(), dtype)
    if flat.dtype == object:
        import pandas as pd

        codes, uniq = pd.factorize(flat, sort=False)  # hashing: linear, unlike a sort of every endpoint
        uniq = np.asarray(uniq, dtype=dtype)
    else:
        from .factorize import factorize  # Numba: 2-3x pandas.factorize on 64-bit ids

        codes, uniq = factorize(flat)
    owner = owner_of(uniq, nowners)
    # sorted pieces (a sort of the chunk's distinct ids only) let owners merge and look up in linear time
    # the ids are distinct, so any sort is stable: numpy's default (vectorised) argsort is 4x its mergesort
    by_value = np.argsort(uniq)
    small = owner.astype(np.uint16 if nowners <= 1 << 16 else np.int64)  # 16-bit keys: numpy's radix sort
    order = by_value[np.argsort(small[by_value], kind="stable")]
    pieces = np.split(uniq[order], np.cumsum(np.bincount(owner, minlength=nowners))[:-1])
    # int32 codes: a chunk has far fewer than 2^31 distinct ids, and the codes live as long as the chunk
    return codes.astype(np.int32 if uniq.size < (1 << 31) else np.int64, copy=False).reshape(-1, 2), order, pieces


def owner_part(dtype, *pieces: np.ndarray) -> np.ndarray:
    """Owner ``p``'s part of the id map: the sorted union of the (sorted) pieces the chunks sent it."""
    arrs = [_as_dtype(p, dtype) for p in pieces if len(p)]
    if not arrs:
        return np.empty(0, dtype)
    if np.dtype(dtype) == object:
        return unique_ids(np.concatenate(arrs))
    from .sorted_merge import union_sorted  # Numba, imported where CPU steps run (GPU workers never load it)

    return union_sorted(arrs)


def lookup_piece(part: np.ndarray, offset: int, piece: np.ndarray) -> np.ndarray:
    """Dense ids (``(k,)`` int64) of a chunk's sorted piece in its owner's sorted part (-1 if absent)."""
    if part.dtype == object or piece.dtype != part.dtype:
        return lookup_sorted(part, offset, piece)
    from .sorted_merge import merge_lookup

    return merge_lookup(part, offset, piece)


def chunk_dense(split: tuple, *looked_up: np.ndarray) -> np.ndarray:
    """The chunk's edges in dense ids (``(k, 2)`` int64): ``looked_up[p]`` are the dense ids of
    ``pieces[p]``, so their concatenation follows ``order``."""
    codes, order, _ = split
    table = np.empty(order.size, np.int64)
    table[order] = np.concatenate(looked_up) if looked_up else np.empty(0, np.int64)
    return table[codes]


def _split_part(split, part: tuple, nowners: int, dtype) -> tuple:
    return split(part[0], nowners, dtype)


def _piece(split: tuple, p: int) -> np.ndarray:
    return split[2][p]


# ---------------------------------------------------------------- the Dask orchestration


def relabel_hashed(client, parts: list, rows: list[int], dtype, workers: list[str], *,
                   nowners: int | None = None, device: str = "cpu") -> tuple[list, PartitionedIdMap]:
    """Relabel raw chunks (futures or delayed objects of ``(edges, stats)``) to dense ids with hash owners.

    Returns ``(dense, id_map)``: ``dense[c]`` is a ``dask.delayed`` of chunk ``c``'s ``(rows[c], 2)`` int64
    dense edges (only chunks with rows) over futures of its codes and looked-up ids, ``id_map`` the
    partitioned map back, its parts left on the workers.  The dense edges are made where they are used
    -- the edge shuffle's send -- and dropped once sent: between relabeling and preparation a chunk
    holds only its codes (8 bytes a tuple) and its raw ids are freed as soon as it is split, instead of
    raw, codes and dense ids at once (40 bytes a tuple, which Dask spilled to disk by the tens of GB at
    2^30 tuples).
    ``device="gpu"``: the steps run on the workers' GPUs (:mod:`breadth.pipeline.hash_relabel_gpu`;
    chunks NumPy or CuPy integers, or cuDF frames of strings), the dense chunks are CuPy arrays and the
    map's parts come to the host at the end.

    >>> dense, idm = relabel_hashed(client, parts, rows, np.int64, workers)   # doctest: +SKIP
    >>> idm.nparts == len(workers), idm.size                                  # doctest: +SKIP
    (True, 1048224)
    """
    P = int(nowners or len(workers))
    dtype = np.dtype(dtype)
    steps = _steps(device, dtype)
    chunks = [p for p, r in zip(parts, rows) if r]
    # one graph of reads (delayed) or read chunks (futures) and their splits: Dask splits a chunk as soon
    # as it is read, and a read chunk nothing else holds is freed once split
    splits = client.compute([dask.delayed(_split_part, pure=False)(steps.chunk_split, p, P, dtype) for p in chunks])
    pieces = [[client.submit(_piece, s, p, pure=False) for p in range(P)] for s in splits]
    owners = [_owner_tree(client, steps, dtype, [pieces[c][p] for c in range(len(splits))],
                          workers[p % len(workers)]) for p in range(P)]
    sizes = client.gather([client.submit(len, o, pure=False) for o in owners])
    offsets = np.zeros(P + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    dense = []
    for c, s in enumerate(splits):
        looked = [client.submit(steps.lookup_piece, owners[p], int(offsets[p]), pieces[c][p], pure=False)
                  for p in range(P)]
        dense.append(dask.delayed(steps.chunk_dense, pure=False)(s, *looked))
    del pieces, splits  # the dense chunks' graphs keep what they need alive
    if steps is not _CPU_STEPS:  # the map back lives in host memory, wherever it was built
        owners = [client.submit(steps.part_to_host, o, workers=[workers[p % len(workers)]],
                                allow_other_workers=True, pure=False) for p, o in enumerate(owners)]
    return dense, PartitionedIdMap(owners, offsets, dtype if dtype != np.dtype("O") else np.dtype(object),
                                   "hash", None, client)


class _CpuSteps:
    """The per-chunk and per-owner steps on the host (this module's functions)."""

    chunk_split = staticmethod(chunk_split)
    owner_part = staticmethod(owner_part)
    lookup_piece = staticmethod(lookup_piece)
    chunk_dense = staticmethod(chunk_dense)


_CPU_STEPS = _CpuSteps()


def _steps(device: str, dtype):
    """The steps for ``device``: this module's, or :mod:`hash_relabel_gpu`'s (same names and results)."""
    if device == "cpu":
        return _CPU_STEPS
    if device != "gpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    from . import hash_relabel_gpu

    return hash_relabel_gpu


def _owner_tree(client, steps, dtype, pieces: list, worker: str):
    """Owner's part as a merge tree of fan-in ``MERGE_FANIN`` on the owner's worker: no task takes more
    than that many pieces (or partial unions) at once, so the owner holds its share plus a few pieces."""
    level = pieces or [client.scatter(np.empty(0, dtype), hash=False)]
    while True:
        level = [client.submit(steps.owner_part, dtype, *level[i:i + MERGE_FANIN], workers=[worker],
                               allow_other_workers=True, pure=False)
                 for i in range(0, len(level), MERGE_FANIN)]
        if len(level) == 1:
            return level[0]


def global_dtype(kinds: list[str]) -> Any:
    """The id map's dtype from the chunks' id kinds: object for strings, uint64 if any chunk needs it."""
    ks = set(kinds) - {"empty"}
    if "str" in ks and len(ks) > 1:
        from breadth.io.errors import NonNumericIdError

        raise NonNumericIdError("vertex ids mix strings and integers across chunks; read them as strings")
    if "str" in ks:
        return np.dtype(object)
    if "uint" in ks:
        return np.dtype(np.uint64)
    return np.dtype(np.int64)
