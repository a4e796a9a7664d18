"""String ids as Arrow string arrays, and the NumPy views of their buffers that Numba kernels read.

A string id array is a ``pyarrow`` ``string`` or ``large_string`` array without nulls: ``offsets``
(``(n+1,)`` int32 or int64) cut ``data`` (uint8, the UTF-8 bytes) into the ids.  Ordering is by those
bytes, which is Python's code-point order of the same strings (UTF-8 keeps it), so a sorted Arrow
array and a sorted object array of the same strings agree.  :func:`as_strings` accepts what callers
hold (object or ``U`` NumPy arrays, lists, Arrow arrays or chunked arrays); :func:`buffers` gives the
views.  :func:`search_sorted` looks ids up in a sorted array by binary search (root lookups, a few ids
at a time).
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
from dask.sizeof import sizeof

#: bytes of string data past which an array needs 64-bit offsets (Arrow's ``large_string``)
INT32_BYTES = (1 << 31) - 1


@sizeof.register(pa.Array)
def _sizeof_array(a: pa.Array) -> int:
    """The bytes of an Arrow array's buffers, which Dask counts for a worker's memory (it counts
    tables and chunked arrays alike, and would take an array for a small Python object)."""
    return int(a.get_total_buffer_size()) + 100


def as_strings(ids) -> pa.Array:
    """``ids`` as one Arrow ``string``/``large_string`` array without nulls, ``(n,)``.

    >>> as_strings(np.array(["b", "a"], dtype=object)).to_pylist()
    ['b', 'a']
    """
    if isinstance(ids, pa.ChunkedArray):
        ids = concat(ids.chunks) if ids.num_chunks != 1 else ids.chunk(0)
    if not isinstance(ids, pa.Array):
        a = np.asarray(ids)
        ids = pa.array(a.ravel().tolist() if a.dtype.kind != "O" else a.ravel(), type=pa.string(),
                       from_pandas=False) if a.size else pa.array([], pa.string())
    if pa.types.is_dictionary(ids.type):
        ids = ids.dictionary_decode()
    if not (pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        raise TypeError(f"string ids expected, got Arrow type {ids.type}")
    if ids.null_count:
        raise ValueError(f"{ids.null_count} null string id(s)")
    return ids


def concat(arrays: list) -> pa.Array:
    """One string array of ``arrays`` (``large_string`` only where the bytes need 64-bit offsets)."""
    arrays = [a for a in arrays if len(a)] or list(arrays[:1]) or [pa.array([], pa.string())]
    nbytes = sum(_data_bytes(a) for a in arrays)
    t = pa.large_string() if nbytes > INT32_BYTES else pa.string()
    return pa.concat_arrays([a if a.type == t else a.cast(t) for a in arrays])


def _data_bytes(a: pa.Array) -> int:
    off, _ = buffers(a)
    return int(off[-1] - off[0]) if off.size else 0


def buffers(a: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, data)`` NumPy views (no copy) of a string array: ``offsets`` ``(n+1,)`` int32 or
    int64 into ``data`` (uint8); the id ``i`` is ``data[offsets[i]:offsets[i+1]]``."""
    wide = pa.types.is_large_string(a.type)
    _, ob, db = a.buffers()
    n = len(a)
    off = np.frombuffer(ob, np.int64 if wide else np.int32, count=n + 1, offset=a.offset * (8 if wide else 4)) \
        if ob is not None and n else np.zeros(1, np.int64 if wide else np.int32)
    data = np.frombuffer(db, np.uint8) if db is not None and db.size else np.zeros(0, np.uint8)
    return off, data


def to_objects(a: pa.Array) -> np.ndarray:
    """Python strings in an object array, ``(n,)`` (for callers that want them: small results)."""
    return a.to_numpy(zero_copy_only=False).astype(object, copy=False)


@numba.njit(inline="always")
def compare(oa, da, i, ob, db, j) -> int:
    """-1, 0 or 1 as string ``i`` of ``(oa, da)`` sorts before, equal to, or after string ``j`` of
    ``(ob, db)`` (bytewise, a prefix first)."""
    a0, b0 = oa[i], ob[j]
    la, lb = oa[i + 1] - a0, ob[j + 1] - b0
    n = min(la, lb)
    for t in range(n):
        x, y = da[a0 + t], db[b0 + t]
        if x != y:
            return -1 if x < y else 1
    return -1 if la < lb else (1 if la > lb else 0)


@numba.njit(nogil=True, cache=True)
def lower_bound(po, pd, lo, hi, qo, qd, i):
    """The first position in ``[lo, hi)`` of sorted strings ``(po, pd)`` not below string ``i`` of
    ``(qo, qd)`` (``hi`` if none): a binary search by UTF-8 bytes."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if compare(po, pd, mid, qo, qd, i) < 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(nogil=True, cache=True)
def _search(po, pd, qo, qd, offset, out):
    n = po.size - 1
    for i in range(qo.size - 1):
        lo = lower_bound(po, pd, 0, n, qo, qd, i)
        out[i] = offset + lo if lo < n and compare(po, pd, lo, qo, qd, i) == 0 else -1


def search_sorted(part, offset: int, ids) -> np.ndarray:
    """Dense ids (int64, ``(k,)``) of string ``ids`` in a sorted unique string ``part`` whose first id is
    dense ``offset``; -1 where absent.  Binary search, ``O(k log n)`` comparisons.

    >>> search_sorted(pa.array(["a", "c"]), 10, ["c", "b"]).tolist()
    [11, -1]
    """
    po, pd = buffers(as_strings(part))
    qo, qd = buffers(as_strings(ids))
    out = np.empty(qo.size - 1, np.int64)
    _search(po, pd, qo, qd, np.int64(offset), out)
    return out
