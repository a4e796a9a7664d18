"""cuDF edge lists on the GPU: id columns checked on the device and handed on as CuPy ``(k, 2)`` chunks
(integer ids) or two-column cuDF frames (string ids).

The GPU twin of the host readers' id checks (:func:`breadth.io.id_checks.normalize_ids`): a missing,
non-integral, out-of-range or negative id is one error naming the file or partition, column and row.
:func:`read_parquet_chunk` reads row groups of one or more Parquet files in one ``cudf.read_parquet`` on
a dask-cuda worker.  cuDF is imported only here, and only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import cupy


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
    path does), relabeled by :mod:`breadth.pipeline.relabel.hash_relabel_gpu`.  A missing id names its row."""
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


# ---------------------------------------------------------------- text on the GPU

#: byte classes of edge-list text: 0 digit, 1 newline, 2 tab, 3 space, 4 comma, 5 anything else
_CLASSES = np.full(256, 5, np.uint8)
_CLASSES[ord("0"):ord("9") + 1] = 0
_CLASSES[[10, 9, 32, 44]] = [1, 2, 3, 4]
#: digits in one field beyond which a uint64 could overflow (10^19 - 1 fits, 20 digits may not)
MAX_DIGITS = 19
#: "other" bytes (comment text, a header) beyond which a block is left to the host parser
MAX_OTHER_BYTES = 1 << 16


def parse_text_block(arr: np.ndarray, opts) -> cupy.ndarray | None:
    """``(k, 2)`` CuPy ids of a block of edge-list text lines (uint8 bytes, ``opts`` a
    :class:`~breadth.io.text_parser.TextOptions`) parsed by ``cudf.read_csv``, or ``None`` where cuDF's
    reader does not fit the block and the host parser must read it
    (:func:`breadth.io.text_parser.read_range_to_device`).

    It fits plain edge lines: outside comment lines only digits, one separator byte and newlines, the
    same number of fields on every line (two for SNAP, or as many as the first line when extra columns
    are allowed), at most :data:`MAX_DIGITS` digits an id.  Everything else -- a bad line, a negative or
    20-digit id, ``\\r\\n`` endings, mixed separators or comment characters, Matrix Market's 1-based ids --
    returns ``None``."""
    import io

    import cudf
    import cupy as cp

    if opts.base != 0 or opts.limit != np.iinfo(np.uint64).max:
        return None
    if arr.size == 0:
        return cp.empty((0, 2), cp.int64)
    d = cp.asarray(arr)
    cls = cp.asarray(_CLASSES)[d]
    counts = cp.bincount(cls, minlength=6).get()
    dig = cls == 0
    run_start = dig.copy()
    run_start[1:] &= ~dig[:-1]
    runs = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(run_start, dtype=cp.int64)])  # runs before i
    c = cp.concatenate([cp.zeros(1, cp.int32), cp.cumsum(dig, dtype=cp.int32)])
    w = MAX_DIGITS + 1  # a run of more digits holds w digits in a row somewhere
    if d.size >= w and bool((c[w:] - c[:-w] == w).any()):
        return None
    comment, runs_in_comments, seps = None, 0, counts[2:5].astype(np.int64)  # tabs, spaces, commas
    if counts[5]:  # bytes other than digits, separators and newlines: only inside comment lines
        if counts[5] > MAX_OTHER_BYTES:
            return None
        nl = cp.flatnonzero(cls == 1)
        at = cp.searchsorted(nl, cp.flatnonzero(cls == 5))
        first = cp.unique(cp.where(at > 0, nl[cp.maximum(at - 1, 0)] + 1, 0))  # their lines' first bytes
        end = cp.concatenate([nl, cp.full(1, d.size, nl.dtype)])[cp.searchsorted(nl, first)]  # their ends
        lead = set(arr[first.get()].tolist())
        if len(lead) != 1 or lead.pop() not in opts.comments:
            return None
        comment = chr(int(arr[int(first[0])]))
        runs_in_comments = int((runs[end] - runs[first]).sum())
        for a, b in zip(first.get().tolist(), end.get().tolist()):  # separators inside comment lines
            text = arr[a:b].tobytes()
            seps -= [text.count(b"\t"), text.count(b" "), text.count(b",")]
    if opts.sep == -1:  # SNAP: one separator byte between the two fields (runs go to the host parser)
        used = [c for c, k in zip("\t ,", seps) if k]
        if len(used) != 1:
            return None
        sep = used[0]
    else:
        sep = chr(opts.sep)
    try:
        df = cudf.read_csv(io.BytesIO(memoryview(arr)), sep=sep, header=None, comment=comment,
                           skip_blank_lines=True, dtype="uint64", compression=None)
    except Exception:  # noqa: BLE001 - whatever cuDF cannot read, the host parser reads or reports exactly
        return None
    ncols = df.shape[1]
    if ncols <= max(opts.src_idx, opts.dst_idx) or (opts.max_fields and ncols > opts.max_fields):
        return None
    if any(df.iloc[:, i].null_count for i in range(ncols)):
        return None
    # every line holds exactly the fields cuDF found (one short of fields is a null above; one with more
    # than the first line would add digit runs beyond rows x columns)
    if int(runs[-1]) - runs_in_comments != len(df) * ncols:
        return None
    edges = cp.stack([df.iloc[:, opts.src_idx].values, df.iloc[:, opts.dst_idx].values], axis=1)
    if edges.size and int(edges.max()) <= np.iinfo(np.int64).max:
        edges = edges.view(cp.int64)  # as the host parser: uint64 only where an id needs it
    return edges
