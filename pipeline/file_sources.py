"""Edge files as sources: the readers of :mod:`breadth.io` cut files into chunks of edge arrays; these
functions turn those chunks into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids (relabeled on
the workers, :func:`~breadth.pipeline.relabel.edge_list_from_parts`).

>>> from breadth.pipeline import read_edges
>>> el = read_edges("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from breadth.io.csv_edges import csv_parts
from breadth.io.errors import BadLineError, TruncatedInputError, UnknownFormatError
from breadth.io.formats import FORMATS, detect_format
from breadth.io.matrix_market import mtx_parts
from breadth.io.parquet_edges import parquet_parts
from breadth.io.paths import expand_paths
from breadth.io.snap_text import snap_parts
from breadth.io.text_parser import DEFAULT_CHUNK_BYTES

from .relabel import edge_list_from_parts


def read_edges(paths, format: str = "auto", *, directed: bool | None = None, src=None, dst=None,
               on_bad_lines: str = "error", client=None, device: str = "cpu", spill_dir: str | None = None, **kw):
    """Read edge files of any supported format into an :class:`~breadth.pipeline.edges.EdgeList`.

    ``format``: ``auto`` (by extension, then content), ``snap``, ``csv``, ``mtx`` or ``parquet``.  All
    files of one call must share a format.  Extra keywords go to the format's reader.  ``directed``
    defaults to undirected (Graph500), except Matrix Market files, whose ``general``/``symmetric`` banner
    decides.  ``device="gpu"``: Parquet, SNAP and CSV text are read on the dask-cuda workers (cuDF's
    readers where the lines allow, the host's parser otherwise) and their ids relabeled on the GPUs;
    Matrix Market is parsed on the host (``prepare(device="gpu")`` moves it).
    ``spill_dir``: where relabeling writes its id shuffle's pieces when the workers' memory limit needs disk.

    >>> from breadth.pipeline import read_edges
    >>> el = read_edges(["a.txt.gz", "b.txt.gz"], directed=True)     # doctest: +SKIP
    """
    if format not in FORMATS:
        raise UnknownFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if format == "auto":
        format = input_format(items)
    _check_keywords(format, items, kw)
    if format == "mtx":
        if src is not None or dst is not None:
            raise ValueError("src/dst columns apply to csv and parquet input, not mtx")
        return read_mtx(items, directed=directed, on_bad_lines=on_bad_lines, client=client, **kw)
    directed = bool(directed)
    if format == "parquet":
        return read_parquet(items, src=src, dst=dst, directed=directed, client=client, device=device,
                                          spill_dir=spill_dir, **kw)
    if format == "csv":
        return read_csv(items, src=src, dst=dst, directed=directed, on_bad_lines=on_bad_lines,
                        client=client, spill_dir=spill_dir, device=device, **kw)
    if src is not None or dst is not None:
        raise ValueError(f"src/dst columns apply to csv and parquet input, not {format}")
    return read_snap(items, directed=directed, on_bad_lines=on_bad_lines, client=client,
                     spill_dir=spill_dir, device=device, **kw)


def input_format(paths) -> str:
    """The one format of the files, directories and globs ``paths`` (a directory: Parquet), from their names
    and first bytes (:func:`~breadth.io.formats.detect_format`).  Raises ``UnknownFormatError`` for inputs
    of several formats or of none recognised, ``FileNotFoundError`` for a name that matches nothing.

    >>> from breadth.pipeline.file_sources import input_format
    >>> input_format(["/work/shared/data/Wiki-Vote.txt"])          # doctest: +SKIP
    'snap'
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files = [i for i in items if not os.path.isdir(i)]
    kinds = {detect_format(p) for p in expand_paths(files)} if files else set()
    if len(files) < len(items):
        kinds.add("parquet")
    if len(kinds) != 1:
        raise UnknownFormatError(f"inputs mix formats {sorted(kinds)}; read them separately or "
                                 "{format=} to read all as one")
    return kinds.pop()


def _check_keywords(format: str, items: list, kw: dict) -> None:
    """A ``ValueError`` naming the first of ``kw`` that the reader of ``format`` does not take, and the
    formats whose readers do (rather than Python's ``TypeError`` about a function the caller never called)."""
    import inspect

    readers = {"snap": read_snap, "csv": read_csv, "mtx": read_mtx, "parquet": read_parquet}
    takes = {f: set(inspect.signature(r).parameters) for f, r in readers.items()}
    for k in kw:
        if k not in takes[format]:
            where = sorted(f for f, names in takes.items() if k in names)
            fits = f"applies to {' and '.join(where)} input" if where else "is not a keyword of any reader"
            raise ValueError(f"{k}= {fits}, not {format} ({os.fspath(items[0])})")


def read_snap(paths, *, directed: bool = False, comments: str = "#%", extra_columns: str = "error",
              on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES, relabel: bool = True,
              persist: bool = True, client=None, spill_dir: str | None = None, device: str = "cpu"):
    """Read SNAP edge-list text files into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    ``paths``: a file, directory, glob or list (``.gz`` files streamed).  Vertices are the distinct ids
    seen (``num_vertices``); ``id_map[dense]`` gives the original id.  ``num_edges`` counts the edge
    lines (self-loops and duplicates included).  Bad lines raise an error naming file, line and text,
    or are skipped (``on_bad_lines="skip"``/``"warn"``) and counted in ``source["skipped_lines"]``.
    ``device="gpu"``: the byte ranges are parsed by cuDF on the dask-cuda workers where their lines allow
    (the host parser otherwise, with the same errors) and the ids relabeled on the GPUs.

    >>> from breadth.pipeline import read_snap
    >>> el = read_snap("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP
    >>> el.num_vertices, el.num_edges                                      # doctest: +SKIP
    (7115, 103689)
    """
    files = expand_paths(paths)
    parts = snap_parts(files, comments=comments, extra_columns=extra_columns, on_bad_lines=on_bad_lines,
                       chunk_bytes=chunk_bytes, device=device)
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "snap", "path": ",".join(files)}, spill_dir=spill_dir)


def read_csv(paths, *, header: bool | None = None, delimiter: str = ",", src=None, dst=None, ids: str = "int",
             directed: bool = False, on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES,
             relabel: bool = True, persist: bool = True, client=None, spill_dir: str | None = None,
             device: str = "cpu"):
    """Read CSV edge files into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    ``header``: ``True`` (the first row names the columns), ``False`` (no header row) or ``None`` (the
    default: decided from each file's first row.  With integer ids a row whose source and target fields
    hold no integer is a header, any other row the first edge; with string ids a row of integer source and
    target is the first edge, any other a header, which an :class:`~breadth.io.errors.InputNotice` warning
    says unless its fields are a known column pair such as ``source,target``).
    ``src``/``dst``: column names (with a header) or 0-based indices; default the first two columns.
    ``ids="int"`` parses integer ids (non-numeric ones are errors naming file, line and text);
    ``ids="str"`` keeps any text as an id (``id_map`` then holds strings).  Lines starting with ``#``
    are comments.  ``device="gpu"``: integer ids are parsed by cuDF on the dask-cuda workers where the
    lines allow (as :func:`read_snap`) and relabeled on the GPUs.

    >>> from breadth.pipeline import read_csv
    >>> el = read_csv("edges.csv", src="from", dst="to")      # doctest: +SKIP
    """
    files = expand_paths(paths)
    parts = csv_parts(files, header=header, delimiter=delimiter, src=src, dst=dst, ids=ids,
                      on_bad_lines=on_bad_lines, chunk_bytes=chunk_bytes, device=device)
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "csv", "path": ",".join(files)}, spill_dir=spill_dir)


def read_mtx(paths, *, directed: bool | None = None, on_bad_lines: str = "error",
             chunk_bytes: int = DEFAULT_CHUNK_BYTES, persist: bool = True, client=None):
    """Read a Matrix Market coordinate file (one file, or several of the same size) as an EdgeList.

    ``num_vertices = max(rows, cols)``; ``id_map`` holds the 1-based file ids.

    >>> from breadth.pipeline import read_mtx
    >>> el = read_mtx("graph.mtx")          # doctest: +SKIP
    """
    files = expand_paths(paths)
    headers, parts = [], []
    for f in files:
        h, p = mtx_parts(f, on_bad_lines=on_bad_lines, chunk_bytes=chunk_bytes)
        headers.append(h)
        parts += p
    n = max(max(h["rows"], h["cols"]) for h in headers)
    if directed is None:
        directed = all(h["symmetry"] == "general" for h in headers)
    el = edge_list_from_parts(parts, client, directed=directed, relabel=False, persist=persist,
                              source={"kind": "mtx", "path": ",".join(files)})
    declared = sum(h["nnz"] for h in headers)
    seen = el.num_edges + el.source.get("skipped_lines", 0)
    if seen < declared:
        raise TruncatedInputError(f"{','.join(files)}: declares {declared} entries but holds {seen}; "
                                  f"the file is truncated", path=files[0])
    if seen > declared:
        raise BadLineError(f"{','.join(files)}: declares {declared} entries but holds {seen}", path=files[0])
    el.num_vertices = n
    el.id_map = np.arange(1, n + 1, dtype=np.int64)
    return el


def read_parquet(paths, *, src: str | None = None, dst: str | None = None, directed: bool = False,
                 relabel: bool = True, persist: bool = True, client=None, device: str = "cpu",
                 spill_dir: str | None = None):
    """Read Parquet edge lists into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    ``device="gpu"``: cuDF reads the files on the dask-cuda workers and the ids (integers or strings) are
    relabeled on their GPUs; without cuDF, pyarrow reads them and integer ids are relabeled on the GPUs.
    Prepare the result with ``prepare(..., device="gpu")``.  ``spill_dir``: where relabeling's id shuffle
    writes when the workers' memory limit needs disk (:func:`~breadth.pipeline.relabel.edge_list_from_parts`).

    >>> from breadth.pipeline import read_parquet
    >>> el = read_parquet("edges/", src="source", dst="target")     # doctest: +SKIP
    """
    files = expand_paths(paths, suffixes=(".parquet", ".pq", ".parq"))
    meta: list = []
    parts = parquet_parts(files, src=src, dst=dst, device=device, meta=meta)
    known = meta if len(meta) == len(parts) and all(m is not None for m in meta) else None
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "parquet", "path": ",".join(files)}, meta=known, spill_dir=spill_dir)
