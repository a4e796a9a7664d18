"""Hash-owner relabeling on the GPU: :mod:`hash_relabel`'s per-chunk and per-owner steps on CuPy arrays.

The orchestration (:func:`~breadth.pipeline.relabel.hash_relabel.relabel_hashed`) is the CPU's; only the array
steps differ, because a GPU sorts faster than it hashes into a table:

* **split**: the chunk's endpoints are hashed to their keys (:func:`~breadth.bfs.id_map.id_hash`, the
  same splitmix64 as on the CPU) and the keys sorted once (:func:`unique_inverse`): the distinct keys
  come out sorted, their codes are the inverse; owners are ``key % P`` as on the CPU, so a map built here
  is looked up like any other; pieces are cut by a sort on ``owner << 40 | rank`` (grouped by owner,
  sorted by key inside).
* **own**: an owner's part is the sorted union of its pieces (a sort of their concatenation), keys until
  the map takes it (:func:`part_ids`: the ids of the keys, in key order, on the host).
* **look up**: dense ids of a chunk's piece by binary search in the owner's part (a kernel of ours).
* **densify**: the chunk's table of dense ids indexed by its codes.

String ids arrive as a two-column cuDF frame of strings (:func:`breadth.io.cudf_edges.device_string_edges`)
and take the same steps with cuDF: ``factorize`` and ``argsort`` of the chunk's strings, ``unique`` for
an owner's union, ``searchsorted`` for lookups (cuDF orders strings by their UTF-8 bytes, which is
Python's code-point order, so the host's binary searches agree with the parts).  Owners of strings are
the host's :func:`~breadth.bfs.id_map.owner_of` (XXH64 of the UTF-8 bytes) of the chunk's distinct strings
as an Arrow array (copied to the host only when there are several owners), so a map built here is looked
up like any other.  The parts end on the host as Arrow string arrays (:func:`part_ids`), the form
the CPU's parts, the store and result mapping use.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from breadth.bfs.id_map import id_hash, ids_of_keys, owner_of


def chunk_split(edges, nowners: int, dtype) -> tuple:
    """A chunk's ``(k, 2)`` edges (CuPy or NumPy) -> ``(codes, order, pieces)`` on the device, as
    :func:`breadth.pipeline.relabel.hash_relabel.chunk_split` gives them: ``codes`` ``(k, 2)`` int32 index the
    sorted distinct keys ``u`` (uint64 hashes of the ids); ``pieces[p]`` are the keys owner ``p``
    numbers, sorted; ``order`` lists ``u``'s positions piece after piece."""
    if _is_cudf(edges):
        return _split_strings(edges, nowners)
    flat = cp.asarray(edges).ravel()
    if flat.dtype != dtype:
        flat = flat.astype(dtype)
    uniq, codes = unique_inverse(id_hash(flat))
    codes = codes.reshape(-1, 2)
    if nowners == 1:
        return codes, cp.arange(uniq.size, dtype=cp.int64), [uniq]
    owner = (uniq % np.uint64(nowners)).astype(cp.int64)
    # uniq is sorted: a key of (owner, position) groups by owner and keeps keys sorted inside a group
    order = cp.argsort((owner.astype(cp.uint64) << np.uint64(40)) | cp.arange(uniq.size, dtype=cp.uint64))
    cuts = np.cumsum(cp.bincount(owner, minlength=nowners).get())[:-1]
    return codes, order, cp.split(uniq[order], cuts.tolist())


def unique_inverse(flat) -> tuple:
    """``(uniq, inverse)`` of a 1-D CuPy array, as ``cupy.unique(flat, return_inverse=True)`` gives them
    (``uniq`` sorted, ``flat == uniq[inverse]``), with ``inverse`` int32 where ``flat`` has fewer than
    2^31 elements.  Written out (one sort, a scan and a scatter) because CuPy's own spends ~0.3 s on its
    first call in a process (H200, 2^27 ids, warm kernel cache; this one ~0.06 s), which a fresh worker's
    first chunk would pay."""
    idx = cp.int32 if flat.size < (1 << 31) else cp.int64
    perm = cp.argsort(flat)
    s = flat[perm]
    head = _heads(s)
    group = cp.cumsum(head, dtype=idx)
    group -= 1
    inverse = cp.empty(flat.size, idx)
    inverse[perm] = group
    return s[head], inverse


def _heads(s):
    """``True`` where a sorted array's run of equal values starts."""
    head = cp.empty(s.size, cp.bool_)
    head[:1] = True
    cp.not_equal(s[1:], s[:-1], out=head[1:])
    return head


#: dense id of each of a piece's ids: its lower bound in the owner's sorted part, plus the part's offset
_LOWER_BOUND = cp.ElementwiseKernel(
    "T q, raw T part, int64 n, int64 offset", "int64 dense",
    """
    long long lo = 0, hi = n;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (part[mid] < q) lo = mid + 1; else hi = mid;
    }
    dense = lo + offset;
    """, "breadth_lower_bound")


def _is_cudf(a) -> bool:
    return type(a).__module__.partition(".")[0] == "cudf"


def _split_strings(df, nowners: int) -> tuple:
    """:func:`chunk_split` of a frame of string ids: ``codes`` index the chunk's distinct strings ``u``
    (first-seen order), ``order`` lists them sorted within each owner, owner after owner."""
    import cudf

    k = len(df)
    codes, uniq = cudf.concat([df.iloc[:, 0], df.iloc[:, 1]], ignore_index=True).factorize()
    uniq = cudf.Series(uniq)
    codes = cp.stack([codes[:k], codes[k:]], axis=1).astype(cp.int32 if len(uniq) < (1 << 31) else cp.int64)
    by_value = cp.asarray(uniq.argsort().values)
    if nowners == 1:
        return codes, by_value, [uniq.take(by_value).reset_index(drop=True)]
    owner = cp.asarray(owner_of(uniq.to_arrow(), nowners))  # XXH64 of the UTF-8 bytes, as on the CPU
    order = by_value[cp.argsort((owner[by_value].astype(cp.uint64) << np.uint64(40))
                                | cp.arange(len(uniq), dtype=cp.uint64))]
    bounds = np.concatenate(([0], np.cumsum(cp.bincount(owner, minlength=nowners).get())))
    ordered = uniq.take(order).reset_index(drop=True)
    return codes, order, [ordered.iloc[bounds[p]:bounds[p + 1]].reset_index(drop=True) for p in range(nowners)]


def owner_part(dtype, *pieces):
    """Owner ``p``'s part: the sorted union of the pieces the chunks sent it (device array of uint64 keys,
    or a cuDF string series)."""
    if any(_is_cudf(p) for p in pieces):
        import cudf

        return cudf.concat([p for p in pieces if len(p)] or list(pieces[:1]), ignore_index=True) \
            .unique().sort_values().reset_index(drop=True)
    arrs = [cp.asarray(p) for p in pieces if len(p)]
    if not arrs:
        return cp.empty(0, cp.uint64)
    if len(arrs) == 1:
        return arrs[0]
    s = cp.sort(cp.concatenate(arrs))
    return s[_heads(s)]  # the split's own steps: cupy.unique's first call in a process costs ~0.15 s more


def part_index(part) -> None:
    """No index: the device's lookups are binary searches (the CPU's walk needs one, see
    :func:`breadth.pipeline.relabel.hash_relabel.part_index`)."""
    return None


def lookup_piece(part, offset: int, piece, index=None) -> "cp.ndarray":
    """Dense ids (int64) of a chunk's piece in its owner's part (every id of the piece is there): a
    binary search per id in breadth's own kernel (``cupy.searchsorted``'s first call in a process takes
    about 0.2 s on an H200, its later ones 4 ms); ``index`` is :func:`part_index`'s ``None``."""
    if _is_cudf(part):
        return cp.asarray(part.searchsorted(piece)).astype(cp.int64) + offset
    q = cp.asarray(piece)
    return _LOWER_BOUND(q, part, int(part.size), int(offset)) if q.size else cp.empty(0, cp.int64)


def chunk_dense(split: tuple, *looked_up, dtype=np.int64) -> "cp.ndarray":
    """The chunk's ``(k, 2)`` dense edges (of ``dtype``) on the device; ``split`` is ``(codes, order, ...)``."""
    codes, order = split[0], split[1]
    table = cp.empty(order.size, dtype)
    if looked_up:
        table[order] = cp.concatenate(looked_up) if len(looked_up) > 1 else looked_up[0]
    return table[codes]


def part_ids(part, dtype):
    """An owner's part as the host array the id map keeps (its share of the ids, once): the ids of its keys
    (NumPy ``dtype``, in key order), or an Arrow string array (no Python strings), as the CPU's parts are."""
    if _is_cudf(part):
        return part.to_arrow()
    return cp.asnumpy(ids_of_keys(part, dtype))
