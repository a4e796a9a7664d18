"""CSV edge lists, with or without a header row; integer ids (fast Numba path) or string ids (pyarrow).

Whether a file has a header row is the caller's word (``header=True``/``False``) or decided from its first
row: with integer ids, a row whose source and target fields hold no integer is a header (it cannot be an
edge) and any other row is data (a bad one is reported by file and line, never dropped as a header); with
string ids a row of integer source and target is data too, and since any other row could be an edge as
well, a first row taken as a header is said in an :class:`~breadth.io.errors.InputNotice` unless its
fields are a known column pair (``source,target``, ...).

Integer ids: plain files are parsed in parallel byte ranges like SNAP text (one Dask chunk each), gzip
files streamed.  String ids (``ids="str"``): each file is streamed through ``pyarrow.csv.open_csv`` in
record batches (one Dask chunk per file).
"""

from __future__ import annotations

import re
import warnings

from .errors import (BadLineError, EmptyInputError, InputNotice, MissingColumnError, NonNumericIdError,
                     TruncatedInputError)
from .formats import COLUMN_PAIRS
from .paths import expand_paths
from .snap_text import _check_policy
from .text_parser import DEFAULT_CHUNK_BYTES, ChunkStats, TextOptions, intact_lines, is_gzip, read_text_file_chunks


def _first_line(path: str) -> tuple[str, int]:
    """The header line (decoded, without its end) and its length in bytes including the newline."""
    import pyarrow as pa

    stream = pa.input_stream(path, compression="gzip" if is_gzip(path) else None)
    with stream:
        try:
            head = bytes(stream.read(1 << 20))
        except (OSError, pa.ArrowException) as e:
            raise _damaged(path, e) from None
    if not head.strip():
        raise EmptyInputError(f"{path}: file is empty", path=path)
    k = head.find(b"\n")
    line = head if k < 0 else head[:k]
    return line.rstrip(b"\r").decode("utf-8", "replace"), (len(head) if k < 0 else k + 1)


def _damaged(path: str, e: Exception) -> TruncatedInputError:
    line = intact_lines(path)
    return TruncatedInputError(f"{path}: compressed stream is damaged or truncated after line {line}: {e}",
                               path=path, line=line)


_INT_FIELD = re.compile(r"^[+-]?[0-9]+$")


def _resolve_header(path: str, delimiter: str, header: bool | None, src, dst,
                    ids: str = "int") -> tuple[bool, str | None]:
    """Whether ``path`` starts with a header row, and the row's text where that was a guess that may have
    dropped an edge (see the module docstring).  ``header`` True/False is the caller's word; columns named
    by text (``src="from"``) can only be found in a header."""
    if header is not None:
        return bool(header), None
    if isinstance(src, str) or isinstance(dst, str):
        return True, None
    line, _ = _first_line(path)
    fields = [c.strip() for c in line.split(delimiter)]
    need = [0 if src is None else src, 1 if dst is None else dst]
    got = [fields[i] if i < len(fields) else "" for i in need]
    if ids == "int":
        # an integer-looking field counts as an id even if out of range or negative, so that such a first
        # row is reported as a bad edge (file:line) instead of silently taken for a header
        return not any(_INT_FIELD.match(f) for f in got), None
    if all(_INT_FIELD.match(f) for f in got):  # string ids that look like numbers: an edge, as above
        return False, None
    if tuple(f.strip('"').lower() for f in got) in COLUMN_PAIRS:
        return True, None
    return True, line


def _say_headers(guessed: list[tuple[str, str]]) -> None:
    """One notice for the files of string ids whose first row was taken as a header by guess."""
    if not guessed:
        return
    path, line = guessed[0]
    more = f" (and {len(guessed) - 1} more file(s))" if len(guessed) > 1 else ""
    row = line if len(line) <= 80 else line[:77] + "..."
    warnings.warn(InputNotice(f"{path}{more}: first row {row!r} taken as a header, though with string ids it "
                              "could be an edge; {header=False} if it is one, or {header=True} to say it is a "
                              "header", path=path), stacklevel=3)


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
    except OSError as e:  # the first block did not decompress
        raise _damaged(path, e) from None
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
        raise _damaged(path, e) from None
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
    out, guessed = [], []
    for path in expand_paths(paths):
        header_here, row = _resolve_header(path, delimiter, header, src, dst, ids)  # each file decides for itself
        if row is not None:
            guessed.append((path, row))
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
    _say_headers(guessed)
    return out


def _check_header(path, delimiter, header, src, dst):
    names = []
    if header:
        line, _ = _first_line(path)
        names = [c.strip().strip('"') for c in line.split(delimiter)]
    _column_index(path, names, src, 0, "source")
    _column_index(path, names, dst, 1, "target")


__all__ = ["csv_parts", "NonNumericIdError"]
