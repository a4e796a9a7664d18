"""cuDF edge lists on the GPU: id columns checked on the device and handed on as CuPy ``(k, 2)`` chunks
(integer ids) or two-column cuDF frames (string ids).

The GPU twin of the host readers' id checks (:func:`breadth.io.id_checks.normalize_ids`): a missing,
non-integral, out-of-range or negative id is one error naming the file or partition, column and row.
:func:`read_parquet_chunk` reads row groups of one or more Parquet files in one ``cudf.read_parquet`` on
a dask-cuda worker.  cuDF is imported only here, and only when called.
"""

from __future__ import annotations

import numpy as np


def _locate(where, i: int) -> tuple[str, int]:
    """``(file or partition, row)`` of chunk row ``i``: ``where`` is a name (rows counted from 0) or the
    chunk's spans ``[(path, first chunk row, its file row), ...]`` in order."""
    if isinstance(where, str):
        return where, i
    path, start, row0 = next(s for s in reversed(where) if s[1] <= i)
    return path, row0 + i - start


def device_edges(df, src: str, dst: str, where) -> tuple:
    """A cuDF partition's integer (or integral float) id columns -> ``((k, 2) CuPy ids, ChunkStats)``,
    checked on the device as the host path checks them (a missing, non-integral, negative or too large
    id names its file or partition and row, see :func:`_locate`); int64, or uint64 when some id needs it.
    The checks are reductions, so a clean chunk costs a few device round trips."""
    import cupy as cp

    from .chunk_stats import ChunkStats
    from .errors import IdRangeError, NegativeIdError, NonNumericIdError

    def bad_row(mask, c: str) -> tuple[int, str, dict]:
        i = int(cp.flatnonzero(mask)[0].get())
        name, row = _locate(where, i)
        return i, f"{name}: column {c!r} row {row}", dict(column=c, line=row, path=name)

    cols = []
    for c in (src, dst):
        s = df[c]
        nulls = int(s.null_count)  # the column's metadata: no kernel for a clean column
        if nulls:
            _, at, info = bad_row(s.isna().values, c)
            raise NonNumericIdError(f"{at}: missing id (null); {nulls} missing id(s) in the column", **info)
        a = s.values
        if a.dtype.kind == "f":
            bad = ~cp.isfinite(a) | (cp.floor(a) != a)
            if bool(bad.any()):
                i, at, info = bad_row(bad, c)
                raise NonNumericIdError(f"{at}: vertex id {float(a[i].get())!r} is not an integer", **info)
            if bool((a >= 2.0**64).any()):
                i, at, info = bad_row(a >= 2.0**64, c)
                raise IdRangeError(f"{at}: vertex id {float(a[i].get())!r} exceeds the uint64 range", **info)
            a = a.astype(cp.uint64) if bool((a >= 2.0**63).any()) else a.astype(cp.int64)
        if a.dtype.kind == "i":
            if a.size and int(a.min()) < 0:
                i, at, info = bad_row(a < 0, c)
                raise NegativeIdError(f"{at}: negative vertex id {int(a[i].get())}", **info)
            a = a.astype(cp.int64, copy=False)
        elif a.dtype != cp.uint64:
            a = a.astype(cp.int64)  # narrower unsigned ids
        cols.append(a)
    dt = cp.uint64 if any(a.dtype == cp.uint64 for a in cols) else cp.int64
    edges = cp.stack([a.astype(dt, copy=False) for a in cols], axis=1)
    if dt == cp.uint64 and edges.size and int(edges.max()) <= np.iinfo(np.int64).max:
        edges = edges.astype(cp.int64)  # as normalize_ids: uint64 only where an id needs it
    return edges, ChunkStats(edges=int(edges.shape[0]))


def device_string_edges(df, src: str, dst: str, where) -> tuple:
    """A cuDF partition's id columns as string ids kept on the GPU -> ``(frame, ChunkStats)``: a two-column
    cuDF frame of strings (a column of integers beside strings is read as their decimal text, as the host
    path does), relabeled by :mod:`breadth.pipeline.hash_relabel_gpu`.  A missing id names its row."""
    import cudf

    from .chunk_stats import ChunkStats
    from .errors import NonNumericIdError

    cols = {}
    for name, c in (("src", src), ("dst", dst)):
        s = df[c]
        nulls = int(s.null_count)
        if nulls:
            import cupy as cp

            i = int(cp.flatnonzero(s.isna().values)[0].get())
            at, row = _locate(where, i)
            raise NonNumericIdError(f"{at}: column {c!r} row {row}: missing id (null); {nulls} missing id(s) in "
                                    "the column", column=c, line=row, path=at)
        cols[name] = s if s.dtype == object else s.astype(str)
    out = cudf.DataFrame(cols)
    return out, ChunkStats(edges=len(out))


def read_parquet_chunk(pieces: list[tuple[str, list[int], int, int]], src: str, dst: str) -> tuple:
    """Row groups of one or more Parquet files, read by cuDF on this worker's GPU in one call ->
    ``((k, 2) CuPy ids, ChunkStats)``; ``pieces``: ``(path, row groups, file row of the first, rows)``
    each, the row groups of a piece consecutive."""
    import cudf

    from .errors import NonNumericIdError

    df = cudf.read_parquet([p[0] for p in pieces], columns=[src, dst], row_groups=[p[1] for p in pieces])
    kinds = {df[c].dtype.kind for c in (src, dst)}
    if kinds <= set("iuf"):
        return device_edges(df, src, dst, _spans(pieces))
    if kinds <= set("iuO"):
        return device_string_edges(df, src, dst, _spans(pieces))
    c = next(c for c in (src, dst) if df[c].dtype.kind not in "iuO")
    raise NonNumericIdError(f"{pieces[0][0]}: column {c!r} has type {df[c].dtype}; vertex ids must be integers or "
                            "strings", path=pieces[0][0], column=c)


def _spans(pieces: list[tuple[str, list[int], int, int]]) -> list[tuple[str, int, int]]:
    """``(path, first chunk row, file row)`` of each piece of a chunk."""
    out, start = [], 0
    for path, _, row0, rows in pieces:
        out.append((path, start, row0))
        start += rows
    return out
