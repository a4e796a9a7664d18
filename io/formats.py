"""``read_edges``: pick a reader by name or by looking at the file."""

from __future__ import annotations

import os

from .errors import UnknownFormatError
from .paths import expand_paths

FORMATS = ("auto", "snap", "csv", "mtx", "parquet")
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
        raise UnknownFormatError(f"{path}: cannot recognise the format (binary or empty); pass format=",
                                 path=path)
    return "snap"


def read_edges(paths, format: str = "auto", *, directed: bool | None = None, src=None, dst=None,
               on_bad_lines: str = "error", client=None, device: str = "cpu", spill_dir: str | None = None, **kw):
    """Read edge files of any supported format into an :class:`~breadth.pipeline.edges.EdgeList`.

    ``format``: ``auto`` (by extension, then content), ``snap``, ``csv``, ``mtx`` or ``parquet``.  All
    files of one call must share a format.  Extra keywords go to the format's reader.  ``directed``
    defaults to undirected (Graph500), except Matrix Market files, whose ``general``/``symmetric`` banner
    decides.  ``device="gpu"``: Parquet is read by cuDF on the dask-cuda workers and its integer ids are
    relabeled on their GPUs; text formats are parsed on the host (``prepare(device="gpu")`` moves them).
    ``spill_dir``: where relabeling writes its id shuffle's pieces when the workers' memory limit needs disk.

    >>> from breadth.io import read_edges
    >>> el = read_edges(["a.txt.gz", "b.txt.gz"], directed=True)     # doctest: +SKIP
    """
    from . import csv_edges, matrix_market, parquet_edges, snap_text

    if format not in FORMATS:
        raise UnknownFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if format == "auto":
        kinds = {detect_format(p) for p in expand_paths([i for i in items if not os.path.isdir(i)])} \
            if any(not os.path.isdir(i) for i in items) else set()
        if any(os.path.isdir(i) for i in items):
            kinds.add("parquet")
        if len(kinds) != 1:
            raise UnknownFormatError(f"inputs mix formats {sorted(kinds)}; read them separately or pass format=")
        format = kinds.pop()
    if format == "mtx":
        if src is not None or dst is not None:
            raise ValueError("src/dst columns apply to csv and parquet input, not mtx")
        return matrix_market.read_mtx(items, directed=directed, on_bad_lines=on_bad_lines, client=client, **kw)
    directed = bool(directed)
    if format == "parquet":
        return parquet_edges.read_parquet(items, src=src, dst=dst, directed=directed, client=client, device=device,
                                          spill_dir=spill_dir, **kw)
    if format == "csv":
        return csv_edges.read_csv(items, src=src, dst=dst, directed=directed, on_bad_lines=on_bad_lines,
                                  client=client, spill_dir=spill_dir, **kw)
    if src is not None or dst is not None:
        raise ValueError(f"src/dst columns apply to csv and parquet input, not {format}")
    return snap_text.read_snap(items, directed=directed, on_bad_lines=on_bad_lines, client=client,
                               spill_dir=spill_dir, **kw)
