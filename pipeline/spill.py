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

import os
import shutil

import numba
import numpy as np

from breadth.bfs.shard import Shard, block_size, column_dtype

from .build_csr import csr_from_entries
from .partition import split_by_owner


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


def spill_chunk(edges: np.ndarray, chunk_id: int, n: int, nparts: int, directed: bool, batch_rows: int,
                root: str) -> np.ndarray:
    """Split one ``(k, 2)`` chunk by owner and write its bucket files under ``root``.

    Returns int64 ``(nparts, kinds, nbatches + 1)`` batch offsets (kinds: out-entries, and in-entries for
    directed graphs) — the only thing that goes back to the scheduler.
    """
    block = block_size(n, nparts)
    nb = -(-block // batch_rows)
    kinds = 2 if directed else 1
    offs = np.zeros((nparts, kinds, nb + 1), np.int64)
    dt = _local_dtype(n)
    for r, piece in enumerate(split_by_owner(edges, n, block, nparts, directed)):
        lo, _ = owner_range(r, nparts, n)
        d = os.path.join(root, f"owner-{r}")
        os.makedirs(d, exist_ok=True)
        for k, arr in enumerate((piece.out, piece.inc)[:kinds]):
            out = np.empty(arr.shape, dt)
            offs[r, k] = _sort_by_batch(arr, lo, batch_rows, nb, out)
            if arr.shape[0]:
                _atomic_save(os.path.join(d, f"chunk-{chunk_id}-{k}.bin"), out)
        if piece.loops.size:
            _atomic_save(os.path.join(d, f"chunk-{chunk_id}-loops.bin"), (piece.loops - lo).astype(dt))
    return offs


def build_shard_spilled(rank: int, nparts: int, n: int, directed: bool, batch_rows: int, root: str,
                        offsets: list[np.ndarray]) -> Shard:
    """Build owner ``rank``'s shard from the bucket files of every chunk, one row batch at a time.

    ``offsets``: each chunk's return value of :func:`spill_chunk`, in chunk order.
    """
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
            parts = [_read_rows(f, dt, o[rank, k, b], o[rank, k, b + 1]) for f, o in present
                     if o[rank, k, b + 1] > o[rank, k, b]]
            off, cols, mult = csr_from_entries(parts, r0, r1 - r0, n)
            del parts
            if k == 0:  # out-entries; as the in-memory builder, directed graphs count tuples at their tail
                tdeg[r0:r1] = mult
            row_offsets.append(off[1:] + total)
            total += int(off[-1])
            bf = os.path.join(d, f"csr-{k}-{b}.bin")
            _atomic_save(bf, cols)
            batch_files.append((bf, cols.size))
            del cols
        for f in files:
            if os.path.exists(f):
                os.remove(f)
        columns = np.empty(total, column_dtype(n))
        pos = 0
        for bf, size in batch_files:
            with open(bf, "rb") as fh:
                fh.readinto(memoryview(columns[pos:pos + size]).cast("B"))
            pos += size
            os.remove(bf)
        csr.append((np.concatenate(row_offsets), columns))
    loops = np.zeros(nloc, np.int64)
    for c in range(len(offsets)):
        f = os.path.join(d, f"chunk-{c}-loops.bin")
        if os.path.exists(f):
            loops += np.bincount(np.fromfile(f, dtype=dt), minlength=nloc)
            os.remove(f)
    shutil.rmtree(d, ignore_errors=True)
    (offs_out, cols_out), (in_off, in_col) = csr[0], (csr[1] if directed else (None, None))
    return Shard(rank, nparts, n, lo, hi, offs_out, cols_out, tdeg.astype(np.int32), loops.astype(np.int32),
                 in_off, in_col)
