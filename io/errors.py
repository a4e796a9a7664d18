"""Errors raised while reading edge files and shard stores, and the notices of what a reader decided alone.

Every error names what it is about (file, line number, offending text or column) so that a batch job's
log says what to fix.  All are ``ValueError`` subclasses (``OSError`` for store problems would hide them
among I/O failures) and pickle by message, so they cross Dask worker boundaries unchanged.

A message that suggests a setting writes it as a token, ``{keyword=value}`` (:mod:`breadth.bfs.advice`):
``str()`` of the error renders it in the Python API's words, ``pass overwrite=True``, and the ``breadth``
command with its flags, ``use --overwrite``.

>>> from breadth.io.errors import StoreError
>>> str(StoreError("g.store exists; {overwrite=True} to replace it"))
'g.store exists; pass overwrite=True to replace it'
"""

from __future__ import annotations

from breadth.bfs.advice import Advised


class IngestError(Advised, ValueError):
    """Base class: the input cannot be turned into an edge list.

    Keyword arguments become attributes naming the place (``path``, ``line``, ``column``, ``text`` where
    known), and the error pickles with them, so a worker's error reaches the client whole.
    """

    def __init__(self, message: str, **info):
        super().__init__(self._advise(message, info))


class InputNotice(Advised, UserWarning):
    """What a reader decided that the caller did not say and may not have meant (a CSV's first row taken as
    its header, Parquet columns taken as source and target by their order): a warning, one line."""

    def __init__(self, message: str, **info):
        super().__init__(self._advise(message, info))


class BadLineError(IngestError):
    """A line that is not an edge (too few fields, extra fields where none are allowed, no line end)."""


class NonNumericIdError(BadLineError):
    """A vertex id that is not an integer where integers are declared."""


class NegativeIdError(BadLineError):
    """A vertex id below zero (or below one in a 1-based Matrix Market file)."""


class IdRangeError(BadLineError):
    """A vertex id beyond the integer range (uint64) or beyond a declared vertex count."""


class EmptyInputError(IngestError):
    """The input holds no edge at all."""


class MissingColumnError(IngestError):
    """A source/target column named by the caller is not in the file."""


class TruncatedInputError(IngestError):
    """A compressed stream or a file that ends early (e.g. a cut gzip, fewer Matrix Market entries)."""


class UnknownFormatError(IngestError):
    """A format name that is not supported, or a file whose format cannot be recognised."""


class StoreError(Advised, ValueError):
    """A shard store that cannot be used (missing, incomplete, corrupted, wrong version).  The first line of
    a long refusal says what and what to do; lines after it give the details."""

    def __init__(self, message: str, **info):
        super().__init__(self._advise(message, info))


class IncompleteStoreError(StoreError):
    """No ``manifest.json``: the store was never completed (e.g. an ingest failed half-way)."""


class CorruptStoreError(StoreError):
    """A store file is missing, has the wrong size or fails its checksum."""


# kind codes returned by the numba text parser -> (exception class, description)
KIND_OK = 0
KIND_FEW_FIELDS = 1
KIND_EXTRA_FIELDS = 2
KIND_NON_NUMERIC = 3
KIND_NEGATIVE = 4
KIND_OVERFLOW = 5
KIND_OUT_OF_RANGE = 6

KINDS = {
    KIND_FEW_FIELDS: (BadLineError, "too few fields"),
    KIND_EXTRA_FIELDS: (BadLineError, "unexpected extra fields"),
    KIND_NON_NUMERIC: (NonNumericIdError, "non-numeric vertex id"),
    KIND_NEGATIVE: (NegativeIdError, "negative vertex id"),
    KIND_OVERFLOW: (IdRangeError, "vertex id exceeds the uint64 range (expected an integer in 0..2**64-1)"),
    KIND_OUT_OF_RANGE: (IdRangeError, "vertex id outside the declared range"),
}
