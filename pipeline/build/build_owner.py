"""An owner's shard from its shuffle inbox, one row batch at a time, whatever tier the pieces waited in.

For each entry kind (out-entries; in-entries too for directed graphs) and each row batch in turn, the
owner takes that batch's entries from every chunk's parcel (:class:`~breadth.pipeline.shuffle.shuffle_tiers.Inbox`),
moves them to its device, deduplicates and builds those rows with the in-memory builder
(:func:`~breadth.pipeline.kernels.build_csr.csr_from_entries`, or
:func:`~breadth.pipeline.kernels.build_csr_gpu.csr_from_entries_gpu` on GPU workers) and writes the batch's
columns into the shard's final column array.  That array is allocated once, before the first batch, at
the owner's entry count (an upper bound of its unique entries), so the columns never exist twice; the
unused tail (duplicates) is given back in place on the CPU (``ndarray.resize``: ``realloc`` shrinks
without copying) and on the GPU kept as slack, or trimmed by one copy past :data:`TRIM_SLACK`.

With one row batch (the memory tier, or a graph small enough) the builder's own arrays are the shard's:
no preallocation, no copy -- exactly what building all of an owner's pieces at once gives.

With ``spec.shard_dir`` (:func:`~breadth.pipeline.prepare` with ``shard_dir``) the batches' rows go to files
instead (:class:`~breadth.pipeline.build.shard_files.RowsToFiles`) and the shard's arrays are read-only maps of
them: the owner holds one batch, never its shard.

Memory of an owner's build: the final columns (4 bytes per entry when ids fit) and offsets, plus one
batch's working set (the CPU builder's read pairs, the columns it deduplicates in place and a 16-bit row
number per entry while it places them by row block, about 14 bytes per entry; the GPU's packed keys and
sort scratch, about 40), plus the parcels themselves where their tier keeps them in memory.  The shards are
the same for every tier and batch size, bit for bit.
"""

from __future__ import annotations

import os
import time

import numpy as np

from breadth.bfs.shard import Shard, column_dtype

from ..kernels.array_backend import backend
from .shard_files import RowsToFiles, write_counts
from ..shuffle.shuffle_tiers import Inbox, ShuffleSpec
from ..stages import StageTimes, owner_record

#: GPU: trim the final column array by one copy when duplicates leave more than this share of it unused
TRIM_SLACK = 1 / 8


def build_owner(rank: int, spec: ShuffleSpec, parcels: list) -> Shard:
    """Build owner ``rank``'s shard from every chunk's parcel (in chunk order) of one shuffle.

    The shard has rows in order, columns sorted and unique within a row, ``tuple_degree`` counted before
    deduplication (out-tuples for directed graphs), self-loop counts apart; in device memory for
    ``spec.device == "gpu"``.  Its ``meta["prepare_stages"]`` records the build
    (:func:`breadth.pipeline.stages.owner_record`: seconds of read, build, assemble and loops; one
    ``[entries, read_s, build_s]`` row per batch; for the GPU the live device bytes after the columns were
    allocated and the most seen after a batch's build).

    >>> spec = ShuffleSpec("memory", "cpu", 4, 1, False, 64)
    >>> from breadth.pipeline.shuffle.shuffle_tiers import send_chunk
    >>> parcels, _ = send_chunk(np.array([[0, 1], [1, 2], [1, 2]]), 0, spec)
    >>> build_owner(0, spec, [parcels[0]]).columns.tolist()
    [1, 0, 2, 1]
    """
    be = backend(spec.device, spec.jit)
    xp = be.xp
    inbox = Inbox(spec, rank, parcels)
    n, nloc, nb, br = spec.num_vertices, inbox.hi - inbox.lo, spec.nbatches, spec.batch_rows
    times = StageTimes(be.sync)
    batches: list[list[float]] = []
    live_peak = 0
    tdeg = None
    csr = []
    folder = None if spec.shard_dir is None else os.path.join(spec.shard_dir, f"shard-{rank:05d}")
    for k in range(spec.kinds):
        if nb == 1 and folder is None:  # the builder's arrays are the shard's
            entries, t_read, t_build, (offsets, columns, mult) = _build_batch(be, inbox, k, 0, 0, nloc)
            live_peak = max(live_peak, _live_bytes(xp))
            times.add("read_s", t_read)
            times.add("build_s", t_build)
            times.add("entries", entries)
            batches.append([entries, t_read, t_build])
            if k == 0:  # out-entries; directed graphs count tuples at their tail
                tdeg = mult
            del mult
            inbox.done(k)
            csr.append((offsets, columns))
            continue
        with times("allocate"):
            # out-entries, then a directed graph's in-entries; tuples are counted at their tail (out)
            rows = (_RowsInMemory(xp, nloc, inbox.count(k), column_dtype(n), k == 0) if folder is None else
                    RowsToFiles(folder, ("", "in_")[k], nloc, column_dtype(n), k == 0))
        live_peak = max(live_peak, _live_bytes(xp))
        for b in range(nb):
            r0, r1 = min(b * br, nloc), min((b + 1) * br, nloc)
            if r0 >= r1:
                break
            entries, t_read, t_build, (off, cols, mult) = _build_batch(be, inbox, k, b, r0, r1 - r0)
            live_peak = max(live_peak, _live_bytes(xp))
            t2 = time.perf_counter()
            rows.put(r0, r1, off, cols, mult)
            del off, cols, mult
            if be.sync:
                be.sync()
            t_build += time.perf_counter() - t2
            times.add("read_s", t_read)
            times.add("build_s", t_build)
            times.add("entries", entries)
            batches.append([entries, t_read, t_build])
        inbox.done(k)
        with times("assemble"):
            offsets, columns, mult = rows.finish(times)
        if k == 0:
            tdeg = mult
            tuples = rows.tuples if folder is not None else None
        del rows, mult
        csr.append((offsets, columns))
    with times("loops"):
        ids = [be.to_device(a) for a in inbox.loops()]
        ids = xp.concatenate(ids) if ids else xp.zeros(0, xp.int64)
        if folder is None:
            # one bincount over all chunks' loop ids (one per chunk would sweep num_local counters each time)
            loops = xp.bincount(ids, minlength=nloc).astype(xp.int32)
        else:  # counted a row batch at a time, as the rows were built
            sums = {"tuple_degree": tuples, "self_loops": int(ids.size)}
            loops = write_counts(os.path.join(folder, "self_loops.bin"), ids, nloc, br)
        del ids
        inbox.done("loops")
    inbox.close()
    (offs_out, cols_out), (in_off, in_col) = csr[0], (csr[1] if spec.directed else (None, None))
    shard = Shard(rank, spec.nparts, n, inbox.lo, inbox.hi, offs_out, cols_out, tdeg.astype(xp.int32, copy=False),
                  loops, in_off, in_col)
    if be.finish and spec.search_order:
        with times("bottom_up_order"):
            shard = be.finish(shard)
    if xp is not np:
        times["device_live_after_allocate_or_batch_peak_bytes"] = live_peak
        times["device_live_end_bytes"] = _live_bytes(xp)
    shard.meta["prepare_stages"] = owner_record(times, batches)
    if folder is not None:  # the summaries of a shard built to files, which must not read its maps back
        shard.meta["sums"] = sums
    return shard


def _build_batch(be, inbox: Inbox, kind: int, b: int, r0: int, nrows: int) -> tuple:
    """Rows ``r0..r0+nrows-1`` (local) of ``kind`` from row batch ``b``: ``(entries, read seconds, build
    seconds, (offsets, columns, multiplicity))`` with offsets from 0."""
    if be.sync:
        be.sync()
    t0 = time.perf_counter()
    batch = [be.to_device(a) for a in inbox.batch(kind, b)]
    entries = sum(int(e.shape[0]) for e in batch)
    if be.sync:
        be.sync()
    t1 = time.perf_counter()
    # the entries hold row - row_base: global rows (row_base = lo) or local ones (row_base = 0)
    out = be.csr(batch, inbox.row_base + r0, nrows, inbox.spec.num_vertices)
    del batch
    if be.sync:
        be.sync()
    return entries, t1 - t0, time.perf_counter() - t1, out


class _RowsInMemory:
    """One CSR of an owner's ``nloc`` rows, received batch by batch in row order into arrays allocated
    once: the final columns at ``count`` entries (every entry: an upper bound of the unique ones), trimmed
    by :meth:`finish`.  :class:`~breadth.pipeline.build.shard_files.RowsToFiles` is the same on files."""

    def __init__(self, xp, nloc: int, count: int, dtype, degrees: bool):
        self.xp, self.total = xp, 0
        self.offsets = xp.zeros(nloc + 1, xp.int64)
        self.columns = xp.empty(count, dtype)
        self.tdeg = xp.zeros(nloc, xp.int64) if degrees else None

    def put(self, r0: int, r1: int, offsets, columns, multiplicity) -> None:
        self.offsets[r0 + 1:r1 + 1] = offsets[1:] + self.total
        self.columns[self.total:self.total + columns.size] = columns
        if self.tdeg is not None:
            self.tdeg[r0:r1] = multiplicity
        self.total += int(columns.size)

    def finish(self, times: StageTimes) -> tuple:
        """``(offsets, columns, tuple counts or None)``; the columns' unused tail given back."""
        columns, self.columns = self.columns, None  # the only reference: resized in place on the CPU
        return self.offsets, _trim(self.xp, columns, self.total, times), self.tdeg


def _trim(xp, columns, total: int, times: StageTimes):
    """The used head of a column array sized for every entry: resized in place on the CPU, on the GPU a
    view (the slack kept) or, past :data:`TRIM_SLACK`, a copy."""
    slack = int(columns.size) - total
    times.add("column_slack_entries", slack)
    if not slack:
        return columns
    if xp is np:
        # realloc to a smaller size keeps the data where it is: no second column array, ever.  Nothing
        # else refers to this array (the batches' views are gone), as refcheck=False requires.
        columns.resize(total, refcheck=False)
        times.add("columns_resized", 1)
        return columns
    if slack > TRIM_SLACK * columns.size:
        times.add("columns_trimmed", 1)
        return columns[:total].copy()
    return columns[:total]


def _live_bytes(xp) -> int:
    """Bytes of live arrays in CuPy's default memory pool (0 for NumPy, and under another allocator)."""
    return 0 if xp is np else int(xp.get_default_memory_pool().used_bytes())

