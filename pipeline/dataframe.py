"""``from_dask_dataframe``: edge lists from ETL jobs (pandas-backed, or cuDF-backed where cuDF exists)."""

from __future__ import annotations

import numpy as np


def _partition_edges(df, src: str, dst: str, where: str):
    from breadth.io.errors import MissingColumnError, NonNumericIdError
    from breadth.io.text_parser import ChunkStats

    from .relabel import normalize_ids

    for c in (src, dst):
        if c not in df.columns:
            raise MissingColumnError(f"{where}: no column {c!r}; columns are {list(df.columns)}", column=c)
    if hasattr(df, "to_pandas") and not hasattr(df, "to_numpy"):  # pragma: no cover - cuDF without to_numpy
        df = df.to_pandas()
    elif type(df).__module__.startswith("cudf"):  # cuDF: ids come to host for relabeling
        df = df[[src, dst]].to_pandas()
    cols = []
    for c in (src, dst):
        s = df[c]
        if s.isna().any():
            raise NonNumericIdError(f"{where}: column {c!r} has {int(s.isna().sum())} missing id(s)", column=c)
        a = s.to_numpy()
        if a.dtype.kind not in "iu":
            a = s.astype(str).to_numpy(dtype=object)
        cols.append(a)
    if (cols[0].dtype == object) != (cols[1].dtype == object):
        cols = [c.astype(str).astype(object) for c in cols]
    elif cols[0].dtype != cols[1].dtype:
        cols = [c.astype(np.uint64) if np.result_type(*[x.dtype for x in cols]).kind == "f" else c
                for c in cols]
    edges = normalize_ids(np.stack(cols, axis=1), where)
    return edges, ChunkStats(edges=int(edges.shape[0]))


def from_dask_dataframe(ddf, src: str = "src", dst: str = "dst", *, directed: bool = False, relabel: bool = True,
                        persist: bool = True, client=None):
    """An :class:`~breadth.pipeline.edges.EdgeList` from the ``src``/``dst`` columns of a Dask DataFrame.

    Each partition becomes one chunk; integer ids (any width) or string ids are relabeled to
    ``0..n-1`` out of core, ``id_map`` giving the originals back.  cuDF-backed frames work where cuDF
    is installed (ids are moved to host for relabeling); cuDF is never required.

    >>> import dask.dataframe as dd, pandas as pd
    >>> from breadth.pipeline import from_dask_dataframe
    >>> ddf = dd.from_pandas(pd.DataFrame({"a": [10, 20], "b": [20, 30]}), npartitions=1)
    >>> el = from_dask_dataframe(ddf, src="a", dst="b")          # doctest: +SKIP
    >>> el.num_vertices, list(el.id_map)                        # doctest: +SKIP
    (3, [10, 20, 30])
    """
    import dask

    from breadth.io.errors import MissingColumnError

    from .relabel import edge_list_from_parts

    for c in (src, dst):
        if c not in ddf.columns:
            raise MissingColumnError(f"Dask DataFrame has no column {c!r}; columns are {list(ddf.columns)}",
                                     column=c)
    parts = [dask.delayed(_partition_edges, pure=True)(p, src, dst, f"partition {i}")
             for i, p in enumerate(ddf[[src, dst]].to_delayed())]
    return edge_list_from_parts(parts, client, directed=directed, relabel=relabel, persist=persist,
                                source={"kind": "dask_dataframe", "src": src, "dst": dst})
