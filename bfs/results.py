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

from .id_map import PartitionedIdMap, part_of_dense, take_local

# one file per root, rank and slice of a rank's vertices; datasets written before slicing lack the slice
_PART_FILE = re.compile(r"^part-\d{5}-\d{5}(-\d{5})?\.parquet$")

#: a rank's vertices per results file: what a worker holds while it writes a file is a few arrays of this
#: many ids (the rank's parents and levels aside), whatever the graph's size
SLICE_VERTICES = 1 << 21


# ---------------------------------------------------------------- per-rank pure functions

def _reached_request(res: tuple, offsets: np.ndarray | None, start: int = 0, stop: int | None = None) -> tuple:
    """``(idx, pieces, part)`` for the rank's local vertices ``start .. stop-1``: local indices of the
    reached ones; per id-map part the dense ids that the part must translate (of the reached vertices,
    then of their parents); and the part of each of those ``2 * len(idx)`` ids (int32), whose stable
    order the pieces keep (``pieces`` empty, ``part`` None without a map)."""
    lo, parent, level = res
    stop = level.size if stop is None else stop
    idx = np.flatnonzero(level[start:stop] >= 0) + start
    if offsets is None:
        return idx, [], None
    want = np.concatenate([idx + lo, parent[idx]]).astype(np.int64, copy=False)
    part = part_of_dense(offsets, want).astype(np.int32)
    pieces = [want[part == p] for p in range(offsets.size - 1)]
    return idx, pieces, part


def _request_piece(req: tuple, p: int) -> np.ndarray:
    return req[1][p]


def _translate(part: np.ndarray, offset: int, dense: np.ndarray) -> np.ndarray:
    return take_local(part, offset, dense)


def _rank_size(res: tuple) -> int:
    return int(res[2].size)


def _arrow_type(dtype):
    import pyarrow as pa

    dtype = np.dtype(dtype)
    return pa.string() if dtype == object else pa.uint64() if dtype == np.uint64 else pa.int64()


def _columns(res: tuple, req: tuple, root, dtype, translated: tuple) -> dict:
    """The reached vertices of a request (:func:`_reached_request`) as columns ``root, vertex, parent,
    level`` (original ids): the translated pieces put back in the request's order, part by part."""
    lo, parent, level = res
    idx, _, part = req
    k = idx.size
    if part is not None:
        both = np.empty(2 * k, dtype)
        for p, got in enumerate(translated):
            both[part == p] = got
        vertex, par = both[:k], both[k:]
    else:
        vertex, par = (idx + lo).astype(np.int64), parent[idx].astype(np.int64)
    roots = np.full(k, root, dtype=dtype) if dtype != object else np.array([root] * k, dtype=object)
    return {"root": roots, "vertex": vertex, "parent": par, "level": level[idx].astype(np.int32)}


def _frame(res: tuple, req: tuple, root, dtype, *translated: np.ndarray):
    """The rank's reached vertices as a pandas frame ``root, vertex, parent, level`` (original ids)."""
    import pandas as pd

    return pd.DataFrame(_columns(res, req, root, dtype, translated))


def _write_slice(res: tuple, req: tuple, root, dtype, path: str, *translated: np.ndarray) -> int:
    """One request's rows written as Parquet file ``path`` (Arrow columns over the arrays, no frame)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = _columns(res, req, root, dtype, translated)
    schema = result_schema(dtype)
    t = pa.table([pa.array(cols[f.name], f.type) for f in schema], schema=schema)
    pq.write_table(t, path)
    return t.num_rows


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
    """One search's result, its data left on the workers (one piece per rank).

    :func:`~breadth.bfs.bfs` and :func:`~breadth.bfs.bfs_batch` return these; nothing n-sized reaches the
    client unless asked for.  :meth:`to_dask_dataframe`, :meth:`to_parquet` and :meth:`summary` keep the
    data distributed; :meth:`to_pandas`, :attr:`level`, :attr:`parent` and :attr:`vertex_ids` gather it to
    the client, for graphs that fit.  The result frames have columns ``root, vertex, parent, level`` in
    original ids, reached vertices only.

    Parameters
    ----------
    root : int or str
        The search's root, an original id (for a search from several sources, the first of them).
    ranks : list of distributed.Future
        Per rank, a future of ``(lo, parent, level)`` on the rank's worker: its vertices are the dense ids
        ``lo .. lo + len(level) - 1``, ``parent`` in dense ids (-1 unreached), ``level`` int32 hops.
    id_map : PartitionedIdMap or None
        Dense id -> original id; None when they coincide.
    client : distributed.Client
        The client of the cluster that holds the pieces.
    sources : list, optional
        Every source of a search from several sources together (default ``[root]``).
    workers : list of str, optional
        The workers that hold the pieces and the id map (the graph's): reading the result while one of them
        is gone raises :class:`~breadth.bfs.WorkerLost` naming it, within about a second, where Dask would
        wait forever for the pieces pinned to it (default: every worker of the cluster when reading begins).

    Attributes
    ----------
    root
        As given; it labels the frames' ``root`` column.
    sources : list
        Every source (``[root]`` for a single-root search).

    Examples
    --------
    >>> res = bfs(g, 30)                                 # doctest: +SKIP
    >>> res.summary()                                    # doctest: +SKIP
    >>> res.to_parquet("out/levels")                     # doctest: +SKIP
    >>> res.to_dask_dataframe().level.max().compute()    # doctest: +SKIP
    """

    def __init__(self, root, ranks: list, id_map: PartitionedIdMap | None, client, sources: list | None = None,
                 workers: list[str] | None = None):
        self.root = root
        self._workers = list(workers) if workers is not None else None
        #: every source of a search from several sources together (``root`` is the first); else ``[root]``
        self.sources = list(sources) if sources is not None else [root]
        self._ranks = ranks  # futures of (lo, parent, level), one per rank, on the rank's worker
        self._id_map = id_map
        self._client = client
        self._frames = None
        self._level = self._parent = None
        self._rank_sizes = None

    def _watch(self, stage: str = "reading of a result"):
        """A guard (:func:`~breadth.bfs.worker_loss.watch_workers`) over the workers that hold this result."""
        from .worker_loss import watch_workers

        return watch_workers(self._client, stage, self._workers)

    def _gather(self, futures: list) -> list:
        with self._watch():
            return self._client.gather(futures)

    @property
    def id_dtype(self):
        """The NumPy dtype of the original ids: int64, uint64, or object for strings."""
        return np.dtype(np.int64) if self._id_map is None else np.dtype(self._id_map.dtype)

    def frame_futures(self) -> list:
        """The result frames, one per rank, built on the workers (once; later calls return the same).

        Returns
        -------
        list of distributed.Future
            Futures of pandas frames ``root, vertex, parent, level`` (original ids; ``level`` int32) of each
            rank's reached vertices, in rank order.

        Examples
        --------
        >>> frames = bfs(g, 30).frame_futures()          # doctest: +SKIP
        >>> client.gather(frames[0]).head()              # doctest: +SKIP
        """
        if self._frames is None:
            c, idm, dt = self._client, self._id_map, self.id_dtype
            frames = []
            for rk in self._ranks:
                if idm is None:
                    req = c.submit(_reached_request, rk, None, pure=False)
                    frames.append(c.submit(_frame, rk, req, self.root, dt, pure=False))
                    continue
                req = c.submit(_reached_request, rk, idm.offsets, pure=False)
                frames.append(c.submit(_frame, rk, req, self.root, dt, *self._translations(req), pure=False))
            self._frames = frames
        return self._frames

    def _translations(self, req) -> list:
        """Futures of the original ids of a request's pieces, each translated by its id-map part's worker."""
        c, idm = self._client, self._id_map
        parts = idm.futures()
        return [c.submit(_translate, parts[p], int(idm.offsets[p]), c.submit(_request_piece, req, p, pure=False),
                         pure=False) for p in range(idm.nparts)]

    def write_futures(self, folder: str, index: int, start: int) -> list:
        """Write one slice of every rank's vertices as Parquet files, on the ranks' workers.

        The building block of :func:`write_results_dataset`, which names the slices and the folder.

        Parameters
        ----------
        folder : str
            The directory of the files (existing, reachable by the workers).
        index : int
            This result's index in the dataset (``IIIII`` of the file names).
        start : int
            The slice's first vertex, a multiple of :data:`SLICE_VERTICES`, relative to each rank's first.

        Returns
        -------
        list of distributed.Future
            Futures of the row counts of the files ``part-IIIII-RRRRR-SSSSS.parquet`` (``index``, rank,
            slice) written for the vertices ``start .. start + SLICE_VERTICES - 1`` of each rank; ranks with
            fewer vertices write nothing.

        Examples
        --------
        >>> futs = bfs(g, 30).write_futures("out/tmp", 0, 0)   # doctest: +SKIP
        >>> sum(client.gather(futs))                           # doctest: +SKIP
        """
        c, idm, dt = self._client, self._id_map, self.id_dtype
        out = []
        for r, (rk, n) in enumerate(zip(self._ranks, self._sizes())):
            if start >= n and not (start == 0 and n == 0):
                continue
            stop = start + SLICE_VERTICES
            req = c.submit(_reached_request, rk, None if idm is None else idm.offsets, start, stop, pure=False)
            tr = [] if idm is None else self._translations(req)
            path = os.path.join(folder, f"part-{index:05d}-{r:05d}-{start // SLICE_VERTICES:05d}.parquet")
            out.append(c.submit(_write_slice, rk, req, self.root, dt, path, *tr, pure=False))
        return out

    def _sizes(self) -> list[int]:
        """Vertices of each rank (``O(ranks)`` numbers, asked once)."""
        if self._rank_sizes is None:
            c = self._client
            self._rank_sizes = self._gather([c.submit(_rank_size, r, pure=False) for r in self._ranks])
        return self._rank_sizes

    def to_dask_dataframe(self):
        """The reached vertices as a Dask DataFrame, one partition per rank (nothing computed yet).

        Returns
        -------
        dask.dataframe.DataFrame
            Columns ``root, vertex, parent, level``: original ids (:attr:`id_dtype`) and int32 levels.

        Examples
        --------
        >>> bfs(g, 30).to_dask_dataframe().level.max().compute()    # doctest: +SKIP
        """
        import dask.dataframe as dd
        import pandas as pd

        dt = self.id_dtype
        meta = pd.DataFrame({"root": np.empty(0, dt), "vertex": np.empty(0, dt), "parent": np.empty(0, dt),
                             "level": np.empty(0, np.int32)})
        return dd.from_delayed(self.frame_futures(), meta=meta, verify_meta=False)

    def to_parquet(self, path: str) -> int:
        """Write the reached vertices as a Parquet dataset directory, from the workers.

        See :func:`write_results_dataset`: files per rank and slice, written into a temporary directory
        that is then renamed to ``path``.

        Parameters
        ----------
        path : str
            The dataset directory; an existing one is replaced only if it is a results dataset itself.

        Returns
        -------
        int
            The rows written (the reached vertices).

        Raises
        ------
        FileExistsError
            When ``path`` exists and holds anything but a results dataset's part files.

        Examples
        --------
        >>> bfs(g, 30).to_parquet("out/levels")           # doctest: +SKIP
        >>> pandas.read_parquet("out/levels")             # doctest: +SKIP
        """
        return write_results_dataset([self], path)

    def to_pandas(self):
        """The reached vertices as one pandas frame, gathered to the client (for graphs that fit).

        Returns
        -------
        pandas.DataFrame
            Columns ``root, vertex, parent, level``: original ids (:attr:`id_dtype`) and int32 levels, rank
            by rank.

        Examples
        --------
        >>> df = bfs(g, 30).to_pandas()                  # doctest: +SKIP
        >>> df.groupby("level").size()                   # doctest: +SKIP
        """
        import pandas as pd

        with self._watch():
            return pd.concat(self._client.gather(self.frame_futures()), ignore_index=True)

    def summary(self) -> tuple[int, int]:
        """How far the search went, computed on the workers (``O(ranks)`` numbers come back).

        Returns
        -------
        reached : int
            Vertices reached, the sources included.
        depth : int
            The largest level (0 when only the sources were reached).

        Examples
        --------
        >>> bfs(g, 30).summary()                          # doctest: +SKIP
        """
        c = self._client
        per = self._gather([c.submit(_count_depth, r, pure=False) for r in self._ranks])
        return int(sum(k for k, _ in per)), int(max(d for _, d in per))

    @property
    def reached(self) -> int:
        """Vertices reached (:meth:`summary`'s first figure)."""
        return self.summary()[0]

    @property
    def level(self) -> np.ndarray:
        """``(n,)`` int32 hops from the root, indexed by dense id (-1 unreached); gathered once."""
        if self._level is None:
            c = self._client
            self._level = np.concatenate(self._gather([c.submit(_levels, r, pure=False) for r in self._ranks]))
        return self._level

    @property
    def parent(self) -> np.ndarray:
        """``(n,)`` parents in original ids, indexed by dense id; gathered once.

        The root is its own parent.  Unreached vertices hold -1 where ids are int64; where they are uint64
        or strings the array is an object array and unreached vertices hold None.
        """
        if self._parent is None:
            c = self._client
            dense = np.concatenate(self._gather([c.submit(_parents, r, pure=False) for r in self._ranks]))
            dense = dense.astype(np.int64, copy=False)
            if self._id_map is None:
                self._parent = dense
            else:
                ok = dense >= 0
                with self._watch():
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
        """``(n,)`` original id of each dense id (gathered), or None when the graph has no id map."""
        if self._id_map is None:
            return None
        with self._watch():
            return self._id_map.gather()

    def __repr__(self) -> str:
        if len(self.sources) > 1:
            return f"BFSResult(sources={self.sources!r}, {len(self._ranks)} rank(s))"
        return f"BFSResult(root={self.root!r}, {len(self._ranks)} rank(s))"


def is_results_dataset(path: str) -> bool:
    """Whether directory ``path`` holds a results dataset of :func:`write_results_dataset` (part files
    only, so that replacing it loses nothing else)."""
    return os.path.isdir(path) and all(_PART_FILE.match(e) for e in os.listdir(path))


def _rounds(results: list) -> list[list[tuple[int, int]]]:
    """The ``(result index, first vertex)`` slices of every result, grouped into rounds of at most
    :data:`SLICE_VERTICES` vertices per rank (several small results share a round; a large one takes one
    round per slice)."""
    rounds, cur, size = [], [], 0
    for i, res in enumerate(results):
        n = max(res._sizes(), default=0)
        for start in range(0, max(n, 1), SLICE_VERTICES):
            k = max(1, min(SLICE_VERTICES, n - start))
            if cur and size + k > SLICE_VERTICES:
                rounds.append(cur)
                cur, size = [], 0
            cur.append((i, start))
            size += k
    return rounds + [cur] if cur else rounds


def write_results_dataset(results: list, path: str) -> int:
    """Write results as one Parquet dataset directory ``path`` (``root, vertex, parent, level``, original
    ids, unreached vertices omitted): each worker writes its ranks' files ``part-IIIII-RRRRR-SSSSS.parquet``
    (root index, rank, slice of :data:`SLICE_VERTICES` of the rank's vertices) into a temporary directory next
    to ``path``, which is then renamed to ``path``.  The slices are written one after another, so a worker
    holds one slice's ids and rows at a time, not the rank's.  An existing ``path`` is replaced only if it is
    a results dataset itself (nothing but part files).  Returns the row count.  Readable with
    ``pandas.read_parquet(path)``.

    >>> write_results_dataset(bfs(g, [1, 2]), "out/bfs")   # doctest: +SKIP
    """
    from distributed import wait

    from .worker_loss import watch_workers

    path = os.path.abspath(path)
    if os.path.exists(path):
        if not is_results_dataset(path):
            raise FileExistsError(f"{path} exists and is not a results dataset written by breadth; "
                                  "remove it or choose another path")
    parent, base = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{base}.tmp-{uuid.uuid4().hex[:8]}")
    os.mkdir(tmp)
    # the workers that hold the results' pieces (None: any of the cluster's)
    held = [r._workers for r in results]
    workers = None if any(w is None for w in held) else sorted({w for ws in held for w in ws})
    try:
        rows = 0
        with watch_workers(results[0]._client, "write of results", workers):
            for group in _rounds(results):
                futs = [f for i, start in group for f in results[i].write_futures(tmp, i, start)]
                wait(futs)
                rows += int(sum(results[0]._client.gather(futs)))
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
