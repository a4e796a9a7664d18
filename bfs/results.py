"""BFS results that stay on the workers: per-rank parent/level arrays, mapped to original ids there.

A search leaves, on the worker of each rank ``r``, ``(lo, parent, level)``: the rank's vertices are the
dense ids ``lo .. lo+len(level)-1``, ``parent`` their parents in dense ids (-1 unreached) and ``level``
their hop counts.  A result frame of rank ``r`` (``root, vertex, parent, level`` of its reached vertices,
in original ids) is built by three kinds of task: the rank splits the dense ids it needs translated
(its reached vertices and their parents) by id-map part; each part's worker translates its piece
(:func:`~breadth.bfs.id_map.take_local`); the rank assembles the frame.  Nothing n-sized passes through
the client unless asked for (:meth:`BFSResult.to_pandas`, ``.level``, ``.parent``).
"""

from __future__ import annotations

import os
import re
import shutil
import uuid

import numpy as np

from .id_map import PartitionedIdMap, part_of_dense, split_by_owner, take_local

_PART_FILE = re.compile(r"^part-\d{5}-\d{5}\.parquet$")


# ---------------------------------------------------------------- per-rank pure functions

def _reached_request(res: tuple, offsets: np.ndarray | None) -> tuple:
    """``(idx, pieces, order)``: local indices of reached vertices; per id-map part the dense ids that the
    part must translate (of the reached vertices, then of their parents); and the permutation of those
    ``2 * len(idx)`` ids that lists them piece after piece (``pieces``/``order`` empty/None without a map)."""
    lo, parent, level = res
    idx = np.flatnonzero(level >= 0)
    if offsets is None:
        return idx, [], None
    want = np.concatenate([idx + lo, parent[idx]]).astype(np.int64)
    part = part_of_dense(offsets, want)
    return idx, split_by_owner(want, part, offsets.size - 1), np.argsort(part, kind="stable")


def _request_piece(req: tuple, p: int) -> np.ndarray:
    return req[1][p]


def _translate(part: np.ndarray, offset: int, dense: np.ndarray) -> np.ndarray:
    return take_local(part, offset, dense)


def _arrow_type(dtype):
    import pyarrow as pa

    dtype = np.dtype(dtype)
    return pa.string() if dtype == object else pa.uint64() if dtype == np.uint64 else pa.int64()


def _frame(res: tuple, req: tuple, root, dtype, *translated: np.ndarray):
    """The rank's reached vertices as a pandas frame ``root, vertex, parent, level`` (original ids)."""
    import pandas as pd

    lo, parent, level = res
    idx = req[0]
    k = idx.size
    if req[2] is not None:
        both = np.empty(2 * k, dtype)
        both[req[2]] = np.concatenate(translated) if translated else np.empty(0, dtype)
        vertex, par = both[:k], both[k:]
    else:
        vertex, par = (idx + lo).astype(np.int64), parent[idx].astype(np.int64)
    roots = np.full(k, root, dtype=dtype) if dtype != object else np.array([root] * k, dtype=object)
    return pd.DataFrame({"root": roots, "vertex": vertex, "parent": par,
                         "level": level[idx].astype(np.int32)})


def _write_frame(df, path: str, dtype) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_pandas(df, schema=result_schema(dtype), preserve_index=False)
    pq.write_table(t, path)
    return len(df)


def result_schema(dtype):
    """The Arrow schema of result frames for ids of ``dtype`` (int64, uint64 or object for strings)."""
    import pyarrow as pa

    t = _arrow_type(dtype)
    return pa.schema([("root", t), ("vertex", t), ("parent", t), ("level", pa.int32())])


def _levels(res: tuple) -> np.ndarray:
    return res[2]


def _parents(res: tuple) -> np.ndarray:
    return res[1]


def _count_depth(res: tuple) -> tuple[int, int]:
    level = res[2]
    return int((level >= 0).sum()), int(level.max()) if level.size else -1


# ---------------------------------------------------------------- the handle


class BFSResult:
    """One search, its data on the workers (one piece per rank).

    ``root`` is the original id (for a search from several sources, the first of ``.sources``, which also
    labels the frames' ``root`` column).  ``.to_dask_dataframe()`` and ``.to_parquet(dir)`` keep the data
    distributed; ``.to_pandas()``, ``.level`` (``(n,)`` int32 hops, -1 unreached, indexed by dense id),
    ``.parent`` (``(n,)`` original ids of the parents; the root is its own parent; -1 unreached, or
    ``None`` in an object array when ids are strings or uint64) and ``.vertex_ids`` (``(n,)`` original id of
    each dense id, None without an id map) gather to the client on demand, for graphs that fit.

    >>> res = bfs(g, 30)                                 # doctest: +SKIP
    >>> res.to_parquet("out/levels")                     # doctest: +SKIP
    >>> res.to_dask_dataframe().level.max().compute()    # doctest: +SKIP
    """

    def __init__(self, root, ranks: list, id_map: PartitionedIdMap | None, client, sources: list | None = None):
        self.root = root
        #: every source of a search from several sources together (``root`` is the first); else ``[root]``
        self.sources = list(sources) if sources is not None else [root]
        self._ranks = ranks  # futures of (lo, parent, level), one per rank, on the rank's worker
        self._id_map = id_map
        self._client = client
        self._frames = None
        self._level = self._parent = None

    @property
    def id_dtype(self):
        return np.dtype(np.int64) if self._id_map is None else np.dtype(self._id_map.dtype)

    def frame_futures(self) -> list:
        """Futures of the per-rank pandas frames (``root, vertex, parent, level``, reached vertices only)."""
        if self._frames is None:
            c, idm, dt = self._client, self._id_map, self.id_dtype
            frames = []
            for rk in self._ranks:
                if idm is None:
                    req = c.submit(_reached_request, rk, None, pure=False)
                    frames.append(c.submit(_frame, rk, req, self.root, dt, pure=False))
                    continue
                parts = idm.futures()
                req = c.submit(_reached_request, rk, idm.offsets, pure=False)
                tr = [c.submit(_translate, parts[p], int(idm.offsets[p]),
                               c.submit(_request_piece, req, p, pure=False), pure=False)
                      for p in range(idm.nparts)]
                frames.append(c.submit(_frame, rk, req, self.root, dt, *tr, pure=False))
            self._frames = frames
        return self._frames

    def to_dask_dataframe(self):
        """A Dask DataFrame ``root, vertex, parent, level`` (original ids), one partition per rank."""
        import dask.dataframe as dd
        import pandas as pd

        dt = self.id_dtype
        meta = pd.DataFrame({"root": np.empty(0, dt), "vertex": np.empty(0, dt), "parent": np.empty(0, dt),
                             "level": np.empty(0, np.int32)})
        return dd.from_delayed(self.frame_futures(), meta=meta, verify_meta=False)

    def to_parquet(self, path: str) -> int:
        """Write the reached vertices as a Parquet dataset directory ``path`` (one file per rank, written
        by the workers); returns the row count.  See :func:`write_results_dataset`."""
        return write_results_dataset([self], path)

    def to_pandas(self):
        """Reached vertices only: columns ``root, vertex, parent, level`` in original ids (gathered)."""
        import pandas as pd

        return pd.concat(self._client.gather(self.frame_futures()), ignore_index=True)

    def summary(self) -> tuple[int, int]:
        """``(reached vertices, depth)`` computed on the workers (``O(ranks)`` numbers come back)."""
        c = self._client
        per = c.gather([c.submit(_count_depth, r, pure=False) for r in self._ranks])
        return int(sum(k for k, _ in per)), int(max(d for _, d in per))

    @property
    def reached(self) -> int:
        return self.summary()[0]

    @property
    def level(self) -> np.ndarray:
        if self._level is None:
            c = self._client
            self._level = np.concatenate(c.gather([c.submit(_levels, r, pure=False) for r in self._ranks]))
        return self._level

    @property
    def parent(self) -> np.ndarray:
        if self._parent is None:
            c = self._client
            dense = np.concatenate(c.gather([c.submit(_parents, r, pure=False) for r in self._ranks]))
            dense = dense.astype(np.int64, copy=False)
            if self._id_map is None:
                self._parent = dense
            else:
                ok = dense >= 0
                mapped = self._id_map.to_original(dense[ok])
                if self._id_map.dtype == np.int64:
                    out = np.full(dense.size, -1, np.int64)
                else:  # uint64 or string ids: -1 is not one of their ids, so unreached -> None
                    out = np.full(dense.size, None, dtype=object)
                out[ok] = mapped
                self._parent = out
        return self._parent

    @property
    def vertex_ids(self) -> np.ndarray | None:
        return None if self._id_map is None else self._id_map.gather()

    def __repr__(self) -> str:
        if len(self.sources) > 1:
            return f"BFSResult(sources={self.sources!r}, {len(self._ranks)} rank(s))"
        return f"BFSResult(root={self.root!r}, {len(self._ranks)} rank(s))"


def is_results_dataset(path: str) -> bool:
    """Whether directory ``path`` holds a results dataset of :func:`write_results_dataset` (part files
    only, so that replacing it loses nothing else)."""
    return os.path.isdir(path) and all(_PART_FILE.match(e) for e in os.listdir(path))


def write_results_dataset(results: list, path: str) -> int:
    """Write results as one Parquet dataset directory ``path`` (``root, vertex, parent, level``, original
    ids, unreached vertices omitted): each worker writes its ranks' files ``part-RRRRR-KKKKK.parquet``
    (root index, rank) into a temporary directory next to ``path``, which is then renamed to ``path``.
    An existing ``path`` is replaced only if it is an earlier results dataset (nothing but part files).
    Returns the row count.  Readable with ``pandas.read_parquet(path)``.

    >>> write_results_dataset(bfs(g, [1, 2]), "out/bfs")   # doctest: +SKIP
    """
    from distributed import wait

    path = os.path.abspath(path)
    if os.path.exists(path):
        if not is_results_dataset(path):
            raise FileExistsError(f"{path} exists and is not a results dataset written by breadth; "
                                  "remove it or choose another path")
    parent, base = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex[:8]}")
    os.mkdir(tmp)
    try:
        futs = []
        for i, res in enumerate(results):
            c = res._client
            for r, f in enumerate(res.frame_futures()):
                futs.append(c.submit(_write_frame, f, os.path.join(tmp, f"part-{i:05d}-{r:05d}.parquet"),
                                     res.id_dtype, pure=False))
        if futs:
            wait(futs)
            rows = int(sum(results[0]._client.gather(futs)))
        else:
            rows = 0
        old = None
        if os.path.exists(path):
            old = os.path.join(parent, f".{base}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return rows
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
