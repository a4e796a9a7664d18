"""The on-disk shard store: prepare once, search many times; written incrementally and resumable.

Layout of a complete store directory::

    STORE/manifest.json              written last (temporary name + rename); its presence = complete store
    STORE/id_map.npy | .parquet      dense -> original ids (npy for integers, Parquet for strings); optional
    STORE/shard-00000/shard.json     the shard's completion record (rank, rows, each file's size and sha256s)
                     offsets.npy     int64 (hi-lo+1)      CSR (out-edges)
                     columns.npy     int32/int64 (nnz)
                     tuple_degree.npy, self_loops.npy   int32 (hi-lo)
                     in_offsets.npy, in_columns.npy     directed graphs only (CSC)

A partial store (a write that failed or was killed after some shards) looks like::

    STORE/progress.json              the in-progress record: parameters, shard count, command (written first)
    STORE/id_map.npy
    STORE/shard-00000/ ...           shards that were complete (each renamed into place only when whole)
    STORE/shard-00002.tmp-3f2a9c1e/  a shard that was being written; removed by the next run
                                     (no manifest.json: the store does not load)

Writing (:func:`write_store`) goes: record the parameters in ``progress.json`` (or check them against
the record of a partial store already there: a different set is refused unless ``overwrite``), remove
temporary leftovers of an earlier interrupted run, write the id map, then let every worker write its
own shards -- each into ``shard-NNNNN.tmp-<token>/``, every file fsynced, ``shard.json`` last, then
renamed to ``shard-NNNNN/`` -- so a run that dies after k of P shards keeps those k.  Only when every
shard is complete is ``manifest.json`` written (temporary name + rename) and ``progress.json``
removed.  No file is ever half-written under its final name.  A rerun keeps a complete shard only
when its files are intact (sha256 on disk) *and* identical to what this run would write (sha256 of
the arrays in memory), so a resumed store is byte-for-byte the store an uninterrupted run writes.
The shards themselves are built again by the rerun (:func:`~breadth.pipeline.prepare` builds every
shard in memory); what resuming saves is writing the shards that were already complete.

Arrays are plain ``.npy`` (``allow_pickle=False`` on load; never pickle).  The manifest records the
format version, the counts, the source and parameters, and each file's size and the sha256 of each of its
64 MiB blocks (:mod:`breadth.io.store_files`: the blocks of a file are hashed, and checked, by several
threads at once).  Each worker writes its own shard files (the path must be visible to the workers, as it
is on one machine or on a shared file system).

Loading verifies every file against the manifest as it reads it and refuses a store without a manifest
(:class:`IncompleteStoreError`, naming the missing shards) or with a missing, resized or altered file
(:class:`CorruptStoreError`).  It loads onto any number of workers, on their CPUs or straight into their
GPUs' memory: when the worker count differs from the stored shard count, each new shard is assembled from
the row ranges of the stored shards that overlap its vertex block (columns are global ids, so rows move
unchanged).  A loaded graph gets bottom-up's degree-ordered rows on its workers
(:mod:`breadth.bfs.search_order`), so it searches as the same graph prepared in memory does.  Stores of the
first format (one sha256 per file) load too; their files are checked in one pass, in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
import uuid

import numpy as np

from breadth.bfs.id_map import on_device
from breadth.bfs.partitioned import partition_graph
from breadth.bfs.partitioning import Partitioning

from .errors import CorruptStoreError, IncompleteStoreError, StoreError
from .store_files import (fsync_dir, npy_data_offset, npy_digest, read_npy_into, same_content, save_npy, token,
                          verify_file)

FORMAT = "breadth-shard-store"
#: the format written; a store of any of :data:`READABLE` loads (the first format recorded one sha256 per file,
#: checked in one pass; the second one per 64 MiB block, checked in parallel as the blocks are read)
VERSION = 2
READABLE = (1, 2)
MANIFEST = "manifest.json"
PROGRESS = "progress.json"
SHARD_RECORD = "shard.json"
ARRAYS = ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns")
# Temporary names all end in ".tmp-<8 hex>" (being written) or ".old-<8 hex>" (being replaced): only
# such names are removed as leftovers, never anything else a user may have put in the directory.
_LEFTOVER = re.compile(r"^.+\.(tmp|old)-[0-9a-f]{8}$")
_SHARD_DIR = re.compile(r"^shard-(\d{5,})$")
_ID_MAP_PART = re.compile(r"^id_map-\d{5}\.(npy|parquet)$")  # see io/id_map_store.py


def _shard_dir(rank: int) -> str:
    return f"shard-{rank:05d}"


def _write_json(path: str, obj: dict, atomic: bool = True) -> None:
    """``obj`` -> ``path``, fsynced; through ``path.tmp-<token>`` + rename unless ``atomic`` is False."""
    target = f"{path}.tmp-{token()}" if atomic else path
    try:
        with open(target, "w") as f:
            json.dump(obj, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        if atomic:
            os.replace(target, path)
            fsync_dir(os.path.dirname(path))
    except BaseException:
        if atomic and os.path.exists(target):
            os.remove(target)
        raise


def _read_json(path: str) -> dict | None:
    """The JSON object in ``path``, or ``None`` when it is absent or unreadable."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _host(a) -> np.ndarray:
    if isinstance(a, np.ndarray):  # a memory map stays one: it is written from its file
        return a
    return a.get() if on_device(a) else np.asarray(a)  # CuPy shards come to host for writing


def _same_shard(final: str, head: dict, arrays: dict) -> bool:
    """Whether the complete shard directory ``final`` holds exactly ``arrays`` (and ``head``'s rows):
    its record matches, every file is intact on disk, and its sha256 equals the in-memory arrays'."""
    rec = _read_json(os.path.join(final, SHARD_RECORD))
    if rec is None or any(rec.get(k) != v for k, v in head.items()):
        return False
    files = rec.get("files")
    if not isinstance(files, dict) or set(files) != set(arrays):
        return False
    try:
        for name, a in arrays.items():
            r = files[name]
            if r.get("dtype") != str(a.dtype) or r.get("shape") != list(a.shape):
                return False
            if not same_content(r, npy_digest(a)):  # this run's data differs (input changed?)
                return False
            verify_file(os.path.join(final, f"{name}.npy"), r)  # damaged on disk
    except (OSError, KeyError, TypeError, CorruptStoreError):
        return False
    return True


def _write_shard(shard, store: str, nparts: int) -> tuple[dict, bool]:
    """Runs on the worker holding ``shard``: write it to ``store/shard-NNNNN/`` unless an identical
    complete copy is already there.  Returns ``(record, kept)``; ``kept`` is True when it was skipped.

    The directory appears under its final name only once whole: files go to ``shard-NNNNN.tmp-<token>/``
    (each fsynced), ``shard.json`` last, then one rename.  An incomplete or different old copy is moved
    aside (``.old-<token>``) and removed after the rename."""
    name = _shard_dir(shard.rank)
    final = os.path.join(store, name)
    arrays = {a: _host(getattr(shard, a)) for a in ARRAYS if getattr(shard, a) is not None}
    head = {"format": FORMAT, "version": VERSION, "rank": int(shard.rank), "nparts": int(nparts),
            "lo": int(shard.lo), "hi": int(shard.hi), "nnz": int(shard.num_local_edges), "dir": name}
    if os.path.isdir(final) and _same_shard(final, head, arrays):
        return _read_json(os.path.join(final, SHARD_RECORD)), True
    tmp = f"{final}.tmp-{token()}"
    os.mkdir(tmp)
    try:
        files = {}
        for a, arr in arrays.items():
            files[a] = save_npy(os.path.join(tmp, f"{a}.npy"), arr)
        rec = dict(head, files=files)
        _write_json(os.path.join(tmp, SHARD_RECORD), rec, atomic=False)  # last: the directory is whole
        fsync_dir(tmp)
        if os.path.lexists(final):
            old = f"{final}.old-{token()}"
            os.rename(final, old)
            os.rename(tmp, final)
            with contextlib.suppress(OSError):
                _remove(old)
        else:
            os.rename(tmp, final)
        fsync_dir(store)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return rec, False


def _jsonable(d):
    if isinstance(d, dict):
        return {str(k): _jsonable(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_jsonable(v) for v in d]
    if isinstance(d, (np.integer,)):
        return int(d)
    if isinstance(d, (np.floating,)):
        return float(d)
    if isinstance(d, (str, int, float, bool)) or d is None:
        return d
    return repr(d)


def _diff(old, new, where: str = "") -> list[str]:
    """Readable differences between two JSON values: ``key: <old> before, <new> now`` (first few)."""
    def show(v):
        s = json.dumps(v)
        return s if len(s) <= 70 else s[:67] + "..."

    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            key = f"{where}.{k}" if where else k
            if k not in old:
                out.append(f"{key}: absent before, {show(new[k])} now")
            elif k not in new:
                out.append(f"{key}: {show(old[k])} before, absent now")
            else:
                out += _diff(old[k], new[k], key)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in _diff(a, b, f"{where}[{i}]")][:3]
    return [] if old == new else [f"{where or 'parameters'}: {show(old)} before, {show(new)} now"]


def _normalized(parameters: dict | None) -> dict:
    """``parameters`` as they read back from JSON (tuples -> lists, NumPy scalars -> numbers)."""
    return json.loads(json.dumps(_jsonable(parameters or {})))


def _complete_ranks(path: str, nparts: int) -> list[int]:
    """Ranks whose ``shard-NNNNN/shard.json`` exists and names them (a cheap look, no checksums)."""
    done = []
    for r in range(nparts):
        rec = _read_json(os.path.join(path, _shard_dir(r), SHARD_RECORD))
        if rec is not None and rec.get("rank") == r and rec.get("nparts") == nparts:
            done.append(r)
    return done


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``shard-00000..shard-00002, shard-00005`` (at most 8 items, then a count)."""
    items, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        items.append(_shard_dir(ranks[i]) if i == j else f"{_shard_dir(ranks[i])}..{_shard_dir(ranks[j])}")
        i = j + 1
    return ", ".join(items[:8]) + (f" and {len(items) - 8} more range(s)" if len(items) > 8 else "")


def is_store(path: str) -> bool:
    """Whether directory ``path`` is a breadth shard store, complete or partial: its ``manifest.json``
    or ``progress.json`` is a JSON object carrying breadth's ``"format"`` key (a file of that name
    written by anything else does not count)."""
    for name in (MANIFEST, PROGRESS):
        rec = _read_json(os.path.join(path, name))
        if rec is not None and rec.get("format") == FORMAT:
            return True
    return False


def check_store(path: str, parameters: dict | None = None, nparts: int | None = None, *,
                overwrite: bool = False) -> dict:
    """What writing a store with ``parameters`` to ``path`` would find there; changes nothing.

    Returns ``{"state": "absent" | "partial" | "complete", "nparts": int | None, "complete": [ranks],
    "missing": [ranks], "parameters": dict | None}`` (the ranks only for a partial store, judged by
    their ``shard.json`` alone; checksums are verified when writing).  Without ``overwrite`` it raises
    :class:`StoreError` when a partial or complete store there was written with other ``parameters``,
    or (``nparts`` given) a partial one with another shard count.  With or without ``overwrite`` it
    refuses a path that is a file, or a non-empty directory that is not a shard store (it would not be
    safe to delete).  The CLI calls it before preparing, so a mismatch is reported at once.

    >>> check_store("/data/kron.store", {"command": "generate", "scale": 26})   # doctest: +SKIP
    {'state': 'partial', 'nparts': 4, 'complete': [0, 1], 'missing': [2, 3], ...}
    """
    path = os.path.abspath(path)
    out = {"state": "absent", "nparts": None, "complete": [], "missing": [], "parameters": None}
    if not os.path.lexists(path):
        return out
    if not os.path.isdir(path):
        raise StoreError(f"{path} exists and is not a directory; refusing to write a shard store there")
    mpath, ppath = os.path.join(path, MANIFEST), os.path.join(path, PROGRESS)
    if os.path.exists(mpath):
        state, recpath = "complete", mpath
    elif os.path.exists(ppath):
        state, recpath = "partial", ppath
    elif [e for e in os.listdir(path) if not _LEFTOVER.match(e)]:
        raise StoreError(f"{path} is a non-empty directory without {MANIFEST} or {PROGRESS}, not a breadth "
                         f"shard store; refusing to write into it (remove it or choose another path)")
    else:
        return out  # empty, or only temporary leftovers (a run killed before its progress record)
    rec = _read_json(recpath)
    if rec is None or rec.get("format") != FORMAT:
        # Not breadth's own record: a user's directory that merely holds a file of that name.  Overwriting
        # it would delete their file (and whatever looks like a shard next to it), so even overwrite=True
        # refuses; only a directory whose record carries breadth's format key is ever replaced.
        raise StoreError(f"{recpath}: not a breadth shard store record (unreadable, or no \"format\": "
                         f"\"{FORMAT}\"); refusing to write{' over' if overwrite else ' into'} {path} "
                         f"(remove it yourself or choose another path)")
    out.update(state=state, nparts=rec.get("nparts"), parameters=rec.get("parameters"))
    if state == "partial" and isinstance(out["nparts"], int):
        out["complete"] = _complete_ranks(path, out["nparts"])
        out["missing"] = sorted(set(range(out["nparts"])) - set(out["complete"]))
    if overwrite:
        return out
    if rec.get("version") != VERSION:
        raise StoreError(f"{recpath}: store format version {rec.get('version')} is not this version's "
                         f"({VERSION}); " "{overwrite=True} to replace it")
    old, new = _normalized(rec.get("parameters")), _normalized(parameters)
    diffs = _diff(old, new)
    if diffs:
        raise StoreError(_other_parameters(path, state, old, new, diffs))
    if state == "partial" and nparts is not None and out["nparts"] != nparts:
        raise StoreError(f"{path} holds a partial store of {out['nparts']} shards, this graph has {nparts}; "
                         f"prepare with nparts={out['nparts']} to resume it, or " "{overwrite=True} to start again")
    return out


def _other_parameters(path: str, state: str, old: dict, new: dict, diffs: list[str]) -> str:
    """The refusal of a store written with other parameters: a first line that names another command, or
    the first two differences (top-level parameters first), and what to do; then every difference, one a
    line (the command line shows those with ``--verbose``: a store of ``ingest`` met by ``generate``
    differs in 14 parameters, 700 characters on one line)."""
    what = "a complete store" if state == "complete" else "a partial store"
    if old.get("command") and new.get("command") and old["command"] != new["command"]:
        head = (f"{path} holds {what} written by breadth {old['command']}, not breadth {new['command']}; "
                "write to another path")
    else:
        shown = sorted(diffs, key=lambda d: "[" in d.split(":", 1)[0])  # a whole value before a list's item
        more = f"; {len(diffs) - 2} more" if len(diffs) > 2 else ""
        head = (f"{path} holds {what} written with different parameters ({'; '.join(shown[:2])}{more}); rerun "
                f"with the same parameters to {'use' if state == 'complete' else 'resume'} it")
    return f"{head}, or " "{overwrite=True} to replace it\n" + "\n".join(f"  {d}" for d in diffs)


@contextlib.contextmanager
def _locked(path: str):
    """Hold an exclusive lock on the store directory while writing: a second writer of the same store
    would otherwise take the first one's temporary directories for leftovers and remove them."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): unlocked
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"{path}: another process is writing this store") from None
        except OSError:
            pass  # file systems without flock (some NFS mounts): go on unlocked
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove(p: str) -> None:
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
    else:
        os.remove(p)


def _clean_leftovers(path: str) -> list[str]:
    """Remove temporary files/directories an interrupted run left in ``path``, and ``STORE.tmp-<token>``
    / ``STORE.old-<token>`` entries next to it (left by a writer that writes a whole store under a
    temporary name and renames it).  Returns what went."""
    gone = []
    for e in os.listdir(path):
        if _LEFTOVER.match(e):
            _remove(os.path.join(path, e))
            gone.append(e)
    parent, base = os.path.split(path)
    sibling = re.compile(rf"^{re.escape(base)}\.(tmp|old)-[0-9a-f]{{8}}$")
    for e in os.listdir(parent):
        if sibling.match(e):
            _remove(os.path.join(parent, e))
            gone.append(os.path.join("..", e))
    return gone


def _wipe(path: str) -> None:
    """Empty a store directory for ``overwrite``: the manifest first (so that no moment shows a
    complete-looking store with mixed contents), then the store's own entries; nothing else."""
    for name in (MANIFEST, PROGRESS):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, name))
    for e in os.listdir(path):
        if _SHARD_DIR.match(e) or _LEFTOVER.match(e) or e in ("id_map.npy", "id_map.parquet") or \
                _ID_MAP_PART.match(e):
            _remove(os.path.join(path, e))
    fsync_dir(path)


def write_store(graph, path: str, *, parameters: dict | None = None, overwrite: bool = False,
                command: str | None = None, extra: dict | None = None) -> dict:
    """Write a prepared graph to the store directory ``path``, shard by shard; resume a partial store.

    Each worker writes the shards it holds (every file fsynced under a temporary name, then renamed), so
    ``path`` must be visible to the workers (one machine, or a shared file system); the client writes only
    the small records.  The manifest is written last: until then the store does not load.

    The manifest is written only with every shard complete on disk and every worker of the graph still
    there.

    Parameters
    ----------
    graph : ShardedGraph
        A prepared graph (:func:`~breadth.pipeline.prepare`), its shards on its client's workers.
    path : str
        The store directory; created if absent, together with missing parents.
    parameters : dict, optional
        JSON-able values that identify the graph (e.g. the input files and options).  A partial store at
        ``path`` is resumed only when it was started with equal parameters and the same shard count.
    overwrite : bool, default False
        Replace the shard store at ``path`` (complete or partial) and write from scratch; a directory that
        is not a shard store is refused all the same.
    command : str, optional
        The command that rebuilds the store (e.g. the CLI line), recorded so that the error for an
        incomplete store can say what to rerun.
    extra : dict, optional
        Recorded in the manifest (e.g. timings in seconds) without being compared on resume.

    Returns
    -------
    dict
        The manifest as written to ``path/manifest.json``: format and version, vertex and edge counts,
        ``nparts``, ``partitioning``, the id map's record, one record per shard (its vertex range
        ``[lo, hi)``, adjacency entries and each file's size in bytes and sha256s), and ``"resume"``: the
        ranks kept from an earlier run (identical shards, verified by sha256 on disk and in memory) and
        those written by this one.

    Raises
    ------
    StoreError
        ``path`` is a file, or a non-empty directory that is not a shard store; a complete store is
        there and ``overwrite`` is False; a partial or complete store there was written with other
        ``parameters``, or a partial one with another shard count; another process is writing the same
        store; or a shard's write failed -- raised after every other shard has finished, the complete
        shards kept on disk for the rerun.
    WorkerLost
        A worker of the graph left the cluster during the write, or had left before (within about a
        second; :mod:`breadth.bfs.worker_loss`).

    Examples
    --------
    >>> from breadth.io import load_store, write_store
    >>> from breadth.pipeline import kronecker, local_cluster, prepare
    >>> client = local_cluster(workers=2)                                   # doctest: +SKIP
    >>> g = prepare(kronecker(16, seed=1), client)                          # doctest: +SKIP
    >>> m = write_store(g, "/data/k16.store", parameters={"scale": 16})     # doctest: +SKIP
    >>> m["nparts"], m["num_vertices"], m["resume"]["written"]              # doctest: +SKIP
    (2, 65536, [0, 1])
    >>> g = load_store("/data/k16.store", client)                           # doctest: +SKIP
    """
    from breadth.bfs.worker_loss import watch_workers

    # the shard tasks are pinned to the graph's workers: one lost midway ends the write (WorkerLost) before
    # the manifest, rather than leaving its shard's task waiting for it forever
    with watch_workers(graph.client, "store write", graph.workers):
        return _write_store(graph, path, parameters, overwrite, command, extra)


def _write_store(graph, path: str, parameters: dict | None, overwrite: bool, command: str | None,
                 extra: dict | None) -> dict:
    """:func:`write_store` inside its guard against lost workers."""
    from distributed import wait

    from breadth.bfs.worker_loss import check_all_there

    path = os.path.abspath(path)
    params = _normalized(parameters)
    nparts = graph.nparts

    def check():
        st = check_store(path, params, nparts, overwrite=overwrite)
        if st["state"] == "complete" and not overwrite:
            raise StoreError(f"{path} already exists; " "{overwrite=True} to replace it")
        return st

    check()  # before creating anything at path
    os.makedirs(path, exist_ok=True)
    with _locked(path):
        st = check()  # again: another writer may have got here first
        if overwrite and st["state"] != "absent":
            _wipe(path)
            st = dict(st, state="absent")
        _clean_leftovers(path)
        if st["state"] == "absent":
            _write_json(os.path.join(path, PROGRESS), {
                "format": FORMAT, "version": VERSION, "state": "in-progress",
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "parameters": params, "nparts": nparts,
                "command": command})
        from .id_map_store import write_id_map

        id_map = None if graph.id_map is None else write_id_map(graph.id_map, path, graph.client)
        client = graph.client
        futs = [client.submit(_write_shard, s, path, nparts, workers=[w], allow_other_workers=False, pure=False)
                for s, w in zip(graph.shards, graph.workers)]
        wait(futs)  # every shard finishes (or fails) before we report: nothing is written after we return
        failed = [r for r, f in enumerate(futs) if f.status != "finished"]
        if failed:
            try:
                futs[failed[0]].result()
                err = RuntimeError(f"status {futs[failed[0]].status}")
            except Exception as e:  # the worker's exception, re-raised here
                err = e
            raise StoreError(f"{path}: writing {_ranges(failed)} failed ({type(err).__name__}: {err}); "
                             f"{nparts - len(failed)} of {nparts} shards are complete and kept; rerun the "
                             f"same command to resume") from err
        results = client.gather(futs)
        shards = []
        for rec, _ in results:
            rec = {k: v for k, v in rec.items() if k not in ("format", "version")}
            shards.append(rec)
        # the manifest makes the store complete: only with every planned shard on disk, each a rank of this
        # graph's count, and every worker of the graph still there (a lost one's shard may be missing)
        _check_all_shards(path, shards, nparts)
        check_all_there(client)
        manifest = {
            "format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "num_vertices": graph.num_vertices, "num_input_edges": graph.num_input_edges,
            "num_edges": graph.num_edges, "num_self_loops": graph.num_self_loops,
            "directed": graph.directed, "nparts": nparts,
            "construction_time": graph.construction_time,
            "source": _jsonable(graph.source), "parameters": params, "command": command,
            "extra": _jsonable(extra or {}),
            "resume": {"kept": [r for r, (_, k) in enumerate(results) if k],
                       "written": [r for r, (_, k) in enumerate(results) if not k]},
            "id_map": id_map,
            "partitioning": graph.partitioning.as_dict(),
            "shards": shards,
        }
        _write_json(os.path.join(path, MANIFEST), manifest)  # the manifest last: the store is now complete
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, PROGRESS))
        fsync_dir(path)
        return manifest


def _check_all_shards(path: str, shards: list[dict], nparts: int) -> None:
    """Raise :class:`StoreError` unless ``shards`` are the records of ranks ``0..nparts-1`` in order, each of
    ``nparts`` shards and complete on disk (its ``shard.json`` there, naming it)."""
    ranks = [s.get("rank") for s in shards]
    missing = sorted(set(range(nparts)) - set(ranks))
    if ranks != list(range(nparts)) or any(s.get("nparts") != nparts for s in shards):
        raise StoreError(f"{path}: the writers returned shard(s) {ranks} of a {nparts}-shard graph"
                         + (f" ({_ranges(missing)} missing)" if missing else "") + "; the manifest is not written")
    absent = [r for r in range(nparts) if r not in _complete_ranks(path, nparts)]
    if absent:
        raise StoreError(f"{path}: {_ranges(absent)} not complete on disk after being written; the manifest "
                         f"is not written: rerun the same command to resume")


def _incomplete_message(path: str) -> str:
    """One line for a store without a manifest: what is missing and how to finish it."""
    prog = _read_json(os.path.join(path, PROGRESS))
    if prog is None or not isinstance(prog.get("nparts"), int):
        return (f"{path}: no {MANIFEST}; the store is incomplete (a failed or interrupted write, and no "
                f"{PROGRESS} says how it was started) and cannot be loaded; write it again ("
                "{overwrite=True})")
    nparts = prog["nparts"]
    missing = sorted(set(range(nparts)) - set(_complete_ranks(path, nparts)))
    how = (f"rerun `{prog['command']}`" if prog.get("command")
           else "rerun write_store with the same graph and parameters")
    if not missing:
        return (f"{path}: no {MANIFEST}; the store is incomplete: all {nparts} shard(s) are written but the "
                f"manifest is not; {how} to finish it (the complete shards are kept)")
    return (f"{path}: no {MANIFEST}; the store is incomplete: {len(missing)} of {nparts} shard(s) missing or "
            f"incomplete ({_ranges(missing)}); {how} to resume it (the complete shards are kept)")


def read_manifest(path: str) -> dict:
    """The manifest of store ``path``; raises if it is absent (:class:`IncompleteStoreError`, naming the
    missing shards of a partial store), unreadable or of an unknown version."""
    path = os.path.abspath(path)
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise StoreError(f"{path}: no such shard store directory")
    if not os.path.exists(mpath):
        raise IncompleteStoreError(_incomplete_message(path))
    try:
        with open(mpath, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise CorruptStoreError(f"{mpath}: unreadable manifest: {e}") from None
    try:  # UnicodeDecodeError is no JSONDecodeError: both are caught, or a damaged byte gives a traceback
        m = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise CorruptStoreError(f"{mpath}: not valid UTF-8/JSON ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise CorruptStoreError(f"{mpath}: not a breadth shard store (format "
                                f"{m.get('format') if isinstance(m, dict) else None!r})")
    if m.get("version") not in READABLE:
        raise StoreError(f"{mpath}: store format version {m.get('version')} is not supported (this breadth reads "
                         f"{', '.join(map(str, READABLE))})")
    _check_manifest(path, m)
    return m


def _npy_header(path: str) -> tuple[str, list[int]]:
    """``(dtype, shape)`` of a ``.npy`` file from its header alone (the data is not read)."""
    if not os.path.exists(path):
        raise CorruptStoreError(f"{path}: file listed in the manifest is missing")
    try:
        _, dtype, shape = npy_data_offset(path)
    except (ValueError, OSError) as e:
        raise CorruptStoreError(f"{path}: cannot be read as .npy: {e}") from None
    return str(dtype), list(shape)


def _check_manifest(path: str, m: dict) -> None:
    """Cross-check the manifest's counts with each other and with the arrays' shapes and dtypes in the
    ``.npy`` headers (no data is read): the checksums only vouch for the files, so an edited manifest
    (another num_vertices, nparts, nnz, shard range or array length) would otherwise load and give
    wrong answers.  Raises :class:`CorruptStoreError` naming the store, the field and the mismatch."""

    def bad(field: str, what: str):
        raise CorruptStoreError(f"{path}: {MANIFEST}: {field} {what}; the manifest disagrees with the store "
                                f"(edited or damaged); write the store again")

    def integer(obj, key: str, field: str, lo: int = 0) -> int:
        v = obj.get(key) if isinstance(obj, dict) else None
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            bad(field, f"is {v!r}, expected an integer >= {lo}")
        return v

    n = integer(m, "num_vertices", "num_vertices")
    nparts = integer(m, "nparts", "nparts", 1)
    for k in ("num_input_edges", "num_edges", "num_self_loops"):
        integer(m, k, k)
    directed = m.get("directed")
    if not isinstance(directed, bool):
        bad("directed", f"is {directed!r}, expected true or false")
    try:
        Partitioning.from_dict(m.get("partitioning"))
    except (TypeError, ValueError, AttributeError) as e:
        bad("partitioning", f"is {m.get('partitioning')!r} ({e})")
    shards = m.get("shards")
    if not isinstance(shards, list) or len(shards) != nparts:
        bad("nparts", f"is {nparts} but shards lists "
                      f"{len(shards) if isinstance(shards, list) else 'no'} shard(s)")
    names = {"offsets", "columns", "tuple_degree", "self_loops"} | ({"in_offsets", "in_columns"} if directed else set())
    end = 0
    for i, s in enumerate(shards):  # the vertex ranges first: they decide every array's length
        f = f"shards[{i}]"
        if integer(s, "rank", f"{f}.rank") != i:
            bad(f"{f}.rank", f"is {s['rank']}, expected {i}")
        if s.get("dir") != _shard_dir(i):  # also keeps file paths inside the store
            bad(f"{f}.dir", f"is {s.get('dir')!r}, expected {_shard_dir(i)!r}")
        lo, hi = integer(s, "lo", f"{f}.lo"), integer(s, "hi", f"{f}.hi")
        if lo != end:
            bad(f"{f}.lo", f"is {lo}, expected {end} (where the previous shard ends)")
        if hi < lo:
            bad(f"{f}.hi", f"is {hi}, expected at least lo = {lo}")
        end = hi
    if end != n:
        bad("num_vertices", f"is {n} but the shards cover vertices [0, {end})")
    nnz_total = in_total = 0
    for i, s in enumerate(shards):
        f = f"shards[{i}]"
        lo, hi = s["lo"], s["hi"]
        nnz = integer(s, "nnz", f"{f}.nnz")
        nnz_total += nnz
        files = s.get("files")
        if not isinstance(files, dict) or set(files) != names:
            bad(f"{f}.files", f"lists {sorted(files) if isinstance(files, dict) else files!r}, expected "
                              f"{sorted(names)} for a{' directed' if directed else 'n undirected'} graph")
        want = {"offsets": hi - lo + 1, "columns": nnz, "tuple_degree": hi - lo, "self_loops": hi - lo,
                "in_offsets": hi - lo + 1, "in_columns": None}
        for a in sorted(names):
            rec = files[a]
            if not isinstance(rec, dict):
                bad(f"{f}.files.{a}", f"is {rec!r}, expected a file record")
            dtype, shape = _npy_header(os.path.join(path, _shard_dir(i), f"{a}.npy"))
            if rec.get("shape") != shape or rec.get("dtype") != dtype:
                bad(f"{f}.files.{a}", f"says {rec.get('dtype')}{rec.get('shape')}, the file holds {dtype}{shape}")
            if len(shape) != 1 or (want[a] is not None and shape[0] != want[a]):
                src = {"columns": f"nnz {nnz}"}.get(a, f"hi - lo = {hi - lo}")
                bad(f"{f}.files.{a}", f"has shape {shape}, expected [{want[a]}] (from {f}.{src})")
            if a == "in_columns":
                in_total += shape[0]
    edges = nnz_total if directed else nnz_total // 2  # prepare's count: an undirected edge is two entries
    if m["num_edges"] != edges:
        bad("num_edges", f"is {m['num_edges']} but the shards hold {nnz_total} adjacency entries (expected "
                         f"{edges} {'directed' if directed else 'undirected'} edges)")
    if directed and in_total != nnz_total:
        bad("shards[*].files.in_columns", f"hold {in_total} in-edges, the out-edges number {nnz_total}")
    idm = m.get("id_map")
    if idm is not None:
        from .id_map_store import PART_FILE, id_map_files

        try:
            files = id_map_files(idm)
            names_ok = all(PART_FILE.match(f) if idm.get("layout") == "parts" else
                           f in ("id_map.npy", "id_map.parquet") for f, _ in files)
        except (AttributeError, KeyError, TypeError):
            names_ok = False
        if not isinstance(idm, dict) or not names_ok or not files:
            bad("id_map", f"is {idm!r}, expected a record of id_map.npy/.parquet or of id_map-NNNNN parts")
        sizes = []
        for i, (f, rec) in enumerate(files):
            dtype, shape = _id_map_file_header(os.path.join(path, f))
            if rec.get("shape") != shape or rec.get("dtype") != dtype or len(shape) != 1:
                where = f"id_map.parts[{i}]" if idm.get("layout") == "parts" else "id_map"
                bad(where, f"says {rec.get('dtype')}{rec.get('shape')}, the file holds {dtype}{shape}")
            sizes.append(shape[0])
        if sum(sizes) != n:
            bad("id_map", f"holds {sum(sizes)} ids, expected num_vertices = {n}")
        if idm.get("layout") == "parts" and idm.get("offsets") != np.concatenate(([0], np.cumsum(sizes))).tolist():
            bad("id_map.offsets", f"are {idm.get('offsets')}, the parts hold {sizes} ids")


def _id_map_file_header(p: str) -> tuple[str, list[int]]:
    """``(dtype, shape)`` of an id-map file, from its .npy header or its Parquet footer (no data read)."""
    if p.endswith(".npy"):
        return _npy_header(p)
    import pyarrow.parquet as pq

    if not os.path.exists(p):
        raise CorruptStoreError(f"{p}: file listed in the manifest is missing")
    try:
        return "string", [pq.read_metadata(p).num_rows]
    except Exception as e:  # pyarrow raises its own error types for a damaged footer
        raise CorruptStoreError(f"{p}: cannot be read as Parquet: {e}") from None


def _load_shard(store: str, manifest: dict, rank: int, nparts: int, verify: bool, device: str = "cpu"):
    """Runs on a worker: build shard ``rank`` of ``nparts`` from the stored shards' rows.

    Every array is allocated once at its final size and the stored rows are read straight into it
    (:func:`~breadth.io.store_files.read_npy_into`): the worker holds the shard's bytes and no more (a
    memory map of the files plus a copy of their rows would hold them twice: 9.5 GB per worker for a
    4.7 GB shard of 2^30 web-crawl tuples).  ``device="gpu"``: the arrays are allocated in the worker's GPU
    memory and the files read into them through small page-locked buffers (the host holds no copy)."""
    from breadth.bfs.shard import Shard, owner_range

    if device == "gpu":
        import cupy as xp
    else:
        xp = np
    t0 = time.perf_counter()
    n = manifest["num_vertices"]
    lo, hi = owner_range(rank, nparts, n)
    files0 = manifest["shards"][0]["files"]
    # (stored shard, its first and end row) of every stored shard that holds rows of this one, in order
    pieces = [(rec, max(lo, rec["lo"]) - rec["lo"], min(hi, rec["hi"]) - rec["lo"]) for rec in manifest["shards"]
              if max(lo, rec["lo"]) < min(hi, rec["hi"])]

    def read(rec: dict, a: str, out, start: int, check: bool = verify) -> None:
        read_npy_into(os.path.join(store, rec["dir"], f"{a}.npy"), rec["files"][a], out, start, check)

    out = {a: xp.empty(hi - lo, np.dtype(files0[a]["dtype"])) for a in ("tuple_degree", "self_loops")}
    for a in out:
        k = 0
        for rec, r0, r1 in pieces:
            read(rec, a, out[a][k:k + r1 - r0], r0)
            k += r1 - r0
    for off_name, col_name in (("offsets", "columns"), ("in_offsets", "in_columns")):
        if off_name not in files0:
            continue
        off = xp.zeros(hi - lo + 1, np.int64)  # each piece's stored offsets, rebased to follow the last
        k = 0
        for rec, r0, r1 in pieces:
            base = int(off[k])
            read(rec, off_name, off[k:k + r1 - r0 + 1], r0)
            off[k:k + r1 - r0 + 1] += base - off[k]
            k += r1 - r0
        col = xp.empty(int(off[-1]), np.dtype(files0[col_name]["dtype"]))
        k = 0
        for rec, r0, r1 in pieces:  # each piece's columns where its rebased offsets put them
            first = np.zeros(1, np.int64)  # where its rows start in the stored columns (checked just above)
            if r0:
                read(rec, off_name, first, r0, False)
            read(rec, col_name, col[int(off[k]):int(off[k + r1 - r0])], int(first[0]))
            k += r1 - r0
        out[off_name], out[col_name] = off, col
    shard = Shard(rank, nparts, n, lo, hi, out["offsets"], out["columns"], out["tuple_degree"], out["self_loops"],
                  out.get("in_offsets"), out.get("in_columns"))
    shard.meta["load_stages"] = {"read_s": time.perf_counter() - t0, "bytes": shard.nbytes()}
    return shard


def _load_record(shard) -> dict:
    """A loaded shard's stage seconds and bytes, and why it went without bottom-up's order (or None)."""
    from breadth.bfs.search_order import ORDER_DROPPED

    return dict(shard.meta.get("load_stages", {}), order_dropped=shard.meta.get(ORDER_DROPPED))


def load_store(path: str, client=None, *, nparts: int | None = None, verify: bool = True, device: str = "cpu",
               search_order: bool = True):
    """Load a shard store onto the workers of a Dask cluster, ready to search.

    Each rank's shard is read by the worker that will search it (the path must be visible to the workers,
    as it is on one machine or on a shared file system), checked against the manifest, and given what a
    search uses beyond the stored CSR -- bottom-up's degree-ordered rows
    (:mod:`breadth.bfs.search_order`), built on the worker's device -- so that a loaded graph searches
    exactly as the same graph prepared in memory.

    Parameters
    ----------
    path : str
        A store directory written by :func:`write_store` (``breadth generate``, ``breadth ingest``).
    client : distributed.Client, optional
        Default: the current client.
    nparts : int, optional
        Ranks to load onto (default: the number of workers).  When it differs from the stored shard count
        each rank's shard is assembled from the rows of the stored shards that overlap its vertex block.  A
        store written with a 2D partitioning loads onto its grid's shard count only.
    verify : bool
        Check every file's sha256 while reading it.
    device : {"cpu", "gpu", "auto"}
        ``"gpu"``: shards in the workers' GPU memory (dask-cuda workers,
        :func:`~breadth.pipeline.cluster.cluster.local_cuda_cluster`), searched by the GPU engine; ``"auto"``: GPU
        when CuPy sees a device here.
    search_order : bool
        Build bottom-up's degree-ordered rows (4 bytes an adjacency entry); ``False`` for a graph that is
        only written again or inspected, not searched.

    Returns
    -------
    ShardedGraph
        Shards held by the workers; ``graph.source["load_time"]`` is the load's wall time in seconds and
        ``graph.source["load_stages"]`` where it went: ``shards_s`` (reading and checking the files into
        the workers' memory or their GPUs'), ``order_s`` (bottom-up's order), and each rank's ``read_s``
        and ``bytes``.

    Raises
    ------
    IncompleteStoreError
        The store has no manifest (a write that did not finish); the message names the missing shards.
    CorruptStoreError
        A file is missing, resized, or its checksum differs from the manifest.
    StoreError
        Any other reason the store cannot be loaded as asked.
    WorkerLost
        A worker left the cluster during the load (within about a second; :mod:`breadth.bfs.worker_loss`).

    Examples
    --------
    >>> from breadth.io import load_store
    >>> from breadth.bfs import bfs
    >>> g = load_store("/data/wiki.store", client)      # doctest: +SKIP
    >>> bfs(g, 30).to_pandas()                          # doctest: +SKIP
    """
    from distributed import default_client

    from breadth.bfs.dask_workers import worker_addresses
    from breadth.bfs.device_choice import resolve_device
    from breadth.bfs.worker_loss import watch_workers

    device = resolve_device(device)
    path = os.path.abspath(path)
    m = read_manifest(path)
    client = client or default_client()
    workers = worker_addresses(client)
    # the shards are pinned to their workers: one lost midway ends the load (WorkerLost)
    with watch_workers(client, "store load", workers):
        return _load_store(path, m, client, workers, nparts, verify, device, search_order)


def _load_store(path: str, m: dict, client, workers: list[str], nparts: int | None, verify: bool, device: str,
                search_order: bool):
    """:func:`load_store` of the manifest ``m`` onto ``workers``, inside its guard against lost workers."""
    from distributed import wait

    from breadth.bfs.search_order import add_bottom_up_order, warn_dropped_order
    from breadth.bfs.sharded_graph import ShardedGraph

    layout = Partitioning.from_dict(m.get("partitioning"))
    if layout.kind == "2d":
        rows, cols = layout.grid
        if nparts not in (None, rows * cols):
            raise StoreError(f"{path}: written with a {rows}x{cols} grid (--partition 2d), which needs "
                             f"{rows * cols} workers, got {nparts}")
        nparts = rows * cols
    nparts = nparts or len(workers)
    from .id_map_store import load_id_map_parts

    id_map = load_id_map_parts(path, m.get("id_map"), client, workers, verify)
    t0 = time.perf_counter()
    token = uuid.uuid4().hex[:8]
    where = [workers[r % len(workers)] for r in range(nparts)]
    shards = [client.submit(_load_shard, path, m, r, nparts, verify, device, key=f"shard-load-{token}-{r}",
                            workers=[where[r]], allow_other_workers=False, pure=False)
              for r in range(nparts)]
    wait(shards)
    for f in shards:
        if f.status == "error":
            f.result()  # raises the worker's error (e.g. CorruptStoreError) here
    t_shards = time.perf_counter()
    if search_order:
        shards = add_bottom_up_order(client, shards, where, token)
    records = client.gather([client.submit(_load_record, s, workers=[w], pure=False) for s, w in zip(shards, where)])
    warn_dropped_order([r.pop("order_dropped") for r in records], stacklevel=3)  # the caller of load_store()
    stages = {"shards_s": t_shards - t0, "order_s": time.perf_counter() - t_shards, "ranks": records}
    graph = ShardedGraph(client=client, shards=shards, workers=where,
                         num_vertices=m["num_vertices"], num_input_edges=m["num_input_edges"],
                         num_edges=m["num_edges"], num_self_loops=m["num_self_loops"], directed=m["directed"],
                         construction_time=m.get("construction_time", 0.0),
                         source=dict(m.get("source", {}), store=path), id_map=id_map, backend=device)
    graph = partition_graph(graph, layout)  # the same graph for 1D
    graph.source["load_time"] = time.perf_counter() - t0
    graph.source["load_stages"] = stages
    return graph


def describe(path: str) -> str:
    """A human-readable summary of a store's manifest (what ``breadth info`` prints)."""
    from .id_map_store import describe_id_map

    m = read_manifest(path)
    total = sum(f["bytes"] for s in m["shards"] for f in s["files"].values())
    lines = [f"store:          {os.path.abspath(path)}",
             f"format:         {m['format']} v{m['version']} (created {m.get('created')})",
             f"vertices:       {m['num_vertices']:,}",
             f"input edges:    {m['num_input_edges']:,} ({m['num_self_loops']:,} self-loops)",
             f"edges:          {m['num_edges']:,} {'directed' if m['directed'] else 'undirected'} after cleaning",
             f"shards:         {m['nparts']} ({total / 2**20:.1f} MiB)",
             f"partition:      {Partitioning.from_dict(m.get('partitioning'))}",
             f"id map:         {describe_id_map(m['id_map'])}",
             f"source:         {json.dumps(m.get('source', {}))}",
             f"parameters:     {json.dumps(m.get('parameters', {}))}"]
    for s in m["shards"]:
        lines.append(f"  shard {s['rank']}: vertices [{s['lo']}, {s['hi']}), {s['nnz']:,} adjacency entries")
    return "\n".join(lines)
