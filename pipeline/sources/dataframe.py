"""``from_dask_dataframe``: edge lists from ETL jobs (pandas-backed, or cuDF-backed where cuDF exists)."""

from __future__ import annotations

import numpy as np


def _py(x):
    """A NumPy scalar as the Python value (messages show ``11``, not ``np.int64(11)``)."""
    return x.item() if isinstance(x, np.generic) else x


def _integral_ids(a: np.ndarray, index, column: str, where: str) -> np.ndarray:
    """Float ids (a column that went through NaN-able arithmetic or CSV type inference) as integers:
    3.0 is vertex 3, exactly as the integer column would give it -- not the string "3.0", a vertex
    apart from 3.  A non-integral or infinite value is an error naming the row; a negative one is
    refused here next to ids >= 2**63, else by ``normalize_ids`` (int64).  int64, or uint64 when some id
    needs it (floats are exact integers up there)."""
    from breadth.io.errors import IdRangeError, NegativeIdError, NonNumericIdError

    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(~np.isfinite(a) | (np.floor(a) != a))
    if bad.size:
        i = bad[0]
        raise NonNumericIdError(f"{where}: column {column!r} row {i} (index {_py(index[i])!r}): vertex id "
                                f"{float(a[i])!r} is not an integer ({bad.size} such value(s) in the column)",
                                column=column, line=int(i))
    big = np.flatnonzero(a >= 2.0**64)
    if big.size:
        i = big[0]
        raise IdRangeError(f"{where}: column {column!r} row {i} (index {_py(index[i])!r}): vertex id "
                           f"{float(a[i])!r} exceeds the uint64 range", column=column, line=int(i))
    if a.size and a.max() >= 2.0**63:
        if a.min() < 0:
            i = int(np.argmin(a))
            raise NegativeIdError(f"{where}: column {column!r} row {i} (index {_py(index[i])!r}): negative "
                                  f"vertex id {float(a[i])!r}", column=column, line=i)
        return a.astype(np.uint64)
    return a.astype(np.int64)


def _partition_edges(df, src: str, dst: str, where: str):
    from breadth.io.errors import MissingColumnError, NegativeIdError, NonNumericIdError
    from breadth.io.chunk_stats import ChunkStats

    from breadth.io.id_checks import normalize_ids

    for c in (src, dst):
        if c not in df.columns:
            raise MissingColumnError(f"{where}: no column {c!r}; columns are {list(df.columns)}", column=c)
    if type(df).__module__.startswith("cudf"):  # ids stay on the GPU
        from breadth.io.cudf_edges import device_edges, device_string_edges

        if all(df[c].dtype.kind in "iuf" for c in (src, dst)):
            return device_edges(df, src, dst, where)
        return device_string_edges(df, src, dst, where)
    cols = []
    for c in (src, dst):
        s = df[c]
        missing = np.flatnonzero(s.isna().to_numpy())
        if missing.size:
            i = missing[0]
            raise NonNumericIdError(f"{where}: column {c!r} row {i} (index {_py(s.index[i])!r}): missing id (NaN/None);"
                                    f" {missing.size} missing id(s) in the column", column=c, line=int(i))
        a = s.to_numpy()
        if a.dtype.kind == "f":
            a = _integral_ids(a, s.index, c, where)
        elif a.dtype.kind not in "iu":
            a = s.astype(str).to_numpy(dtype=object)
        cols.append(a)
    if (cols[0].dtype == object) != (cols[1].dtype == object):
        cols = [c.astype(str).astype(object) for c in cols]
    elif cols[0].dtype != cols[1].dtype:
        # int64 with uint64: uint64 holds both, once the int64 side is known to have no negatives
        # (NumPy's common type for the pair is float64, which would round ids above 2**53)
        for c, a in zip((src, dst), cols):
            neg = np.flatnonzero(a < 0) if a.dtype.kind == "i" else ()
            if len(neg):
                i = neg[0]
                raise NegativeIdError(f"{where}: column {c!r} row {i} (index {_py(df.index[i])!r}): negative vertex "
                                      f"id {a[i]}", column=c, line=int(i))
        cols = [a.astype(np.uint64) for a in cols]
    edges = normalize_ids(np.stack(cols, axis=1), where)
    return edges, ChunkStats(edges=int(edges.shape[0]))


def from_dask_dataframe(ddf, src: str = "src", dst: str = "dst", *, directed: bool = False, relabel: bool = True,
                        persist: bool = True, client=None, spill_dir: str | None = None):
    """An :class:`~breadth.pipeline.edges.EdgeList` from two columns of a Dask DataFrame (an ETL job's output).

    Each partition becomes one chunk, parsed and relabeled on the workers: the client holds ``O(chunks)``
    numbers, never the edges or the ids.  A cuDF-backed frame (dask_cudf on dask-cuda workers) keeps its
    ids on the GPUs: integers are checked, relabeled and handed to ``prepare(device="gpu")`` as CuPy
    chunks (:mod:`breadth.pipeline.relabel.hash_relabel_gpu`), strings as cuDF string columns.  cuDF is never
    required.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        pandas- or cuDF-backed.  The id columns hold integers of any width, floats that are whole numbers
        (``3.0`` is vertex 3), or strings (any other type is read as its text).
    src, dst : str, default "src", "dst"
        The source and target columns.
    directed : bool, default False
        Whether a row ``(u, v)`` is the arc ``u -> v`` only.
    relabel : bool, default True
        Relabel the ids to ``0..n-1`` (``id_map[i]`` the original id of vertex ``i``).  ``False``: the ids
        must be non-negative int64 and are kept (``num_vertices = max id + 1``, no id map).
    persist : bool, default True
        Keep the parsed chunks in the workers' memory (Dask spills them under pressure), so that the frame
        is computed once; without it each chunk is computed again when the graph is prepared.
    client : distributed.Client, optional
        Default: the current client.
    spill_dir : str, optional
        Where relabeling's id shuffle writes its pieces when the workers' memory limit needs disk
        (default: a temporary directory).

    Returns
    -------
    EdgeList
        ``num_edges`` the frame's rows; ``id_map`` a :class:`~breadth.bfs.id_map.PartitionedIdMap` whose
        parts stay on the workers (``None`` with ``relabel=False``).

    Raises
    ------
    MissingColumnError
        ``src`` or ``dst`` is not a column of ``ddf``.
    NonNumericIdError
        A missing (NaN/None) or non-integral id, or strings mixed with integers across partitions (the
        message names the partition, column and row).
    NegativeIdError, IdRangeError
        An id below zero, or beyond the uint64 range.
    EmptyInputError
        The frame has no rows.
    IngestError
        ``relabel=False`` with ids that are not int64.
    ValueError
        No ``client`` was given and none is current.

    Examples
    --------
    >>> import pandas as pd
    >>> import dask.dataframe as dd                                          # doctest: +SKIP
    >>> from breadth.pipeline import from_dask_dataframe, local_cluster
    >>> client = local_cluster(workers=2)                                    # doctest: +SKIP
    >>> frame = pd.DataFrame({"a": [10, 20], "b": [20, 30]})
    >>> el = from_dask_dataframe(dd.from_pandas(frame, npartitions=1), src="a", dst="b")  # doctest: +SKIP
    >>> el.num_vertices, el.num_edges                                        # doctest: +SKIP
    (3, 2)
    """
    import dask

    from breadth.io.errors import MissingColumnError

    from ..relabel.relabel import edge_list_from_parts

    for c in (src, dst):
        if c not in ddf.columns:
            raise MissingColumnError(f"Dask DataFrame has no column {c!r}; columns are {list(ddf.columns)}",
                                     column=c)
    parts = [dask.delayed(_partition_edges, pure=True)(p, src, dst, f"partition {i}")
             for i, p in enumerate(ddf[[src, dst]].to_delayed())]
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "dask_dataframe", "src": src, "dst": dst}, spill_dir=spill_dir)
