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
               chunk_bytes: int = DEFAULT_CHUNK_BYTES, device: str = "cpu") -> list:
    """Delayed raw ``(edges, ChunkStats)`` chunks of SNAP text files (see :func:`read_snap`); ``device="gpu"``:
    CuPy chunks, parsed by cuDF where the lines allow (:func:`breadth.io.text_parser.read_range_to_device`)."""
    _check_policy(on_bad_lines)
    if extra_columns not in ("error", "ignore"):
        raise ValueError(f"extra_columns must be 'error' or 'ignore', got {extra_columns!r}")
    opts = TextOptions(sep=-1, max_fields=0 if extra_columns == "ignore" else 2,
                       comments=comments.encode(), on_bad_lines=on_bad_lines,
                       extra_fields_fix="{extra_columns='ignore'} to ignore them")
    return [c for p in expand_paths(paths) for c in read_text_file_chunks(p, opts, chunk_bytes, device=device)]
