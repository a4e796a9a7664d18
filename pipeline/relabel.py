"""Dense relabeling, out of core: original vertex ids (sparse ints, uint64, strings) -> ``0..n-1``.

No process ever holds a dict of ids.  Each raw chunk computes its sorted unique ids; those are merged
in a Dask tree (fan-in ``MERGE_FANIN``, sorted-array unions) into the sorted array of all ids, which *is*
the map back (``id_map[dense] == original``).  Each chunk is then mapped with ``searchsorted`` against
that array, broadcast once to the workers.  The sorted order makes the dense ids of integer inputs keep
their relative order, and lets :func:`breadth.bfs.search.to_dense` look roots up by binary search.

The raw chunks are delayed ``(edges, ChunkStats)`` pairs produced by the readers in :mod:`breadth.io`;
``edges`` is ``(k, 2)`` of int64, uint64 or object (str) ids.
"""

from __future__ import annotations

import operator

import numpy as np

from .edges import EdgeList

MERGE_FANIN = 8
INT64_MAX = np.iinfo(np.int64).max


def _kind(a: np.ndarray) -> str:
    if a.dtype == object or a.dtype.kind in "USO":
        return "str"
    if a.dtype.kind == "u":
        return "uint"
    if a.dtype.kind == "i":
        return "int"
    return "other"


def normalize_ids(edges: np.ndarray, where: str) -> np.ndarray:
    """Ids as int64 where they fit, uint64 beyond, object (str) for strings; negatives rejected."""
    from breadth.io.errors import IdRangeError, NegativeIdError, NonNumericIdError

    k = _kind(edges)
    if k == "str":
        return edges.astype(object, copy=False)
    if k == "other":
        raise NonNumericIdError(f"{where}: vertex ids must be integers or strings, got dtype {edges.dtype}",
                                path=where)
    if k == "int":
        if edges.size and edges.min() < 0:
            bad = np.argwhere(edges < 0)[0]
            raise NegativeIdError(f"{where}: row {bad[0]} has negative vertex id {edges[tuple(bad)]}",
                                  path=where, line=int(bad[0]))
        return edges.astype(np.int64, copy=False)
    if edges.dtype.itemsize > 8:
        raise IdRangeError(f"{where}: ids of dtype {edges.dtype} exceed 64 bits", path=where)
    if edges.size and edges.max() > INT64_MAX:
        return edges.astype(np.uint64, copy=False)
    return edges.astype(np.int64)


def _chunk_unique(part) -> tuple[np.ndarray, int, object]:
    edges, stats = part
    return np.unique(edges.ravel()), int(edges.shape[0]), stats


def _merge(*uniques) -> np.ndarray:
    arrs = [u for u in uniques if u.size] or list(uniques[:1])
    kinds = {_kind(a) for a in arrs}
    if "str" in kinds and len(kinds) > 1:
        from breadth.io.errors import NonNumericIdError

        raise NonNumericIdError("vertex ids mix strings and integers across chunks; read them as strings")
    if "uint" in kinds:  # int64 chunks are non-negative (checked), so uint64 holds both
        arrs = [a.astype(np.uint64) for a in arrs]
    if len(arrs) == 1:
        return arrs[0]
    return np.unique(np.concatenate(arrs))


def _densify(part, id_map: np.ndarray) -> np.ndarray:
    edges = part[0]
    if _kind(id_map) == "uint" and edges.dtype != np.uint64:
        edges = edges.astype(np.uint64)
    return np.searchsorted(id_map, edges).astype(np.int64)


def _edges_only(part) -> np.ndarray:
    return np.asarray(part[0], np.int64)


def edge_list_from_parts(parts: list, client=None, *, directed: bool = False, source: dict | None = None,
                         relabel: bool = True, persist: bool = True, chunk_rows: list[int] | None = None
                         ) -> EdgeList:
    """Turn raw ``(edges, ChunkStats)`` delayed chunks into an :class:`EdgeList` of dense ids.

    ``relabel=False`` keeps integer ids as they are (``num_vertices = max id + 1``, no ``id_map``).
    ``persist`` keeps the parsed chunks in the workers' memory (Dask spills them under pressure) so
    the files are parsed once; without it each chunk is parsed again when the graph is prepared.
    ``source["bad_lines"]``/``["skipped_lines"]`` report lines skipped by ``on_bad_lines``.

    >>> el = edge_list_from_parts(read_snap_parts("g.txt"), client)   # doctest: +SKIP
    """
    import dask
    import dask.array as da
    from distributed import default_client

    from breadth.io.errors import EmptyInputError, IngestError

    client = client or default_client()
    source = dict(source or {})
    if persist:
        parts = client.compute(parts)  # futures of (edges, stats)
    else:
        parts = [dask.delayed(p) if not hasattr(p, "dask") else p for p in parts]
    submit = (lambda f, *a: client.submit(f, *a, pure=False)) if persist else \
        (lambda f, *a: client.compute(dask.delayed(f, pure=True)(*a)))
    level = [submit(_chunk_unique, p) for p in parts]
    meta = client.gather([client.submit(lambda t: (t[1], t[2]), u, pure=False) for u in level])
    rows = [m[0] for m in meta]
    stats = [m[1] for m in meta]
    total = int(sum(rows))
    skipped = int(sum(getattr(s, "skipped", 0) for s in stats if s is not None))
    bad = [b for s in stats if s is not None for b in getattr(s, "bad", [])][:20]
    source.update({"skipped_lines": skipped, "bad_lines": [list(b) for b in bad]})
    if total == 0:
        raise EmptyInputError(f"no edges in {source.get('path', 'the input')}"
                              + (f" ({skipped} bad line(s) skipped)" if skipped else ""),
                              path=source.get("path"))
    uniq = [client.submit(operator.getitem, u, 0, pure=False) for u in level]
    while len(uniq) > 1:
        uniq = [client.submit(_merge, *uniq[i:i + MERGE_FANIN], pure=False)
                for i in range(0, len(uniq), MERGE_FANIN)]
    id_map = uniq[0].result()
    if relabel:
        idm_fut = client.scatter(id_map, broadcast=True)
        blocks = [da.from_delayed(dask.delayed(_densify, pure=True)(p, idm_fut), shape=(r, 2), dtype=np.int64)
                  for p, r in zip(parts, rows) if r]
        n = int(id_map.size)
        out_map = id_map
    else:
        if _kind(id_map) != "int":
            raise IngestError(f"relabel=False needs int64 ids; {source.get('path', 'input')} has "
                              f"{id_map.dtype} ids", path=source.get("path"))
        blocks = [da.from_delayed(dask.delayed(_edges_only, pure=True)(p), shape=(r, 2), dtype=np.int64)
                  for p, r in zip(parts, rows) if r]
        n = int(id_map[-1]) + 1
        out_map = None
    arr = da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    # the persisted chunks stay alive as long as `arr`'s graph refers to their futures
    return EdgeList(arr, num_vertices=n, directed=directed, source=source, id_map=out_map)
