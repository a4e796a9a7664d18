"""cuDF edge lists on the GPU: id columns checked on the device and handed on as CuPy ``(k, 2)`` chunks.

The GPU twin of the host readers' id checks (:func:`breadth.pipeline.relabel.normalize_ids`): a missing,
non-integral, out-of-range or negative id is one error naming the file or partition, column and row.
:func:`read_parquet_chunk` reads consecutive row groups of one Parquet file with ``cudf.read_parquet`` on
a dask-cuda worker.  cuDF is imported only here, and only when called.
"""

from __future__ import annotations

import numpy as np


def device_edges(df, src: str, dst: str, where: str, row0: int = 0) -> tuple:
    """A cuDF partition's integer (or integral float) id columns -> ``((k, 2) CuPy ids, ChunkStats)``,
    checked on the device as the host path checks them (missing, non-integral, negative ids name their
    row, counted from ``row0``); int64, or uint64 when some id needs it."""
    import cupy as cp

    from .errors import IdRangeError, NegativeIdError, NonNumericIdError
    from .text_parser import ChunkStats

    def first(mask) -> int:
        return int(cp.flatnonzero(mask)[0].get())

    def at(i: int) -> int:
        return row0 + i

    cols = []
    for c in (src, dst):
        s = df[c]
        nulls = int(s.isna().sum())
        if nulls:
            i = first(s.isna().values)
            raise NonNumericIdError(f"{where}: column {c!r} row {at(i)}: missing id (null); {nulls} missing id(s) "
                                    f"in the column", column=c, line=at(i))
        a = s.values
        if a.dtype.kind == "f":
            bad = ~cp.isfinite(a) | (cp.floor(a) != a)
            if bool(bad.any()):
                i = first(bad)
                raise NonNumericIdError(f"{where}: column {c!r} row {at(i)}: vertex id {float(a[i].get())!r} is not an "
                                        f"integer", column=c, line=at(i))
            if bool((a >= 2.0**64).any()):
                i = first(a >= 2.0**64)
                raise IdRangeError(f"{where}: column {c!r} row {at(i)}: vertex id {float(a[i].get())!r} exceeds the "
                                   f"uint64 range", column=c, line=at(i))
            a = a.astype(cp.uint64) if bool((a >= 2.0**63).any()) else a.astype(cp.int64)
        if a.dtype.kind == "i":
            if a.size and int(a.min()) < 0:
                i = first(a < 0)
                raise NegativeIdError(f"{where}: column {c!r} row {at(i)}: negative vertex id {int(a[i].get())}",
                                      column=c, line=at(i))
            a = a.astype(cp.int64, copy=False)
        elif a.dtype != cp.uint64:
            a = a.astype(cp.int64)  # narrower unsigned ids
        cols.append(a)
    dt = cp.uint64 if any(a.dtype == cp.uint64 for a in cols) else cp.int64
    edges = cp.stack([a.astype(dt, copy=False) for a in cols], axis=1)
    if dt == cp.uint64 and edges.size and int(edges.max()) <= np.iinfo(np.int64).max:
        edges = edges.astype(cp.int64)  # as normalize_ids: uint64 only where an id needs it
    return edges, ChunkStats(edges=int(edges.shape[0]))


def read_parquet_chunk(path: str, row_groups: list[int], src: str, dst: str, row0: int) -> tuple:
    """Row groups ``row_groups`` (consecutive) of one Parquet file, read by cuDF on this worker's GPU ->
    ``((k, 2) CuPy ids, ChunkStats)``; ``row0``: the file row of the first one (for error messages)."""
    import cudf

    from .errors import NonNumericIdError

    df = cudf.read_parquet(path, columns=[src, dst], row_groups=[row_groups])
    for c in (src, dst):
        if df[c].dtype.kind not in "iuf":
            raise NonNumericIdError(f"{path}: column {c!r} has type {df[c].dtype}; --device gpu reads integer "
                                    "ids (string ids: --device cpu)", path=path, column=c)
    return device_edges(df, src, dst, path, row0)
