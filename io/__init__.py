"""Readers of real graph files (SNAP text, CSV, Matrix Market, Parquet) and the on-disk shard store.

>>> from breadth.io import read_edges, write_store, load_store
>>> el = read_edges("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP

The names below load on first use (see :mod:`breadth.bfs.lazy_exports`).
"""

from typing import TYPE_CHECKING

from breadth.bfs.lazy_exports import install

_ERRORS = ("BadLineError", "CorruptStoreError", "EmptyInputError", "IdRangeError", "IncompleteStoreError",
           "IngestError", "MissingColumnError", "NegativeIdError", "NonNumericIdError", "StoreError",
           "TruncatedInputError", "UnknownFormatError")
_EXPORTS = {
    **{name: ".errors" for name in _ERRORS},
    "read_csv": ".csv_edges",
    "detect_format": ".formats", "read_edges": ".formats",
    "read_mtx": ".matrix_market",
    "read_parquet": ".parquet_edges",
    "load_store": ".shard_store", "write_store": ".shard_store",
    "read_snap": ".snap_text",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .csv_edges import read_csv
    from .errors import (BadLineError, CorruptStoreError, EmptyInputError, IdRangeError, IncompleteStoreError,
                         IngestError, MissingColumnError, NegativeIdError, NonNumericIdError, StoreError,
                         TruncatedInputError, UnknownFormatError)
    from .formats import detect_format, read_edges
    from .matrix_market import read_mtx
    from .parquet_edges import read_parquet
    from .shard_store import load_store, write_store
    from .snap_text import read_snap
