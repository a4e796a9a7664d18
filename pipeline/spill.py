"""Out-of-core preparation: edge chunks spill per-owner bucket files; owners build their CSR in row batches.

Peak memory per worker is set by the chunk size and the batch size, never by the input size:

* ``spill_chunk`` (one task per edge chunk) splits the chunk by owner, sorts each owner's entries by row
  batch (a counting sort) and writes one raw file per (chunk, owner) with 32-bit local ids when they
  fit, plus the batch offsets; it returns only those offsets.
* ``build_shard_spilled`` (one task per owner, on the owner's worker) reads, batch after batch, the slice of
  every chunk file that holds the batch's rows (an explicit read of just that slice), deduplicates and
  builds those rows with the in-memory builder, and spills the batch's columns; the final column array is
  then allocated once and filled from the batch files, so it never exists twice.

Every file is written under a temporary name and renamed, and deleted as soon as it has been consumed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from typing import NamedTuple

import numba
import numpy as np

from breadth.bfs.shard import Shard, block_size, column_dtype

from .build_csr import csr_from_entries
from .partition import split_by_owner
from .stages import StageTimes, owner_record


def _atomic_save(path: str, arr: np.ndarray) -> None:
    """Raw bytes (the reader knows dtype and shape) under a temporary name, then renamed."""
    tmp = f"{path}.tmp"
    np.ascontiguousarray(arr).tofile(tmp)
    os.replace(tmp, path)


def _read_rows(path: str, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
    """Rows ``start..stop-1`` of a raw ``(k, 2)`` file, read into private memory.  Not a memory map: mapped
    file pages stay resident (and count in RSS) for as long as the map lives."""
    item = np.dtype(dtype).itemsize
    return np.fromfile(path, dtype=dtype, count=2 * int(stop - start), offset=2 * int(start) * item).reshape(-1, 2)


@numba.njit(nogil=True, cache=True)
def _sort_by_batch(entries, lo, batch_rows, nbatches, out):
    """Counting sort of ``[row, col]`` entries by ``(row - lo) // batch_rows`` into ``out`` (local rows)."""
    cnt = np.zeros(nbatches + 1, np.int64)
    for i in range(entries.shape[0]):
        cnt[(entries[i, 0] - lo) // batch_rows + 1] += 1
    for b in range(nbatches):
        cnt[b + 1] += cnt[b]
    cur = cnt[:-1].copy()
    for i in range(entries.shape[0]):
        b = (entries[i, 0] - lo) // batch_rows
        out[cur[b], 0] = entries[i, 0] - lo
        out[cur[b], 1] = entries[i, 1]
        cur[b] += 1
    return cnt


def owner_range(rank: int, nparts: int, n: int) -> tuple[int, int]:
    block = block_size(n, nparts)
    lo = min(rank * block, n)
    return lo, min(lo + block, n)


def _local_dtype(n: int) -> np.dtype:
    return np.dtype(np.int32) if n <= np.iinfo(np.int32).max else np.dtype(np.int64)


class SpilledChunk(NamedTuple):
    """What a chunk task sends back: the batch offsets of its files and the seconds of its stages."""

    offsets: np.ndarray  # int64 (nparts, kinds, nbatches + 1): entry offsets of each row batch per file
    stages: dict  # split_s, sort_s, write_s, bytes_written, entries (see breadth.pipeline.stages)


def spill_chunk(edges: np.ndarray, chunk_id: int, n: int, nparts: int, directed: bool, batch_rows: int,
                root: str) -> SpilledChunk:
    """Split one ``(k, 2)`` chunk by owner and write its bucket files under ``root``.

    Returns int64 ``(nparts, kinds, nbatches + 1)`` batch offsets (kinds: out-entries, and in-entries for
    directed graphs) and the task's stage seconds -- the only things that go back to the scheduler.
    """
    block = block_size(n, nparts)
    nb = -(-block // batch_rows)
    kinds = 2 if directed else 1
    offs = np.zeros((nparts, kinds, nb + 1), np.int64)
    dt = _local_dtype(n)
    times = StageTimes()
    with times("split"):
        pieces = split_by_owner(edges, n, block, nparts, directed)
    for r, piece in enumerate(pieces):
        lo, _ = owner_range(r, nparts, n)
        d = os.path.join(root, f"owner-{r}")
        # mkdir, not makedirs: ``root`` exists for the whole run (prepare creates it); a task still
        # running after a failed run removed it must fail here rather than create the tree again
        with contextlib.suppress(FileExistsError):
            os.mkdir(d)
        for k, arr in enumerate((piece.out, piece.inc)[:kinds]):
            with times("sort"):
                out = np.empty(arr.shape, dt)
                offs[r, k] = _sort_by_batch(arr, lo, batch_rows, nb, out)
            if arr.shape[0]:
                with times("write"):
                    _atomic_save(os.path.join(d, f"chunk-{chunk_id}-{k}.bin"), out)
                times.add("bytes_written", out.nbytes)
                times.add("entries", out.shape[0])
        if piece.loops.size:
            with times("write"):
                loops = (piece.loops - lo).astype(dt)
                _atomic_save(os.path.join(d, f"chunk-{chunk_id}-loops.bin"), loops)
            times.add("bytes_written", loops.nbytes)
    return SpilledChunk(offs, times.as_dict())


def build_shard_spilled(rank: int, nparts: int, n: int, directed: bool, batch_rows: int, root: str,
                        chunks: list[SpilledChunk]) -> Shard:
    """Build owner ``rank``'s shard from the bucket files of every chunk, one row batch at a time.

    ``chunks``: each chunk's return value of :func:`spill_chunk`, in chunk order.  The shard's
    ``meta["prepare_stages"]`` records the build's stages (:func:`breadth.pipeline.stages.owner_record`:
    read, build, write, assemble, loops, cleanup seconds; bytes read and written; one
    ``[entries, read_s, build_s, write_s]`` row per batch).
    """
    offsets = [c.offsets for c in chunks]
    times = StageTimes()
    batches = []
    lo, hi = owner_range(rank, nparts, n)
    nloc = hi - lo
    dt = _local_dtype(n)
    d = os.path.join(root, f"owner-{rank}")
    nb = -(-block_size(n, nparts) // batch_rows)
    csr = []
    tdeg = np.zeros(nloc, np.int64)
    for k in range(2 if directed else 1):
        files = [os.path.join(d, f"chunk-{c}-{k}.bin") for c in range(len(offsets))]
        present = [(f, o) for f, o in zip(files, offsets) if os.path.exists(f)]
        row_offsets = [np.zeros(1, np.int64)]
        batch_files, total = [], 0
        for b in range(nb):
            r0, r1 = min(b * batch_rows, nloc), min((b + 1) * batch_rows, nloc)
            if r0 >= r1:
                break
            t = [time.perf_counter()]
            parts = [_read_rows(f, dt, o[rank, k, b], o[rank, k, b + 1]) for f, o in present
                     if o[rank, k, b + 1] > o[rank, k, b]]
            entries = sum(p.shape[0] for p in parts)
            t.append(time.perf_counter())
            off, cols, mult = csr_from_entries(parts, r0, r1 - r0, n)
            del parts
            if k == 0:  # out-entries; as the in-memory builder, directed graphs count tuples at their tail
                tdeg[r0:r1] = mult
            row_offsets.append(off[1:] + total)
            total += int(off[-1])
            t.append(time.perf_counter())
            bf = os.path.join(d, f"csr-{k}-{b}.bin")
            _atomic_save(bf, cols)
            batch_files.append((bf, cols.size))
            times.add("bytes_written", cols.nbytes)
            del cols
            t.append(time.perf_counter())
            dt_read, dt_build, dt_write = np.diff(t).tolist()
            times.add("read_s", dt_read)
            times.add("build_s", dt_build)
            times.add("write_s", dt_write)
            times.add("bytes_read", entries * 2 * dt.itemsize)
            batches.append([entries, dt_read, dt_build, dt_write])
        with times("cleanup"):
            for f in files:
                if os.path.exists(f):
                    os.remove(f)
        with times("assemble"):  # the final column array, allocated once and read back batch by batch
            columns = np.empty(total, column_dtype(n))
            pos = 0
            for bf, size in batch_files:
                with open(bf, "rb") as fh:
                    fh.readinto(memoryview(columns[pos:pos + size]).cast("B"))
                pos += size
                os.remove(bf)
            csr.append((np.concatenate(row_offsets), columns))
    with times("loops"):
        loop_ids = []
        for c in range(len(offsets)):
            f = os.path.join(d, f"chunk-{c}-loops.bin")
            if os.path.exists(f):
                loop_ids.append(np.fromfile(f, dtype=dt))
                os.remove(f)
        # one bincount over all chunks' loop ids: a bincount per chunk would sweep num_local counters
        # once per chunk (256 sweeps of 512 MB at scale 26)
        loops = np.bincount(np.concatenate(loop_ids), minlength=nloc) if loop_ids else np.zeros(nloc, np.int64)
        del loop_ids
    with times("cleanup"):
        shutil.rmtree(d, ignore_errors=True)
    (offs_out, cols_out), (in_off, in_col) = csr[0], (csr[1] if directed else (None, None))
    shard = Shard(rank, nparts, n, lo, hi, offs_out, cols_out, tdeg.astype(np.int32), loops.astype(np.int32),
                  in_off, in_col)
    shard.meta["prepare_stages"] = owner_record(times, batches)
    return shard
