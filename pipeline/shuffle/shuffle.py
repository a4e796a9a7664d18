"""The shuffle to owners: chunks send per-owner pieces, owners consume theirs; one mechanism, three tiers.

Every preparation (``generate``, ``ingest``, :func:`~breadth.pipeline.from_dask_dataframe`,
:func:`~breadth.pipeline.from_dask_array`, all through :func:`~breadth.pipeline.prepare`) moves each
adjacency entry of its edge chunks to the owner of its row in one shuffle:

1. :func:`choose_tier` picks where the pieces wait from the cluster's own ``memory_limit`` per worker (a
   worker without one: its host's memory shared among the workers there) and the graph's size
   (:func:`breadth.pipeline.shuffle.memory_plan.choose_tier`, the same decision the CLI logs): in the workers'
   memory as Dask task outputs (``"memory"``), grouped by row batch as 32-bit pairs in host memory
   (``"host"``), or in per-owner bucket files (``"disk"``) under a folder of this run
   (:func:`spill_space`: in ``spill_dir``, or a temporary directory, removed afterwards and also when the
   run fails or is interrupted).  :class:`~breadth.pipeline.prepare_config.PrepareConfig`'s ``tier``
   (the setting :data:`TIER_CONFIG`, ``"auto"`` by default) forces a tier, for benchmarks and tests.
2. :func:`send` runs one task per chunk (:func:`~breadth.pipeline.shuffle.shuffle_tiers.send_chunk`), waits for
   all of them (owners need a piece from every chunk anyway; waiting times the phase) and returns each
   owner's parcel futures.
3. :func:`consume` runs one task per owner, pinned to its worker, that reads its parcels one row batch
   at a time (:func:`~breadth.pipeline.build.build_owner.build_owner` for shards).

The id shuffle of relabeling has the same shape with whole 1-D pieces instead of row batches:
:func:`exchange` runs a user function per chunk that cuts its ids into per-owner pieces, stores them in
the tier, and returns an :class:`OwnerPieces` whose :meth:`~OwnerPieces.reduce` merges owner ``p``'s
pieces in a tree on ``p``'s worker and whose :meth:`~OwnerPieces.piece` gives chunk ``c``'s piece for
``p`` back (for lookups); :func:`id_tier` picks its tier from the same memory limit.  Hash relabeling
(:mod:`breadth.pipeline.relabel.hash_relabel`) moves its ids through it.

>>> from breadth.pipeline.shuffle.shuffle import choose_tier
>>> choice = choose_tier(client, num_vertices=1 << 16, num_tuples=1 << 20, nparts=2)   # doctest: +SKIP
>>> choice.tier                                                                         # doctest: +SKIP
'memory'
"""

from __future__ import annotations

import contextlib
import operator
import os
import shutil
import tempfile
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from breadth.io.npy_lock import load_npy

from breadth.bfs.device_memory import device_memory_limit
from .memory_plan import TIERS, TierChoice
from .memory_plan import choose_tier as _choose_tier
from .shuffle_tiers import ShuffleSpec, run_folder, send_chunk

#: breadth's setting that forces the shuffle's tier (:attr:`PrepareConfig.tier
#: <breadth.pipeline.prepare_config.PrepareConfig>`): "auto" (default: from the memory limit), "memory", "host" or
#: "disk".  ``dask.config.set({"breadth.shuffle.tier": "disk"})``
TIER_CONFIG = "breadth.shuffle.tier"


# ---------------------------------------------------------------- the tier, from the cluster


@dataclass(frozen=True)
class ClusterMemory:
    """What the cluster's workers may hold: the smallest ``memory_limit`` (bytes per worker), the
    workers, the most threads of one worker, the largest RSS of a worker now (bytes: what it holds
    already), and the smallest GPU's memory (bytes; GPU workers only)."""

    limit: int | None
    workers: int
    threads: int
    resident: int | None = None
    device_memory: int | None = None


def _host_memory() -> tuple[str, int]:
    import socket

    import psutil

    return socket.gethostname(), int(psutil.virtual_memory().total)


def malloc_trim() -> bool:
    """Hand the C heap's free memory back to the kernel (glibc's ``malloc_trim(0)``: the free pages in the
    middle of every arena too, not only the top); ``False`` where the C library has no such call."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    trim(0)
    return True


def _rss(trim: bool = False) -> int:
    """This process's RSS (bytes); with ``trim``, after :func:`malloc_trim`."""
    import psutil

    if trim:
        malloc_trim()
    return int(psutil.Process().memory_info().rss)


def _gpu_memory(dask_worker=None) -> int:
    """This worker's GPU memory (bytes): the device's, or less where the worker was given a device
    memory limit (dask-cuda's ``device_memory_limit``, past which it moves task outputs to the host).
    ``client.run`` passes ``dask_worker``."""
    import cupy as cp

    total = int(cp.cuda.runtime.memGetInfo()[1])
    limit = device_memory_limit(dask_worker.data) if dask_worker is not None else None
    return min(total, limit) if limit else total


def cluster_memory(client, device: str = "cpu", trim: bool = False) -> ClusterMemory:
    """:class:`ClusterMemory` of ``client``'s workers, read from the scheduler (``memory_limit``,
    ``nthreads``) and from the workers (their RSS now; the last heartbeat's when one does not answer).  A
    worker without a limit (0 or None: Dask never ends it) counts as its host's memory divided among the
    workers on that host.

    ``trim``: each worker first hands its C heap's free memory back (:func:`malloc_trim`), so that their RSS
    is what they hold rather than what earlier tasks freed (after relabeling 2^30 tuples, trimming takes
    69 ms and lowers two workers' RSS by about a third); a plan that counts the untrimmed figure asks for a
    larger minimum by chance.  Memory handed back is faulted in again when used, so only a plan under a memory
    limit asks for it."""
    from breadth.bfs.dask_workers import workers_info

    info = workers_info(client)
    if not info:
        return ClusterMemory(None, 0, 1)
    limits = {a: int(w.get("memory_limit") or 0) for a, w in info.items()}
    if not all(limits.values()):
        hosts = client.run(_host_memory, workers=[a for a, v in limits.items() if not v])
        per_host: dict[str, int] = {}
        for a in info:
            h = hosts.get(a, (None,))[0]
            per_host[h] = per_host.get(h, 0) + 1
        for a, (h, total) in hosts.items():
            limits[a] = total // per_host[h]
    device_memory = None
    if device == "gpu":  # imported on the workers only: the client may have no GPU
        device_memory = min(client.run(_gpu_memory).values())
    try:
        resident = max(client.run(_rss, trim).values(), default=None)
    except (OSError, TimeoutError):
        # a worker too busy to answer (one that spilled tens of GB at 2^30 tuples did not within Dask's
        # connect timeout): the RSS its last heartbeat told the scheduler, a second old at most
        beats = [w.get("metrics", {}).get("memory") for w in workers_info(client).values()]
        resident = max((b for b in beats if b is not None), default=None)
    return ClusterMemory(min(limits.values()), len(info), max(int(w.get("nthreads", 1)) for w in info.values()),
                         resident, device_memory)


def forced_tier(tier: str | None = None) -> str | None:
    """The tier that ``tier`` forces (default: the setting :data:`TIER_CONFIG`, read by
    :meth:`~breadth.pipeline.prepare_config.PrepareConfig.from_config`), or ``None`` for ``"auto"``."""
    if tier is None:
        from ..prepare_config import PrepareConfig

        tier = PrepareConfig.from_config().tier
    if tier == "auto":
        return None
    if tier not in TIERS:
        raise ValueError(f"tier must be 'auto' or one of {TIERS}, got {tier!r}")
    return tier


def choose_tier(client, num_vertices: int, num_tuples: int, nparts: int, directed: bool = False,
                device: str = "cpu", chunk_edges: int | None = None,
                batch_entries: int | None = None, tier: str | None = None) -> TierChoice:
    """The shuffle's tier and row batch size for this graph on ``client``'s workers
    (:func:`breadth.pipeline.shuffle.memory_plan.choose_tier` with :func:`cluster_memory`), unless ``tier`` forces
    one (``"auto"``: none; default the setting :data:`TIER_CONFIG`)."""
    mem = cluster_memory(client, device)
    choice = _choose_tier(mem.limit, num_vertices, num_tuples, nparts, max(1, mem.workers), mem.threads,
                          directed, chunk_edges=chunk_edges, batch_entries=batch_entries, device=device,
                          device_memory=mem.device_memory, resident=mem.resident)
    forced = forced_tier(tier)
    if forced is not None:
        choice = TierChoice(forced, choice.batch_entries, {**choice.estimates, "forced": forced}, choice.limit,
                            choice.on_device)
    return choice


#: bytes per tuple a worker holds on the id shuffle's memory tier: its chunks' pieces (at most two distinct
#: 64-bit ids a tuple) and what the chunks keep meanwhile (32-bit codes, at most two 32-bit order entries)
ID_MEMORY_BYTES_PER_TUPLE = 16 + 16


def id_tier(client, num_tuples: int) -> str:
    """The id shuffle's tier (:func:`exchange`) for ``num_tuples`` tuples on ``client``'s workers: the
    memory tier when a worker's share of the pieces and of what the chunks keep
    (:data:`ID_MEMORY_BYTES_PER_TUPLE`) fits in :data:`~breadth.pipeline.shuffle.memory_plan.TIER_SAFETY` of its
    memory limit over what it holds already (as :func:`choose_tier` counts them), else the disk tier;
    :data:`TIER_CONFIG` forces one (``"host"`` keeps the pieces as task outputs, as ``"memory"`` does)."""
    from .memory_plan import TIER_SAFETY, WORKER_BASELINE

    forced = forced_tier()
    if forced is not None:
        return forced
    mem = cluster_memory(client)
    if mem.limit is None:
        return "memory"
    held = ID_MEMORY_BYTES_PER_TUPLE * num_tuples // max(1, mem.workers)
    return "memory" if max(WORKER_BASELINE, mem.resident or 0) + held <= TIER_SAFETY * mem.limit else "disk"


def batch_rows(num_tuples: int, nparts: int, block: int, batch_entries: int) -> int:
    """Rows per batch so that a batch holds about ``batch_entries`` adjacency entries (each tuple is two
    entries, spread over ``nparts`` owners), at least 64 rows and at most an owner's block."""
    entries_per_owner = max(1, 2 * num_tuples // nparts)
    return int(max(64, min(block, block * batch_entries // entries_per_owner)))


# ---------------------------------------------------------------- the disk tier's folder


@dataclass
class SpillSpace:
    """This run's folder of the disk tier (``None`` for the other tiers) and the futures to cancel if
    the run fails before the folder is removed."""

    root: str | None
    futures: list = field(default_factory=list)


@contextlib.contextmanager
def spill_space(client, tier: str, spill_dir: str | None) -> Iterator[SpillSpace]:
    """A folder of this run alone for the disk tier: ``spill_dir/breadth-spill-<token>``, or a temporary
    directory when ``spill_dir`` is ``None``; nothing for the other tiers.  Removed on the way out, also
    when the run fails or is interrupted (its tasks cancelled first), with ``spill_dir`` itself when this
    run made it and it is empty again."""
    if tier != "disk":
        yield SpillSpace(None)
        return
    if spill_dir is None:
        made = tempfile.mkdtemp(prefix="breadth-spill-")
        root = os.path.join(made, "run")
    else:
        made = None if os.path.isdir(spill_dir) else os.path.abspath(spill_dir)
        root = os.path.join(spill_dir, f"breadth-spill-{uuid.uuid4().hex[:8]}")
    os.makedirs(root)
    space = SpillSpace(root)
    try:
        yield space
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(space.futures, force=True)
        _remove(root, made if spill_dir is None else None)
        if made is not None and spill_dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(made)
        raise
    _remove(root, made if spill_dir is None else None)


def _remove(root: str, temporary: str | None) -> None:
    """Remove ``root`` until it stays gone.  A chunk task already running when the run failed cannot be
    stopped and may still write a bucket file; it never creates its owner's folder's parent again
    (its tasks make folders with :func:`~breadth.pipeline.shuffle.shuffle_tiers.run_folder`, never ``makedirs``)."""
    for _ in range(100):
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.lexists(root):
            break
        time.sleep(0.05)
    if temporary is not None:
        shutil.rmtree(temporary, ignore_errors=True)


class LastingFolder:
    """A folder of files that tasks of a lazy graph read after the run that wrote them: removed when the
    last graph that refers to this object is dropped (or at exit).  Pickled into a task, it is the path
    (``str``): the folder's life is the client's graph's, not a worker's copy's.

    >>> folder = LastingFolder.make(spill_dir)                            # doctest: +SKIP
    >>> part = dask.delayed(load)(folder, "chunk-0.npy")                  # doctest: +SKIP
    """

    def __init__(self, path: str):
        self.path = path
        self._gone = weakref.finalize(self, shutil.rmtree, path, True)

    @classmethod
    def make(cls, spill_dir: str | None, prefix: str = "breadth-chunks-") -> "LastingFolder":
        """A new folder in ``spill_dir`` (default: the system's temporary directory)."""
        if spill_dir is not None:
            os.makedirs(spill_dir, exist_ok=True)
        return cls(tempfile.mkdtemp(prefix=prefix, dir=spill_dir))

    def remove(self) -> None:
        """Remove the folder now (a run that failed: no graph will read its files)."""
        self._gone()

    def __reduce__(self):
        return str, (self.path,)


def save_npy(path: str, a: np.ndarray) -> None:
    """``a`` as ``path`` (``.npy``), written under a temporary name and renamed."""
    tmp = path[:-len(".npy")] + ".tmp.npy"
    np.save(tmp, a)
    os.replace(tmp, path)


# ---------------------------------------------------------------- edges: send, then consume


@dataclass
class Sent:
    """The futures of a shuffle's chunk phase: ``parcels[r]`` owner ``r``'s parcel from every chunk (in
    chunk order), ``stages`` every chunk task's stage record, ``keys`` every key of the shuffle's tasks."""

    parcels: list[list]
    stages: list
    keys: set


def _parcel(sent: tuple, owner: int):
    """Owner ``owner``'s parcel from a :func:`~breadth.pipeline.shuffle.shuffle_tiers.send_chunk` output."""
    return sent[0][owner]


def send(client, chunks: list, spec: ShuffleSpec, futures: list | None = None,
         progress: Callable | None = None, stages: bool = False, release: bool = False) -> Sent:
    """Run one :func:`~breadth.pipeline.shuffle.shuffle_tiers.send_chunk` task per edge chunk (Dask delayed
    objects or futures of ``(k, 2)`` arrays) and wait for all of them.  The futures are also added to
    ``futures`` (a failed run cancels them); ``progress(futures)`` draws a progress bar.  ``stages``: also
    bring back each chunk task's stage record (``Sent.stages``; empty otherwise).  ``release``: ``chunks``
    is emptied once the tasks are submitted, so that a chunk that is a future nobody else holds is freed as
    soon as it is sent rather than when the last one is; lazy chunks (recipes, which hold no data) are kept
    until every send has run, since their graphs may own what the tasks read (a
    :class:`LastingFolder`'s files)."""
    import dask
    from distributed import wait

    split = [dask.delayed(send_chunk, pure=False)(c, i, spec) for i, c in enumerate(chunks)]
    # one small task per parcel, next to its chunk (only its owner fetches it); the stage records come
    # back apart, and only when asked for: every task costs the scheduler and a worker about a millisecond
    records = [dask.delayed(operator.getitem, pure=True)(s, 1) for s in split] if stages else []
    futs = client.compute(records + [dask.delayed(_parcel, pure=True)(s, r)
                                     for r in range(spec.nparts) for s in split])
    records, flat = futs[:len(records)], futs[len(records):]
    keys = {f.key for f in futs} | {d.key for d in split}
    nchunks = len(split)
    lazy = chunks
    if release:
        from distributed import Future

        lazy = [c for c in chunks if not isinstance(c, Future)]
        chunks.clear()
        del split  # its delayed objects hold the chunks too
    if futures is not None:
        futures += futs
    if progress:
        progress(flat)
    wait(futs)
    del lazy  # only now may a lazy chunk's graph go
    return Sent([flat[r * nchunks:(r + 1) * nchunks] for r in range(spec.nparts)], records, keys)


def consume(client, sent: Sent, spec: ShuffleSpec, workers: list[str], fn: Callable, token: str,
            futures: list | None = None, name: str = "owner") -> list:
    """One task per owner ``r``, on worker ``workers[r % len(workers)]`` only: ``fn(r, spec, parcels)``
    with owner ``r``'s parcels from every chunk (e.g. :func:`~breadth.pipeline.build.build_owner.build_owner`),
    under the key ``{name}-{token}-{r}``.  Returns the owners' futures (not waited for)."""
    out = [client.submit(fn, r, spec, sent.parcels[r], key=f"{name}-{token}-{r}",
                         workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False)
           for r in range(spec.nparts)]
    if futures is not None:
        futures += out
    return out


# ---------------------------------------------------------------- ids: exchange whole 1-D pieces


@dataclass(frozen=True)
class ParkedArrays:
    """What a chunk's split kept (a tuple of NumPy arrays), written to ``.npy`` files of the disk tier's
    folder instead of waiting in the worker's memory until the owners answer."""

    paths: tuple[str, ...]

    def load(self) -> tuple:
        """The arrays, as the split returned them."""
        return tuple(load_npy(p) for p in self.paths)


def unpark(kept):
    """What a split kept, read back where :func:`exchange` parked it (``park_kept``), else as it is."""
    return kept.load() if isinstance(kept, ParkedArrays) else kept


def _park(root: str, index: int, kept: tuple) -> ParkedArrays:
    d = run_folder(os.path.join(root, "kept"))
    paths = tuple(os.path.join(d, f"chunk-{index}-{j}.npy") for j in range(len(kept)))
    for path, a in zip(paths, kept):
        save_npy(path, a)
    return ParkedArrays(paths)


def _exchange_chunk(chunk, index: int, split: Callable, nowners: int, tier: str, root: str | None,
                    args: tuple, park_kept: bool = False) -> tuple:
    """Chunk side of :func:`exchange`: ``split(chunk, *args) -> (kept, pieces)``, returned flat as
    ``(kept, piece_0, ..., piece_{P-1})`` (one getitem task per output); the pieces go to the tier (the
    disk tier writes each to a file, :func:`save_piece`, and keeps the files' names; with ``park_kept``
    also what the split kept, :class:`ParkedArrays`)."""
    kept, pieces = split(chunk, *args)
    if len(pieces) != nowners:
        raise ValueError(f"split returned {len(pieces)} pieces for {nowners} owners")
    if tier != "disk":
        return (kept, *pieces)
    names = []
    for p, a in enumerate(pieces):
        d = run_folder(os.path.join(root, f"owner-{p}"))
        names.append(save_piece(os.path.join(d, f"chunk-{index}"), a))
    return (_park(root, index, kept) if park_kept else kept, *names)


def save_piece(stem: str, a) -> str:
    """A piece as ``stem.npy`` (NumPy) or ``stem.arrow`` (an Arrow array: one column ``id`` in the Arrow IPC
    file format), written under a temporary name and renamed; the file's name."""
    import pyarrow as pa

    if isinstance(a, pa.Array):
        path = stem + ".arrow"
        tmp = stem + ".tmp.arrow"
        batch = pa.record_batch([a], names=["id"])
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, batch.schema) as w:
            w.write_batch(batch)
    else:
        path = stem + ".npy"
        tmp = stem + ".tmp.npy"
        a = np.asarray(a)
        np.save(tmp, a, allow_pickle=a.dtype == object)  # this run's own files only
    os.replace(tmp, path)
    return os.path.basename(path)


def _load_piece(root: str, owner: int, name: str):
    """A piece that :func:`save_piece` wrote (``name`` in owner ``owner``'s folder)."""
    path = os.path.join(root, f"owner-{owner}", name)
    if name.endswith(".arrow"):
        import pyarrow as pa

        with pa.OSFile(path) as f:  # read into memory: the folder goes before the piece does
            return pa.ipc.open_file(f).get_batch(0).column(0)
    return load_npy(path, allow_pickle=True)  # written by _exchange_chunk of this run


def _reduce_files(root: str, owner: int, combine: Callable, args: tuple, *names: str):
    return combine(*args, *[_load_piece(root, owner, nm) for nm in names])


@dataclass
class OwnerPieces:
    """Owner ``p``'s pieces from every chunk of an :func:`exchange`, wherever its tier keeps them."""

    client: Any
    tier: str
    root: str | None
    workers: list[str]
    parcels: list[list]  # parcels[c][p]: a future of chunk c's piece for p (disk: of its file's name)
    kept: list  # kept[c]: a future of what chunk c's split kept for itself

    def _where(self, p: int) -> dict:
        return dict(workers=[self.workers[p % len(self.workers)]], allow_other_workers=False, pure=False)

    def piece(self, c: int, p: int):
        """A future of chunk ``c``'s piece for owner ``p`` (the disk tier reads its file on ``p``'s worker)."""
        f = self.parcels[c][p]
        if self.tier != "disk":
            return f
        return self.client.submit(_load_piece, self.root, p, f, **self._where(p))

    def reduce(self, p: int, combine: Callable, *args, fanin: int = 8):
        """``combine(*args, *pieces)`` of owner ``p``'s pieces as a tree of fan-in ``fanin`` on ``p``'s
        worker (no task holds more than ``fanin`` pieces or partial results): a future of the root.
        ``combine`` must be associative (a sorted union is).  The disk tier's leaves read their files."""
        nchunks = len(self.parcels)
        if self.tier == "disk":
            level = [self.client.submit(_reduce_files, self.root, p, combine, args,
                                        *[self.parcels[c][p] for c in range(i, min(i + fanin, nchunks))],
                                        **self._where(p))
                     for i in range(0, nchunks, fanin)]
        else:
            level = [self.parcels[c][p] for c in range(nchunks)]
            level = [self.client.submit(combine, *args, *level[i:i + fanin], **self._where(p))
                     for i in range(0, len(level), fanin)]
        if not level:
            return self.client.submit(combine, *args, **self._where(p))
        while len(level) > 1:
            level = [self.client.submit(combine, *args, *level[i:i + fanin], **self._where(p))
                     for i in range(0, len(level), fanin)]
        return level[0]


def exchange(client, chunks: list, split: Callable, nowners: int, workers: list[str], *, tier: str = "memory",
             root: str | None = None, args: tuple = (), park_kept: bool = False) -> OwnerPieces:
    """The id shuffle's first half: one task per chunk (futures or delayed objects) runs
    ``split(chunk, *args) -> (kept, pieces)`` (``pieces``: ``nowners`` 1-D arrays, e.g. the chunk's
    distinct ids cut by owner) and stores the pieces in ``tier`` (``"memory"`` and ``"host"``: Dask task
    outputs; ``"disk"``: files under ``root``, a :func:`spill_space` folder: ``.npy`` for NumPy pieces,
    Arrow IPC for Arrow arrays, :func:`save_piece`).  Owners then consume them with
    :meth:`OwnerPieces.reduce` and :meth:`OwnerPieces.piece`.  ``park_kept``: on the disk tier, ``kept`` (a
    tuple of NumPy arrays) goes to files too, :attr:`OwnerPieces.kept` holds :class:`ParkedArrays`, and
    its consumer reads them with :func:`unpark` -- so that no worker holds every chunk's ``kept`` while the
    owners work.

    >>> def cut(ids, n):                      # doctest: +SKIP
    ...     u = np.unique(ids); return u.size, [u[u % n == p] for p in range(n)]
    >>> ex = exchange(client, chunk_futures, cut, 2, workers, args=(2,))                  # doctest: +SKIP
    >>> part0 = ex.reduce(0, lambda *a: np.unique(np.concatenate(a)) if a else np.empty(0))  # doctest: +SKIP
    """
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    if tier == "disk" and not root:
        raise ValueError("the disk tier needs a folder (root)")
    import dask

    # delayed reads and their splits form one graph, so that a chunk is split as soon as it is read; the
    # splits' outputs are taken apart by getitem tasks (each next to its chunk) submitted in one batch
    outs = [dask.delayed(_exchange_chunk, pure=False)(c, i, split, nowners, tier, root, args, park_kept)
            for i, c in enumerate(chunks)]
    flat = client.compute([dask.delayed(operator.getitem, pure=True)(o, j)
                           for o in outs for j in range(nowners + 1)])
    rows = [flat[c * (nowners + 1):(c + 1) * (nowners + 1)] for c in range(len(outs))]
    return OwnerPieces(client, tier, root, list(workers), [r[1:] for r in rows], [r[0] for r in rows])
