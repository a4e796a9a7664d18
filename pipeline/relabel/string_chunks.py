"""A chunk of string ids split for the owners, with Arrow C++ and no Python strings.

:func:`split_strings` is :func:`breadth.pipeline.relabel.hash_relabel.chunk_split` for string ids: the chunk's
endpoints (a two-column Arrow table from the readers, or a ``(k, 2)`` object array) are numbered by
``pyarrow.compute.dictionary_encode`` (a hash table in C++: codes in first-seen order and the distinct
strings), the distinct strings sorted by ``array_sort_indices`` (UTF-8 bytes: code-point order) and cut
into per-owner pieces by their XXH64 owners (:func:`breadth.bfs.id_map.owner_of`).  A Numba table over
the XXH64 hashes that compares the bytes of equal hashes would take about three times as long (the byte
comparison's cache misses; ``dictionary_encode`` numbers 2^21 URL-like endpoints in 0.29 s).  Parquet's reader hands its
string columns over dictionary-encoded (:func:`breadth.io.parquet_edges.read_row_group`), already numbered:
their dictionaries are unified (:func:`dictionary_codes`) and no row's string is ever materialised; other
tables' columns are encoded chunk by chunk into one dictionary (:func:`_encode_columns`), without a copy of
their strings.  The pieces are Arrow string arrays, which the id shuffle moves as they are (in memory, or as
Arrow IPC files on its disk tier).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from breadth.bfs.arrow_strings import as_strings
from breadth.bfs.id_map import owner_of


def endpoints(edges) -> pa.Array:
    """A chunk's ``(k, 2)`` array of string ids as ``(2k,)`` strings: every source, then every target (tables
    are numbered column chunk by column chunk, never concatenated: :func:`split_strings`)."""
    e = np.asarray(edges)
    return as_strings(np.concatenate([e[:, 0], e[:, 1]]))


def dictionary_codes(table: pa.Table) -> tuple[np.ndarray, pa.Array]:
    """``(codes, uniq)`` of a two-column table of dictionary-encoded strings (as the Parquet reader gives
    them): the chunks' dictionaries unified into one, ``codes`` ``(2k,)`` (every source, then every target)
    index the distinct strings ``uniq``.  Dictionary entries no row uses (a categorical column's unused
    categories) are dropped: every string of ``uniq`` is an endpoint.

    >>> enc = lambda xs: pa.array(xs).dictionary_encode()
    >>> t = pa.table({"s": enc(["b", "a"]), "d": enc(["a", "c"])})
    >>> codes, uniq = dictionary_codes(t)
    >>> uniq.take(pa.array(codes)).to_pylist()
    ['b', 'a', 'a', 'c']
    """
    chunks = [c for col in table.columns for c in col.chunks]
    if not chunks:
        return np.empty(0, np.int64), pa.array([], pa.string())
    unified = pa.chunked_array(chunks).unify_dictionaries()
    uniq = as_strings(unified.chunk(0).dictionary)
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in unified.chunks])
    used = np.bincount(codes, minlength=len(uniq)) > 0
    if not used.all():
        keep = np.flatnonzero(used)
        renumber = np.cumsum(used) - 1
        codes, uniq = renumber[codes], uniq.take(pa.array(keep))
    return codes, uniq


def _encode_columns(table: pa.Table) -> tuple[np.ndarray, pa.Array]:
    """``(codes, uniq)`` of a two-column table of strings of one type: the columns' chunks encoded as one
    chunked array, whose chunks share the dictionary, so the strings are never concatenated into a copy
    (about 10 % less peak RSS for 1 M-tuple row groups of URL-like ids in plain string columns)."""
    chunks = [c for col in table.columns for c in col.chunks if len(c)]
    if not chunks:
        return np.empty(0, np.int64), pa.array([], table.column(0).type)
    enc = pc.dictionary_encode(pa.chunked_array(chunks))
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in enc.chunks])
    return codes, enc.chunk(0).dictionary


def split_strings(edges, nowners: int) -> tuple[np.ndarray, np.ndarray, list[pa.Array]]:
    """A chunk's ``(k, 2)`` string edges -> ``(codes, order, pieces)`` as
    :func:`~breadth.pipeline.relabel.hash_relabel.chunk_split` gives them: ``codes`` ``(k, 2)`` int32 index the
    chunk's distinct strings ``u`` (first-seen order, or the unified dictionary's), ``pieces[p]`` (Arrow)
    are the strings of ``u`` that owner ``p`` numbers, sorted, and ``order`` lists ``u``'s positions piece
    after piece.

    >>> codes, order, pieces = split_strings(np.array([["b", "a"], ["a", "c"]], dtype=object), 1)
    >>> codes.tolist(), pieces[0].to_pylist()
    ([[0, 1], [1, 2]], ['a', 'b', 'c'])
    """
    if isinstance(edges, pa.Table) and edges.column(0).type != edges.column(1).type:
        # string and large_string, or one column dictionary-encoded: both decoded to one string type
        cols = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in edges.columns]
        wide = pa.large_string() if any(pa.types.is_large_string(c.type) for c in cols) else pa.string()
        edges = pa.table([c.cast(wide) for c in cols], names=edges.column_names)
    if isinstance(edges, pa.Table) and pa.types.is_dictionary(edges.column(0).type):
        flat_codes, uniq = dictionary_codes(edges)
    elif isinstance(edges, pa.Table):
        flat_codes, uniq = _encode_columns(edges)
    else:
        enc = pc.dictionary_encode(endpoints(edges))
        flat_codes, uniq = enc.indices.to_numpy(zero_copy_only=False), enc.dictionary
    k = len(flat_codes) // 2
    index = np.int32 if len(uniq) < (1 << 31) else np.int64
    codes = np.empty((k, 2), index)
    codes[:, 0] = flat_codes[:k]
    codes[:, 1] = flat_codes[k:]
    by_value = pc.array_sort_indices(uniq).to_numpy().astype(index, copy=False)
    if nowners == 1:
        return codes, by_value, [uniq.take(pa.array(by_value))]
    owner = owner_of(uniq, nowners)
    small = owner.astype(np.uint16 if nowners <= 1 << 16 else np.int64)  # 16-bit keys: numpy's radix sort
    order = by_value[np.argsort(small[by_value], kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=nowners))))
    # a take per piece: each piece owns its buffers (a slice would drag the chunk's along when sent)
    return codes, order, [uniq.take(pa.array(order[bounds[p]:bounds[p + 1]])) for p in range(nowners)]
