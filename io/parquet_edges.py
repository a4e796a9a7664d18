"""Parquet edge lists: a file, a directory of files or a glob; one Dask chunk per row group.

Source/target columns are configurable (default: ``src``/``dst``, ``source``/``target``, ``from``/``to``,
``u``/``v``, or the only two columns in their order, which an :class:`~breadth.io.errors.InputNotice` says).
Integer columns of any width (int32, int64, uint64...) and string columns are accepted; uint64 ids above
the int64 range stay uint64 in ``id_map``.  Only the two columns are read, one row group at a time.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from .chunk_stats import ChunkStats
from .errors import (BadLineError, EmptyInputError, InputNotice, MissingColumnError, NonNumericIdError,
                     UnknownFormatError)
from .formats import COLUMN_PAIRS, FORMATS
from .paths import expand_paths

DEFAULT_PAIRS = COLUMN_PAIRS


def _pick_columns(path: str, names: list[str], src, dst) -> tuple[str, str, bool]:
    """The source and target columns of a file with columns ``names``, and whether they were taken by their
    order alone (two columns that are no pair of :data:`DEFAULT_PAIRS`)."""
    if src is None and dst is None:
        for a, b in DEFAULT_PAIRS:
            if a in names and b in names:
                return a, b, False
        if len(names) == 2:
            return names[0], names[1], True
        raise MissingColumnError(f"{path}: cannot tell the source/target columns among {names}; "
                                 "{src=,dst=} to name them", path=path)
    if src is None or dst is None:
        raise MissingColumnError(f"{path}: a {'target' if src is None else 'source'} column is named but no "
                                 f"{'source' if src is None else 'target'} column; " "{src=,dst=} to name both",
                                 path=path)
    for c, what in ((src, "source"), (dst, "target")):
        if c not in names:
            raise MissingColumnError(f"{path}: no {what} column {c!r}; columns are {names}", path=path, column=c)
    return src, dst, False


def _say_guessed(guessed: list[tuple[str, str, str]]) -> None:
    """One notice for the files whose columns were taken by their order (the first named, the others counted)."""
    if not guessed:
        return
    import warnings

    path, s, d = guessed[0]
    more = f" (and {len(guessed) - 1} more file(s))" if len(guessed) > 1 else ""
    warnings.warn(InputNotice(f"{path}{more}: columns {s!r} and {d!r} are not a known source/target pair; read "
                              f"{s!r} as the source and {d!r} as the target (" "{src=,dst=} to choose)", path=path),
                  stacklevel=3)


def _column_array(path: str, col, name: str, rg: int):
    """A column of ids: a NumPy array of integers, or the Arrow column itself for strings (kept as Arrow
    string arrays: relabeling reads their buffers, never Python strings)."""
    import pyarrow as pa

    if col.null_count:
        raise NonNumericIdError(f"{path}: row group {rg}: column {name!r} has {col.null_count} null id(s)",
                                path=path, column=name)
    t = col.type
    if pa.types.is_dictionary(t) and _is_string(t.value_type):
        return col  # string ids read dictionary-encoded (read_row_group): relabeling takes the codes
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_integer(t):
        return _integers(col)
    if _is_string(t):
        return col
    raise NonNumericIdError(f"{path}: column {name!r} has type {t}; vertex ids must be integers or strings",
                            path=path, column=name)


def _is_string(t) -> bool:
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _integers(col) -> np.ndarray:
    """A null-free Arrow integer column as a NumPy array: a view of its one chunk's data buffer (a copy when
    it has several).  Not ``to_numpy``: its first call in a process imports pandas, 0.2-0.3 s of a fresh
    worker's first chunk that nothing else here needs."""
    import pyarrow as pa

    t = col.type
    dtype = np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    parts = [np.frombuffer(c.buffers()[1], dtype, count=len(c), offset=c.offset * dtype.itemsize)
             for c in col.chunks]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def read_row_group(path: str, rg: int, src: str, dst: str):
    """Row group ``rg`` of one file -> ``(edges, ChunkStats)``: ``edges`` ``(k, 2)`` integers (normalised,
    see relabel), or for string ids a two-column Arrow table (source, target) of dictionary-encoded strings.

    String columns are read with pyarrow's ``read_dictionary``: each distinct string of the row group is
    decoded once, with int32 codes for the rows, instead of every row's string, which takes about 30 % less
    peak memory (a 1 M-tuple row group of URL-like ids, 266 K distinct).  It costs time where ids repeat
    little and the writer's dictionary fell back to plain pages, which pyarrow then dictionary-encodes as it
    decodes (0.77 M distinct in 1 M tuples: a row group reads in about three times as long, a 2^26-tuple
    ingest takes about 10 % longer, for 14 % less peak memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .id_checks import normalize_ids

    pf = pq.ParquetFile(path)
    strings = [c for c in (src, dst) if _is_string(pf.schema_arrow.field(c).type)]
    if strings:
        pf = pq.ParquetFile(path, read_dictionary=strings)
    t = pf.read_row_group(rg, columns=[src, dst])
    s = _column_array(path, t.column(src), src, rg)
    d = _column_array(path, t.column(dst), dst, rg)
    if isinstance(s, pa.ChunkedArray) != isinstance(d, pa.ChunkedArray):
        raise NonNumericIdError(f"{path}: columns {src!r} ({t.column(src).type}) and {dst!r} "
                                f"({t.column(dst).type}) hold different id types", path=path)
    if isinstance(s, pa.ChunkedArray):
        return pa.table({"src": s, "dst": d}), ChunkStats(edges=len(s))
    if s.dtype != d.dtype:
        both = np.result_type(s.dtype, d.dtype)
        if both.kind == "f":  # uint64 with int64: ids are non-negative, so uint64 holds both
            both = np.dtype(np.uint64)
            for a, c in ((s, src), (d, dst)):
                if a.dtype.kind == "i" and a.size and a.min() < 0:
                    raise BadLineError(f"{path}: column {c!r} has negative ids", path=path, column=c)
        s, d = s.astype(both), d.astype(both)
    edges = normalize_ids(np.stack([s, d], axis=1), f"{path} (row group {rg})")
    return edges, ChunkStats(edges=int(edges.shape[0]))


GPU_CHUNK_ROWS = 1 << 26  # rows per GPU chunk: 1 GiB of int64 pairs, a few of which a GPU sorts at once


def read_row_group_to_device(path: str, rg: int, src: str, dst: str):
    """:func:`read_row_group` (pyarrow on the host), the ids then moved to this worker's GPU (CuPy), so
    that they are relabeled there: the GPU path without cuDF."""
    import cupy as cp

    edges, stats = read_row_group(path, rg, src, dst)
    return cp.asarray(edges), stats


def _row_group_meta(path: str, pf, rg: int, src: str, dst: str) -> tuple | None:
    """What :func:`breadth.pipeline.relabel.relabel.edge_list_from_parts` learns from a chunk, read from the file's
    metadata instead of its data: ``(rows, stats, kind, lo, hi, on_device)``; ``None`` where the metadata
    cannot say (no min/max statistics, unsigned or dictionary columns: the chunk is then read to learn it)."""
    import pyarrow as pa

    md = pf.metadata.row_group(rg)
    kinds, lo, hi = set(), [], []
    for c in (src, dst):
        t = pf.schema_arrow.field(c).type
        if _is_string(t):
            kinds.add("str")
            continue
        if not pa.types.is_signed_integer(t):
            return None
        st = md.column(pf.schema_arrow.get_field_index(c)).statistics
        if st is None or not st.has_min_max or st.null_count:
            return None
        kinds.add("int")
        lo.append(int(st.min))
        hi.append(int(st.max))
    if len(kinds) != 1 or (lo and min(lo) < 0):
        return None  # mixed or negative ids: reading the chunk reports them with their row
    rows = md.num_rows
    if kinds == {"str"}:
        return rows, ChunkStats(edges=rows), "str", None, None, False
    return rows, ChunkStats(edges=rows), "int", min(lo), max(hi), False


def row_group_sizes(paths) -> list[int]:
    """Rows of every non-empty row group of the Parquet files under ``paths`` (the CPU reader's chunks,
    :func:`parquet_parts`), from their footers alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = []
    for path in expand_paths(paths, suffixes=FORMATS["parquet"].suffixes):
        try:
            md = pq.ParquetFile(path).metadata
        except (pa.ArrowInvalid, OSError) as e:
            raise UnknownFormatError(f"{path}: not a readable Parquet file: {e}", path=path) from None
        out += [k for k in (md.row_group(rg).num_rows for rg in range(md.num_row_groups)) if k]
    return out


def parquet_parts(paths, *, src: str | None = None, dst: str | None = None, device: str = "cpu",
                  chunk_rows: int = GPU_CHUNK_ROWS, meta: list | None = None) -> list:
    """Delayed raw chunks (see :func:`read_parquet`): on the CPU one per row group of every file; on
    the GPU (``device="gpu"``, read by cuDF on the dask-cuda workers, ids kept in device memory)
    about ``chunk_rows`` rows of row groups in file order, several files in one read where they are
    small, since a GPU task on a row group of a million rows takes less time than Dask's scheduling
    of it.  ``meta``: a list that receives each CPU chunk's :func:`_row_group_meta` (``None`` entries
    where the metadata cannot tell), so that relabeling need not read every chunk before splitting any."""
    import dask
    import pyarrow as pa
    import pyarrow.parquet as pq

    has_cudf = device == "gpu" and importlib.util.find_spec("cudf") is not None
    out, gpu_groups, gpu_cols, guessed = [], [], None, []
    for path in expand_paths(paths, suffixes=FORMATS["parquet"].suffixes):
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise UnknownFormatError(f"{path}: not a readable Parquet file: {e}", path=path) from None
        s, d, by_order = _pick_columns(path, pf.schema_arrow.names, src, dst)
        if by_order:
            guessed.append((path, s, d))
        ints = all(pa.types.is_integer(pf.schema_arrow.field(c).type) for c in (s, d))
        if device == "gpu" and has_cudf:  # integer or string ids, read and relabeled on the GPUs
            if gpu_cols not in (None, (s, d)):
                raise MissingColumnError(f"{path}: source/target columns {s!r}/{d!r} differ from the other files' "
                                         f"{gpu_cols[0]!r}/{gpu_cols[1]!r}; "
                                         "{src=,dst=} to name them", path=path)
            gpu_cols, row0 = (s, d), 0
            for rg in range(pf.metadata.num_row_groups):
                k = pf.metadata.row_group(rg).num_rows
                if k:
                    gpu_groups.append((path, rg, row0, k))
                row0 += k
            continue
        # without cuDF, integer ids are read on the host and moved to the GPU, strings relabeled on the host
        read = read_row_group_to_device if device == "gpu" and ints else read_row_group
        for rg in range(pf.metadata.num_row_groups):
            if pf.metadata.row_group(rg).num_rows:
                out.append(dask.delayed(read, pure=True)(path, rg, s, d))
                if meta is not None:
                    meta.append(_row_group_meta(path, pf, rg, s, d) if read is read_row_group else None)
    _say_guessed(guessed)
    if gpu_groups:
        out += _gpu_chunks(gpu_groups, *gpu_cols, chunk_rows)
    if not out:
        raise EmptyInputError(f"{paths}: no rows in the Parquet input", path=str(paths))
    return out


def _gpu_chunks(row_groups: list[tuple[str, int, int, int]], src: str, dst: str, chunk_rows: int) -> list:
    """Delayed cuDF reads of about ``chunk_rows`` rows each from ``(path, row group, its file row, rows)``
    in order: consecutive row groups of a file, and several files, go into one read."""
    import dask

    from .cudf_edges import read_parquet_chunk

    out, pieces, rows = [], [], 0

    def flush():
        if pieces:
            out.append(dask.delayed(read_parquet_chunk, pure=True)([tuple(p) for p in pieces], src, dst))

    for path, rg, row0, k in row_groups:
        if pieces and rows + k > chunk_rows:
            flush()
            pieces, rows = [], 0
        if pieces and pieces[-1][0] == path and pieces[-1][1][-1] == rg - 1:
            pieces[-1][1].append(rg)
            pieces[-1][3] += k
        else:
            pieces.append([path, [rg], row0, k])
        rows += k
    flush()
    return out
