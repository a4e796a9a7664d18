"""Readers of real graph files (SNAP text, CSV, Matrix Market, Parquet) cut into chunks of edge arrays,
their errors, and the on-disk shard store.  The sources that turn files into edge lists are in
:mod:`breadth.pipeline` (``read_edges``, ``read_snap``, ...).

>>> from breadth.io import write_store, load_store
>>> write_store(graph, "/data/wiki.store")                              # doctest: +SKIP

The names below load on first use (see :mod:`breadth.bfs.lazy_exports`).
"""

from typing import TYPE_CHECKING

from breadth.bfs.lazy_exports import install

_ERRORS = ("BadLineError", "CorruptStoreError", "EmptyInputError", "IdRangeError", "IncompleteStoreError",
           "IngestError", "InputNotice", "MissingColumnError", "NegativeIdError", "NonNumericIdError", "StoreError",
           "TruncatedInputError", "UnknownFormatError")
_EXPORTS = {
    **{name: ".errors" for name in _ERRORS},
    "detect_format": ".formats",
    "load_store": ".shard_store", "write_store": ".shard_store",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .errors import (BadLineError, CorruptStoreError, EmptyInputError, IdRangeError, IncompleteStoreError,
                         IngestError, InputNotice, MissingColumnError, NegativeIdError, NonNumericIdError, StoreError,
                         TruncatedInputError, UnknownFormatError)
    from .formats import detect_format
    from .shard_store import load_store, write_store
