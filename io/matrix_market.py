"""Matrix Market coordinate files (``%%MatrixMarket matrix coordinate <field> <symmetry>``), 1-based.

The declared size fixes the vertex count (``max(rows, cols)``, isolated vertices included), so ids are
not relabeled: dense id ``i`` is file id ``i + 1`` (``id_map``).  Values (real/integer/complex) are
ignored; the number of entries must equal the declared count (a shorter file is reported truncated).
A ``general`` matrix is read as directed unless ``directed=False``; ``symmetric`` ones as undirected.
"""

from __future__ import annotations

from .errors import BadLineError, EmptyInputError, TruncatedInputError, UnknownFormatError
from .snap_text import _check_policy
from .text_parser import DEFAULT_CHUNK_BYTES, TextOptions, is_gzip, read_text_file_chunks

FIELDS = {"pattern": 2, "integer": 3, "real": 3, "double": 3, "complex": 4}


def read_header(path: str) -> dict:
    """``{"field", "symmetry", "rows", "cols", "nnz", "data_start", "header_lines"}`` of a coordinate file."""
    import pyarrow as pa

    with pa.input_stream(path, compression="gzip" if is_gzip(path) else None) as s:
        try:
            head = bytes(s.read(1 << 20))
        except (OSError, pa.ArrowException) as e:
            raise TruncatedInputError(f"{path}: compressed stream is damaged or truncated: {e}", path=path) from None
    if not head:
        raise EmptyInputError(f"{path}: file is empty", path=path)
    lines = head.split(b"\n")
    banner = lines[0].rstrip(b"\r").decode("ascii", "replace").split()
    if len(banner) < 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        raise UnknownFormatError(f"{path}:1: not a Matrix Market file (banner {lines[0][:80]!r})", path=path, line=1)
    fmt, fld, sym = (b.lower() for b in banner[2:5])
    if fmt != "coordinate":
        raise UnknownFormatError(f"{path}:1: Matrix Market '{fmt}' format is not a graph; need 'coordinate'",
                                 path=path, line=1)
    if fld not in FIELDS:
        raise UnknownFormatError(f"{path}:1: unknown Matrix Market field {fld!r}", path=path, line=1)
    off = len(lines[0]) + 1
    for i, raw in enumerate(lines[1:-1], start=2):
        text = raw.rstrip(b"\r").strip()
        off_next = off + len(raw) + 1
        if not text or text.startswith(b"%"):
            off = off_next
            continue
        parts = text.split()
        try:
            rows, cols, nnz = (int(x) for x in parts)
        except ValueError:
            raise BadLineError(f"{path}:{i}: bad Matrix Market size line: {text.decode('utf-8', 'replace')!r}",
                               path=path, line=i, text=text.decode("utf-8", "replace")) from None
        return {"field": fld, "symmetry": sym, "rows": rows, "cols": cols, "nnz": nnz, "data_start": off_next,
                "header_lines": i}
    raise TruncatedInputError(f"{path}: no size line in the first MiB", path=path)


def mtx_parts(path: str, *, on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES):
    """``(header, delayed raw chunks)`` of one Matrix Market file."""
    _check_policy(on_bad_lines)
    h = read_header(path)
    opts = TextOptions(sep=-1, max_fields=FIELDS[h["field"]], comments=b"%", base=1,
                       limit=max(h["rows"], h["cols"]), on_bad_lines=on_bad_lines)
    return h, read_text_file_chunks(path, opts, chunk_bytes, data_start=h["data_start"],
                                    header_lines=h["header_lines"])
