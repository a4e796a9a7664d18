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
    """The format of an edge file: from its name where the extension says it, else from its first bytes.

    Parameters
    ----------
    path : str
        A file (possibly gzip-compressed, ``.gz``) or a directory (a Parquet dataset).  A name ending in
        ``.parquet``/``.pq``/``.parq``, ``.mtx``/``.mm``, ``.csv`` or a SNAP text extension (``.txt``,
        ``.tsv``, ``.edges``, ``.el``, ``.edgelist``, ``.snap``), with or without ``.gz``, decides without
        opening the file; otherwise its first 4 KiB are read (decompressed for gzip).

    Returns
    -------
    str
        ``"parquet"`` (a directory, or the ``PAR1`` magic), ``"mtx"`` (a ``%%MatrixMarket`` banner),
        ``"csv"``, or ``"snap"`` (any other text).

    Raises
    ------
    UnknownFormatError
        The file is empty, binary (a NUL byte in its first 4 KiB) or an unreadable gzip stream.
    OSError
        The file cannot be opened (``FileNotFoundError`` for a missing one) where its name does not decide.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "graph")
    >>> with open(path, "w") as f:
    ...     _ = f.write("%%MatrixMarket matrix coordinate pattern general\\n3 3 1\\n1 2\\n")
    >>> detect_format(path)
    'mtx'
    >>> detect_format("crawl.csv.gz")  # by name alone: the file is not opened
    'csv'
    >>> import shutil; shutil.rmtree(folder)
    """
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
