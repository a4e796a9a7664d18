"""Out-of-core preparation through a host-memory tier: entries wait in the workers' host memory, sorted by
row batch, and each owner builds its shard one row batch at a time (on its GPU for ``device="gpu"``).

This is the path for GPUs whose memory cannot hold an edge list two or three times over (the in-memory GPU
builder sorts all of an owner's entries as packed 64-bit keys at once), on machines whose disks are too
small for :mod:`breadth.pipeline.spill`'s bucket files:

* :func:`batch_chunk` (one task per edge chunk) splits the chunk by owner (on the GPU for
  ``device="gpu"``, with :func:`~breadth.pipeline.build_csr_gpu.split_by_owner_gpu`), groups each
  owner's entries by row batch and narrows them to ``[row - lo, column]`` pairs of 32-bit ids when ids fit,
  then copies them to host NumPy arrays (:class:`HostPiece`).  These pieces are ordinary Dask task
  outputs in the workers' host memory, which Dask's memory manager (dask-cuda's device -> host -> disk
  tiers on GPU workers) may spill to its local disk.
* :func:`build_shard_batched` (one task per owner) takes, for each row batch in turn, that batch's slice
  of every piece, copies it to the device, deduplicates and builds those rows with the in-memory builder
  (:func:`~breadth.pipeline.build_csr_gpu.csr_from_entries_gpu` or the Numba
  :func:`~breadth.pipeline.build_csr.csr_from_entries`), and writes the batch's columns into the shard's
  final column array.  That array is allocated once, before the first batch, at the owner's entry count
  (an upper bound on its unique entries), so the columns never exist twice; the unused tail (duplicates)
  is kept as slack, or trimmed by one copy when it exceeds an eighth of the array.

Device memory of an owner's build: the final columns (4 bytes per entry when ids fit) and offsets, plus
one batch's working set (the batch's entries and the builder's packed keys and sort scratch, about 40 bytes
per entry).  Host memory: the owner's pieces (8 bytes per entry when ids fit).

The logic is written once over an array module (``xp``: NumPy or CuPy) so that the CPU runs all of it
except the few calls that :func:`backend` binds to CuPy for ``device="gpu"``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from breadth.bfs.shard import Shard, block_size, column_dtype

from .build_csr import csr_from_entries
from .partition import split_by_owner
from .spill import _local_dtype, _sort_by_batch, owner_range
from .stages import StageTimes, owner_record

#: trim the final column array by one copy when duplicates leave more than this share of it unused
TRIM_SLACK = 1 / 8


class HostPiece(NamedTuple):
    """What one chunk sends to one owner, in host memory: entries ``[row - lo, column]`` (local row,
    global column) of the graph's local dtype (int32 when ids fit), grouped by row batch.

    A tuple, so that Dask's ``sizeof`` counts its arrays (its memory manager spills by that count).
    """

    out: np.ndarray  # (k, 2): out-entries (undirected: all entries), batch b = out[out_batches[b]:out_batches[b+1]]
    out_batches: np.ndarray  # int64 (nbatches + 1,)
    inc: np.ndarray | None  # (k', 2): directed graphs' in-entries [head - lo, tail], grouped likewise
    inc_batches: np.ndarray | None  # int64 (nbatches + 1,)
    loops: np.ndarray  # (l,): local ids of the owner's self-loop tuples


class Backend(NamedTuple):
    """The calls that differ between NumPy and CuPy; everything else is written over ``xp``."""

    xp: Any  # numpy or cupy
    split: Callable  # split_by_owner(edges, n, block, nparts, directed) -> list[Piece] (entries on the device)
    sort_by_batch: Callable  # (entries, lo, batch_rows, nbatches, dtype) -> (local entries, int64 host offsets)
    csr: Callable  # csr_from_entries(entries, lo, num_local, n) -> (offsets, columns, multiplicity)
    to_device: Callable  # host NumPy -> xp array
    to_host: Callable  # xp array -> host NumPy
    sync: Callable | None  # waits for the device (stage timings), None on the CPU
    finish: Callable | None  # shard -> shard: extra structure built with the shard (GPU bottom-up order)


def sort_by_batch_xp(entries, lo: int, batch_rows: int, nbatches: int, dtype, xp) -> tuple[Any, np.ndarray]:
    """Group ``(k, 2)`` ``[row, column]`` entries (global rows of one owner) by row batch
    ``(row - lo) // batch_rows`` with array operations (an argsort of the batch ids), for any ``xp``.

    Returns ``(local, offsets)``: ``(k, 2)`` ``dtype`` entries ``[row - lo, column]`` in batch order (the
    order within a batch is unspecified: the builder sorts rows) and int64 host ``(nbatches + 1,)`` batch
    offsets.  :func:`_sort_by_batch_numpy` is the CPU's faster counting sort with the same result.
    """
    k = int(entries.shape[0])
    local = xp.empty((k, 2), dtype)
    rows = entries[:, 0] - entries.dtype.type(lo)  # same dtype as the entries: no widening copy
    offsets = np.zeros(nbatches + 1, np.int64)
    if nbatches == 1 or k == 0:
        local[:, 0] = rows
        local[:, 1] = entries[:, 1]
        offsets[1:] = k
        return local, offsets
    # rows < num_local <= the dtype's max, so a batch size clamped to that max still gives batch 0
    batch = rows // entries.dtype.type(min(batch_rows, np.iinfo(entries.dtype).max))
    order = xp.argsort(batch)
    counts = xp.bincount(batch, minlength=nbatches)
    del batch
    local[:, 0] = rows[order]
    local[:, 1] = entries[order, 1]
    np.cumsum(_host(counts), out=offsets[1:])
    return local, offsets


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _sort_by_batch_numpy(entries: np.ndarray, lo: int, batch_rows: int, nbatches: int, dtype) -> tuple:
    out = np.empty(entries.shape, dtype)
    return out, _sort_by_batch(entries, lo, batch_rows, nbatches, out)


def backend(device: str) -> Backend:
    """The :class:`Backend` of ``device`` (``"cpu"`` or ``"gpu"``; CuPy is imported only for the GPU)."""
    if device == "gpu":
        import cupy as cp

        from .build_csr_gpu import csr_from_entries_gpu, split_by_owner_gpu

        return Backend(cp, split_by_owner_gpu,
                       lambda e, lo, br, nb, dt: sort_by_batch_xp(e, lo, br, nb, dt, cp),
                       csr_from_entries_gpu, cp.asarray, cp.asnumpy, cp.cuda.get_current_stream().synchronize,
                       _gpu_bottom_up_order)
    if device != "cpu":
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    return Backend(np, split_by_owner, _sort_by_batch_numpy, csr_from_entries, np.asarray, np.asarray, None, None)


def _gpu_bottom_up_order(shard: Shard) -> Shard:
    """As :func:`~breadth.pipeline.build_csr_gpu.build_shard_gpu` does for one rank: bottom-up's
    degree-ordered rows, built with the shard so that construction time counts them (several ranks get
    theirs from :func:`~breadth.pipeline.prepare`, which gathers every owner's degrees)."""
    if shard.nparts == 1:
        from breadth.bfs.gpu_kernels import degree_ordered_columns

        bu_off, bu_col = (shard.in_offsets, shard.in_columns) if shard.directed else (shard.offsets, shard.columns)
        ordered = degree_ordered_columns(bu_off, bu_col)  # None when device memory is short
        if ordered is not None:
            shard.meta["bu_columns"] = ordered
    return shard


def batch_chunk(edges, n: int, nparts: int, directed: bool, batch_rows: int,
                device: str = "cpu") -> tuple[list[HostPiece], dict]:
    """Split one ``(k, 2)`` chunk of edge tuples by owner and return each owner's :class:`HostPiece`
    (host memory) and the task's stage seconds (split, sort, d2h) and counters (entries, host_bytes)."""
    be = backend(device)
    block = block_size(n, nparts)
    nb = -(-block // batch_rows)
    dt = _local_dtype(n)
    times = StageTimes(be.sync)
    with times("split"):
        pieces = be.split(edges, n, block, nparts, directed)
    del edges
    out = []
    for r, p in enumerate(pieces):
        lo, _ = owner_range(r, nparts, n)
        host = []
        for arr in (p.out, p.inc) if directed else (p.out,):
            with times("sort"):
                local, offs = be.sort_by_batch(arr, lo, batch_rows, nb, dt)
            with times("d2h"):
                local = be.to_host(local)
            host += [local, offs]
            times.add("entries", local.shape[0])
            times.add("host_bytes", local.nbytes)
        with times("d2h"):
            loops = be.to_host((p.loops - lo).astype(dt))
        times.add("host_bytes", loops.nbytes)
        if not directed:
            host += [None, None]
        out.append(HostPiece(host[0], host[1], host[2], host[3], loops))
    del pieces
    return out, times.as_dict()


def build_shard_batched(rank: int, nparts: int, n: int, directed: bool, batch_rows: int,
                        pieces: list[HostPiece], device: str = "cpu") -> Shard:
    """Build owner ``rank``'s shard from every chunk's :class:`HostPiece`, one row batch at a time.

    The shard is the in-memory builders' exactly (rows in order, columns sorted and unique within a row,
    ``tuple_degree`` counted before deduplication), in device memory for ``device="gpu"``.  Its
    ``meta["prepare_stages"]`` records the build (:func:`breadth.pipeline.stages.owner_record`: seconds
    of h2d, build, assemble and loops; one ``[entries, h2d_s, build_s]`` row per batch; for the GPU the
    live device bytes after the columns were allocated and the most seen after a batch's build).
    """
    be = backend(device)
    xp = be.xp
    lo, hi = owner_range(rank, nparts, n)
    nloc = hi - lo
    nb = -(-block_size(n, nparts) // batch_rows)
    cdt = column_dtype(n)
    times = StageTimes(be.sync)
    batches: list[list[float]] = []
    live_peak = 0
    tdeg = xp.zeros(nloc, xp.int64)
    csr = []
    for k in range(2 if directed else 1):
        parts = [(p.out, p.out_batches) if k == 0 else (p.inc, p.inc_batches) for p in pieces]
        parts = [(a, o) for a, o in parts if a.shape[0]]
        with times("allocate"):
            offsets = xp.zeros(nloc + 1, xp.int64)
            # An owner's unique entries are at most its entries: one array, allocated once, receives every
            # batch's columns, so the final columns never exist twice (batch arrays are freed as they go).
            columns = xp.empty(sum(a.shape[0] for a, _ in parts), cdt)
        live_peak = max(live_peak, _live_bytes(xp))
        total = 0
        for b in range(nb):
            r0, r1 = min(b * batch_rows, nloc), min((b + 1) * batch_rows, nloc)
            if r0 >= r1:
                break
            if be.sync:
                be.sync()
            t0 = time.perf_counter()
            batch = [be.to_device(a[o[b]:o[b + 1]]) for a, o in parts if o[b + 1] > o[b]]
            entries = sum(int(e.shape[0]) for e in batch)
            if be.sync:
                be.sync()
            t1 = time.perf_counter()
            off, cols, mult = be.csr(batch, r0, r1 - r0, n)  # local rows r0..r1-1 (the entries hold row - lo)
            del batch
            live_peak = max(live_peak, _live_bytes(xp))
            offsets[r0 + 1:r1 + 1] = off[1:] + total
            columns[total:total + cols.size] = cols
            if k == 0:  # out-entries; as the in-memory builders, directed graphs count tuples at their tail
                tdeg[r0:r1] = mult
            total += int(cols.size)
            del off, cols, mult
            if be.sync:
                be.sync()
            t2 = time.perf_counter()
            times.add("h2d_s", t1 - t0)
            times.add("build_s", t2 - t1)
            times.add("entries", entries)
            batches.append([entries, t1 - t0, t2 - t1])
        with times("assemble"):
            slack = int(columns.size) - total
            times.add("column_slack_entries", slack)
            # a view keeps the whole array; copy out the used part only when duplicates wasted much of it
            if slack > TRIM_SLACK * columns.size:
                columns = columns[:total].copy()
                times.add("columns_trimmed", 1)
            else:
                columns = columns[:total]
        csr.append((offsets, columns))
    with times("loops"):
        ids = [p.loops for p in pieces if p.loops.size]
        # one bincount over all chunks' loop ids (one per chunk would sweep num_local counters each time)
        loops = (xp.bincount(be.to_device(np.concatenate(ids)), minlength=nloc) if ids
                 else xp.zeros(nloc, xp.int64))
    (offs_out, cols_out), (in_off, in_col) = csr[0], (csr[1] if directed else (None, None))
    shard = Shard(rank, nparts, n, lo, hi, offs_out, cols_out, tdeg.astype(xp.int32), loops.astype(xp.int32),
                  in_off, in_col)
    if be.finish:
        with times("bottom_up_order"):
            shard = be.finish(shard)
    if xp is not np:
        times["device_live_after_allocate_or_batch_peak_bytes"] = live_peak
        times["device_live_end_bytes"] = _live_bytes(xp)
    shard.meta["prepare_stages"] = owner_record(times, batches)
    return shard


def _live_bytes(xp) -> int:
    """Bytes of live arrays in CuPy's default memory pool (0 for NumPy, and under another allocator)."""
    return 0 if xp is np else int(xp.get_default_memory_pool().used_bytes())
