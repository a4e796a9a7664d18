"""The input formats: one registry (:data:`FORMATS`) of what each edge-file format is called, how a file is
recognised as it (:func:`detect_format`), which function reads it into an edge list, and how that reading is
cut into chunks (byte ranges of text, or row groups).  ``read_edges``'s dispatch and its keyword checks, the
``breadth ingest`` command's ``--format`` choices and format-specific flags, and ``ingest``'s memory plan are
all derived from it.

Adding a format is one module with its reader (an io chunk reader and the pipeline function that makes an
:class:`~breadth.pipeline.edges.EdgeList` of its chunks, as :func:`~breadth.pipeline.sources.file_sources.read_snap`)
and one :func:`register_format` call.

>>> sorted(FORMATS)
['csv', 'mtx', 'parquet', 'snap']
>>> FORMATS["csv"].title, FORMATS["parquet"].text
('CSV', False)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Union

from .errors import UnknownFormatError

#: a function, or where it lives as ``"module:function"`` (imported when first used, so that listing the
#: formats imports no reader, and this io module can name a :mod:`breadth.pipeline` function)
Ref = Union[str, Callable]


@dataclass(frozen=True)
class InputFormat:
    """One input format of :data:`FORMATS`.

    Attributes
    ----------
    name : str
        Its ``format=`` value and ``--format`` choice, e.g. ``"csv"``.
    title : str
        What messages call it, e.g. ``"CSV"``.
    reader : str or callable
        The function that reads files of it into an :class:`~breadth.pipeline.edges.EdgeList`: called as
        ``reader(files, client=..., ...)`` with those of ``read_edges``'s keywords (``directed``, ``src``,
        ``dst``, ``on_bad_lines``, ``device``, ``spill_dir``, ``chunk_bytes`` and its own) that it takes.  Its
        keywords also say which ``breadth ingest`` flags apply to the format (``--src/--dst`` where it takes
        ``src``, ``--ids str`` where it takes ``ids``, ...).
    suffixes : tuple of str
        Lower-case file-name endings that decide the format without opening the file (``".csv"``); each
        belongs to one format.
    gzip : bool
        Whether gzip-compressed files of it are read: a name ending in one of ``suffixes`` plus ``.gz`` is
        this format, and :attr:`sniff` sees a gzip stream's decompressed first bytes.
    sniff : callable, optional
        ``sniff(head) -> bool``: whether a file whose name does not decide is this format, from its first
        4 KiB (bytes).
    directory : bool
        A directory is a dataset of this format (Parquet); at most one format says so.
    fallback : bool
        Any other text file (no NUL byte) is this format (SNAP text); at most one format says so.
    row_groups : str or callable, optional
        For a format read by row group (Parquet): ``row_groups(files) -> list[int]``, the rows of each chunk
        its reader makes, from the files' footers alone, which the memory plan counts before reading.  None:
        text, read in byte ranges of ``chunk_bytes`` that the memory plan sizes.
    """

    name: str
    title: str
    reader: Ref
    suffixes: tuple[str, ...] = ()
    gzip: bool = True
    sniff: Callable[[bytes], bool] | None = None
    directory: bool = False
    fallback: bool = False
    row_groups: Ref | None = None

    @property
    def text(self) -> bool:
        """Whether it is read in byte ranges of ``chunk_bytes`` (not by row group)."""
        return self.row_groups is None


#: the registered formats, by name, in registration order (the order of ``--format``'s choices and of
#: content sniffing)
FORMATS: dict[str, InputFormat] = {}


def register_format(fmt: InputFormat) -> InputFormat:
    """Add ``fmt`` to :data:`FORMATS`.

    Parameters
    ----------
    fmt : InputFormat
        The new format.

    Returns
    -------
    InputFormat
        ``fmt``.

    Raises
    ------
    ValueError
        Its name is ``"auto"`` or taken, one of its suffixes is another format's or not a lower-case
        ``".ext"``, or it claims directories or the text fallback where another format does.

    Examples
    --------
    >>> fmt = register_format(InputFormat("tsv2", "TSV2", "mypkg.tsv2:read_tsv2", suffixes=(".tsv2",)))
    >>> detect_format("web.tsv2.gz")
    'tsv2'
    >>> del FORMATS["tsv2"]
    """
    if fmt.name == "auto" or fmt.name in FORMATS:
        raise ValueError(f"format {fmt.name!r} is {'reserved' if fmt.name == 'auto' else 'registered already'}")
    for s in fmt.suffixes:
        if not s.startswith(".") or s != s.lower():
            raise ValueError(f"format {fmt.name!r}: suffix {s!r} is not a lower-case '.ext'")
        owner = next((f.name for f in FORMATS.values() if s in f.suffixes), None)
        if owner:
            raise ValueError(f"format {fmt.name!r}: suffix {s!r} is {owner}'s")
    for flag in ("directory", "fallback"):
        owner = next((f.name for f in FORMATS.values() if getattr(f, flag)), None)
        if getattr(fmt, flag) and owner:
            raise ValueError(f"format {fmt.name!r}: {owner} is the {flag} format")
    FORMATS[fmt.name] = fmt
    return fmt


def get_format(name: str) -> InputFormat:
    """The registered format ``name``; :class:`UnknownFormatError` naming the choices otherwise.

    >>> get_format("mtx").title
    'Matrix Market'
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormatError(f"unknown format {name!r}; expected one of {', '.join(format_choices())}") \
            from None


def format_choices() -> tuple[str, ...]:
    """``"auto"`` and the registered formats' names: ``read_edges``'s ``format`` and ``--format``'s choices.

    >>> format_choices()
    ('auto', 'snap', 'csv', 'mtx', 'parquet')
    """
    return ("auto", *FORMATS)


#: source/target column names known without being named (Parquet columns, a CSV header of string ids); any
#: case in a CSV header
COLUMN_PAIRS = (("src", "dst"), ("source", "target"), ("from", "to"), ("u", "v"))


def detect_format(path: str) -> str:
    """The format of an edge file: from its name where a format's suffix says it, else from its first bytes.

    Parameters
    ----------
    path : str
        A file (possibly gzip-compressed, ``.gz``) or a directory (a Parquet dataset).  A name ending in a
        registered suffix (``.parquet``/``.pq``/``.parq``, ``.mtx``/``.mm``, ``.csv``, or a SNAP text one:
        ``.txt``, ``.tsv``, ``.edges``, ``.el``, ``.edgelist``, ``.snap``), with ``.gz`` for formats read
        compressed, decides without opening the file; otherwise its first 4 KiB are read (decompressed for
        gzip) and each format's :attr:`~InputFormat.sniff` asked in registration order.

    Returns
    -------
    str
        A name of :data:`FORMATS`: ``"parquet"`` (a directory, or the ``PAR1`` magic), ``"mtx"`` (a
        ``%%MatrixMarket`` banner), ``"csv"`` (by name only), or ``"snap"`` (any other text).

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
    formats = list(FORMATS.values())
    if os.path.isdir(path):
        for f in formats:
            if f.directory:
                return f.name
    name = path.lower()
    for f in formats:
        if f.suffixes and name.endswith(f.suffixes):
            return f.name
    if name.endswith(".gz"):
        for f in formats:
            if f.gzip and f.suffixes and name[:-3].endswith(f.suffixes):
                return f.name
    with open(path, "rb") as fh:
        head = fh.read(4096)
    for f in formats:
        if not f.gzip and f.sniff is not None and f.sniff(head):
            return f.name
    if head.startswith(b"\x1f\x8b"):
        import gzip

        try:
            with gzip.open(path, "rb") as g:
                head = g.read(4096)
        except (OSError, EOFError) as e:
            raise UnknownFormatError(f"{path}: unreadable gzip: {e}", path=path) from None
    for f in formats:
        if f.gzip and f.sniff is not None and f.sniff(head):
            return f.name
    fallback = next((f.name for f in formats if f.fallback), None)
    if b"\0" in head or not head or fallback is None:
        raise UnknownFormatError(f"{path}: cannot recognise the format "
                                 f"({'binary or empty' if fallback else 'no format recognises it'}); "
                                 "{format=} to name it",
                                 path=path)
    return fallback


def _parquet_magic(head: bytes) -> bool:
    return head.startswith(b"PAR1")


def _mtx_banner(head: bytes) -> bool:
    return head.lower().startswith(b"%%matrixmarket")


# The built-in formats.  Their readers are in breadth.pipeline.sources.file_sources (named, not imported: io is below
# pipeline); sniffing asks them in this order.
register_format(InputFormat("snap", "SNAP text", "breadth.pipeline.sources.file_sources:read_snap",
                            suffixes=(".txt", ".tsv", ".edges", ".el", ".edgelist", ".snap"), fallback=True))
register_format(InputFormat("csv", "CSV", "breadth.pipeline.sources.file_sources:read_csv", suffixes=(".csv",)))
register_format(InputFormat("mtx", "Matrix Market", "breadth.pipeline.sources.file_sources:read_mtx",
                            suffixes=(".mtx", ".mm"), sniff=_mtx_banner))
register_format(InputFormat("parquet", "Parquet", "breadth.pipeline.sources.file_sources:read_parquet",
                            suffixes=(".parquet", ".pq", ".parq"), gzip=False, sniff=_parquet_magic,
                            directory=True, row_groups="breadth.io.parquet_edges:row_group_sizes"))
