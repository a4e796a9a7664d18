"""The storage tiers of the shuffle to owners: where a chunk's per-owner pieces wait until their owner
reads them, row batch by row batch.

One chunk task (:func:`send_chunk`) splits its ``(k, 2)`` edge tuples by owner (self-loops set aside,
undirected tuples sent both ways, directed ones as out- and in-entries: :mod:`breadth.pipeline.kernels.partition`)
and hands each owner a *parcel*; one owner task opens an :class:`Inbox` over every chunk's parcel and
reads it one row batch at a time (:mod:`breadth.pipeline.build.build_owner`).  The tier only says where a
parcel waits:

* ``"memory"``: the split's own pieces (:class:`~breadth.pipeline.kernels.partition.Piece`, global ``[row,
  column]`` entries; on GPU workers in device memory) as Dask task outputs; one row batch spans the
  owner's whole block, so the owner builds at once.  16 bytes per adjacency entry on the CPU.
* ``"host"``: each owner's entries grouped by row batch as ``[row - lo, column]`` pairs of 32-bit ids
  (when ids fit) in host memory (:class:`HostPiece`), as Dask task outputs that Dask's memory manager
  may move to its local directory (dask-cuda: device -> host -> disk).  8 bytes per entry.  On GPU
  workers whose device holds the pairs beside the build (``on_device``, chosen with the tier), the pairs
  stay in device memory: the same parcels, without the copies to the host and back.
* ``"disk"``: the same pairs written to one raw file per (chunk, owner, kind) under the run's spill
  folder (:class:`DiskPiece` keeps only the batch offsets); the owner reads each batch's slice of every
  file with an explicit read (not a memory map: mapped pages stay resident) and deletes the files.

Nothing in a chunk task or an owner task depends on the tier beyond these parcels, so the shards are
the same for every tier, bit for bit.

>>> spec = ShuffleSpec("host", "cpu", num_vertices=1000, nparts=2, directed=False, batch_rows=128)
>>> spec.nbatches, spec.block
(4, 512)
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from breadth.bfs.shard import block_size, owner_range

from ..kernels.array_backend import backend, local_dtype
from ..stages import StageTimes

TIERS = ("memory", "host", "disk")


@dataclass(frozen=True)
class ShuffleSpec:
    """What every task of one shuffle agrees on (sent to each task; a few numbers and a path)."""

    tier: str  # "memory", "host" or "disk" (see the module docstring)
    device: str  # "cpu" or "gpu": where chunks are split and owners build
    num_vertices: int
    nparts: int  # owners
    directed: bool
    batch_rows: int  # rows per row batch (the memory tier: the whole block)
    root: str | None = None  # the disk tier's folder for this run (created and removed by the caller)
    jit: bool = True  # CPU: Numba kernels; False: their NumPy twins, so that workers never import Numba
    shard_dir: str | None = None  # owners write their shards' arrays to files here (see build_owner)
    on_device: bool = False  # GPU workers, host tier: the pairs stay in device memory (see the module notes)
    search_order: bool = True  # a one-owner GPU build adds bottom-up's degree order (prepare's search_order)

    def __post_init__(self):
        if self.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {self.tier!r}")
        if self.tier == "disk" and not self.root:
            raise ValueError("the disk tier needs a folder (root)")

    @property
    def block(self) -> int:
        """Vertices per owner (:func:`breadth.bfs.shard.block_size`)."""
        return block_size(self.num_vertices, self.nparts)

    @property
    def nbatches(self) -> int:
        """Row batches per owner (1 for the memory tier)."""
        return 1 if self.tier == "memory" else -(-self.block // self.batch_rows)

    @property
    def kinds(self) -> int:
        """Entry kinds: out-entries, plus in-entries for directed graphs."""
        return 2 if self.directed else 1


class HostPiece(NamedTuple):
    """What one chunk sends to one owner in the host tier: entries ``[row - lo, column]`` (local row,
    global column) of the graph's local dtype (int32 when ids fit), grouped by row batch (NumPy arrays, or
    CuPy arrays where the pairs stay on the device).

    A tuple, so that Dask's ``sizeof`` counts its arrays (its memory manager spills by that count).
    """

    out: np.ndarray  # (k, 2): out-entries (undirected: all entries), batch b = out[out_batches[b]:out_batches[b+1]]
    out_batches: np.ndarray  # int64 (nbatches + 1,)
    inc: np.ndarray | None  # (k', 2): directed graphs' in-entries [head - lo, tail], grouped likewise
    inc_batches: np.ndarray | None  # int64 (nbatches + 1,)
    loops: np.ndarray  # (l,): local ids of the owner's self-loop tuples


class DiskPiece(NamedTuple):
    """What one chunk sends to one owner in the disk tier: where its files are and their batch offsets
    (the entries themselves are in the files, see :func:`disk_path`)."""

    chunk: int  # chunk id: the files are disk_path(root, owner, chunk, kind)
    offsets: np.ndarray  # int64 (kinds, nbatches + 1): entry offsets of each row batch per kind's file
    loops: int  # self-loop tuples in the chunk's loops file (0: no file)


def disk_path(root: str, owner: int, chunk: int, kind: int | str) -> str:
    """The raw file of one chunk's entries of ``kind`` (0 out, 1 in, ``"loops"``) for one owner."""
    return os.path.join(root, f"owner-{owner}", f"chunk-{chunk}-{kind}.bin")


def save_raw(path: str, arr: np.ndarray) -> None:
    """Raw bytes (the reader knows dtype and shape) under a temporary name, then renamed: a file under
    its final name is always whole."""
    tmp = f"{path}.tmp"
    np.ascontiguousarray(arr).tofile(tmp)
    os.replace(tmp, path)


def read_rows(path: str, dtype: np.dtype, start: int, stop: int) -> np.ndarray:
    """Rows ``start..stop-1`` of a raw ``(k, 2)`` file, read into private memory.  Not a memory map: mapped
    file pages stay resident (and count in RSS) for as long as the map lives."""
    item = np.dtype(dtype).itemsize
    return np.fromfile(path, dtype=dtype, count=2 * int(stop - start), offset=2 * int(start) * item).reshape(-1, 2)


def run_folder(path: str) -> str:
    """Make ``path``, a folder directly in a run's root, unless it is there: ``mkdir``, not ``makedirs``,
    since the root exists for the whole run and a task still running after a failed run removed it must
    fail here rather than create the tree again."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)
    return path


def send_chunk(edges: Any, chunk: int, spec: ShuffleSpec) -> tuple[list, dict]:
    """Split one ``(k, 2)`` chunk of edge tuples by owner and store each owner's part in ``spec.tier``.

    Returns ``(parcels, stages)``: one parcel per owner (a :class:`~breadth.pipeline.kernels.partition.Piece`,
    :class:`HostPiece` or :class:`DiskPiece`) and the task's stage seconds and counters (split, sort,
    d2h, write seconds; entries, host_bytes, bytes_written).
    """
    be = backend(spec.device, spec.jit)
    times = StageTimes(be.sync)
    with times("split"):
        pieces = be.split(edges, spec.num_vertices, spec.block, spec.nparts, spec.directed)
    del edges
    if spec.tier == "memory":
        times.add("entries", sum(int(p.out.shape[0]) + (int(p.inc.shape[0]) if spec.directed else 0)
                                 for p in pieces))
        return pieces, times.as_dict()
    parcels = []
    for r, p in enumerate(pieces):
        lo, _ = owner_range(r, spec.nparts, spec.num_vertices)
        grouped = []  # (local entries on the host, int64 batch offsets) per kind
        for arr in (p.out, p.inc)[:spec.kinds]:
            with times("sort"):
                local, offs = be.sort_by_batch(arr, lo, spec.batch_rows, spec.nbatches, local_dtype(spec.num_vertices))
            if not spec.on_device:
                with times("d2h"):
                    local = be.to_host(local)
            grouped.append((local, offs))
            times.add("entries", local.shape[0])
        loops = (p.loops - lo).astype(local_dtype(spec.num_vertices))
        if not spec.on_device:
            with times("d2h"):
                loops = be.to_host(loops)
        parcels.append(_store(spec, r, chunk, grouped, loops, times))
    return parcels, times.as_dict()


def _store(spec: ShuffleSpec, owner: int, chunk: int, grouped: list, loops: np.ndarray, times: StageTimes):
    """One owner's grouped entries as the tier keeps them: in host memory, or written to its files."""
    if spec.tier == "host":
        where = "device_bytes" if spec.on_device else "host_bytes"
        for local, _ in grouped:
            times.add(where, local.nbytes)
        times.add(where, loops.nbytes)
        (out, ob), (inc, ib) = grouped[0], (grouped[1] if spec.directed else (None, None))
        return HostPiece(out, ob, inc, ib, loops)
    run_folder(os.path.dirname(disk_path(spec.root, owner, chunk, 0)))
    for k, (local, _) in enumerate(grouped):
        if local.shape[0]:
            with times("write"):
                save_raw(disk_path(spec.root, owner, chunk, k), local)
            times.add("bytes_written", local.nbytes)
    if loops.size:
        with times("write"):
            save_raw(disk_path(spec.root, owner, chunk, "loops"), loops)
        times.add("bytes_written", loops.nbytes)
    return DiskPiece(chunk, np.stack([offs for _, offs in grouped]), int(loops.size))


class Inbox:
    """Owner ``rank``'s view of every chunk's parcel, read one row batch at a time.

    ``row_base`` is what the builder subtracts from the rows it reads: ``lo`` for the memory tier's global
    rows, 0 for the local rows of the other tiers.  Arrays come back as they are stored (host NumPy, or
    device arrays of the GPU's memory tier and of its host tier's pairs on the device); the builder moves
    them to its device.
    """

    def __init__(self, spec: ShuffleSpec, rank: int, parcels: list):
        self.spec, self.rank = spec, rank
        self.lo, self.hi = owner_range(rank, spec.nparts, spec.num_vertices)
        self.parcels = parcels
        self.row_base = self.lo if spec.tier == "memory" else 0

    def count(self, kind: int) -> int:
        """Entries of ``kind`` (0 out, 1 in) in every parcel: an upper bound of the owner's unique entries."""
        if self.spec.tier == "memory":
            return sum(int((p.out if kind == 0 else p.inc).shape[0]) for p in self.parcels)
        if self.spec.tier == "host":
            return sum(int((p.out_batches if kind == 0 else p.inc_batches)[-1]) for p in self.parcels)
        return sum(int(p.offsets[kind, -1]) for p in self.parcels)

    def batch(self, kind: int, b: int) -> list:
        """The ``(k, 2)`` entries of row batch ``b`` of ``kind``, one array per parcel that has any."""
        tier = self.spec.tier
        if tier == "memory":
            arrs = [p.out if kind == 0 else p.inc for p in self.parcels]
            return [a for a in arrs if a.shape[0]]
        if tier == "host":
            parts = [(p.out, p.out_batches) if kind == 0 else (p.inc, p.inc_batches) for p in self.parcels]
            return [a[o[b]:o[b + 1]] for a, o in parts if o[b + 1] > o[b]]
        dt = local_dtype(self.spec.num_vertices)
        return [read_rows(disk_path(self.spec.root, self.rank, p.chunk, kind), dt, p.offsets[kind, b],
                          p.offsets[kind, b + 1])
                for p in self.parcels if p.offsets[kind, b + 1] > p.offsets[kind, b]]

    def loops(self) -> list:
        """Local ids (``id - lo``) of the owner's self-loop tuples, one array per parcel that has any."""
        tier = self.spec.tier
        if tier == "memory":
            return [p.loops - self.lo for p in self.parcels if p.loops.size]
        if tier == "host":
            return [p.loops for p in self.parcels if p.loops.size]
        dt = local_dtype(self.spec.num_vertices)
        return [np.fromfile(disk_path(self.spec.root, self.rank, p.chunk, "loops"), dtype=dt)
                for p in self.parcels if p.loops]

    def done(self, kind: int | str) -> None:
        """``kind``'s entries (or ``"loops"``) are built: the disk tier deletes their files at once, so the
        disk holds at most what is still to be read."""
        if self.spec.tier != "disk":
            return
        for p in self.parcels:
            with contextlib.suppress(FileNotFoundError):
                os.remove(disk_path(self.spec.root, self.rank, p.chunk, kind))

    def close(self) -> None:
        """Remove the owner's folder of the disk tier (empty once every kind is done)."""
        if self.spec.tier == "disk":
            import shutil

            shutil.rmtree(os.path.dirname(disk_path(self.spec.root, self.rank, 0, 0)), ignore_errors=True)

