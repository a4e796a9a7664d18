"""Sizing a preparation to a per-worker memory limit: chunk size, batch size, disk tier, and the smallest
limit that can work.  All sizes are in bytes; counts (tuples, entries, vertices) are plain integers.

A worker's resident memory (RSS, what Dask's nanny compares with ``memory_limit``) during a preparation
is its baseline plus the largest of its phases, which never overlap on one worker (preparation waits
for every chunk before any owner builds, and the store is written, or the search run, after the build):

* **baseline** ``B``: a worker process that has imported distributed, NumPy and Numba and run the
  pipeline's Numba kernels.  Measured on Linux x86-64 (Python 3.11, distributed 2026.7.1, numba 0.68.1):
  an idle worker of a script that imports only distributed holds 77 MiB, one started by the CLI 135 MiB
  (a spawned worker re-imports the parent's main module, and ``breadth.pipeline`` imports Numba);
  importing Numba costs 55 MiB and the first call of a compiled kernel (LLVM's initialisation, even
  from Numba's cache) another 60 MiB, so *any* worker that has run a kernel holds about 195 MiB before
  its first byte of data, whatever it imported beyond (importing only the modules a worker needs saves
  under 1 MiB once the kernels ran; glibc arena and Numba thread settings change nothing).
  :data:`WORKER_BASELINE` is that figure plus Dask's own bookkeeping and the spread between runs (peaks of
  205 and 220 MiB for the same scale-14 run); it is the
  floor of every limit (no limit below about 240 MB can work for any graph) and dominates them below scale 20.
* **chunk phase** ``T * 80 * c``: each of the worker's ``T`` threads runs a chunk task over ``c`` edge
  tuples: the generated int64 tuples (16 B/tuple) and the next chunk queued behind it (16), the
  split into per-owner int64 ``[row, column]`` entries (2 entries per tuple, 32), and one owner's entries
  sorted by row batch as 32-bit pairs (up to 16): :data:`CHUNK_BYTES_PER_TUPLE` = 80.
* **build phase** ``S + 24 * nloc + batch``: the owner's final shard ``S`` (:func:`shard_bytes`: int64
  offsets, 8 B/vertex; columns, 4 B/entry when ids fit in 32 bits; int32 tuple degrees and self-loop
  counts, 4 + 4 B/vertex; directed graphs add the in-edge offsets and columns), the build's per-vertex
  scratch (int64 degrees and row offsets, 24 B/vertex), and one row batch of ``b`` adjacency entries
  (the batch read as 32-bit pairs, 8 B/entry; the builder's int64 scatter array, 8; its 32-bit
  deduplicated columns, 4; per-row counters, 48 B/row): :func:`batch_bytes`.
* **store phase** (``generate``/``ingest``): the shard plus a 1 MiB write block (the store writes arrays in
  slices of their own memory, :mod:`breadth.io.shard_store`).
* **search phase** (``bench``): the shard plus the search's compiled kernels (:data:`SEARCH_CODE_BYTES`)
  and its per-vertex state (:data:`SEARCH_BYTES_PER_VERTEX` per owned vertex and a bitmap of all vertices).

So the minimum limit is::

    minimum = B + max(T * 80 * c_min, S + 24 * nloc + batch_bytes(b_min), S + 1 MiB [store], search [bench])

with ``c_min`` = :data:`MIN_CHUNK_EDGES` and ``b_min`` = :data:`MIN_BATCH_ENTRIES` (smaller chunks and
batches only multiply tasks, files and reads), ``nloc`` = vertices per owner and ``S`` computed with
every adjacency entry counted (``2 m / P`` per owner for ``m`` undirected tuples on ``P`` owners:
duplicates are only known after the build).  Checked against measurements (2 workers of 1 thread,
``benchmarks/bench_memory_limit.py``): scale 18, minimum 260 MB, worker peaks 219-220 MiB at that limit;
scale 20, minimum 326 MB, peaks 275-278 MiB.  Above the minimum, :func:`plan_memory` picks the largest
power-of-two chunk and batch (up to the defaults, 2**22 tuples and 2**25 entries) that keep each phase
under the limit.  The shuffle's storage tier (:func:`choose_tier`, which :func:`~breadth.pipeline.prepare`
calls with the cluster's own ``memory_limit``, so the CLI and the Python API decide alike) is the
cheapest whose estimate fits in :data:`TIER_SAFETY` of the limit: the memory tier (every owner holds its
int64 entries from all chunks, 16 B/entry, and the build's placement and columns, 12 B/entry: 28 B/entry
instead of a batch), the host tier (32-bit pairs, 8 B/entry, held while the owner
builds batch by batch), else the disk tier (pieces in bucket files, a batch at a time in memory).

**The NumPy path** (``generate`` only: :func:`plan_numpy_path`, taken when the limit is below the Numba
path's minimum).  Numba is what makes the baseline: an idle worker holds 77 MiB (51 MiB anonymous, 26 MiB
of mapped files), started by the CLI or by a script that imports only distributed alike (with the ``ucx``
extra installed, whose packages distributed loads at start-up), and importing Numba and running a kernel
adds ~110 MiB.  With ``jit=False`` the generator (:mod:`~breadth.pipeline.sources.kronecker_numpy`), the split and
the build (:mod:`~breadth.pipeline.kernels.build_csr_numpy`) run with NumPy alone, the shuffle takes the disk
tier, and each owner writes its shard to files batch by batch (:mod:`~breadth.pipeline.build.shard_files`),
which the store writer copies from: the shard is never resident.  Measured on 2 workers of 1 thread (RSS
sampled every 50 ms, ``benchmarks/bench_memory_limit.py``): a worker holds 82 MiB once it imported that
path and keeps ~43 KiB of Dask's records per chunk task it ran until the owners are built; scales 18 and
20 peak at 88 and 94-95 MiB per worker under their minimums (97 and 104 MB).  The search still needs
Numba (``bench`` and ``bfs`` plan the Numba path).

``ingest`` first reads its files (:func:`plan_reading`, before anything starts): a read task and the
relabelling of its chunk hold about :data:`READ_BYTES_PER_TEXT_BYTE` bytes per byte of edge text (the
text, the parsed int64 tuples at 16 B per line, for a compressed stream, read whole by one task, their
concatenation, the chunk's sorted ids and its mapped copy), so plain
text is read in byte ranges sized to the limit and the largest compressed stream (its uncompressed size
from the gzip trailer) must fit whole; the parsed chunks then wait in the workers' memory as Dask data,
spilled to Dask's local directory (``--spill-dir``) past what the limit leaves them.  The graph's
size is only known once read; the preparation is planned then, as above.  Parquet files say their tuple
count and row groups (the reader's chunks) in their footers, so a limit below what those tuples need with
a single vertex (:func:`plan_row_group_floor`: the shard's columns, the chunk phase) is refused before
anything is read -- at 2^30 tuples reading and relabeling take minutes.

The clusters that breadth starts with a limit run with Dask's thresholds set by
:func:`dask_memory_config`: the nanny ends a worker only when its RSS exceeds the limit itself, workers
never pause (a paused worker with a task that needs the memory is a hang) and a task whose worker was
ended fails at once (no retry: a retry on a fresh worker needs the same memory, a restart loop).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

MiB = 1 << 20

#: RSS of a worker that has imported distributed, NumPy and Numba and run the pipeline's kernels (bytes)
WORKER_BASELINE = 225 * MiB
#: RSS of a worker of the NumPy path (``jit=False``: no Numba) started by the CLI, having imported what its
#: generation, split, build and store write need (bytes; measured: 77 MiB idle, 51 anonymous + 26 of files,
#: and 4 MiB of imports), plus 2 MiB for the spread between runs; Numba's import and first kernel would add ~110
NUMPY_WORKER_BASELINE = 84 * MiB
#: NumPy path: what a worker keeps of each chunk task it ran until the owners are built (Dask's records of
#: the task, its parcel per owner and its stage record; measured ~43 KiB: 4 MiB more for 96 more tasks)
NUMPY_BYTES_PER_CHUNK_TASK = 64 << 10
#: NumPy path: the store write (its 1 MiB blocks, the hashing, the records; measured 2 MiB)
NUMPY_STORE_BYTES = 2 * MiB
#: bytes per edge tuple of a running chunk task: tuples + the next chunk (16 + 16), split (32), sorted (16)
CHUNK_BYTES_PER_TUPLE = 80
#: NumPy path: bytes per edge tuple of a chunk task: the chunk (16) and the next (16), the split's stacked
#: int32 entries and their owner-sorted copy (16 + 16), its owner ids and order (8 + 16), one owner's
#: batch grouping (local pairs 8, batch ids 4, order 8)
NUMPY_CHUNK_BYTES_PER_TUPLE = 108
#: NumPy path: bytes per adjacency entry of a row batch: read pairs (8), packed keys (8), their unique
#: copy (8), flags (1), columns (4), rounded up
NUMPY_BATCH_BYTES_PER_ENTRY = 32
#: bytes per adjacency entry of a row batch.  The builder holds 14 (read pairs 8, columns 4 deduplicated in
#: place, row numbers within their row block 2; and a copy of the row block it builds); the plan counts 20
#: (pairs 8, placement 8, columns 4), the figure the module docstring's measured minimums were checked with
BATCH_BYTES_PER_ENTRY = 20
#: bytes per row of a row batch: the builder's int64 degree, offset, cursor, unique-count arrays (and copies)
BATCH_BYTES_PER_ROW = 48
#: bytes per owned vertex of the build's scratch: int64 tuple degrees, row offsets and their concatenation
BUILD_BYTES_PER_VERTEX = 24
#: bytes per write of a store file (breadth.io.shard_store writes an array in slices of its own memory)
STORE_WRITE_BUFFER = 1 * MiB
#: bytes per owned vertex of a search (parents, levels, frontier lists, received updates: int64 each)
SEARCH_BYTES_PER_VERTEX = 48
#: the search's own compiled kernels (Numba code loaded into the worker: measured ~10 MiB more than a
#: preparation's peak at scale 18 with the same shard)
SEARCH_CODE_BYTES = 10 * MiB
#: memory tier: bytes per adjacency entry held by an owner, counted as 28 (int64 entries 16, placement 8,
#: columns 4); with int32 entries (ids that fit) placed into the columns by row block (a 16-bit row number
#: each) an owner holds 14
IN_MEMORY_BYTES_PER_ENTRY = 28
#: host tier: bytes per adjacency entry waiting in an owner's memory (32-bit [row - lo, column] pairs)
HOST_TIER_BYTES_PER_ENTRY = 8
#: GPU memory tier: device bytes per adjacency entry of an owner's build at once (its int32 pairs 8,
#: packed 64-bit keys 8, the radix sort's scratch 16, flags and columns 5, rounded up)
GPU_IN_MEMORY_BYTES_PER_ENTRY = 40
#: the tier's estimates must fit in this share of the limit: what the model leaves out (allocator slack,
#: Dask's buffers and transfers, fragmentation) must not end a worker
TIER_SAFETY = 0.8
#: bytes of a worker reading and relabelling per byte of edge text: the text block, the int64 tuples (~1.2
#: at 16 B per ~13-byte line), their concatenation for a whole stream, the sorted copy that finds the
#: chunk's unique ids and the chunk mapped to dense ids (measured: cnr-2000.txt.gz, 43 MB of text, 3.2 M
#: lines, one worker at 392 MiB, 190 MiB above its baseline: 4.6 per byte)
READ_BYTES_PER_TEXT_BYTE = 5
DEFAULT_READ_CHUNK_BYTES = 64 << 20
MIN_READ_CHUNK_BYTES = 1 << 20
MIN_CHUNK_EDGES = 1 << 16
MIN_BATCH_ENTRIES = 1 << 16
DEFAULT_CHUNK_EDGES = 1 << 22
DEFAULT_BATCH_ENTRIES = 1 << 25
DEFAULT_GPU_BATCH_ENTRIES = 1 << 28
#: where an owner's shuffled entries wait, cheapest first (see breadth.pipeline.shuffle.shuffle_tiers)
TIERS = ("memory", "host", "disk")


class MemoryLimitError(ValueError):
    """A memory limit below the minimum that can work (the message names the minimum)."""

    def __init__(self, message: str, minimum: int):
        super().__init__(message)
        self.minimum = minimum


def parse_memory_limit(text: str) -> int:
    """``"100MB"``, ``"1.5GiB"``, ``"200000000"`` -> bytes (``dask.utils.parse_bytes``); ``ValueError``
    with a one-line message for anything else or a value below 1 byte."""
    from dask.utils import parse_bytes

    try:
        if not text.strip():  # parse_bytes reads "" as 1 byte
            raise ValueError(text)
        value = int(parse_bytes(text))
    except (ValueError, TypeError):
        raise ValueError(f"expected a size such as 500MB or 2GiB, got {text!r}") from None
    if value < 1:
        raise ValueError(f"expected a positive size, got {text!r}")
    return value


def format_bytes(n: int) -> str:
    """Bytes as whole decimal megabytes, rounded up (the unit ``--memory-limit`` is usually given in)."""
    return f"{math.ceil(n / 1e6)}MB"


def format_limit(n: int) -> str:
    """A limit the user gave, exactly: in the largest unit that divides it (decimal or binary), else in bytes.

    >>> format_limit(1000), format_limit(1_500_000), format_limit(300 << 20), format_limit(123)
    ('1KB', '1500KB', '300MiB', '123 bytes')
    """
    units = [("TB", 10**12), ("TiB", 1 << 40), ("GB", 10**9), ("GiB", 1 << 30), ("MB", 10**6), ("MiB", 1 << 20),
             ("KB", 10**3), ("KiB", 1 << 10)]
    for name, size in sorted(units, key=lambda u: -u[1]):
        if n and n % size == 0:
            return f"{n // size}{name}"
    return f"{n} bytes"


def _block(num_vertices: int, nparts: int) -> int:
    """Vertices per owner, as :func:`breadth.bfs.shard.block_size` (not imported: it pulls in breadth.bfs)."""
    per = -(-num_vertices // nparts)
    return max(64, -(-per // 64) * 64)


def _column_bytes(num_vertices: int) -> int:
    return 4 if num_vertices <= 2**31 - 1 else 8


def entries_per_owner(num_tuples: int, nparts: int) -> int:
    """Adjacency entries per owner: each tuple is two entries (both ways, or out and in), spread over
    ``nparts`` owners; duplicates and self-loops counted (unknown before the build)."""
    return -(-2 * num_tuples // nparts)


def shard_bytes(num_vertices: int, num_tuples: int, nparts: int, directed: bool = False) -> int:
    """Bytes of one owner's final shard: offsets (8 B per vertex + 8), columns (4 or 8 B per entry),
    int32 tuple degrees and self-loop counts (8 B per vertex); directed graphs split the entries into
    out- and in-columns and add in-offsets (8 B per vertex)."""
    nloc = _block(num_vertices, nparts)
    cols = entries_per_owner(num_tuples, nparts) * _column_bytes(num_vertices)
    offsets = 8 * (nloc + 1) * (2 if directed else 1)
    return offsets + cols + 8 * nloc


def batch_bytes(batch_entries: int, num_tuples: int, num_vertices: int, nparts: int,
                per_entry: int = BATCH_BYTES_PER_ENTRY) -> int:
    """Bytes of one row batch of about ``batch_entries`` adjacency entries (see the module docstring);
    ``per_entry``: the builder's bytes per entry (:data:`NUMPY_BATCH_BYTES_PER_ENTRY` for the NumPy path)."""
    nloc = _block(num_vertices, nparts)
    rows = min(nloc, max(64, nloc * batch_entries // max(1, entries_per_owner(num_tuples, nparts))))
    return per_entry * batch_entries + BATCH_BYTES_PER_ROW * rows


@dataclass(frozen=True)
class TierChoice:
    """Where the shuffle to owners keeps its pieces, and the estimates that chose it (bytes per worker)."""

    tier: str  # "memory", "host" or "disk" (breadth.pipeline.shuffle.shuffle_tiers)
    batch_entries: int  # adjacency entries per row batch of the host and disk tiers
    estimates: dict = field(default_factory=dict)  # estimated peak of each tier: host RSS, and the GPU's
    limit: int | None = None  # bytes per worker compared with (None: no limit known)
    on_device: bool = False  # GPU workers: the host tier's 32-bit pairs would wait in device memory (choose_tier)


def choose_tier(limit: int | None, num_vertices: int, num_tuples: int, nparts: int, workers: int, threads: int,
                directed: bool = False, *, chunk_edges: int | None = None, batch_entries: int | None = None,
                device: str = "cpu", device_memory: int | None = None, resident: int | None = None) -> TierChoice:
    """The cheapest storage tier of the shuffle to owners whose estimated peak fits in
    :data:`TIER_SAFETY` of ``limit`` (bytes per worker; ``None``: no limit, the memory tier), and the row
    batch size of the batched tiers.  :func:`plan_memory` (the CLI) and :func:`~breadth.pipeline.prepare`
    (from the cluster's own ``memory_limit``) both decide here, so they decide alike.

    Per worker, with ``E`` adjacency entries and a shard of ``S`` bytes for each of its owners (``nparts``
    owners on ``workers`` workers), ``nloc`` vertices per owner, a chunk phase of ``threads`` chunk tasks of
    ``chunk_edges`` tuples (:data:`CHUNK_BYTES_PER_TUPLE`) and a batch of ``b`` entries
    (:func:`batch_bytes`), over the worker baseline ``B``:

    * memory: ``max(16 E + chunks, 28 E + 48 nloc)`` (every int64 entry held, then built at once);
    * host: ``max(8 E + chunks, 8 E + S + 24 nloc + batch)`` (32-bit pairs held, built batch by batch);
    * disk: ``max(chunks, S + 24 nloc + batch)`` (pieces on disk): the last resort, whatever it needs.

    On GPU workers (``device="gpu"``, ``device_memory``: bytes of one worker's GPU) the memory tier holds
    the entries in device memory (:data:`GPU_IN_MEMORY_BYTES_PER_ENTRY` per entry, plus the shard), so it is
    compared with the GPU's memory; the host and disk tiers hold their pieces as on the CPU, but the batches
    and the shard are built in device memory: the host holds ``S`` only when a store is written (host:
    ``max(8 E + chunks, S)``; disk: ``max(chunks, S)``).  A Kronecker scale-28 graph on one 141 GB GPU with
    128 GB of host memory thus takes the host tier, where counting the shard in host memory sent it to disk.
    The host tier's pairs wait in device memory instead (``on_device``) where the GPU holds them beside the
    build (``gpu_pairs``: ``8 E`` of pairs, the shard with its degree-ordered copy of the columns, the build's
    scratch and a batch): the chunks then skip their copies to the host and the owners theirs back (at scale
    26 on an 80 GB H100, 6.2 and 2.9 s of a 10 s construction); dask-cuda still moves them to the host past
    its device memory limit.

    ``batch_entries``: kept when given; else the largest power of two up to :data:`DEFAULT_BATCH_ENTRIES`
    (:data:`DEFAULT_GPU_BATCH_ENTRIES` on GPUs) whose build fits the whole limit.  ``resident``: what the
    busiest worker holds already (its RSS now: imports such as pyarrow, an ingest's relabeled chunks and
    id-map part), the baseline when it exceeds :data:`WORKER_BASELINE`.

    >>> choose_tier(None, 1 << 20, 16 << 20, 2, 2, 1).tier
    'memory'
    >>> choose_tier(400_000_000, 1 << 20, 16 << 20, 2, 2, 1).tier
    'disk'
    """
    per_worker = -(-nparts // max(1, workers))  # owners a worker builds (one after the other, or at once)
    E = entries_per_owner(num_tuples, nparts) * per_worker
    S = shard_bytes(num_vertices, num_tuples, nparts, directed) * per_worker
    nloc = _block(num_vertices, nparts) * per_worker
    chunks = threads * CHUNK_BYTES_PER_TUPLE * min(chunk_edges or DEFAULT_CHUNK_EDGES, max(1, num_tuples))
    B = max(WORKER_BASELINE, resident or 0)

    def build(b: int) -> int:
        return S + BUILD_BYTES_PER_VERTEX * nloc + batch_bytes(b, num_tuples, num_vertices, nparts)

    top = DEFAULT_GPU_BATCH_ENTRIES if device == "gpu" else DEFAULT_BATCH_ENTRIES
    b = batch_entries or (top if limit is None else
                          _largest_pow2(MIN_BATCH_ENTRIES, top, lambda v: B + build(v) <= limit)
                          or MIN_BATCH_ENTRIES)
    gpu = device == "gpu"  # the shard and its batches are built in device memory; the host sees the shard
    estimates = {          # only when a store is written, after the batches are gone
        "memory": B + (chunks if gpu else
                       max(16 * E + chunks, IN_MEMORY_BYTES_PER_ENTRY * E + BATCH_BYTES_PER_ROW * nloc)),
        "host": B + max(HOST_TIER_BYTES_PER_ENTRY * E + chunks,
                        S if gpu else HOST_TIER_BYTES_PER_ENTRY * E + build(b)),
        "disk": B + max(chunks, S if gpu else build(b)),
    }
    fits = {t: limit is None or v <= TIER_SAFETY * limit for t, v in estimates.items()}
    on_device = False
    if device == "gpu":
        estimates["gpu_memory"] = GPU_IN_MEMORY_BYTES_PER_ENTRY * E + S
        estimates["gpu_pairs"] = (HOST_TIER_BYTES_PER_ENTRY * E + build(b)
                                  + _column_bytes(num_vertices) * E)  # the bottom-up order's columns
        fits["memory"] = fits["memory"] and (device_memory is None
                                             or estimates["gpu_memory"] <= TIER_SAFETY * device_memory)
        on_device = device_memory is None or estimates["gpu_pairs"] <= TIER_SAFETY * device_memory
    tier = next((t for t in TIERS[:-1] if fits[t]), "disk")
    return TierChoice(tier=tier, batch_entries=int(b), estimates=estimates, limit=limit, on_device=on_device)


@dataclass(frozen=True)
class MemoryPlan:
    """How a preparation fits a per-worker memory limit (bytes)."""

    limit: int  # bytes per worker
    minimum: int  # the smallest limit that can work for this graph and cluster (bytes)
    chunk_edges: int  # edge tuples per chunk
    batch_entries: int  # adjacency entries per row batch (host and disk tiers)
    tier: str  # where the shuffle to owners keeps its pieces: "memory", "host" or "disk" (choose_tier)
    phases: dict = field(default_factory=dict)  # estimated peak RSS of each phase at these sizes (bytes)
    jit: bool = True  # False: the NumPy path (no Numba in the workers, shards built to files)

    @property
    def spill(self) -> bool:
        """Whether the shuffle writes its pieces to disk (the disk tier)."""
        return self.tier == "disk"

    def describe(self) -> str:
        """One line for the log."""
        path = {"disk": "disk tier (spill files, row batches)", "host": "host tier (row batches in memory)",
                "memory": "memory tier (built at once)"}[self.tier]
        if not self.jit:
            path += ", NumPy kernels (no Numba in the workers), shards built to files"
        peaks = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.phases.items())
        return (f"memory plan: limit {format_limit(self.limit)} per worker (minimum {format_bytes(self.minimum)}); "
                f"chunks of {self.chunk_edges:,} tuples, {path}, batches of {self.batch_entries:,} entries; "
                f"estimated peaks: {peaks}")


def _largest_pow2(lo: int, hi: int, fits) -> int | None:
    """The largest power of two in ``[lo, hi]`` (``hi`` itself when it fits) for which ``fits`` holds."""
    if fits(hi):
        return hi
    v = 1 << (max(hi, 1).bit_length() - 1)
    while v >= lo:
        if fits(v):
            return v
        v >>= 1
    return None


def plan_memory(limit: int, num_vertices: int, num_tuples: int, workers: int, threads: int,
                directed: bool = False, chunk_edges: int | None = None, search: bool = False,
                store: bool = False, what: str = "",
                source_chunks_held: bool = False, resident: int | None = None,
                numpy_path: bool = False) -> MemoryPlan:
    """Size a preparation on ``workers`` workers of ``threads`` threads to ``limit`` bytes per worker.

    ``chunk_edges``: the user's chunk size (kept; refused when it cannot fit), ``None`` to derive it from
    the limit.  ``search``: a Graph500 search follows on the same workers (``bench``); ``store``: the
    shards are written to a store (``generate``, ``ingest``).  ``what`` names the graph in the
    message (e.g. ``"scale 18"``).  ``source_chunks_held``: the edge chunks are already in the workers'
    memory (``ingest``'s parsed chunks, counted by :func:`plan_reading`), so a chunk task does not hold a
    freshly generated chunk and the next one (16 B per tuple less); ``chunk_edges`` is then the
    reader's largest chunk.  ``resident``: the RSS the busiest worker holds already (an ingest's
    relabeled chunks and id-map part, its readers' imports), the baseline when above
    :data:`WORKER_BASELINE` (see :func:`choose_tier`).  ``numpy_path``: the command can run the NumPy path
    (``generate``: a generated source, shards built to files and written to a store), taken when
    ``limit`` is below the Numba path's minimum (:func:`plan_numpy_path`); the minimum is then that
    path's.

    Raises :class:`MemoryLimitError` (its message gives the minimum, see the module docstring) when
    ``limit`` is below it.
    """
    numpy_path = numpy_path and store and not search
    try:
        plan = _plan_numba_path(limit, num_vertices, num_tuples, workers, threads, directed, chunk_edges, search,
                                store, what, source_chunks_held, resident)
    except MemoryLimitError:
        if not numpy_path:
            raise
        return plan_numpy_path(limit, num_vertices, num_tuples, workers, threads, directed, chunk_edges, what,
                               resident)
    if numpy_path:  # the smallest limit that works is the NumPy path's
        floor = plan_numpy_path(10**18, num_vertices, num_tuples, workers, threads, directed, chunk_edges, what,
                                resident).minimum
        plan = replace(plan, minimum=min(plan.minimum, floor))
    return plan


def plan_numpy_path(limit: int, num_vertices: int, num_tuples: int, workers: int, threads: int,
                    directed: bool = False, chunk_edges: int | None = None, what: str = "",
                    resident: int | None = None) -> MemoryPlan:
    """Size the NumPy path (``jit=False``: generation, split and build without Numba; the disk tier;
    shards built to files, see :func:`~breadth.pipeline.prepare`) to ``limit`` bytes per worker.

    Nothing of the graph stays resident: over the baseline :data:`NUMPY_WORKER_BASELINE` and Dask's
    records of the chunk tasks it ran (:data:`NUMPY_BYTES_PER_CHUNK_TASK` each, ``K`` tasks), a worker
    holds ``threads`` chunk tasks (:data:`NUMPY_CHUNK_BYTES_PER_TUPLE` per tuple), or one row batch
    (:data:`NUMPY_BATCH_BYTES_PER_ENTRY` per entry and :data:`BATCH_BYTES_PER_ROW` per row), or the store
    write, so::

        minimum = B + max(64 KiB * K + max(T * 108 * c, batch_bytes(b_min)), 2 MiB)

    at the chunk size ``c`` (a power of two from :data:`MIN_CHUNK_EDGES` to :data:`DEFAULT_CHUNK_EDGES`, or
    ``--chunk-edges``; ``K`` tasks of ``c`` tuples per worker) where it is smallest; the plan takes the
    largest chunk that fits.  Not counted: the owner's self-loop ids, 8 B per self-loop tuple while its
    loop counts are written (a Kronecker graph has about one in 5,000 tuples).

    Raises :class:`MemoryLimitError` below it."""
    nparts = workers
    B = max(NUMPY_WORKER_BASELINE, resident or 0)

    def held(c: int) -> int:  # what the worker keeps of its chunk tasks until the build
        return NUMPY_BYTES_PER_CHUNK_TASK * -(-max(1, num_tuples) // c // max(1, workers))

    def chunk_phase(c: int) -> int:
        return held(c) + threads * NUMPY_CHUNK_BYTES_PER_TUPLE * c

    def build_phase(c: int, b: int) -> int:
        return held(c) + batch_bytes(b, num_tuples, num_vertices, nparts, NUMPY_BATCH_BYTES_PER_ENTRY)

    def phases_at(c: int) -> dict:  # each phase at chunks of c tuples and the smallest batch, named
        tasks = f"records of {-(-max(1, num_tuples) // c // max(1, workers)):,} chunk tasks ~{format_bytes(held(c))}"
        return {f"{tasks} + chunk ~{format_bytes(chunk_phase(c) - held(c))}": chunk_phase(c),
                f"{tasks} + row batch ~{format_bytes(build_phase(c, MIN_BATCH_ENTRIES) - held(c))}":
                    build_phase(c, MIN_BATCH_ENTRIES),
                "write": NUMPY_STORE_BYTES}

    # more, smaller chunks trade the chunk phase for Dask's records: the minimum is at the best chunk size
    sizes = ([min(chunk_edges, max(1, num_tuples))] if chunk_edges else
             [min(1 << k, max(1, num_tuples)) for k in range(MIN_CHUNK_EDGES.bit_length() - 1,
                                                              DEFAULT_CHUNK_EDGES.bit_length())])
    c_min = min(sizes, key=lambda c: max(phases_at(c).values()))
    smallest = phases_at(c_min)
    minimum = _minimum_or_refuse(
        limit, B, smallest, what, workers, f" with --chunk-edges {chunk_edges}" if chunk_edges else "",
        " without Numba",
        lambda largest: ((" or lower --chunk-edges" if "+ chunk" in largest else " or raise --chunk-edges")
                         if chunk_edges else " or add --workers"))
    room = limit - B
    c = max((v for v in sizes if max(phases_at(v).values()) <= room), default=c_min)
    b = _largest_pow2(MIN_BATCH_ENTRIES, DEFAULT_BATCH_ENTRIES, lambda v: build_phase(c, v) <= room)
    phases = {"chunk": B + chunk_phase(c), "build": B + build_phase(c, b), "store": B + NUMPY_STORE_BYTES}
    return MemoryPlan(limit=limit, minimum=minimum, chunk_edges=c, batch_entries=b, tier="disk", phases=phases,
                      jit=False)


def _minimum_or_refuse(limit: int, baseline: int, smallest: dict[str, int], what: str, workers: int,
                       chunk: str, path: str, hint) -> int:
    """The smallest working limit: the worker ``baseline`` plus the largest of the phases at their smallest
    (``smallest``: bytes by a name the message shows).  A ``limit`` below it raises
    :class:`MemoryLimitError` naming that phase, ``chunk`` (the chunks, where the caller set them),
    ``path`` (how the baseline is reached) and ``hint(name)`` (what to change)."""
    largest = max(smallest, key=smallest.get)
    minimum = baseline + smallest[largest]
    if limit < minimum:
        graph = f" for {what}" if what else ""
        raise MemoryLimitError(
            f"--memory-limit {format_limit(limit)} is below the minimum of {format_bytes(minimum)}{graph} on "
            f"{workers} worker(s){chunk} (worker baseline{path} ~{format_bytes(baseline)} + {largest}); raise it"
            + hint(largest), minimum)
    return minimum


def _plan_numba_path(limit: int, num_vertices: int, num_tuples: int, workers: int, threads: int, directed: bool,
                     chunk_edges: int | None, search: bool, store: bool, what: str, source_chunks_held: bool,
                     resident: int | None) -> MemoryPlan:
    """:func:`plan_memory` for the Numba path (shards held in memory)."""
    nparts = workers
    nloc = _block(num_vertices, nparts)
    S = shard_bytes(num_vertices, num_tuples, nparts, directed)
    B = max(WORKER_BASELINE, resident or 0)
    after = [S + STORE_WRITE_BUFFER] if store else []
    if search:
        after.append(S + SEARCH_CODE_BYTES + SEARCH_BYTES_PER_VERTEX * nloc + num_vertices // 4)

    per_tuple = CHUNK_BYTES_PER_TUPLE - (16 if source_chunks_held else 0)

    def chunk_phase(c: int) -> int:
        return threads * per_tuple * c

    def build_phase(b: int) -> int:
        return S + BUILD_BYTES_PER_VERTEX * nloc + batch_bytes(b, num_tuples, num_vertices, nparts)

    c_min = min(chunk_edges or MIN_CHUNK_EDGES, max(1, num_tuples))
    shard = f"shard ~{format_bytes(S)}"
    # each phase at its smallest, named for the message: the largest one sets the minimum
    smallest = {f"chunk ~{format_bytes(chunk_phase(c_min))}": chunk_phase(c_min),
                f"{shard} + build": build_phase(MIN_BATCH_ENTRIES)}
    if store:
        smallest[f"{shard} + write"] = after[0]
    if search:
        smallest[f"{shard} + search"] = after[-1]
    # an ingest's chunks are as read (Parquet row groups, text byte ranges), not --chunk-edges
    chunk = ("" if not chunk_edges else f" with chunks of up to {chunk_edges:,} tuples as read" if source_chunks_held
             else f" with --chunk-edges {chunk_edges}")
    fewer = " or write the input in smaller row groups" if source_chunks_held else " or lower --chunk-edges"
    minimum = _minimum_or_refuse(
        limit, B, smallest, what, workers, chunk, "",
        lambda largest: (fewer if chunk_edges and largest.startswith("chunk") else " or add --workers"))
    room = limit - B
    c = chunk_edges or _largest_pow2(MIN_CHUNK_EDGES, DEFAULT_CHUNK_EDGES, lambda v: chunk_phase(v) <= room)
    b = _largest_pow2(MIN_BATCH_ENTRIES, DEFAULT_BATCH_ENTRIES, lambda v: build_phase(v) <= room)
    c = min(c, max(1, num_tuples))
    # the tier as prepare() chooses it from the cluster's memory_limit: the same function, the same numbers
    choice = choose_tier(limit, num_vertices, num_tuples, nparts, workers, threads, directed, chunk_edges=c,
                         batch_entries=b, resident=resident)
    phases = {"chunk": B + chunk_phase(c),
              "build": choice.estimates[choice.tier] if choice.tier != "disk" else B + build_phase(b)}
    if store:
        phases["store"] = B + S + STORE_WRITE_BUFFER
    if search:
        phases["search"] = B + after[-1]
    return MemoryPlan(limit=limit, minimum=minimum, chunk_edges=c, batch_entries=b, tier=choice.tier,
                      phases=phases)


@dataclass(frozen=True)
class ReadPlan:
    """How ``ingest`` reads its files under a per-worker memory limit (bytes)."""

    chunk_bytes: int  # bytes of plain text per read task
    minimum: int  # the smallest limit that can read these files (bytes)
    task_bytes: int  # estimated peak of one worker's read tasks at this chunk size (bytes)
    managed_target: float  # Dask's ``target`` fraction: parsed chunks past it go to disk


def text_bytes(path: str) -> tuple[int, bool]:
    """``(bytes of edge text, compressed)`` of one input file: a gzip file's uncompressed size from its
    trailer (ISIZE, exact below 4 GiB per member), any other file's own size."""
    import os

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b" or size < 18:
            return size, False
        f.seek(-4, os.SEEK_END)
        isize = int.from_bytes(f.read(4), "little")
    # ISIZE is the size mod 2**32: a stream that compresses better than 1:1 is at least its file size
    while isize < size:
        isize += 1 << 32
    return isize, True


def plan_reading(limit: int, paths: list[str], workers: int, threads: int, *, directed: bool = False,
                 format: str = "auto", count_row_groups: bool = False) -> ReadPlan:
    """Size ``ingest``'s reading to ``limit`` bytes per worker (see the module docstring).  Inputs of a format
    read by row group (Parquet, :attr:`~breadth.io.formats.InputFormat.text` false) are not counted; the
    others are text, read in byte ranges.  Raises :class:`MemoryLimitError` below the minimum: the
    baseline plus ``threads`` read tasks of the largest compressed stream (read whole) or of
    :data:`MIN_READ_CHUNK_BYTES` of plain text, or an empty graph's stored shard.  ``format``: the inputs'
    (default: each file's :func:`~breadth.io.formats.detect_format`).  ``count_row_groups``: also below
    :func:`plan_row_group_floor` of the row-grouped inputs (``workers`` is then the cluster's, as for the
    plan made after reading; ``directed`` as the graph is read)."""
    from breadth.io.formats import FORMATS, detect_format
    from breadth.io.paths import expand_paths

    files, grouped = [], {}
    for f in expand_paths(paths):
        name = detect_format(f) if format == "auto" else format
        if FORMATS[name].text:
            files.append(f)
        else:
            grouped.setdefault(name, []).append(f)
    for name, group in grouped.items() if count_row_groups else ():
        plan_row_group_floor(limit, group, workers, threads, directed, format=name)
    sizes = [text_bytes(f) for f in files]
    stream = max([b for b, gz in sizes if gz] or [0])
    plain = max([b for b, gz in sizes if not gz] or [0])

    def task(c: int) -> int:
        return threads * READ_BYTES_PER_TEXT_BYTE * max(stream, min(c, plain))

    floor = plan_memory(10**15, 1, 0, workers, threads, store=True).minimum
    minimum = max(floor, WORKER_BASELINE + task(MIN_READ_CHUNK_BYTES))
    if limit < minimum:
        why = (f"a compressed input of {format_bytes(stream)} is parsed whole by one task" if stream
               else "worker baseline + a read task")
        raise MemoryLimitError(f"--memory-limit {format_limit(limit)} is below the minimum of "
                               f"{format_bytes(minimum)} for reading these files on {workers} worker(s) "
                               f"({why}); raise it", minimum)
    room = limit - WORKER_BASELINE
    c = _largest_pow2(MIN_READ_CHUNK_BYTES, DEFAULT_READ_CHUNK_BYTES, lambda v: task(v) <= room)
    target = min(0.6, max(0.05, (room - task(c)) / limit))
    return ReadPlan(chunk_bytes=c, minimum=minimum, task_bytes=task(c), managed_target=target)


def plan_row_group_floor(limit: int, paths: list[str], workers: int, threads: int, directed: bool = False,
                         format: str = "parquet") -> int:
    """The least that preparing these files of a row-grouped ``format`` (Parquet) can need per worker, from
    their footers alone (the format's :attr:`~breadth.io.formats.InputFormat.row_groups`): the Numba path's
    minimum (:func:`plan_memory`, for a store) for their tuples, with chunks of their largest row group,
    counted as if they had a single vertex -- the vertex count (known once the ids are relabeled) and what
    the workers hold after reading only add to it.  Raises :class:`MemoryLimitError` where ``limit`` is below
    it, so that ``ingest`` refuses before reading instead of after.

    >>> format_bytes(plan_row_group_floor(10**12, ["crawl/"], 2, 1))  # 2^26 tuples, groups of 2^20  # doctest: +SKIP
    '506MB'
    """
    from breadth.bfs.lazy_exports import resolve
    from breadth.io.formats import FORMATS

    fmt = FORMATS[format]
    sizes = resolve(fmt.row_groups)(paths)
    tuples = sum(sizes)
    if not tuples:
        return 0
    return plan_memory(limit, 1, tuples, workers, threads, directed, chunk_edges=max(sizes), store=True,
                       what=f"{tuples:,} tuples (from the {fmt.title} footers; their vertices add more)",
                       source_chunks_held=True).minimum


def dask_memory_config(managed_target: float | None = None) -> dict:
    """Dask settings for a local cluster whose workers have a memory limit sized by :func:`plan_memory`:
    the nanny ends a worker only past the limit itself (not at 95 %), no pausing (a paused worker waits
    for memory that its running task holds: a hang), no spilling of task outputs triggered by process
    memory (the memory is breadth's arrays, not Dask's data), and a task whose worker died fails at once
    instead of being retried on a restarted worker that needs the same memory (a restart loop).
    ``managed_target``: the fraction of the limit past which Dask moves task outputs to its local
    directory (default: Dask's, 0.6; ``ingest`` sets what its reading leaves, see :func:`plan_reading`)."""
    extra = {} if managed_target is None else {"distributed.worker.memory.target": managed_target}
    return {
        **extra,
        "distributed.worker.memory.terminate": 1.0,
        "distributed.worker.memory.pause": False,
        "distributed.worker.memory.spill": False,
        "distributed.scheduler.allowed-failures": 0,
    }
