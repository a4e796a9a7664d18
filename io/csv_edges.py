"""CSV edge lists, with or without a header row; integer ids (fast Numba path) or string ids (pyarrow).

Integer ids: plain files are parsed in parallel byte ranges like SNAP text (one Dask chunk each), gzip
files streamed.  String ids (``ids="str"``): each file is streamed through ``pyarrow.csv.open_csv`` in
record batches (one Dask chunk per file).
"""

from __future__ import annotations

import re
import warnings

from .errors import BadLineError, EmptyInputError, MissingColumnError, NonNumericIdError, TruncatedInputError
from .paths import expand_paths
from .snap_text import _check_policy
from .text_parser import DEFAULT_CHUNK_BYTES, ChunkStats, TextOptions, is_gzip, read_text_file_chunks


def _first_line(path: str) -> tuple[str, int]:
    """The header line (decoded, without its end) and its length in bytes including the newline."""
    import pyarrow as pa

    stream = pa.input_stream(path, compression="gzip" if is_gzip(path) else None)
    with stream:
        try:
            head = bytes(stream.read(1 << 20))
        except (OSError, pa.ArrowException) as e:
            raise TruncatedInputError(f"{path}: compressed stream is damaged or truncated: {e}", path=path) from None
    if not head.strip():
        raise EmptyInputError(f"{path}: file is empty", path=path)
    k = head.find(b"\n")
    line = head if k < 0 else head[:k]
    return line.rstrip(b"\r").decode("utf-8", "replace"), (len(head) if k < 0 else k + 1)


_INT_FIELD = re.compile(r"^[+-]?[0-9]+$")


def _resolve_header(path: str, delimiter: str, header: bool | None, src, dst) -> bool:
    """Whether ``path`` starts with a header row.  ``header`` True/False is the caller's word; ``None``
    (the default) decides from the first line: a row whose source and target fields are integers is an
    edge -- data, not a header -- so a header-less numeric file keeps its first edge; anything else is a
    header.  Columns named by text (``src="from"``) can only be found in a header.  (A header-less file
    whose first row has non-numeric ids, e.g. ``ids="str"`` names, needs ``header=False``.)"""
    if header is not None:
        return bool(header)
    if isinstance(src, str) or isinstance(dst, str):
        return True
    line, _ = _first_line(path)
    fields = [c.strip() for c in line.split(delimiter)]
    need = [0 if src is None else src, 1 if dst is None else dst]
    # an integer-looking field counts as an id even if out of range or negative, so that such a first
    # row is reported as a bad edge (file:line) instead of silently taken for a header
    return not all(i < len(fields) and _INT_FIELD.match(fields[i]) for i in need)


def _column_index(path: str, names: list[str], col, default: int, what: str) -> int:
    if col is None:
        return default
    if isinstance(col, int):
        if col >= len(names) and names:
            raise MissingColumnError(f"{path}: {what} column index {col} but the header has {len(names)} columns",
                                     path=path, column=col)
        return col
    if col not in names:
        raise MissingColumnError(f"{path}: no {what} column {col!r}; columns are {names}", path=path, column=col)
    return names.index(col)


def _read_str_csv(path: str, delimiter: str, header: bool, src, dst, on_bad_lines: str):
    """Stream one CSV file with string ids -> ``(edges, ChunkStats)``, ``edges`` a two-column Arrow
    table of strings (source, target)."""
    import pyarrow as pa
    from pyarrow import csv

    stats = ChunkStats()

    def invalid(row):
        if on_bad_lines == "error":
            return "error"
        stats.skipped += 1
        if len(stats.bad) < 5:
            stats.bad.append((path, row.number, "wrong number of fields", row.text))
            if on_bad_lines == "warn":
                warnings.warn(f"{path}:{row.number}: skipped bad line: {row.text!r}", stacklevel=2)
        return "skip"

    ro = csv.ReadOptions(autogenerate_column_names=not header, block_size=16 << 20)
    po = csv.ParseOptions(delimiter=delimiter, invalid_row_handler=invalid)
    try:
        reader = csv.open_csv(pa.input_stream(path, compression="gzip" if is_gzip(path) else None),
                              read_options=ro, parse_options=po,
                              convert_options=csv.ConvertOptions(column_types={}, strings_can_be_null=False))
    except pa.ArrowInvalid as e:
        raise BadLineError(f"{path}: {e}", path=path) from None
    names = reader.schema.names
    si = _column_index(path, names if header else [], src, 0, "source")
    di = _column_index(path, names if header else [], dst, 1, "target")
    src_parts, dst_parts = [], []
    try:
        for batch in reader:
            src_parts.append(batch.column(si).cast(pa.string()))
            dst_parts.append(batch.column(di).cast(pa.string()))
    except (pa.ArrowInvalid, IndexError) as e:
        raise BadLineError(f"{path}: {e}", path=path) from None
    except OSError as e:
        raise TruncatedInputError(f"{path}: compressed stream is damaged or truncated: {e}", path=path) from None
    edges = pa.table({"src": pa.chunked_array(src_parts, pa.string()),
                      "dst": pa.chunked_array(dst_parts, pa.string())})
    stats.edges = int(edges.num_rows)
    return edges, stats


def csv_parts(paths, *, header: bool | None = None, delimiter: str = ",", src=None, dst=None, ids: str = "int",
              on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES, device: str = "cpu") -> list:
    """Delayed raw ``(edges, ChunkStats)`` chunks of CSV files (see :func:`read_csv`); ``device="gpu"``:
    integer ids as CuPy chunks, parsed by cuDF where the lines allow (string ids are read on the host)."""
    import dask

    _check_policy(on_bad_lines)
    if len(delimiter) != 1:
        raise ValueError(f"delimiter must be one character, got {delimiter!r}")
    if ids not in ("int", "str"):
        raise ValueError(f"ids must be 'int' or 'str', got {ids!r}")
    out = []
    for path in expand_paths(paths):
        header_here = _resolve_header(path, delimiter, header, src, dst)  # each file decides for itself
        if ids == "str":
            _check_header(path, delimiter, header_here, src, dst)  # missing columns fail here, not on a worker
            out.append(dask.delayed(_read_str_csv, pure=True)(path, delimiter, header_here, src, dst, on_bad_lines))
            continue
        names, start = [], 0
        if header_here:
            line, start = _first_line(path)
            names = [c.strip().strip('"') for c in line.split(delimiter)]
        si = _column_index(path, names, src, 0, "source")
        di = _column_index(path, names, dst, 1, "target")
        opts = TextOptions(sep=ord(delimiter), src_idx=si, dst_idx=di,
                           max_fields=len(names) if header_here else 0, comments=b"#", on_bad_lines=on_bad_lines)
        out += read_text_file_chunks(path, opts, chunk_bytes, data_start=start, header_lines=1 if header_here else 0,
                                     device=device)
    return out


def _check_header(path, delimiter, header, src, dst):
    names = []
    if header:
        line, _ = _first_line(path)
        names = [c.strip().strip('"') for c in line.split(delimiter)]
    _column_index(path, names, src, 0, "source")
    _column_index(path, names, dst, 1, "target")


__all__ = ["csv_parts", "NonNumericIdError"]
