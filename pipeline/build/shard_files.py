"""An owner's shard written to files as it is built, and memory-mapped back: the worker never holds it.

:class:`RowsToFiles` receives the rows of one CSR (offsets, columns and the per-row tuple counts) one row
batch at a time, in row order, and appends them to raw files in the owner's folder with plain writes;
:meth:`RowsToFiles.finish` maps the files back read-only (``np.memmap``).  Written pages sit in the
kernel's page cache, not in the process: a mapped page counts in the worker's RSS (what Dask's nanny
compares with its memory limit) only once something reads it.  The store writer copies such arrays
from their files (:mod:`breadth.io.shard_store`), so a shard goes from its row batches to the store
without ever being resident.  The files are raw (no ``.npy`` header: the count is known only at the
end); the folder belongs to the caller, who removes it once the shard is no longer used.
"""

from __future__ import annotations

import os

import numpy as np


def mapped(path: str, dtype, count: int) -> np.ndarray:
    """``count`` items of ``dtype`` in the raw file ``path``, mapped read-only (an empty array for none: an
    empty file cannot be mapped)."""
    if count == 0:
        return np.empty(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(count,))


def _append(f, arr: np.ndarray) -> None:
    """The bytes of ``arr`` (C order) appended to the open binary file ``f``."""
    arr = np.ascontiguousarray(arr)
    if arr.size:
        f.write(memoryview(arr.reshape(-1)).cast("B"))


def write_counts(path: str, ids: np.ndarray, n: int, step: int) -> np.ndarray:
    """How often each of ``0..n-1`` occurs in ``ids``, as int32, written to the raw file ``path`` ``step``
    counters at a time (never ``n`` at once) and mapped back (:func:`mapped`)."""
    ids = np.asarray(ids)
    with open(path, "wb") as f:
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            _append(f, np.bincount(ids[(ids >= r0) & (ids < r1)] - r0, minlength=r1 - r0).astype(np.int32))
    return mapped(path, np.int32, n)


class RowsToFiles:
    """One CSR of an owner's ``nloc`` rows, appended batch by batch to the raw files ``{prefix}offsets``
    (int64), ``{prefix}columns`` (``column_dtype``) and, with ``degrees``, ``tuple_degree`` (int32) in
    ``folder``.  Holds the open files and three counters: rows and columns received, and the tuples
    counted (their sum, :attr:`tuples`, is a summary that must not read the map back)."""

    def __init__(self, folder: str, prefix: str, nloc: int, column_dtype, degrees: bool):
        os.makedirs(folder, exist_ok=True)
        self.kinds = {f"{prefix}offsets": np.dtype(np.int64), f"{prefix}columns": np.dtype(column_dtype)}
        if degrees:
            self.kinds["tuple_degree"] = np.dtype(np.int32)
        self.offsets, self.columns = list(self.kinds)[:2]
        self.paths = {name: os.path.join(folder, f"{name}.bin") for name in self.kinds}
        self.files = {name: open(p, "wb") for name, p in self.paths.items()}
        self.nloc, self.rows, self.total, self.tuples = nloc, 0, 0, 0
        _append(self.files[self.offsets], np.zeros(1, np.int64))

    def put(self, r0: int, r1: int, offsets: np.ndarray, columns: np.ndarray, multiplicity: np.ndarray) -> None:
        """Rows ``r0..r1-1`` (local; ``r0`` is the rows received so far): their offsets from 0
        (``r1 - r0 + 1``), columns, and tuple counts before deduplication."""
        if r0 != self.rows:
            raise ValueError(f"rows must come in order: expected row {self.rows}, got {r0}")
        _append(self.files[self.offsets], offsets[1:].astype(np.int64) + self.total)
        _append(self.files[self.columns], columns.astype(self.kinds[self.columns], copy=False))
        if "tuple_degree" in self.files:
            _append(self.files["tuple_degree"], multiplicity.astype(np.int32))
            self.tuples += int(multiplicity.sum())
        self.rows, self.total = r1, self.total + int(columns.size)

    def finish(self, times=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(offsets int64[nloc + 1], columns[nnz], tuple_degree int32[nloc] or None)``, mapped from the
        files (rows never received are empty); ``times`` is not used (the in-memory twin's stage record)."""
        if self.rows < self.nloc:
            self.put(self.rows, self.nloc, np.zeros(self.nloc - self.rows + 1, np.int64), np.zeros(0, np.int64),
                     np.zeros(self.nloc - self.rows, np.int64))
        for f in self.files.values():
            f.close()
        counts = {self.offsets: self.nloc + 1, self.columns: self.total, "tuple_degree": self.nloc}
        out = {name: mapped(p, self.kinds[name], counts[name]) for name, p in self.paths.items()}
        return out[self.offsets], out[self.columns], out.get("tuple_degree")
