"""The id checks every host reader applies to a chunk: integers or strings, no negatives, int64 where the
ids fit and uint64 beyond (:mod:`breadth.io.cudf_edges` is the GPU twin)."""

from __future__ import annotations

import numpy as np

from .errors import IdRangeError, NegativeIdError, NonNumericIdError

INT64_MAX = np.iinfo(np.int64).max


def id_kind(a: np.ndarray) -> str:
    """``"str"`` (strings, object, a cuDF string column, an Arrow table of string columns), ``"int"``,
    ``"uint"`` or ``"other"``: what a chunk's id column holds."""
    if type(a).__module__.partition(".")[0] in ("cudf", "pyarrow"):  # readers' frames of string ids
        return "str"
    if a.dtype == object or a.dtype.kind in "USO":
        return "str"
    if a.dtype.kind == "u":
        return "uint"
    if a.dtype.kind == "i":
        return "int"
    return "other"


def normalize_ids(edges: np.ndarray, where: str) -> np.ndarray:
    """Ids as int64 where they fit, uint64 beyond, object (str) for strings; negatives rejected."""
    k = id_kind(edges)
    if k == "str":
        return edges.astype(object, copy=False)
    if k == "other":
        raise NonNumericIdError(f"{where}: vertex ids must be integers or strings, got dtype {edges.dtype}",
                                path=where)
    if k == "int":
        if edges.size and edges.min() < 0:
            bad = np.argwhere(edges < 0)[0]
            raise NegativeIdError(f"{where}: row {bad[0]} has negative vertex id {edges[tuple(bad)]}",
                                  path=where, line=int(bad[0]))
        return edges.astype(np.int64, copy=False)
    if edges.dtype.itemsize > 8:
        raise IdRangeError(f"{where}: ids of dtype {edges.dtype} exceed 64 bits", path=where)
    if edges.size and edges.max() > INT64_MAX:
        return edges.astype(np.uint64, copy=False)
    return edges.astype(np.int64)
