"""Distributed relabeling by hash ownership: original ids (sparse int64, uint64, strings) -> dense ``0..n-1``.

No process holds all the ids.  With ``P`` owners (one per worker by default) the steps are Dask tasks:

1. **split** (one task per chunk, where the chunk is): factorize the chunk's endpoints into codes and its
   distinct ids, and cut those into ``P`` sorted pieces by :func:`~breadth.bfs.id_map.owner_of` (a hash of
   the id's value).  Integer ids travel as their hash *keys* (:func:`~breadth.bfs.id_map.id_hash`, a
   bijection), sorted by key (:mod:`breadth.pipeline.relabel.hashed_factorize`: counting passes over uniform keys,
   where sorting the ids by value cost more than numbering them); strings as Arrow strings sorted by value
   (:mod:`breadth.pipeline.relabel.string_chunks`).  The pieces go into the id shuffle
   (:func:`breadth.pipeline.shuffle.shuffle.exchange`): task outputs in the workers' memory, or files on its
   disk tier when the workers' memory limit needs it (:func:`breadth.pipeline.shuffle.shuffle.id_tier`), where the
   chunk's codes and order wait in files too until step 5.
2. **own** (a merge tree per owner, pinned round-robin to the workers): owner ``p`` receives its piece
   of every chunk (the shuffle), and keeps their sorted union -- part ``p`` of the id map (keys until the
   chunks are densified, step 5; then the ids of the keys in key order: the map's ``order="hash"``).
3. **offsets**: the client gathers the ``P`` part sizes; owner ``p``'s ids get dense ids
   ``offsets[p] .. offsets[p+1]-1`` in their part's order (by key for integers, by value for strings).
4. **look up** (one small task per chunk and owner, next to the owner's part): the chunk's piece for
   ``p`` -> dense ids by a merge walk through part ``p`` that starts each key where the part's index of
   top bits says (keys; built once per owner) or gallops (strings).
5. **densify** (one task per chunk): the chunk's table (its unique ids, now with dense ids) maps the
   chunk's codes to dense ids, 32-bit while ``n < 2**31``: the form a chunk waits in until preparation.

Each worker holds its share of the map plus what its chunks need; the client holds ``O(P + chunks)``
numbers.  The map back stays where step 2 left it, as a :class:`~breadth.bfs.id_map.PartitionedIdMap`.
String ids stay Arrow string arrays throughout (pieces, parts, the map back), never Python strings.
The array operations are the pure functions of :mod:`breadth.bfs.id_map` plus the ones below (sorted
unions and lookup walks in Numba, :mod:`breadth.pipeline.relabel.sorted_merge` for integer ids and
:mod:`breadth.pipeline.relabel.sorted_string_merge` for strings); :mod:`hash_relabel_gpu` has their
CuPy twins (sort, searchsorted), and :func:`relabel_hashed` runs either set with one orchestration.
This module itself imports no Numba, so that GPU workers never load it.
"""

from __future__ import annotations

import os
from typing import Any

import dask
import numpy as np

from breadth.bfs.id_map import PartitionedIdMap, ids_of_keys, is_strings

MERGE_FANIN = 8  # pieces (or partial unions) per task of an owner's merge tree


# ---------------------------------------------------------------- per-chunk / per-owner pure functions

def _as_dtype(a: np.ndarray, dtype) -> np.ndarray:
    return a.astype(dtype, copy=False) if a.dtype != dtype else a


def chunk_split(edges: np.ndarray, nowners: int, dtype) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """A chunk's ``(k, 2)`` edges -> ``(codes, order, pieces)``.

    ``codes`` (``(k, 2)`` int32, int64 past 2^31 distinct ids) index the chunk's distinct keys ``u``
    (uint64 :func:`~breadth.bfs.id_map.id_hash` of its ids, sorted); ``pieces[p]`` are the keys of ``u``
    that owner ``p`` numbers (``key % P``), sorted, and ``order`` (``(len(u),)``) is the permutation of
    ``u`` that lists them piece after piece.

    String ids (``dtype`` object; the chunk an Arrow table or an object array): ``u`` the chunk's distinct
    strings, the pieces Arrow string arrays sorted by value
    (:func:`~breadth.pipeline.relabel.string_chunks.split_strings`).

    >>> codes, order, pieces = chunk_split(np.array([[30, 20], [20, 10]]), 1, np.int64)
    >>> bool(codes[0, 1] == codes[1, 0]), ids_of_keys(pieces[0], np.int64)[codes].tolist() == [[30, 20], [20, 10]]
    (True, True)
    """
    if np.dtype(dtype) == object:
        from .string_chunks import split_strings

        return split_strings(edges, nowners)
    from .hashed_factorize import hashed_factorize, owner_pieces

    codes, keys = hashed_factorize(_as_dtype(np.ascontiguousarray(edges).ravel(), dtype))
    # int32 codes and order: a chunk has far fewer than 2^31 distinct ids, and both wait until the owners
    # have numbered every chunk's ids
    index = np.int32 if keys.size < (1 << 31) else np.int64
    if nowners == 1:
        return codes.reshape(-1, 2), np.arange(keys.size, dtype=index), [keys]
    order, pieces = owner_pieces(keys, nowners, index)
    return codes.reshape(-1, 2), order, pieces


def owner_part(dtype, *pieces: np.ndarray) -> np.ndarray:
    """Owner ``p``'s part of the id map: the sorted union of the (sorted) pieces the chunks sent it --
    uint64 keys for integer ids, an Arrow string array for strings (``dtype`` object)."""
    if np.dtype(dtype) == object:
        from .sorted_string_merge import union_strings

        return union_strings(list(pieces))
    arrs = [p for p in pieces if len(p)]
    if not arrs:
        return np.empty(0, np.uint64)
    from .sorted_merge import union_sorted  # Numba, imported where CPU steps run (GPU workers never load it)

    return union_sorted(arrs)


def part_index(part) -> np.ndarray | None:
    """Where the lookups of an owner's part start (:func:`~breadth.pipeline.relabel.sorted_merge.key_index`, built
    once per owner): for parts of hash keys; ``None`` for strings."""
    if is_strings(part) or part.dtype != np.uint64:
        return None
    from .sorted_merge import key_index

    return key_index(part)


def lookup_piece(part: np.ndarray, offset: int, piece: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Dense ids (``(k,)`` int64) of a chunk's sorted piece in its owner's sorted part (-1 if absent);
    ``index``: the part's :func:`part_index`."""
    if is_strings(part):
        from .sorted_string_merge import lookup_strings

        return lookup_strings(part, offset, piece)
    from .sorted_merge import merge_lookup

    return merge_lookup(part, offset, piece, index)


def part_ids(part, dtype):
    """The map's part from an owner's part: the ids of its keys (``dtype``, in key order) for integers,
    the strings as they are."""
    return part if np.dtype(dtype) == object else ids_of_keys(part, dtype)


def chunk_dense(split: tuple, *looked_up: np.ndarray, dtype=np.int64) -> np.ndarray:
    """The chunk's edges in dense ids (``(k, 2)`` of ``dtype``): ``split`` is ``(codes, order, ...)``,
    ``looked_up[p]`` are the dense ids of ``pieces[p]``, so their concatenation follows ``order``."""
    from .chunk_densify import dense_of_codes  # Numba, imported where CPU steps run
    from ..shuffle.shuffle import unpark

    codes, order = unpark(split)[:2]
    return dense_of_codes(codes, order, looked_up, dtype)


def dense_to_file(folder: str, c: int, dense_step, split: tuple, *looked_up, dtype=np.int64) -> int:
    """:func:`chunk_dense`, written to chunk ``c``'s file in ``folder`` instead of kept: its row count."""
    from ..shuffle.shuffle import save_npy

    d = dense_step(split, *looked_up, dtype=dtype)
    save_npy(os.path.join(folder, f"dense-{c}.npy"), d)
    return int(d.shape[0])


def dense_from_file(folder: str, c: int, _rows: int) -> np.ndarray:
    """Chunk ``c``'s dense ids written by :func:`dense_to_file`, in the dtype they were written in."""
    from breadth.io.npy_lock import load_npy

    return load_npy(os.path.join(folder, f"dense-{c}.npy"))


def _split_part(part: tuple, split, nowners: int, dtype) -> tuple:
    """:func:`~breadth.pipeline.shuffle.shuffle.exchange`'s split: ``((codes, order), pieces)`` of a raw chunk."""
    codes, order, pieces = split(part[0], nowners, dtype)
    return (codes, order), pieces


# ---------------------------------------------------------------- the Dask orchestration


def relabel_hashed(client, parts: list, rows: list[int], dtype, workers: list[str], *,
                   nowners: int | None = None, device: str = "cpu",
                   spill_dir: str | None = None) -> tuple[list, PartitionedIdMap]:
    """Relabel raw chunks (futures or delayed objects of ``(edges, stats)``) to dense ids with hash owners.

    Returns ``(dense, id_map)`` once every chunk is relabeled: ``dense[c]`` is a future (a ``dask.delayed``
    that reads its file, on the disk tier) of chunk ``c``'s ``(rows[c], 2)`` dense edges (only chunks with
    rows), int32 while ``n < 2**31``
    (:func:`~breadth.bfs.shard.column_dtype`); ``id_map`` the partitioned map back, its parts left on the
    workers.  The ids move to their owners through the id shuffle (:func:`~breadth.pipeline.shuffle.shuffle.exchange`),
    whose tier follows the workers' memory limit
    (:func:`~breadth.pipeline.shuffle.shuffle.id_tier`): on the disk tier each chunk's pieces (8 bytes per distinct
    id) wait in files under ``spill_dir`` (default: a temporary directory), removed before this returns.
    A chunk waits for its owners as its codes and order (about 8 bytes a tuple plus 4 per distinct id; on
    the disk tier in files beside its pieces, :class:`~breadth.pipeline.shuffle.shuffle.ParkedArrays`), then as its
    dense ids in 32 bits where ``n < 2**31`` (8 bytes a tuple) -- in the workers' memory, or on the disk
    tier in a file of a :class:`~breadth.pipeline.shuffle.shuffle.LastingFolder` under ``spill_dir``, removed when
    the dense chunks' graphs go -- and the edge shuffle's send reads them as they are; its raw ids are
    freed as soon as it is split.
    ``device="gpu"``: the steps run on the workers' GPUs (:mod:`breadth.pipeline.relabel.hash_relabel_gpu`;
    chunks NumPy or CuPy integers, or cuDF frames of strings), the pieces wait as task outputs in device
    memory (dask-cuda spills them), the dense chunks are CuPy arrays and the map's parts come to the host.

    >>> dense, idm = relabel_hashed(client, parts, rows, np.int64, workers)   # doctest: +SKIP
    >>> idm.nparts == len(workers), idm.size                                  # doctest: +SKIP
    (True, 1048224)
    """
    from ..shuffle.shuffle import LastingFolder, id_tier

    P = int(nowners or len(workers))
    dtype = np.dtype(dtype)
    steps = _steps(device, dtype)
    chunks = [p for p, r in zip(parts, rows) if r]
    tier = "memory" if device == "gpu" else id_tier(client, int(sum(rows)))
    parked = LastingFolder.make(spill_dir) if tier == "disk" else None  # where dense chunks wait
    try:
        dense, owners, offsets = _relabel(client, steps, chunks, P, dtype, workers, tier, spill_dir, parked)
    except BaseException:
        if parked is not None:  # a failed or interrupted run: its frames may hold the folder until exit
            parked.remove()
        raise
    # integer parts become the ids of their keys, in host memory wherever they were built
    owners = [client.submit(steps.part_ids, o, dtype, workers=[workers[p % len(workers)]],
                            allow_other_workers=True, pure=False) for p, o in enumerate(owners)]
    load = dense if parked is None else \
        [dask.delayed(dense_from_file, pure=True)(parked, c, d) for c, d in enumerate(dense)]
    strings = dtype == np.dtype("O")
    return (load, PartitionedIdMap(owners, offsets, np.dtype(object) if strings else dtype, "hash", None, client,
                                   order="value" if strings else "hash"))


def _relabel(client, steps, chunks: list, P: int, dtype, workers: list[str], tier: str, spill_dir: str | None,
             parked) -> tuple[list, list, np.ndarray]:
    """:func:`relabel_hashed`'s shuffle, owners and densifying: ``(dense futures, owners' part futures (keys
    for integers), offsets)`` once every chunk is densified."""
    from distributed import wait

    from ..shuffle.shuffle import exchange, spill_space

    with spill_space(client, tier, spill_dir) as space:
        # reads (delayed) and splits form one graph: Dask splits a chunk as soon as it is read and frees
        # the read chunk once split; on the disk tier a chunk's codes and order (8 bytes a tuple) wait in
        # files too, since held, every chunk's would be a worker's share of the edge list while the owners
        # merge (2^26 tuples on 2 workers: 744 MiB a worker, past a 700MB limit)
        ex = exchange(client, chunks, _split_part, P, workers, tier=tier, root=space.root,
                      args=(steps.chunk_split, P, dtype), park_kept=True)
        space.futures += ex.kept  # the splits write the disk tier's pieces: cancelled if the run fails
        owners = [ex.reduce(p, steps.owner_part, dtype, fanin=MERGE_FANIN) for p in range(P)]
        sizes = client.gather([client.submit(len, o, pure=False) for o in owners])
        # every split has run (each part holds a piece of every chunk): nothing of theirs is left to cancel,
        # and the list would hold every chunk's codes and order until the last chunk is densified
        space.futures.clear()
        offsets = np.zeros(P + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        dense = _densify(client, steps, ex, owners, offsets, parked)
        space.futures += dense
        del ex  # a chunk's codes, order and pieces go once its dense ids are made
        wait(dense)  # before the pieces' folder goes (the dense chunks' folder goes with the last graph)
    return dense, owners, offsets


def _densify(client, steps, ex, owners: list, offsets: np.ndarray, parked) -> list:
    """Futures of every chunk's dense ids: its pieces looked up at their owners, then its codes mapped
    through them, in 32 bits where the ids fit (the form a chunk waits in until preparation); with a
    ``parked`` folder, written there (the futures are then of the row counts)."""
    narrow = np.int32 if offsets[-1] < (1 << 31) else np.int64
    index = [client.submit(steps.part_index, o, pure=False) for o in owners]
    dense = []
    for c, kept in enumerate(ex.kept):
        looked = [client.submit(steps.lookup_piece, owners[p], int(offsets[p]), ex.piece(c, p), index[p],
                                pure=False) for p in range(len(owners))]
        if parked is None:
            dense.append(client.submit(steps.chunk_dense, kept, *looked, dtype=narrow, pure=False))
        else:
            dense.append(client.submit(dense_to_file, parked.path, c, steps.chunk_dense, kept, *looked,
                                       dtype=narrow, pure=False))
    return dense


class _CpuSteps:
    """The per-chunk and per-owner steps on the host (this module's functions)."""

    chunk_split = staticmethod(chunk_split)
    owner_part = staticmethod(owner_part)
    part_index = staticmethod(part_index)
    lookup_piece = staticmethod(lookup_piece)
    chunk_dense = staticmethod(chunk_dense)
    part_ids = staticmethod(part_ids)


_CPU_STEPS = _CpuSteps()


def _steps(device: str, dtype):
    """The steps for ``device``: this module's, or :mod:`hash_relabel_gpu`'s (same names and results)."""
    if device == "cpu":
        return _CPU_STEPS
    if device != "gpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    from . import hash_relabel_gpu

    return hash_relabel_gpu


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
