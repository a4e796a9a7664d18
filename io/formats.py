"""Which format an edge file is in: by name, else by looking at its first bytes (``read_edges`` in
:mod:`breadth.pipeline.file_sources` picks its reader with this)."""

from __future__ import annotations

import os

from .errors import UnknownFormatError

FORMATS = ("auto", "snap", "csv", "mtx", "parquet")
#: what each format is called in messages
FORMAT_NAMES = {"snap": "SNAP text", "csv": "CSV", "mtx": "Matrix Market", "parquet": "Parquet"}
#: source/target column names known without being named (Parquet columns, a CSV header of string ids); any
#: case in a CSV header
COLUMN_PAIRS = (("src", "dst"), ("source", "target"), ("from", "to"), ("u", "v"))
_TEXT_EXT = (".txt", ".tsv", ".edges", ".el", ".edgelist", ".snap")


def detect_format(path: str) -> str:
    """``snap``, ``csv``, ``mtx`` or ``parquet`` from the extension, else from the first bytes."""
    name = path.lower()
    if os.path.isdir(path) or name.endswith((".parquet", ".pq", ".parq")):
        return "parquet"
    base = name[:-3] if name.endswith(".gz") else name
    if base.endswith((".mtx", ".mm")):
        return "mtx"
    if base.endswith(".csv"):
        return "csv"
    if base.endswith(_TEXT_EXT):
        return "snap"
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x1f\x8b"):
        import gzip

        try:
            with gzip.open(path, "rb") as g:
                head = g.read(4096)
        except (OSError, EOFError) as e:
            raise UnknownFormatError(f"{path}: unreadable gzip: {e}", path=path) from None
    if head.lower().startswith(b"%%matrixmarket"):
        return "mtx"
    if b"\0" in head or not head:
        raise UnknownFormatError(f"{path}: cannot recognise the format (binary or empty); "
                                 "{format=} to name it",
                                 path=path)
    return "snap"
