"""Readers of real graph files (SNAP text, CSV, Matrix Market, Parquet) and the on-disk shard store.

>>> from breadth.io import read_edges, write_store, load_store
>>> el = read_edges("/work/shared/data/Wiki-Vote.txt", directed=True)   # doctest: +SKIP
"""

from .csv_edges import read_csv
from .errors import (BadLineError, CorruptStoreError, EmptyInputError, IdRangeError, IncompleteStoreError,
                     IngestError, MissingColumnError, NegativeIdError, NonNumericIdError, StoreError,
                     TruncatedInputError, UnknownFormatError)
from .formats import detect_format, read_edges
from .matrix_market import read_mtx
from .parquet_edges import read_parquet
from .shard_store import load_store, write_store
from .snap_text import read_snap

__all__ = ["BadLineError", "CorruptStoreError", "EmptyInputError", "IdRangeError", "IncompleteStoreError",
           "IngestError", "MissingColumnError", "NegativeIdError", "NonNumericIdError", "StoreError",
           "TruncatedInputError", "UnknownFormatError", "detect_format", "read_csv", "read_edges", "read_mtx",
           "read_parquet", "read_snap", "load_store", "write_store"]
