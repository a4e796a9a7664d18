"""Errors raised while reading edge files and shard stores.

Every error names what it is about (file, line number, offending text or column) so that a batch job's
log says what to fix.  All are ``ValueError`` subclasses (``OSError`` for store problems would hide them
among I/O failures) and pickle by message, so they cross Dask worker boundaries unchanged.
"""

from __future__ import annotations


class IngestError(ValueError):
    """Base class: the input cannot be turned into an edge list.

    Keyword arguments become attributes naming the place (``path``, ``line``, ``column``, ``text`` where
    known), and the error pickles with them, so a worker's error reaches the client whole.
    """

    def __init__(self, message: str, **info):
        super().__init__(message)
        self.info = info
        for k, v in info.items():
            setattr(self, k, v)

    def __reduce__(self):  # message + keyword attributes, so workers can send it to the client
        return (_rebuild, (type(self), str(self), self.info))


def _rebuild(cls, message, info):
    return cls(message, **info)


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


class StoreError(ValueError):
    """A shard store that cannot be used (missing, incomplete, corrupted, wrong version)."""


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
    KIND_EXTRA_FIELDS: (BadLineError, "unexpected extra fields (pass extra_columns='ignore' / allow them)"),
    KIND_NON_NUMERIC: (NonNumericIdError, "non-numeric vertex id"),
    KIND_NEGATIVE: (NegativeIdError, "negative vertex id"),
    KIND_OVERFLOW: (IdRangeError, "vertex id exceeds the uint64 range (expected an integer in 0..2**64-1)"),
    KIND_OUT_OF_RANGE: (IdRangeError, "vertex id outside the declared range"),
}
