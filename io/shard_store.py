"""The on-disk shard store: prepare once, search many times.

Layout of a store directory::

    STORE/manifest.json            written last (temporary name + rename); its presence = complete store
    STORE/id_map.npy | .parquet    dense -> original ids (npy for integers, Parquet for strings); optional
    STORE/shard-00000/offsets.npy  int64 (hi-lo+1)      CSR (out-edges)
                     columns.npy   int32/int64 (nnz)
                     tuple_degree.npy, self_loops.npy   int32 (hi-lo)
                     in_offsets.npy, in_columns.npy     directed graphs only (CSC)

Arrays are plain ``.npy`` (``allow_pickle=False`` on load; never pickle).  The manifest records the
format version, the counts, the source and parameters, and each file's size and sha256.  A store is
written into ``STORE.tmp-<token>/`` and renamed to ``STORE`` only once complete, so a failed ingest
leaves nothing at ``STORE``; each worker writes its own shard files (the path must be visible to the
workers, as it is on one machine or on a shared file system).

Loading verifies every file against the manifest and refuses a store without a manifest
(:class:`IncompleteStoreError`) or with a missing, resized or altered file (:class:`CorruptStoreError`).
It loads onto any number of workers: when that differs from the stored shard count, each new shard is
assembled from the row ranges of the stored shards that overlap its vertex block (columns are global
ids, so rows move unchanged).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid

import numpy as np

from .errors import CorruptStoreError, IncompleteStoreError, StoreError

FORMAT = "breadth-shard-store"
VERSION = 1
MANIFEST = "manifest.json"
ARRAYS = ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns")


class _HashingWriter:
    """A write-only file that hashes what passes through (no second read of what was written)."""

    def __init__(self, f):
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b)


def _save(path: str, arr: np.ndarray) -> dict:
    arr = np.ascontiguousarray(arr)
    with open(path, "wb") as f:
        w = _HashingWriter(f)
        np.lib.format.write_array(w, arr, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())
    return {"sha256": w.h.hexdigest(), "bytes": w.n, "dtype": str(arr.dtype), "shape": list(arr.shape)}


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def _write_shard(shard, directory: str) -> dict:
    """Runs on the worker holding ``shard``: its arrays -> ``directory``; returns the file records."""
    os.makedirs(directory, exist_ok=True)
    files = {}
    for name in ARRAYS:
        a = getattr(shard, name)
        if a is None:
            continue
        a = a.get() if hasattr(a, "get") else np.asarray(a)  # CuPy shards come to host for writing
        files[name] = _save(os.path.join(directory, f"{name}.npy"), a)
    return {"rank": shard.rank, "lo": shard.lo, "hi": shard.hi, "nnz": shard.num_local_edges, "files": files}


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


def _write_id_map(id_map, directory: str) -> dict:
    idm = np.asarray(id_map)
    if idm.dtype.kind in "iu":
        rec = _save(os.path.join(directory, "id_map.npy"), idm)
        rec["file"] = "id_map.npy"
        return rec
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(directory, "id_map.parquet")
    pq.write_table(pa.table({"id": pa.array(idm.tolist(), pa.string())}), path)
    return {"file": "id_map.parquet", "sha256": sha256_file(path), "bytes": os.path.getsize(path),
            "dtype": "string", "shape": [int(idm.size)]}


def write_store(graph, path: str, *, parameters: dict | None = None, overwrite: bool = False) -> dict:
    """Write a prepared :class:`~breadth.bfs.sharded_graph.ShardedGraph` to the store directory ``path``.

    Returns the manifest.  ``overwrite`` replaces an existing store (the old one is removed only after
    the new one is complete).

    >>> from breadth.io.shard_store import write_store, load_store
    >>> write_store(g, "/data/wiki.store")           # doctest: +SKIP
    """
    path = os.path.abspath(path)
    if os.path.exists(path) and not overwrite:
        raise StoreError(f"{path} already exists; pass overwrite=True (--overwrite) to replace it")
    tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
    os.makedirs(tmp)
    try:
        client = graph.client
        futs = [client.submit(_write_shard, s, os.path.join(tmp, f"shard-{r:05d}"), workers=[w],
                              allow_other_workers=False, pure=False)
                for r, (s, w) in enumerate(zip(graph.shards, graph.workers))]
        shards = client.gather(futs)
        for rec in shards:
            rec["dir"] = f"shard-{rec['rank']:05d}"
        manifest = {
            "format": FORMAT, "version": VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "num_vertices": graph.num_vertices, "num_input_edges": graph.num_input_edges,
            "num_edges": graph.num_edges, "num_self_loops": graph.num_self_loops,
            "directed": graph.directed, "nparts": graph.nparts,
            "construction_time": graph.construction_time,
            "source": _jsonable(graph.source), "parameters": _jsonable(parameters or {}),
            "id_map": None if graph.id_map is None else _write_id_map(graph.id_map, tmp),
            "shards": shards,
        }
        mtmp = os.path.join(tmp, f"{MANIFEST}.tmp")
        with open(mtmp, "w") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(mtmp, os.path.join(tmp, MANIFEST))  # the manifest last: the store is now complete
        if os.path.exists(path):
            old = f"{path}.old-{uuid.uuid4().hex[:8]}"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        return manifest
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(path: str) -> dict:
    """The manifest of store ``path``; raises if it is absent, unreadable or of an unknown version."""
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isdir(path):
        raise StoreError(f"{path}: no such shard store directory")
    if not os.path.exists(mpath):
        raise IncompleteStoreError(f"{path}: no {MANIFEST}; the store is incomplete (a failed or interrupted "
                                   f"write?) and cannot be loaded")
    try:
        with open(mpath) as f:
            m = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CorruptStoreError(f"{mpath}: unreadable manifest: {e}") from None
    if m.get("format") != FORMAT:
        raise CorruptStoreError(f"{mpath}: not a breadth shard store (format {m.get('format')!r})")
    if m.get("version") != VERSION:
        raise StoreError(f"{mpath}: store format version {m.get('version')} is not supported (need {VERSION})")
    return m


def _verify(path: str, rec: dict) -> None:
    if not os.path.exists(path):
        raise CorruptStoreError(f"{path}: file listed in the manifest is missing")
    size = os.path.getsize(path)
    if size != rec["bytes"]:
        raise CorruptStoreError(f"{path}: {size} bytes, manifest says {rec['bytes']} (truncated or replaced)")
    if sha256_file(path) != rec["sha256"]:
        raise CorruptStoreError(f"{path}: sha256 checksum mismatch; the file is corrupted")


def _load_array(path: str, rec: dict, verify: bool, mmap: bool = False) -> np.ndarray:
    if verify:
        _verify(path, rec)
    try:
        a = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (ValueError, OSError) as e:
        raise CorruptStoreError(f"{path}: cannot be read as .npy: {e}") from None
    if str(a.dtype) != rec["dtype"] or list(a.shape) != rec["shape"]:
        raise CorruptStoreError(f"{path}: dtype/shape {a.dtype}{a.shape} differ from the manifest")
    return a


def _load_shard(store: str, manifest: dict, rank: int, nparts: int, verify: bool):
    """Runs on a worker: build shard ``rank`` of ``nparts`` from the stored shards' rows."""
    from breadth.bfs.shard import Shard, block_size

    n = manifest["num_vertices"]
    block = block_size(n, nparts)
    lo = min(rank * block, n)
    hi = min(lo + block, n)
    names = [a for a in ARRAYS if a in manifest["shards"][0]["files"]]
    pieces = {a: [] for a in names}
    for rec in manifest["shards"]:
        a0, a1 = max(lo, rec["lo"]), min(hi, rec["hi"])
        if a0 >= a1:
            continue
        d = os.path.join(store, rec["dir"])
        arr = {a: _load_array(os.path.join(d, f"{a}.npy"), rec["files"][a], verify, mmap=True) for a in names}
        r0, r1 = a0 - rec["lo"], a1 - rec["lo"]
        for off_name, col_name in (("offsets", "columns"), ("in_offsets", "in_columns")):
            if off_name not in arr:
                continue
            off = np.asarray(arr[off_name][r0:r1 + 1])
            pieces[col_name].append(np.asarray(arr[col_name][off[0]:off[-1]]))
            pieces[off_name].append(off - off[0])
        for a in ("tuple_degree", "self_loops"):
            pieces[a].append(np.asarray(arr[a][r0:r1]))
    out = {}
    for a in names:
        if a in ("offsets", "in_offsets"):
            parts = pieces[a]
            total = np.zeros(hi - lo + 1, np.int64)
            k, base = 0, 0
            for off in parts:
                m = off.size - 1
                total[k:k + m + 1] = off + base
                base += int(off[-1])
                k += m
            out[a] = total
        else:
            ps = pieces[a]
            dt = np.dtype(manifest["shards"][0]["files"][a]["dtype"])
            out[a] = np.concatenate(ps).astype(dt, copy=False) if ps else np.empty(0, dt)
    return Shard(rank, nparts, n, lo, hi, out["offsets"], out["columns"], out["tuple_degree"], out["self_loops"],
                 out.get("in_offsets"), out.get("in_columns"))


def load_id_map(path: str, manifest: dict, verify: bool = True):
    rec = manifest.get("id_map")
    if rec is None:
        return None
    f = os.path.join(path, rec["file"])
    if f.endswith(".npy"):
        return _load_array(f, rec, verify)
    if verify:
        _verify(f, rec)
    import pyarrow.parquet as pq

    return pq.read_table(f).column("id").to_numpy(zero_copy_only=False).astype(object)


def load_store(path: str, client=None, *, nparts: int | None = None, verify: bool = True):
    """Load store ``path`` onto the workers of ``client`` as a :class:`ShardedGraph`.

    ``nparts`` defaults to the number of workers; when it differs from the stored shard count the
    shards are re-cut (see the module docstring).  ``verify`` checks every file's sha256.

    >>> from breadth.io.shard_store import load_store
    >>> g = load_store("/data/wiki.store", client)     # doctest: +SKIP
    >>> bfs(g, 30).to_pandas()                          # doctest: +SKIP
    """
    from distributed import default_client, wait

    from breadth.bfs.sharded_graph import ShardedGraph
    from breadth.pipeline.cluster import worker_addresses

    path = os.path.abspath(path)
    m = read_manifest(path)
    client = client or default_client()
    workers = worker_addresses(client)
    nparts = nparts or len(workers)
    id_map = load_id_map(path, m, verify)
    t0 = time.perf_counter()
    token = uuid.uuid4().hex[:8]
    shards = [client.submit(_load_shard, path, m, r, nparts, verify, key=f"shard-load-{token}-{r}",
                            workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False)
              for r in range(nparts)]
    wait(shards)
    for f in shards:
        if f.status == "error":
            f.result()  # raises the worker's error (e.g. CorruptStoreError) here
    return ShardedGraph(client=client, shards=shards, workers=[workers[r % len(workers)] for r in range(nparts)],
                        num_vertices=m["num_vertices"], num_input_edges=m["num_input_edges"],
                        num_edges=m["num_edges"], num_self_loops=m["num_self_loops"], directed=m["directed"],
                        construction_time=m.get("construction_time", 0.0),
                        source=dict(m.get("source", {}), store=path, load_time=time.perf_counter() - t0),
                        id_map=id_map)


def describe(path: str) -> str:
    """A human-readable summary of a store's manifest (what ``breadth info`` prints)."""
    m = read_manifest(path)
    total = sum(f["bytes"] for s in m["shards"] for f in s["files"].values())
    lines = [f"store:          {os.path.abspath(path)}",
             f"format:         {m['format']} v{m['version']} (created {m.get('created')})",
             f"vertices:       {m['num_vertices']:,}",
             f"input edges:    {m['num_input_edges']:,} ({m['num_self_loops']:,} self-loops)",
             f"edges:          {m['num_edges']:,} {'directed' if m['directed'] else 'undirected'} after cleaning",
             f"shards:         {m['nparts']} ({total / 2**20:.1f} MiB)",
             f"id map:         {'none (ids are 0..n-1)' if m['id_map'] is None else m['id_map']['file'] + ' ' + m['id_map']['dtype']}",
             f"source:         {json.dumps(m.get('source', {}))}",
             f"parameters:     {json.dumps(m.get('parameters', {}))}"]
    for s in m["shards"]:
        lines.append(f"  shard {s['rank']}: vertices [{s['lo']}, {s['hi']}), {s['nnz']:,} adjacency entries")
    return "\n".join(lines)
