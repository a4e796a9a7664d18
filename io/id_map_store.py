"""The id map in a shard store: one file per part of a :class:`~breadth.bfs.id_map.PartitionedIdMap`.

Layout (inside the store directory)::

    id_map-00000.npy | .parquet     part 0: its original ids in order (npy for integers, Parquet for strings)
    id_map-00001.npy | .parquet     ...

Each part is written by the worker that holds it (temporary name, fsync, rename) and loaded by a worker,
so neither the client nor any one worker handles the whole map.  The manifest's ``"id_map"`` record is
``{"layout": "parts", "owner": "hash" | "range", "order": "value" | "hash", "dtype", "offsets": [P+1],
"bounds": [P] | None, "parts": [{file, sha256_blocks, block_bytes, bytes, dtype, shape}, ...]}``: ``O(P)``
numbers (and a part's sha256 per 64 MiB block).  ``order`` says how a part is sorted
(:class:`~breadth.bfs.id_map.PartitionedIdMap`): integer ids by their hash, as hash relabeling sorts them; a
record without ``order`` is sorted by value.

A map of one range part (the table path of small dense-ish integer ids) is written as the single file
``id_map.npy`` / ``id_map.parquet`` (record ``{"file": ...}``); both layouts load as a
:class:`PartitionedIdMap`.
"""

from __future__ import annotations

import contextlib
import os
import re

import numpy as np

from breadth.bfs.id_map import PartitionedIdMap, as_id_map

from .errors import CorruptStoreError
from .store_files import load_array, save_npy, save_strings, verify_file, write_id_map_file

PART_FILE = re.compile(r"^id_map-\d{5}\.(npy|parquet)$")


def part_name(p: int, dtype) -> str:
    return f"id_map-{p:05d}.{'parquet' if np.dtype(dtype) == object else 'npy'}"


def _write_part(arr, path: str) -> dict:
    """One part -> ``path`` (temp name + fsync + rename); its manifest record.  Runs on the part's worker.
    A part of strings (an Arrow string array, or an object array) is written as it is."""

    if path.endswith(".npy"):
        return save_npy(path, np.asarray(arr), atomic=True)
    from breadth.bfs.arrow_strings import as_strings  # string ids only (it loads Numba)

    return save_strings(path, as_strings(arr))


def _load_part(path: str, rec: dict, verify: bool):
    """One part file -> its ids: a NumPy array, an Arrow string array for strings.  Runs on a worker."""

    if path.endswith(".npy"):
        return load_array(path, rec, verify)
    if verify:
        verify_file(path, rec)
    import pyarrow.parquet as pq

    from breadth.bfs.arrow_strings import as_strings

    return as_strings(pq.read_table(path).column("id"))


def _head(a) -> np.ndarray:
    return np.asarray(a[:1])


def write_id_map(id_map, directory: str, client=None) -> dict:
    """Write ``id_map`` (a :class:`PartitionedIdMap` or a sorted array) into store ``directory``;
    returns the manifest record.  Parts are written by the workers that hold them.

    >>> rec = write_id_map(graph.id_map, "/data/g.store", client)    # doctest: +SKIP
    >>> len(rec["parts"]) == graph.id_map.nparts                     # doctest: +SKIP
    True
    """

    idm = as_id_map(id_map, client)
    if idm.owner == "range" and idm.nparts == 1:
        rec = write_id_map_file(idm.gather(), directory)  # the single-file layout
        _remove_parts(directory, keep=0)
        return rec
    c = client or idm._client()
    futs = idm.futures()
    names = [part_name(p, idm.dtype) for p in range(idm.nparts)]
    recs = c.gather([c.submit(_write_part, f, os.path.join(directory, nm), pure=False)
                     for f, nm in zip(futs, names)])
    for rec, nm in zip(recs, names):
        rec["file"] = nm
    _remove_parts(directory, keep=idm.nparts, dtype=idm.dtype)
    for stale in ("id_map.npy", "id_map.parquet"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, stale))
    dt = np.dtype(idm.dtype)
    rec = {"layout": "parts", "owner": idm.owner, "order": idm.order, "dtype": "string" if dt == object else dt.name,
           "offsets": [int(x) for x in idm.offsets],
           "bounds": None if idm.bounds is None else [x if isinstance(x, str) else int(x) for x in idm.bounds],
           "parts": recs}
    if dt == object and idm.owner == "hash":
        from breadth.bfs.string_hash import STRING_HASH  # string ids only: it loads Numba

        rec["string_hash"] = STRING_HASH  # how string ids were given to parts: how a lookup finds its part
    return rec


def _remove_parts(directory: str, keep: int, dtype=None) -> None:
    """Remove part files of another map (other count or kind) left by an earlier run, so none is stale."""
    want = {part_name(p, dtype) for p in range(keep)} if dtype is not None else set()
    for e in os.listdir(directory):
        if PART_FILE.match(e) and e not in want:
            os.remove(os.path.join(directory, e))


def id_map_files(rec: dict | None) -> list[tuple[str, dict]]:
    """``(file name, record)`` of every file of an id-map record (for checksums and clean-up)."""
    if not rec:
        return []
    if rec.get("layout") == "parts":
        return [(r["file"], r) for r in rec["parts"]]
    return [(rec["file"], rec)]


def describe_id_map(rec: dict | None) -> str:
    if rec is None:
        return "none (ids are 0..n-1)"
    if rec.get("layout") == "parts":
        sizes = np.diff(rec["offsets"])
        return (f"{len(rec['parts'])} part(s) by {rec['owner']} owner, {rec['dtype']}, "
                f"{int(sizes.min()):,}..{int(sizes.max()):,} ids each")
    return f"{rec['file']} {rec['dtype']}"


def load_id_map_parts(path: str, rec: dict | None, client, workers: list[str], verify: bool = True
                      ) -> PartitionedIdMap | None:
    """The store's id map as a :class:`PartitionedIdMap` whose parts the workers loaded (round-robin).

    A single-file map becomes one range part."""
    from distributed import wait

    if rec is None:
        return None
    if rec.get("layout") != "parts":
        dtype = np.dtype(object) if rec["dtype"] == "string" else np.dtype(rec["dtype"])
        f = client.submit(_load_part, os.path.join(path, rec["file"]), rec, verify,
                          workers=[workers[0]], allow_other_workers=True, pure=False)
        n = int(rec["shape"][0])
        wait([f])
        f.result()  # raises a verification error here
        lo = client.submit(_head, f, pure=False).result()
        return PartitionedIdMap([f], np.array([0, n], np.int64), dtype, "range",
                                lo if lo.size else np.zeros(1, np.int64), client)
    dtype = np.dtype(object) if rec["dtype"] == "string" else np.dtype(rec["dtype"])
    if dtype == object and rec["owner"] == "hash":
        from breadth.bfs.string_hash import STRING_HASH  # string ids only: it loads Numba

        if rec.get("string_hash") != STRING_HASH:
            raise CorruptStoreError(f"{path}: its string ids were given to parts by "
                                    f"{rec.get('string_hash', 'an earlier hash')}, not {STRING_HASH}; "
                                    "ingest the input again")
    futs = [client.submit(_load_part, os.path.join(path, r["file"]), r, verify,
                          workers=[workers[p % len(workers)]], allow_other_workers=True, pure=False)
            for p, r in enumerate(rec["parts"])]
    wait(futs)
    for f in futs:
        if f.status == "error":
            f.result()
    bounds = None if rec.get("bounds") is None else np.array(rec["bounds"], dtype=dtype)
    return PartitionedIdMap(futs, np.array(rec["offsets"], np.int64), dtype, rec["owner"], bounds, client,
                            order=rec.get("order", "value"))
