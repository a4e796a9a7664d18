"""Dense relabeling, out of core: original vertex ids (sparse ints, uint64, strings) -> ``0..n-1``.

:func:`edge_list_from_parts` reads each raw chunk's id kind and min/max (``O(chunks)`` numbers reach the
client) and picks one of two paths:

* **hash owners** (:mod:`breadth.pipeline.relabel.hash_relabel`), for sparse 64-bit, uint64 and string ids: ids
  are shuffled to ``P`` owners by a hash of their value, each owner numbers its part, chunks map through
  their ids' dense numbers looked up at the owners.  The map back stays in ``P`` parts on the workers
  (:class:`~breadth.bfs.id_map.PartitionedIdMap`); no process holds all the ids.
* **table** (this module), for int64 ids over a span of at most ``FAST_SPAN_MAX`` (SNAP files): each chunk
  computes its sorted unique ids (a presence bitmap when the span is small next to the values, else
  ``np.unique``), a Dask tree (fan-in ``MERGE_FANIN``) merges them into the sorted array of all ids, and
  a lookup table built once on a worker maps every chunk.  The map is one sorted, range-owned part, at
  most ``FAST_SPAN_MAX`` ids whatever the input, and dense ids keep the ids' order.  On cnr-2000 (3.2 M
  tuples, 325 k ids, 2 workers) reading and relabeling take about 60 % of the hash path's time.

The raw chunks are delayed ``(edges, ChunkStats)`` pairs produced by the readers in :mod:`breadth.io`;
``edges`` is ``(k, 2)`` of int64, uint64 or object (str) ids, or for strings read from files a
two-column Arrow table (source, target).
"""

from __future__ import annotations

import operator

import numpy as np

from breadth.bfs.shard import column_dtype
from breadth.io.id_checks import INT64_MAX, id_kind as _kind

from ..edges import EdgeList

MERGE_FANIN = 8
DENSE_SPAN_FACTOR = 4  # lookup table (int32/int64 per id in the span; sent to every worker)
DENSE_SPAN_MIN = 1 << 22
BITMAP_SPAN_FACTOR = 16  # presence bytes (transient, one task)
BITMAP_SPAN_MIN = 1 << 26
FAST_SPAN_MAX = 1 << 23  # the table path's bound: its map (and each worker's table) never exceeds this many ids


def _dense_span(lo: int, hi: int, count: int, factor: int = DENSE_SPAN_FACTOR, least: int = DENSE_SPAN_MIN) -> int:
    """``hi - lo + 1`` when a table of that many entries is worth it for ``count`` values, else 0."""
    span = int(hi) - int(lo) + 1
    return span if span <= max(least, factor * int(count)) else 0


def _bitmap_span(lo: int, hi: int, count: int) -> int:
    return _dense_span(lo, hi, count, BITMAP_SPAN_FACTOR, BITMAP_SPAN_MIN)


def _unique_ids(a: np.ndarray) -> np.ndarray:
    """Sorted unique values of a 1-D id array (bitmap for dense int64 ids, sort otherwise)."""
    if a.dtype == np.int64 and a.size:
        from .id_table import _collect, _mark, _minmax

        lo, hi = _minmax(a)
        span = _bitmap_span(lo, hi, a.size)
        if span:
            seen = np.zeros(span, np.uint8)
            _mark(seen, a, lo)
            return _collect(seen, lo)
    return np.unique(a)


def _chunk_unique(part) -> tuple[np.ndarray, int, object]:
    edges, stats = part
    return _unique_ids(np.ascontiguousarray(edges).ravel()), int(edges.shape[0]), stats


def _chunk_meta(part) -> tuple:
    """``(rows, stats, kind, lo, hi, on_device)`` of a raw chunk; ``lo``/``hi`` bound integer ids (else
    None); ``on_device``: the chunk is a CuPy array (a GPU reader's or a cuDF frame's)."""
    from breadth.bfs.id_map import on_device

    edges, stats = part
    k = _kind(edges) if edges.shape[0] else "empty"
    lo = hi = None
    if k in ("int", "uint"):
        lo, hi = int(edges.min()), int(edges.max())  # NumPy: no JIT warm-up on a fresh worker
    return int(edges.shape[0]), stats, k, lo, hi, on_device(edges)


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
    if all(a.dtype == np.int64 for a in arrs):  # sorted unique int64 arrays: a bitmap or one in-place sort
        from .id_table import _collect, _mark
        from .sorted_merge import union_sorted

        lo = min(int(a[0]) for a in arrs if a.size)
        hi = max(int(a[-1]) for a in arrs if a.size)
        span = _bitmap_span(lo, hi, sum(a.size for a in arrs))
        if span:
            seen = np.zeros(span, np.uint8)
            for a in arrs:
                _mark(seen, a, lo)
            return _collect(seen, lo)
        return union_sorted(arrs)
    return np.unique(np.concatenate(arrs))


def _map_table(id_map: np.ndarray):
    """What :func:`_densify` maps with: ``("lut", lo, table)`` for dense int64 ids, else the sorted map."""
    if id_map.dtype == np.int64 and id_map.size:
        lo, hi = int(id_map[0]), int(id_map[-1])
        span = _dense_span(lo, hi, id_map.size)
        if span:
            from .id_table import _build_lut

            lut = np.empty(span, np.int32 if id_map.size < (1 << 31) else np.int64)
            _build_lut(id_map, lo, lut)
            return ("lut", lo, lut)
    return ("sorted", id_map)


def _densify(part, table) -> np.ndarray:
    edges = part[0]
    if table[0] == "lut":  # every chunk's ids are int64 here (_merge would have made uint64 or str otherwise)
        from .id_table import _map_lut

        out = np.empty(edges.shape, np.int64)
        _map_lut(np.ascontiguousarray(edges, np.int64), np.int64(table[1]), table[2], out)
        return out
    id_map = table[1]
    if _kind(id_map) == "uint" and edges.dtype != np.uint64:
        edges = edges.astype(np.uint64)
    return np.searchsorted(id_map, edges).astype(np.int64)


def _edges_only(part) -> np.ndarray:
    e = part[0]
    return e.astype(np.int64, copy=False) if e.dtype != np.int64 else e  # NumPy or CuPy, left where it is


def _fast_span(meta: list[tuple]) -> int:
    """The id span when every chunk has int64 ids in a span small enough for the bitmap/table path
    (bounded by ``FAST_SPAN_MAX`` whatever the input, so no worker's table grows with the graph), else 0."""
    ints = [m for m in meta if m[2] != "empty"]
    if not ints or any(m[2] != "int" for m in ints):
        return 0
    lo, hi = min(m[3] for m in ints), max(m[4] for m in ints)
    if hi > INT64_MAX:
        return 0
    span = _dense_span(lo, hi, 2 * sum(m[0] for m in ints))
    return span if span <= FAST_SPAN_MAX else 0


def _import_meanwhile(name: str):
    """A future of module ``name``, imported by a thread of its own while the caller's tasks run: importing
    ``dask.array`` takes 0.4-0.6 s in a fresh process (it loads SciPy's FFT where SciPy is installed), time
    in which the workers of a fresh cluster would wait for their first chunk."""
    import importlib
    import threading
    from concurrent.futures import Future

    fut: Future = Future()

    def run() -> None:
        try:
            fut.set_result(importlib.import_module(name))
        except BaseException as e:  # noqa: BLE001  handed to the caller
            fut.set_exception(e)

    threading.Thread(target=run, name=f"import-{name}", daemon=True).start()
    return fut


def edge_list_from_parts(parts: list, client=None, *, directed: bool = False, source: dict | None = None,
                         relabel: bool = True, persist: bool = True, chunk_rows: list[int] | None = None,
                         hashed: bool | None = None, meta: list[tuple] | None = None,
                         spill_dir: str | None = None) -> EdgeList:
    """Turn raw ``(edges, ChunkStats)`` delayed chunks into an :class:`EdgeList` of dense ids.

    Sparse ids (int64 over a wide span, uint64, strings) are relabeled by hash owners
    (:mod:`breadth.pipeline.relabel.hash_relabel`); the id map stays partitioned on the workers
    (``EdgeList.id_map`` is a :class:`~breadth.bfs.id_map.PartitionedIdMap`).  Integer ids over a span
    of at most ``FAST_SPAN_MAX`` take the bitmap/lookup-table path and keep their order (one part).
    ``hashed`` forces one path or the other (None: choose by the span).
    ``relabel=False`` keeps integer ids as they are (``num_vertices = max id + 1``, no ``id_map``).
    ``persist`` keeps the parsed chunks in the workers' memory (Dask spills them under pressure) so
    the files are parsed once; without it each chunk is parsed again when the graph is prepared.
    ``source["bad_lines"]``/``["skipped_lines"]`` report lines skipped by ``on_bad_lines``.
    ``meta``: each chunk's ``(rows, stats, kind, lo, hi, on_device)`` when the reader knows them without
    reading it (Parquet metadata): hash relabeling then splits each chunk as soon as it is read, and its raw
    ids are freed once split, instead of every chunk being read (and held) before any split.
    ``spill_dir``: where hash relabeling's id shuffle writes when the workers' memory limit needs its disk
    tier (default: a temporary directory): the ids' pieces, removed once relabeled, and the relabeled
    chunks, removed when the edge list's graph goes.  A worker that leaves the cluster meanwhile raises
    :class:`~breadth.bfs.worker_loss.WorkerLost` within about a second (the hash owners' tasks are pinned to
    their workers); the edge list records those workers (``EdgeList.workers``), and preparing it without one
    of them raises at once.

    >>> el = edge_list_from_parts(snap_parts(["g.txt"]), client)   # doctest: +SKIP
    """
    from distributed import default_client

    from breadth.bfs.worker_loss import watch_workers

    client = client or default_client()
    # the relabeling's owners are pinned to their workers: one lost midway ends the read (WorkerLost) rather
    # than leaving its tasks waiting for it forever
    with watch_workers(client, "reading") as watch:
        return _edge_list_from_parts(parts, client, watch, directed, source, relabel, persist, hashed, meta,
                                     spill_dir)


def _edge_list_from_parts(parts: list, client, watch, directed: bool, source: dict | None, relabel: bool,
                          persist: bool, hashed: bool | None, meta: list[tuple] | None,
                          spill_dir: str | None) -> EdgeList:
    """:func:`edge_list_from_parts` inside its guard against lost workers (``watch``, told each stage)."""
    import dask

    from breadth.bfs.id_map import PartitionedIdMap
    from breadth.io.errors import EmptyInputError, IngestError

    from breadth.bfs.dask_workers import worker_addresses
    from .hash_relabel import global_dtype, relabel_hashed

    arrays = _import_meanwhile("dask.array")  # the edge list's type, needed once the chunks are relabeled
    source = dict(source or {})
    streamed = meta is not None
    if persist and not streamed:
        parts = client.compute(parts)  # futures of (edges, stats)
    else:
        parts = [p if dask.is_dask_collection(p) else dask.delayed(p) for p in parts]
    submit = (lambda f, *a: client.submit(f, *a, pure=False)) if persist and not streamed else \
        (lambda f, *a: client.compute(dask.delayed(f, pure=True)(*a)))
    if not streamed:
        meta = client.gather([submit(_chunk_meta, p) for p in parts])
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
    dtype = global_dtype([m[2] for m in meta])
    device = "gpu" if any(m[5] for m in meta) else "cpu"  # chunks on GPUs are relabeled there
    watch.stage = "relabeling"
    owners = None  # the workers that hash relabeling pins its owners to
    if not relabel:
        if dtype != np.int64 or any(m[4] is not None and m[4] > INT64_MAX for m in meta):
            raise IngestError(f"relabel=False needs int64 ids; {source.get('path', 'input')} has "
                              f"{'str' if dtype == object else dtype} ids", path=source.get("path"))
        own = [dask.delayed(_edges_only, pure=True)(p) for p, r in zip(parts, rows) if r]
        out_dtype = np.dtype(np.int64)
        n = max(m[4] for m in meta if m[4] is not None) + 1
        out_map = None
    elif (hashed is None and not _fast_span(meta)) or hashed or device == "gpu":
        # the hashed path reads each chunk once, in its split (raw ids are freed as soon as it is split)
        owners = worker_addresses(client)
        dense, out_map = relabel_hashed(client, parts, rows, dtype, owners, device=device, spill_dir=spill_dir)
        n = out_map.size
        own, out_dtype = dense, column_dtype(n)
        source["relabel"] = "hash" if device == "cpu" else "hash_gpu"
    else:
        if streamed and persist:  # the table path reads each chunk twice (ids, densify): parse it once
            parts = client.compute(parts)
            submit = lambda f, *a: client.submit(f, *a, pure=False)  # noqa: E731
        level = [submit(_chunk_unique, p) for p in parts]
        uniq = [client.submit(operator.getitem, u, 0, pure=False) for u in level]
        while len(uniq) > 1:
            uniq = [client.submit(_merge, *uniq[i:i + MERGE_FANIN], pure=False)
                    for i in range(0, len(uniq), MERGE_FANIN)]
        # built once on the worker that holds the merged ids (at most FAST_SPAN_MAX entries); Dask copies
        # it to the others on demand
        table = client.submit(_map_table, uniq[0], pure=False)
        n = int(client.submit(len, uniq[0], pure=False).result())
        lo = min(m[3] for m in meta if m[3] is not None)
        out_map = PartitionedIdMap([uniq[0]], np.array([0, n], np.int64), np.dtype(np.int64), "range",
                                   np.array([lo], np.int64), client)
        own = [dask.delayed(_densify, pure=True)(p, table) for p, r in zip(parts, rows) if r]
        out_dtype = np.dtype(np.int64)
        source["relabel"] = "table"
    # own[c]: a future (hash relabeling in memory) or delayed object of the c-th non-empty chunk's (rows, 2)
    # edges in dense ids
    da = arrays.result()
    blocks = [da.from_delayed(d, shape=(r, 2), dtype=out_dtype) for d, r in zip(own, [r for r in rows if r])]
    arr = da.concatenate(blocks, axis=0) if len(blocks) > 1 else blocks[0]
    # the persisted chunks stay alive as long as `arr`'s graph refers to their futures
    return EdgeList(arr, num_vertices=n, directed=directed, source=source, id_map=out_map, blocks=own,
                    blocks_of=arr, workers=owners)
