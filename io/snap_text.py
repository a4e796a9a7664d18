"""SNAP-style edge-list text: ``u v`` per line, ``#``/``%`` comments, tab/space/comma separators.

Handles CRLF endings, a missing final newline and gzip (detected by magic bytes, streamed).  Extra
columns (timestamps, weights) are an error unless ``extra_columns="ignore"``.  Plain files are read in
parallel byte ranges; each file/range is one chunk of the resulting edge list.
"""

from __future__ import annotations

from .text_parser import DEFAULT_CHUNK_BYTES, TextOptions, read_text_file_chunks
from .paths import expand_paths

ON_BAD_LINES = ("error", "skip", "warn")


def _check_policy(on_bad_lines: str) -> None:
    if on_bad_lines not in ON_BAD_LINES:
        raise ValueError(f"on_bad_lines must be one of {ON_BAD_LINES}, got {on_bad_lines!r}")


def snap_parts(paths, *, comments: str = "#%", extra_columns: str = "error", on_bad_lines: str = "error",
               chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list:
    """Delayed raw ``(edges, ChunkStats)`` chunks of SNAP text files (see :func:`read_snap`)."""
    _check_policy(on_bad_lines)
    if extra_columns not in ("error", "ignore"):
        raise ValueError(f"extra_columns must be 'error' or 'ignore', got {extra_columns!r}")
    opts = TextOptions(sep=-1, max_fields=0 if extra_columns == "ignore" else 2,
                       comments=comments.encode(), on_bad_lines=on_bad_lines)
    return [c for p in expand_paths(paths) for c in read_text_file_chunks(p, opts, chunk_bytes)]


def read_snap(paths, *, directed: bool = False, comments: str = "#%", extra_columns: str = "error",
              on_bad_lines: str = "error", chunk_bytes: int = DEFAULT_CHUNK_BYTES, relabel: bool = True,
              persist: bool = True, client=None, spill_dir: str | None = None):
    """Read SNAP edge-list text files into an :class:`~breadth.pipeline.edges.EdgeList` of dense ids.

    ``paths``: a file, directory, glob or list (``.gz`` files streamed).  Vertices are the distinct ids
    seen (``num_vertices``); ``id_map[dense]`` gives the original id.  ``num_edges`` counts the edge
    lines (self-loops and duplicates included).  Bad lines raise an error naming file, line and text,
    or are skipped (``on_bad_lines="skip"``/``"warn"``) and counted in ``source["skipped_lines"]``.

    >>> from breadth.io import read_snap
    >>> el = read_snap("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP
    >>> el.num_vertices, el.num_edges                                      # doctest: +SKIP
    (7115, 103689)
    """
    from breadth.pipeline.relabel import edge_list_from_parts

    files = expand_paths(paths)
    parts = snap_parts(files, comments=comments, extra_columns=extra_columns, on_bad_lines=on_bad_lines,
                       chunk_bytes=chunk_bytes)
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "snap", "path": ",".join(files)}, spill_dir=spill_dir)
