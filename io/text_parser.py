"""Block-wise parsing of edge-list text (SNAP, headerless/numeric CSV, Matrix Market entries).

A Numba kernel (:mod:`breadth.io.text_kernels`) turns a block of bytes into an ``(k, 2)`` int64 array in
one pass: comment and blank lines skipped, ``\\r\\n`` or ``\\n`` endings, a missing final newline, fields split on whitespace runs
and commas (``sep=-1``) or on one delimiter byte.  Bad lines are reported by their byte offset and a
kind code (see :mod:`breadth.io.errors`); the Python side turns offsets into line numbers, which costs a
newline count only when something is wrong.

Files are read in bounded blocks (``chunk_bytes``): an uncompressed file is cut into byte ranges, each
a Dask task that owns the lines *starting* inside its range; a gzip file is one task that streams its
decompressed bytes (``pyarrow`` input stream) block by block, carrying the partial last line over.
Memory per task is therefore one block of text plus its parsed edges, never the whole file.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from .chunk_stats import MAX_REPORTED, ChunkStats  # noqa: F401  (ChunkStats re-exported)
from .errors import KIND_EXTRA_FIELDS, KINDS, TruncatedInputError

INT64_MAX = np.iinfo(np.int64).max
UINT64_MAX = np.iinfo(np.uint64).max  # text ids may use the whole uint64 range, as Parquet uint64 columns do
DEFAULT_CHUNK_BYTES = 64 << 20
STREAM_BLOCK_BYTES = 8 << 20  # decompressed bytes per block of a compressed stream (read ahead by a thread)


@dataclass(frozen=True)
class TextOptions:
    """How to read the lines of one text format (see :func:`parse_edges`)."""

    sep: int = -1
    src_idx: int = 0
    dst_idx: int = 1
    max_fields: int = 2  # 0: any number of extra fields allowed
    comments: bytes = b"#%"
    base: int = 0
    limit: int = UINT64_MAX
    on_bad_lines: str = "error"  # error | skip | warn
    #: how to read lines with extra fields instead, appended to their error (a setting token of
    #: :mod:`breadth.bfs.advice`); empty where the format has no such setting
    extra_fields_fix: str = ""


def _line_text(buf: np.ndarray, pos: int) -> str:
    end = pos
    while end < buf.size and buf[end] != 10 and end - pos < 200:
        end += 1
    return bytes(buf[pos:end]).rstrip(b"\r").decode("utf-8", "replace")


def _parse_block(buf: np.ndarray, opts: TextOptions, path: str, line_of) -> tuple[np.ndarray, ChunkStats]:
    """Parse one block; ``line_of(pos)`` gives the 1-based file line of block offset ``pos``."""
    from .text_kernels import count_newlines, parse_edges  # Numba: where text is parsed, never on a client
    cap = count_newlines(buf) + 1
    out = np.empty((cap, 2), np.uint64)
    bad_pos = np.zeros(MAX_REPORTED, np.int64)
    bad_kind = np.zeros(MAX_REPORTED, np.int64)
    skip = opts.on_bad_lines != "error"
    rows, nbad, big = parse_edges(buf, np.int64(opts.sep), opts.src_idx, opts.dst_idx, opts.max_fields,
                                  np.frombuffer(opts.comments, np.uint8), np.uint64(opts.base),
                                  np.uint64(opts.limit), skip, out, bad_pos, bad_kind)
    # int64 (the common case) unless some id needs the upper half of uint64; relabeling takes both
    out = out if big else out.view(np.int64)
    stats = ChunkStats(edges=int(rows), skipped=int(nbad) if skip else 0)
    for j in range(min(int(nbad), MAX_REPORTED)):
        pos = int(bad_pos[j])
        cls, what = KINDS[int(bad_kind[j])]
        line, text = line_of(pos), _line_text(buf, pos)
        if not skip:
            extra = int(bad_kind[j]) == KIND_EXTRA_FIELDS
            fix = f"; {opts.extra_fields_fix}" if extra and opts.extra_fields_fix else ""
            raise cls(f"{path}:{line}: {what}: {text!r}{fix}", path=path, line=line, text=text)
        stats.bad.append((path, line, what, text))
        if opts.on_bad_lines == "warn":
            warnings.warn(f"{path}:{line}: skipped bad line ({what}): {text!r}", stacklevel=2)
    # a copy, so the (k, 2) result does not pin the over-allocated buffer
    return (out[:rows].copy() if rows < cap // 2 else out[:rows]), stats


def _newlines_before(path: str, offset: int) -> int:
    """Newlines in the first ``offset`` bytes of an uncompressed file (only computed for bad lines)."""
    n = 0
    with open(path, "rb") as f:
        left = offset
        while left > 0:
            b = f.read(min(left, 16 << 20))
            if not b:
                break
            n += b.count(b"\n")
            left -= len(b)
    return n


def intact_lines(path: str) -> int:
    """Lines of a damaged or cut gzip file that decompress before its stream fails, as ``zcat`` shows them
    (newlines counted in what Python's ``gzip`` module gives back; ``read1``, since ``read`` drops what it
    had gathered for a request when a later part of it fails).  For the error only: the reader's own count
    stops at the last block it parsed, up to ``STREAM_BLOCK_BYTES`` of lines before the damage, which a
    stream read in one block (any file under 8 MB of text) reported as line 0."""
    import gzip
    import zlib

    n = 0
    try:
        with gzip.open(path, "rb") as f:
            while True:
                block = f.read1(1 << 16)
                if not block:
                    break
                n += block.count(b"\n")
    except (EOFError, OSError, zlib.error):
        pass
    return n


def is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def byte_ranges(path: str, data_start: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """``[start, end)`` ranges of about ``chunk_bytes`` covering ``data_start..size``."""
    size = os.path.getsize(path)
    if size <= data_start:
        return [(data_start, data_start)]
    return [(a, min(a + chunk_bytes, size)) for a in range(data_start, size, chunk_bytes)]


def read_range(path: str, start: int, end: int, opts: TextOptions, data_start: int = 0):
    """Parse the lines that start in ``[start, end)`` of an uncompressed file -> ``(edges, ChunkStats)``."""
    arr, base_off = range_block(path, start, end, data_start)
    return _parse_block(arr, opts, path, lambda pos: _newlines_before(path, base_off + pos) + 1)


def range_block(path: str, start: int, end: int, data_start: int = 0) -> tuple[np.ndarray, int]:
    """The bytes of the lines that start in ``[start, end)`` of an uncompressed file, as a uint8 array,
    and the file offset of its first byte."""
    from .text_kernels import find_byte

    with open(path, "rb") as f:  # read straight into one array (no bytes/bytearray copies of the block)
        lo = start - 1 if start > data_start else start
        f.seek(lo)
        want = max(0, end - lo)
        buf = np.empty(want + (1 << 16), np.uint8)
        n = f.readinto(memoryview(buf)[:want])
        if n == want and n and buf[n - 1] != 10:  # the line running past `end` belongs to this range
            while True:
                if n == buf.size:
                    buf = np.concatenate([buf, np.empty(max(1 << 16, buf.size // 4), np.uint8)])
                k = f.readinto(memoryview(buf)[n:])
                if not k:
                    break
                j = find_byte(buf[n:n + k], 10)
                if j >= 0:
                    n += j + 1
                    break
                n += k
        buf = buf[:n]
    skip_head = 0
    if start > data_start:  # lines starting before `start` belong to the previous range
        k = find_byte(buf, 10)
        skip_head = n if k < 0 else k + 1
    return buf[skip_head:], lo + skip_head


def read_stream(path: str, opts: TextOptions, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                compression: str | None = "gzip", skip_lines: int = 0):
    """Parse a whole (compressed) stream block by block -> ``(edges, ChunkStats)``.

    ``skip_lines`` leading lines (a header) are dropped.  A cut gzip raises :class:`TruncatedInputError`.
    Blocks of at most ``STREAM_BLOCK_BYTES`` are decompressed by a helper thread while the previous
    block is parsed (both release the GIL), so decompression and parsing overlap.
    """
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa

    from .text_kernels import count_newlines, find_byte, rfind_byte

    parts, stats = [], ChunkStats()
    lines_before = 0
    carry = np.empty(0, np.uint8)
    block_bytes = max(1, min(chunk_bytes, STREAM_BLOCK_BYTES))
    try:
        stream = pa.input_stream(path, compression=compression)
    except (OSError, pa.ArrowException) as e:
        raise TruncatedInputError(f"{path}: cannot open compressed stream: {e}", path=path) from None
    with stream, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(stream.read, block_bytes)
        eof = False
        while not eof:
            try:
                block = pending.result()
            except (OSError, pa.ArrowException) as e:
                done = intact_lines(path) if compression == "gzip" else lines_before + count_newlines(carry)
                raise TruncatedInputError(f"{path}: compressed stream is damaged or truncated after line "
                                          f"{done}: {e}", path=path, line=done) from None
            eof = not block
            if not eof:
                pending = pool.submit(stream.read, block_bytes)
            blk = np.frombuffer(block, np.uint8)
            data = np.concatenate([carry, blk]) if carry.size else blk
            if not eof:
                k = rfind_byte(data, 10)
                if k < 0:
                    carry = data.copy()
                    continue
                data, carry = data[:k + 1], data[k + 1:].copy()
            else:
                carry = np.empty(0, np.uint8)
            while skip_lines and data.size:
                k = find_byte(data, 10)
                data = data[:0] if k < 0 else data[k + 1:]
                skip_lines -= 1
                lines_before += 1
            if not data.size:
                continue
            arr = data
            lb = lines_before
            e, s = _parse_block(arr, opts, path, lambda pos: lb + count_newlines(arr[:pos]) + 1)
            parts.append(e)
            stats = stats.merge(s)
            lines_before += count_newlines(arr)
    if any(p.dtype == np.uint64 for p in parts):  # int64 blocks hold no negatives: uint64 holds all
        parts = [p.astype(np.uint64, copy=False) for p in parts]
    edges = np.concatenate(parts) if len(parts) != 1 else parts[0]
    if not parts:
        edges = np.empty((0, 2), np.int64)
    return edges, stats


def read_text_file_chunks(path: str, opts: TextOptions, chunk_bytes: int, data_start: int = 0,
                          header_lines: int = 0, device: str = "cpu") -> list:
    """Delayed ``(edges, ChunkStats)`` tasks covering one file (byte ranges, or one stream for gzip).
    ``device="gpu"``: the edges are CuPy arrays on the worker's GPU, a byte range parsed there by cuDF
    where its lines allow (:func:`read_range_to_device`)."""
    import dask

    gpu = "gpu-" if device == "gpu" else ""
    if is_gzip(path):
        fn = read_stream if not gpu else _read_stream_to_device
        key = f"read-gz-{gpu}{_tok(path, opts, chunk_bytes, header_lines)}"
        return [dask.delayed(fn, pure=True)(path, opts, chunk_bytes, "gzip", header_lines, dask_key_name=key)]
    fn = read_range_to_device if gpu else read_range
    return [dask.delayed(fn, pure=True)(path, a, b, opts, data_start,
                                        dask_key_name=f"read-range-{gpu}{_tok(path, opts, data_start)}-{a}-{b}")
            for a, b in byte_ranges(path, data_start, chunk_bytes)]


def read_range_to_device(path: str, start: int, end: int, opts: TextOptions, data_start: int = 0):
    """:func:`read_range` on a GPU worker: the same lines as ``((k, 2) CuPy ids, ChunkStats)``, parsed by
    ``cudf.read_csv`` where they are plain edge lines (:func:`breadth.io.cudf_edges.parse_text_block`),
    else by the host parser -- which reports bad lines by file and line exactly as on the CPU, or skips
    them -- and copied to the GPU."""
    import cupy

    from .cudf_edges import parse_text_block

    arr, base_off = range_block(path, start, end, data_start)
    edges = parse_text_block(arr, opts)
    if edges is not None:
        return edges, ChunkStats(edges=int(edges.shape[0]))
    e, stats = _parse_block(arr, opts, path, lambda pos: _newlines_before(path, base_off + pos) + 1)
    return cupy.asarray(e), stats


def _read_stream_to_device(*args):
    """:func:`read_stream` (gzip is decompressed and parsed on the host), its edges moved to the GPU."""
    import cupy

    edges, stats = read_stream(*args)
    return cupy.asarray(edges), stats


def _tok(path, *args) -> str:
    """Key token: the file's identity (path, size, mtime) and everything that shapes the chunk."""
    from dask.base import tokenize

    st = os.stat(path)
    return tokenize(os.path.abspath(path), st.st_size, st.st_mtime_ns, *args)
