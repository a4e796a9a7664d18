"""Edge files as sources: the readers of :mod:`breadth.io` cut files into chunks of edge arrays; these
functions turn those chunks into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids (relabeled on
the workers, :func:`~breadth.pipeline.relabel.relabel.edge_list_from_parts`).

>>> from breadth.pipeline import read_edges
>>> el = read_edges("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from breadth.bfs.lazy_exports import resolve
from breadth.io.csv_edges import csv_parts
from breadth.io.errors import BadLineError, TruncatedInputError, UnknownFormatError
from breadth.io.formats import FORMATS, detect_format, get_format
from breadth.io.matrix_market import mtx_parts
from breadth.io.parquet_edges import parquet_parts
from breadth.io.paths import expand_paths
from breadth.io.snap_text import snap_parts
from breadth.io.text_parser import DEFAULT_CHUNK_BYTES

from ..relabel.relabel import edge_list_from_parts


def read_edges(paths, format: str = "auto", *, directed: bool | None = None, src=None, dst=None,
               on_bad_lines: str = "error", client=None, device: str = "cpu", spill_dir: str | None = None, **kw):
    """Read edge files of any supported format into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    Dispatches to the format's reader in :data:`~breadth.io.formats.FORMATS` (:func:`read_snap`,
    :func:`read_csv`, :func:`read_mtx`, :func:`read_parquet`, or a registered format's); the files are read
    and relabeled on the workers.

    Parameters
    ----------
    paths : str, os.PathLike or list
        Files, directories (Parquet datasets) or globs; gzip files are streamed.  All files of one call
        share a format.
    format : str, default "auto"
        A name of :data:`~breadth.io.formats.FORMATS` (``"snap"``, ``"csv"``, ``"mtx"``, ``"parquet"``) or
        ``"auto"``: each file's :func:`~breadth.io.detect_format` (by extension, then content).
    directed : bool, optional
        Default undirected (Graph500), except Matrix Market files, whose ``general``/``symmetric`` banner
        decides.
    src, dst : str or int, optional
        Source and target columns, for CSV (names or 0-based indices) and Parquet (names) only.
    on_bad_lines : {"error", "skip", "warn"}, default "error"
        Text formats: stop at the first malformed line with an error naming its file, line and text, or
        skip (and count) such lines, warning for each with ``"warn"``.
    client : distributed.Client, optional
        Default: the current client.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: Parquet, SNAP and CSV text are read on the dask-cuda workers (cuDF's readers where the
        lines allow, the host's parser otherwise) and their ids relabeled on the GPUs; Matrix Market is
        parsed on the host (``prepare(device="gpu")`` moves it).
    spill_dir : str, optional
        Where relabeling writes its id shuffle's pieces when the workers' memory limit needs disk.
    **kw
        The format's reader's other keywords (e.g. ``header`` and ``ids`` for CSV, ``extra_columns`` for
        SNAP, ``chunk_bytes``).

    Returns
    -------
    EdgeList
        As the format's reader returns it.

    Raises
    ------
    UnknownFormatError
        An unknown ``format``, inputs of several formats, or a file whose format cannot be recognised.
    ValueError
        ``src``/``dst`` given for a format whose reader takes no columns (SNAP, Matrix Market), or a keyword
        of ``**kw`` that the format's reader does not take.
    FileNotFoundError, IngestError
        A missing input, or any error of the format's reader (see each reader).

    Examples
    --------
    >>> from breadth.pipeline import local_cluster, read_edges
    >>> client = local_cluster(workers=2)                                      # doctest: +SKIP
    >>> el = read_edges(["a.txt.gz", "b.txt.gz"], directed=True)               # doctest: +SKIP
    >>> el = read_edges("crawl/", src="from_url", dst="to_url")                # doctest: +SKIP
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    format = get_format(input_format(items) if format == "auto" else format).name
    reader = resolve(FORMATS[format].reader)
    takes = _keywords(reader)
    _check_keywords(format, items, kw)
    if (src is not None or dst is not None) and "src" not in takes:
        raise ValueError(f"src/dst columns apply to {' and '.join(formats_taking('src'))} input, not {format}")
    # read_edges's own keywords go to the readers that take them: on_bad_lines is the text formats', device
    # and spill_dir those that read on the GPU or relabel; a reader whose default for directed is None (Matrix
    # Market: its banner decides) gets None through, the others their default
    given = {"directed": directed, "src": src, "dst": dst, "on_bad_lines": on_bad_lines, "client": client,
             "device": device, "spill_dir": spill_dir}
    return reader(items, **{k: v for k, v in given.items() if k in takes and not (k == "directed" and v is None)},
                  **kw)


def input_format(paths) -> str:
    """The one format of the files, directories and globs ``paths`` (a directory: Parquet), from their names
    and first bytes (:func:`~breadth.io.formats.detect_format`).  Raises ``UnknownFormatError`` for inputs
    of several formats or of none recognised, ``FileNotFoundError`` for a name that matches nothing.

    >>> from breadth.pipeline.sources.file_sources import input_format
    >>> input_format(["/work/shared/data/Wiki-Vote.txt"])          # doctest: +SKIP
    'snap'
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    files = [i for i in items if not os.path.isdir(i)]
    kinds = {detect_format(p) for p in expand_paths(files)} if files else set()
    kinds |= {detect_format(os.fspath(i)) for i in items if os.path.isdir(i)}
    if len(kinds) != 1:
        raise UnknownFormatError(f"inputs mix formats {sorted(kinds)}; read them separately or "
                                 "{format=} to read all as one")
    return kinds.pop()


def formats_taking(keyword: str) -> list[str]:
    """The registered formats (:data:`~breadth.io.formats.FORMATS`, in their order) whose reader takes
    ``keyword``: where ``read_edges``'s ``**kw`` and the ``breadth ingest`` flag that sets it apply.

    >>> from breadth.pipeline.sources.file_sources import formats_taking
    >>> formats_taking("src"), formats_taking("extra_columns")
    (['csv', 'parquet'], ['snap'])
    """
    return [name for name, f in FORMATS.items() if keyword in _keywords(resolve(f.reader))]


def _keywords(reader) -> set[str]:
    import inspect

    return set(inspect.signature(reader).parameters)


def _check_keywords(format: str, items: list, kw: dict) -> None:
    """A ``ValueError`` naming the first of ``kw`` that the reader of ``format`` does not take, and the
    formats whose readers do (rather than Python's ``TypeError`` about a function the caller never called)."""
    takes = _keywords(resolve(FORMATS[format].reader))
    for k in kw:
        if k not in takes:
            where = formats_taking(k)
            fits = f"applies to {' and '.join(where)} input" if where else "is not a keyword of any reader"
            raise ValueError(f"{k}= {fits}, not {format} ({os.fspath(items[0])})")


def read_snap(paths, *, directed: bool = False, comments: str = "#%", extra_columns: str = "error",
              on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES, relabel: bool = True,
              persist: bool = True, client=None, spill_dir: str | None = None, device: str = "cpu"):
    """Read SNAP edge-list text files into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    One ``u v`` pair of integer ids per line, separated by tabs, spaces or a comma; comment lines and blank
    lines skipped; ``\\r\\n`` endings and a missing final newline accepted.  A plain file is read in byte
    ranges of ``chunk_bytes``, one Dask chunk each, a gzip file streamed by one task; every chunk is parsed
    and relabeled on the workers, so memory per task is one block of text and its tuples.

    Parameters
    ----------
    paths : str, os.PathLike or list
        A file, directory, glob or a list of them.
    directed : bool, default False
        Whether a line ``u v`` is the arc ``u -> v`` only.
    comments : str, default "#%"
        Characters that start a comment line.
    extra_columns : {"error", "ignore"}, default "error"
        Lines with more than two fields (timestamps, weights): bad lines, or read for their first two.
    on_bad_lines : {"error", "skip", "warn"}, default "error"
        A malformed line raises an error naming its file, line and text, or is skipped and counted in
        ``source["skipped_lines"]`` (``source["bad_lines"]`` describes the first few).
    chunk_bytes : int, default 64 MiB
        Bytes of plain text per chunk.
    relabel : bool, default True
        Relabel the ids to ``0..n-1``; ``False`` keeps them (``num_vertices = max id + 1``, no id map).
    persist : bool, default True
        Keep the parsed chunks in the workers' memory (Dask spills them under pressure), so that the files
        are parsed once; without it each chunk is parsed again when the graph is prepared.
    client : distributed.Client, optional
        Default: the current client.
    spill_dir : str, optional
        Where relabeling writes its id shuffle's pieces when the workers' memory limit needs disk.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: the byte ranges are parsed by cuDF on the dask-cuda workers where their lines allow (the
        host parser otherwise, with the same errors) and the ids relabeled on the GPUs.

    Returns
    -------
    EdgeList
        ``num_vertices`` the distinct ids seen, ``num_edges`` the edge lines (self-loops and duplicates
        included), ``id_map[i]`` the original id of vertex ``i``.

    Raises
    ------
    BadLineError
        Only with ``on_bad_lines="error"``: a line with too few fields, or extra fields with
        ``extra_columns="error"``; its subclasses ``NonNumericIdError``, ``NegativeIdError`` and
        ``IdRangeError`` for an id that is not an integer, is negative or exceeds uint64.
    TruncatedInputError
        A damaged or cut gzip stream.
    EmptyInputError
        No input file, or no edge in the files.
    FileNotFoundError
        A path that names nothing.
    ValueError
        An unknown ``on_bad_lines`` or ``extra_columns``, or no ``client`` and none current.

    Examples
    --------
    >>> from breadth.pipeline import local_cluster, read_snap
    >>> client = local_cluster(workers=2)                                  # doctest: +SKIP
    >>> el = read_snap("Wiki-Vote.txt", directed=True)                     # doctest: +SKIP
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

    Integer ids are parsed like SNAP text (plain files in byte ranges of ``chunk_bytes``, one Dask chunk
    each; gzip files streamed); string ids are streamed through pyarrow's CSV reader, one chunk per file.
    Lines starting with ``#`` are comments.

    Parameters
    ----------
    paths : str, os.PathLike or list
        A file, directory, glob or a list of them.
    header : bool, optional
        ``True``: the first row names the columns; ``False``: no header row; ``None`` (default): decided
        from each file's first row.  With integer ids a row whose source and target fields hold no integer
        is a header, any other row the first edge; with string ids a row of integer source and target is
        the first edge, any other a header, which an :class:`~breadth.io.errors.InputNotice` warning says
        unless its fields are a known column pair such as ``source,target``.
    delimiter : str, default ","
        One character.
    src, dst : str or int, optional
        Column names (with a header) or 0-based indices; default the first two columns.
    ids : {"int", "str"}, default "int"
        ``"int"`` parses integer ids (a non-numeric one is an error naming file, line and text); ``"str"``
        keeps any text as an id (``id_map`` then holds strings).
    directed : bool, default False
        Whether a row ``(u, v)`` is the arc ``u -> v`` only.
    on_bad_lines : {"error", "skip", "warn"}, default "error"
        A malformed row raises an error naming its file, line and text, or is skipped and counted in
        ``source["skipped_lines"]``.
    chunk_bytes : int, default 64 MiB
        Bytes of plain text per chunk (integer ids).
    relabel, persist, client, spill_dir
        As for :func:`read_snap`.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: integer ids are parsed by cuDF on the dask-cuda workers where the lines allow (as
        :func:`read_snap`) and relabeled on the GPUs; string ids are read on the host.

    Returns
    -------
    EdgeList
        ``num_vertices`` the distinct ids seen, ``num_edges`` the data rows, ``id_map[i]`` the original id
        of vertex ``i`` (strings with ``ids="str"``).

    Raises
    ------
    MissingColumnError
        ``src``/``dst`` names a column the header lacks, or an index beyond it.
    BadLineError
        Only with ``on_bad_lines="error"``: a row with too few or too many fields, or (``ids="int"``) an id
        that is not a non-negative integer within uint64 (``NonNumericIdError``, ``NegativeIdError``,
        ``IdRangeError``).
    TruncatedInputError, EmptyInputError, FileNotFoundError
        As for :func:`read_snap`.
    ValueError
        A ``delimiter`` that is not one character, an unknown ``ids`` or ``on_bad_lines``, or no
        ``client`` and none current.

    Examples
    --------
    >>> from breadth.pipeline import local_cluster, read_csv
    >>> client = local_cluster(workers=2)                                  # doctest: +SKIP
    >>> el = read_csv("edges.csv", src="from", dst="to")                   # doctest: +SKIP
    >>> el = read_csv("links.tsv.gz", delimiter="\\t", ids="str", header=False)  # doctest: +SKIP
    """
    files = expand_paths(paths)
    parts = csv_parts(files, header=header, delimiter=delimiter, src=src, dst=dst, ids=ids,
                      on_bad_lines=on_bad_lines, chunk_bytes=chunk_bytes, device=device)
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "csv", "path": ",".join(files)}, spill_dir=spill_dir)


def read_mtx(paths, *, directed: bool | None = None, on_bad_lines: str = "error",
             chunk_bytes: int = DEFAULT_CHUNK_BYTES, persist: bool = True, client=None):
    """Read Matrix Market coordinate files (``%%MatrixMarket matrix coordinate ...``) as an EdgeList.

    The declared size fixes the vertex count, so ids are not relabeled: dense id ``i`` is file id ``i + 1``.
    Entry values (real, integer, complex) are ignored.

    Parameters
    ----------
    paths : str, os.PathLike or list
        One file, or several of the same graph's entries (the largest declared size counts); gzip allowed.
    directed : bool, optional
        Default: directed when every file's banner says ``general``, undirected otherwise (``symmetric``).
    on_bad_lines : {"error", "skip", "warn"}, default "error"
        As for :func:`read_snap`; a skipped line counts towards the declared entries.
    chunk_bytes : int, default 64 MiB
        Bytes of plain text per chunk.
    persist, client
        As for :func:`read_snap`.

    Returns
    -------
    EdgeList
        ``num_vertices = max(rows, cols)`` (isolated vertices included), ``num_edges`` the entries,
        ``id_map`` the 1-based file ids (int64 ``(num_vertices,)``).

    Raises
    ------
    UnknownFormatError
        No Matrix Market banner, a format other than ``coordinate``, or an unknown field.
    BadLineError
        A bad size line or entry (``NegativeIdError``/``IdRangeError`` for an id outside
        ``1..max(rows, cols)``), or more entries than declared.
    TruncatedInputError
        Fewer entries than declared, no size line in the first MiB, or a cut gzip stream.
    EmptyInputError, FileNotFoundError
        An empty file, or a path that names nothing.

    Examples
    --------
    >>> from breadth.pipeline import local_cluster, read_mtx
    >>> client = local_cluster(workers=2)                                  # doctest: +SKIP
    >>> el = read_mtx("cnr-2000.mtx")                                      # doctest: +SKIP
    >>> el.num_vertices, el.directed                                       # doctest: +SKIP
    (325557, True)
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

    Only the two id columns are read, one row group per Dask chunk on the CPU; the files' footers give
    each chunk's size (and, from column statistics, its id range) without reading it, so relabeling splits
    each chunk as soon as it is read.

    Parameters
    ----------
    paths : str, os.PathLike or list
        Files (``.parquet``, ``.pq``, ``.parq``), directories of them, globs, or a list.
    src, dst : str, optional
        The id columns; default the first pair present of ``src``/``dst``, ``source``/``target``,
        ``from``/``to``, ``u``/``v``, or the only two columns.  Integer columns of any width (uint64 ids
        above the int64 range stay uint64 in ``id_map``) or string columns.
    directed : bool, default False
        Whether a row ``(u, v)`` is the arc ``u -> v`` only.
    relabel, persist, client, spill_dir
        As for :func:`read_snap`.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: cuDF reads the files on the dask-cuda workers (about 2^26 rows a read) and the ids
        (integers or strings) are relabeled on their GPUs; without cuDF, pyarrow reads them and integer ids
        are relabeled on the GPUs.  Prepare the result with ``prepare(..., device="gpu")``.

    Returns
    -------
    EdgeList
        ``num_vertices`` the distinct ids seen, ``num_edges`` the rows, ``id_map[i]`` the original id of
        vertex ``i``.

    Raises
    ------
    MissingColumnError
        ``src``/``dst`` is not a column, or the columns cannot be told apart without them.
    NonNumericIdError
        A null id, a column that holds neither integers nor strings, or columns of different id types.
    BadLineError
        Negative ids in a signed column beside an unsigned one (``NegativeIdError`` otherwise).
    UnknownFormatError
        A file that is not readable Parquet.
    EmptyInputError, FileNotFoundError
        No rows, no input file, or a path that names nothing.

    Examples
    --------
    >>> from breadth.pipeline import local_cluster, read_parquet
    >>> client = local_cluster(workers=2)                                  # doctest: +SKIP
    >>> el = read_parquet("edges/", src="source", dst="target")            # doctest: +SKIP
    """
    files = expand_paths(paths, suffixes=FORMATS["parquet"].suffixes)
    meta: list = []
    parts = parquet_parts(files, src=src, dst=dst, device=device, meta=meta)
    known = meta if len(meta) == len(parts) and all(m is not None for m in meta) else None
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "parquet", "path": ",".join(files)}, meta=known, spill_dir=spill_dir)
