"""The partitioned id map: dense vertex ids ``0..n-1`` <-> the source's original ids, held as ``P`` parts.

Part ``p`` is the array of the original ids that owner ``p`` numbered, in order; they have the dense ids
``offsets[p] .. offsets[p+1]-1`` in that order, so ``dense -> original`` is ``parts[p][d - offsets[p]]``
and ``original -> dense`` is a binary search in the one part that owns the id.  Which part owns an
original id is decided by

* ``"hash"`` ownership (the relabeling of :mod:`breadth.pipeline.relabel.hash_relabel`): ``id_hash(id) % P``.
  Owners get about ``n/P`` ids each, and because ownership ignores the id's value the dense ids are a
  random permutation of the originals, which balances the 1D partition.
* ``"range"`` ownership (small dense-ish integer inputs, and stores written before the map was
  partitioned): the parts are consecutive slices of one sorted array; ``bounds[p]`` is part ``p``'s
  first id.

A part is sorted in one of two orders: ``"value"`` (strings, range parts, and the integer maps of
stores written before this order) or ``"hash"``: integer ids sorted by their :func:`id_hash`, which
is a bijection of 64-bit integers (:func:`ids_of_keys` inverts it), so that a chunk's split sorts uniform
keys by counting passes (:mod:`breadth.pipeline.relabel.hashed_factorize`) instead of sorting ids by value.

The parts live on the Dask workers as futures (or, for a map built in this process, as local arrays);
no operation here brings more than the ids asked about to the client, except :meth:`gather`, for graphs
that fit.  The per-part operations are small pure functions on arrays (:func:`id_hash`,
:func:`owner_of`, :func:`split_by_owner`, :func:`unique_ids`, :func:`lookup_sorted`, :func:`lookup_keyed`,
:func:`take_local`) so that a CuPy/cuDF twin can reuse the orchestration with another array module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1_INV = np.uint64(0x96DE1B173F119089)  # inverses mod 2^64 of the odd multipliers: id_hash is a bijection
_M2_INV = np.uint64(0x319642B2D24D8EC3)


# ---------------------------------------------------------------- pure per-part operations (arrays in, arrays out)

def on_device(a) -> bool:
    """Whether ``a`` lives on a GPU: a CuPy array, or a cuDF frame of string ids (told by its type's
    package: CPU installs never import either)."""
    return type(a).__module__.partition(".")[0] in ("cupy", "cudf")


def _is_arrow(a) -> bool:
    """Whether ``a`` is an Arrow array (told by its type's package: a worker that never meets string ids
    never imports pyarrow, ~27 MB of its memory)."""
    return type(a).__module__.partition(".")[0] == "pyarrow"


def is_strings(ids) -> bool:
    """Whether ``ids`` are string ids: an Arrow array, or a NumPy object or ``U``/``S`` array."""
    return _is_arrow(ids) or np.asarray(ids).dtype.kind in "OUS"


def id_hash(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each id, the same in every process: ``(k,)`` ids -> ``(k,)`` uint64.

    Integers (int64 or uint64 of the same value hash alike) go through the splitmix64 finaliser; strings
    (Arrow string arrays, object or ``U`` arrays) are XXH64 with seed 0 of their UTF-8 bytes
    (:mod:`breadth.bfs.string_hash`; cuDF's ``hash_values(method="xxhash64")``).  CuPy ids hash on the
    device, to the same values.

    >>> id_hash(np.array([1, 2], np.int64)).dtype
    dtype('uint64')
    """
    if type(ids).__module__.partition(".")[0] != "cupy" and is_strings(ids):
        from .string_hash import xxh64

        return xxh64(ids)
    a = ids if type(ids).__module__.partition(".")[0] == "cupy" else np.asarray(ids)
    z = a.astype(np.uint64, copy=True)  # non-negative int64 and uint64 of equal value: equal bits
    with np.errstate(over="ignore"):
        z += _GOLDEN
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def _unshift(z, s: int) -> None:
    """Invert ``z ^= z >> s`` in place."""
    y = z.copy()
    k = s
    while k < 64:
        z ^= y >> np.uint64(k)  # y ^ y >> s ^ y >> 2s ^ ... undoes one xorshift
        k += s


def ids_of_keys(keys, dtype):
    """The integer ids (``dtype``, int64 or uint64) whose :func:`id_hash` are ``keys`` (uint64, NumPy or
    CuPy, ``(k,)``): the hash inverted step by step.

    >>> ids_of_keys(id_hash(np.array([-5, 7])), np.int64).tolist()
    [-5, 7]
    """
    z = keys.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        _unshift(z, 31)
        z *= _M2_INV
        _unshift(z, 27)
        z *= _M1_INV
        _unshift(z, 30)
        z -= _GOLDEN
    return z.view(np.dtype(dtype))


def owner_of(ids: np.ndarray, nowners: int) -> np.ndarray:
    """The hash owner ``0..nowners-1`` (int64, shape ``(k,)``) of each id.

    >>> owner_of(np.arange(4), 1).tolist()
    [0, 0, 0, 0]
    """
    return (id_hash(ids) % np.uint64(nowners)).astype(np.int64)


def split_by_owner(ids: np.ndarray, owner: np.ndarray, nowners: int) -> list[np.ndarray]:
    """``ids`` cut into ``nowners`` arrays by ``owner`` (each keeps the input's relative order, so sorted
    input gives sorted pieces).

    >>> [p.tolist() for p in split_by_owner(np.array([5, 6, 7]), np.array([1, 0, 1]), 2)]
    [[6], [5, 7]]
    """
    order = np.argsort(owner, kind="stable")
    cuts = np.cumsum(np.bincount(owner, minlength=nowners))[:-1]
    return np.split(ids[order], cuts)


def unique_ids(ids: np.ndarray) -> np.ndarray:
    """Sorted unique ids (int64, uint64 or object str), shape ``(u,)``."""
    return np.unique(ids)


def lookup_sorted(part: np.ndarray, offset: int, ids: np.ndarray) -> np.ndarray:
    """Dense ids (int64, ``(k,)``) of ``ids`` in a sorted part whose first id is dense ``offset``;
    -1 where an id is not in the part.  A part of strings (an Arrow string array, or Python strings in an
    object array) is searched by its UTF-8 bytes (:func:`~breadth.bfs.arrow_strings.search_sorted`).

    >>> lookup_sorted(np.array([3, 8, 9]), 10, np.array([9, 4])).tolist()
    [12, -1]
    """
    if is_strings(part):
        if not is_strings(ids):
            return np.full(len(ids), -1, np.int64)
        from .arrow_strings import search_sorted

        return search_sorted(part, offset, ids)
    return _search(part, part, offset, ids, lambda a: a)


def lookup_keyed(part: np.ndarray, offset: int, ids: np.ndarray) -> np.ndarray:
    """:func:`lookup_sorted` in an integer part sorted by :func:`id_hash` (``order="hash"``); the part is
    hashed on each call (a map keeps ids, not keys: 1 M ids take a few milliseconds).

    >>> part = np.array([3, 8, 9])[np.argsort(id_hash(np.array([3, 8, 9])))]
    >>> int(lookup_keyed(part, 10, np.array([8]))[0]) == 10 + int(np.flatnonzero(part == 8)[0])
    True
    """
    return _search(part, id_hash(part), offset, ids, id_hash)


def _search(part: np.ndarray, sorted_keys: np.ndarray, offset: int, ids, key) -> np.ndarray:
    """Dense ids of integer ``ids`` by a binary search of ``key(ids)`` in ``sorted_keys`` (``key`` of the
    part, sorted): ids of another integer kind are compared by value, anything else is absent (-1)."""
    ids = np.asarray(ids)
    if part.dtype.kind in "iu" and ids.dtype != part.dtype:
        if ids.dtype.kind in "iu":
            ok = ids >= 0 if ids.dtype.kind == "i" else np.ones(ids.shape, bool)
            if part.dtype == np.int64:
                ok &= ids <= np.iinfo(np.int64).max
            q = np.where(ok, ids, 0).astype(part.dtype)
        else:
            return np.full(ids.shape, -1, np.int64)
    else:
        ok, q = None, ids
    if part.size == 0:
        return np.full(ids.shape, -1, np.int64)
    k = key(q)
    pos = np.searchsorted(sorted_keys, k)
    posc = np.minimum(pos, part.size - 1)
    hit = (pos < part.size) & (sorted_keys[posc] == k)
    if ok is not None:
        hit &= ok
    return np.where(hit, posc + offset, -1).astype(np.int64)


def take_local(part, offset: int, dense: np.ndarray) -> np.ndarray:
    """Original ids of dense ids that this part holds (``offset <= d < offset + part.size``): a NumPy
    array, Python strings in an object array for a part of strings."""
    idx = np.asarray(dense, np.int64) - offset
    if _is_arrow(part):
        import pyarrow as pa

        from .arrow_strings import to_objects

        return to_objects(part.take(pa.array(idx)))
    return part[idx]


def part_of_dense(offsets: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """The part (int64, ``(k,)``) holding each dense id, from the ``(P+1,)`` offsets."""
    return np.searchsorted(offsets, dense, side="right").astype(np.int64) - 1


# ---------------------------------------------------------------- the handle


@dataclass
class PartitionedIdMap:
    """``P`` parts of the dense -> original id map (see the module docstring).

    ``parts[p]``: future (or local array) of the original ids of part ``p``, sorted by ``order``, dtype ``dtype``
    (int64, uint64 or object for strings, whose parts are Arrow string arrays or object arrays);
    ``offsets``: ``(P+1,)`` int64 prefix of the part sizes; ``owner``: ``"hash"`` or ``"range"`` (then
    ``bounds``: ``(P,)`` first id of each part); ``order``: how each part is sorted, ``"value"`` or
    ``"hash"`` (integer ids by their :func:`id_hash`).

    >>> m = PartitionedIdMap.from_array(np.array([3, 5, 9]))
    >>> m.to_dense([9, 3]).tolist(), m.to_original([1]).tolist()
    ([2, 0], [5])
    """

    parts: list
    offsets: np.ndarray
    dtype: Any
    owner: str = "hash"
    bounds: Any = None
    client: Any = None
    order: str = "value"
    _whole: Any = field(default=None, repr=False, compare=False)

    # -- construction
    @classmethod
    def from_array(cls, sorted_ids: np.ndarray, client=None) -> "PartitionedIdMap":
        """One local part with range ownership: a sorted id array (the classic single-array map)."""
        a = np.asarray(sorted_ids)
        return cls([a], np.array([0, a.size], np.int64), a.dtype, "range",
                   np.array(a[:1].tolist() or [0], dtype=a.dtype if a.size else np.int64), client)

    # -- sizes and dtype
    @property
    def nparts(self) -> int:
        return len(self.parts)

    @property
    def size(self) -> int:
        return int(self.offsets[-1])

    def __len__(self) -> int:
        return self.size

    @property
    def part_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    # -- running a per-part function where the part lives
    def _client(self):
        if self.client is None:
            from distributed import default_client

            self.client = default_client()
        return self.client

    def _is_future(self, p: int) -> bool:
        """Whether part ``p`` lives on a worker (a Dask future) rather than in this process (an array)."""
        return not (isinstance(self.parts[p], np.ndarray) or _is_arrow(self.parts[p]))

    def futures(self) -> list:
        """The parts as futures on the workers (local parts are scattered once)."""
        if not all(self._is_future(p) for p in range(self.nparts)):
            c = self._client()
            self.parts = [f if self._is_future(p) else c.scatter(f, hash=False)
                          for p, f in enumerate(self.parts)]
        return self.parts

    def _run(self, fn, per_part: dict) -> dict:
        """``{p: fn(part_p, offset_p, arg)}`` for ``per_part = {p: arg}``, each on the part's worker."""
        out = {}
        remote = {p: a for p, a in per_part.items() if self._is_future(p)}
        for p, a in per_part.items():
            if p not in remote:
                out[p] = fn(self.parts[p], int(self.offsets[p]), a)
        if remote:
            c = self._client()
            futs = {p: c.submit(fn, self.parts[p], int(self.offsets[p]), a, pure=False) for p, a in remote.items()}
            out.update(zip(futs, c.gather(list(futs.values()))))
        return out

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """The part that would hold each original id."""
        if self.owner == "hash":
            return owner_of(ids, self.nparts)
        if self.nparts == 1:
            return np.zeros(len(ids), np.int64)
        b = np.asarray(self.bounds)
        q = np.asarray(ids)
        if b.dtype.kind in "iu" and q.dtype != b.dtype:
            q = q.astype(np.float64) if q.dtype.kind == "f" else q.astype(object)
            b = b.astype(object)
        return np.maximum(np.searchsorted(b, q, side="right") - 1, 0).astype(np.int64)

    # -- lookups: only the queried ids travel
    def to_dense(self, ids) -> np.ndarray:
        """Dense ids (int64) of original ids; -1 for ids not in the graph.  Each id goes to its owner."""
        q = np.atleast_1d(np.asarray(ids))
        if q.dtype.kind in "US":
            q = q.astype(object)
        if q.dtype == object and self.dtype != object and all(isinstance(x, (int, np.integer)) for x in q.tolist()):
            # a list mixing ids below and above 2^63 arrives as objects: integers of the map's kind
            q = np.array([int(x) for x in q.tolist()], dtype=np.uint64 if max(q.tolist()) > np.iinfo(np.int64).max
                         else np.int64) if min(q.tolist()) >= 0 else q
        out = np.full(q.shape, -1, np.int64)
        if q.size == 0 or self.size == 0:
            return out
        if (self.dtype == object) != (q.dtype == object):
            return out  # strings are never integer ids and the other way round
        own = self.owners(q)
        sel = {p: np.flatnonzero(own == p) for p in np.unique(own).tolist()}
        got = self._run(lookup_keyed if self.order == "hash" else lookup_sorted, {p: q[i] for p, i in sel.items()})
        for p, i in sel.items():
            out[i] = got[p]
        return out

    def to_original(self, dense) -> np.ndarray:
        """Original ids of dense ids ``0 <= d < n`` (dtype ``self.dtype``)."""
        d = np.atleast_1d(np.asarray(dense, np.int64))
        out = np.empty(d.shape, self.dtype)
        part = part_of_dense(self.offsets, d)
        sel = {p: np.flatnonzero(part == p) for p in np.unique(part).tolist()}
        got = self._run(take_local, {p: d[i] for p, i in sel.items()})
        for p, i in sel.items():
            out[i] = got[p]
        return out

    # -- the whole map, for graphs that fit (and for the array-like API of the classic map)
    def gather(self) -> np.ndarray:
        """The whole map as one ``(n,)`` array, ``gather()[d]`` = original id of ``d``."""
        if self._whole is None:
            parts = [self.parts[p] for p in range(self.nparts)]
            fut = [p for p in range(self.nparts) if self._is_future(p)]
            if fut:
                got = self._client().gather([parts[p] for p in fut])
                for p, a in zip(fut, got):
                    parts[p] = a
            parts = [p.to_numpy(zero_copy_only=False) if _is_arrow(p) else p for p in parts]
            self._whole = np.concatenate(parts).astype(self.dtype, copy=False) if parts else np.empty(0, self.dtype)
        return self._whole

    def __array__(self, dtype=None, copy=None):
        a = self.gather()
        return a if dtype is None else a.astype(dtype)

    def __getitem__(self, key):
        return self.gather()[key]

    def __iter__(self):
        return iter(self.gather())

    def tolist(self) -> list:
        return self.gather().tolist()

    def searchsorted(self, v, side: str = "left", sorter=None):  # the classic sorted map's idiom (range maps)
        return np.searchsorted(self.gather(), v, side=side, sorter=sorter)

    def release(self) -> None:
        for p in range(self.nparts):
            if self._is_future(p):
                self.parts[p].release()


def as_id_map(id_map, client=None) -> PartitionedIdMap | None:
    """``None``, a :class:`PartitionedIdMap`, or a classic sorted array (wrapped as one range part)."""
    if id_map is None or isinstance(id_map, PartitionedIdMap):
        return id_map
    return PartitionedIdMap.from_array(np.asarray(id_map), client)
