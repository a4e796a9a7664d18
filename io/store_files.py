"""The files of a shard store: ``.npy`` arrays and Parquet string columns written through a temporary name,
fsync and rename, with their manifest records (sha256, bytes, dtype, shape), and read back checked against
them.  :mod:`breadth.io.shard_store` (shards, manifest) and :mod:`breadth.io.id_map_store` (the id map's
parts) both write and read through here."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
import uuid

import numpy as np

from .errors import CorruptStoreError
from .npy_lock import NPY_HEADER_LOCK


def token() -> str:
    """8 hex digits naming one temporary file (``NAME.tmp-<token>``)."""
    return uuid.uuid4().hex[:8]


class HashingWriter:
    """A write-only sink that hashes what passes through to ``f`` (``None``: hash only, write nothing)."""

    def __init__(self, f=None):
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b) if self.f is not None else len(b)


def fsync_dir(path: str) -> None:
    """Make renames/creations inside ``path`` durable (a no-op where directories cannot be fsynced)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: bytes per write of an array's data: NumPy's own writer copies 16 MiB at a time into a bytes object when
#: the target is not a real file (the hashing writer), which a worker with a memory limit pays for
_WRITE_BLOCK = 1 << 20


def mapped_file(arr: np.ndarray) -> tuple[str, int] | None:
    """``(path, byte offset)`` of the file that a whole read-only memory map ``arr`` shows (a shard built
    to files, :mod:`breadth.pipeline.shard_files`), else ``None``."""
    if not isinstance(arr, np.memmap) or arr.filename is None or not arr.flags.c_contiguous:
        return None
    if os.path.getsize(arr.filename) != arr.offset + arr.nbytes:  # a slice of a map: its own offset is not recorded
        return None
    return arr.filename, arr.offset


def write_npy(w, arr: np.ndarray) -> None:
    """``arr`` (C-contiguous, not object) as ``.npy`` bytes into ``w`` (a file or a :class:`HashingWriter`):
    the header ``numpy.lib.format.write_array`` writes (version 1.0), then the data in slices of the array's
    own memory (no copy), so the file and its sha256 are ``write_array``'s exactly.  A memory-mapped array
    is read from its file in blocks instead: a mapped page that is read stays in the worker's resident
    memory while the map lives, a block read into a buffer does not."""
    np.lib.format.write_array_header_1_0(w, np.lib.format.header_data_from_array_1_0(arr))
    source = mapped_file(arr)
    if source is not None:
        with open(source[0], "rb") as f:
            f.seek(source[1])
            left = arr.nbytes
            while left:
                block = f.read(min(_WRITE_BLOCK, left))
                if not block:
                    raise OSError(f"{source[0]}: ended {left} bytes early")
                w.write(block)
                left -= len(block)
        return
    data = memoryview(arr.reshape(-1)).cast("B") if arr.size else memoryview(b"")
    for i in range(0, len(data), _WRITE_BLOCK):
        w.write(data[i:i + _WRITE_BLOCK])


#: arrays in memory from this size on are hashed on a thread of their own while they are written (hashlib
#: and the file's writes both let go of the GIL): a shard's 525 MB of columns saves in about 0.44 s on 2
#: cores, a fifth less than hashing each 1 MiB block before writing it
HASH_APART_BYTES = 16 << 20


def _write_hashing_apart(f, arr: np.ndarray) -> tuple[str, int]:
    """``arr`` (C-contiguous, in memory) written into ``f`` by :func:`write_npy`, its sha256 computed
    meanwhile by another thread (the header's bytes, then the array's memory): ``(hex digest, bytes)``."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(arr))
    h = hashlib.sha256(head.getvalue())
    data = memoryview(arr.reshape(-1)).cast("B")
    hasher = threading.Thread(target=h.update, args=(data,), name="breadth-npy-sha256", daemon=True)
    hasher.start()
    try:
        write_npy(f, arr)
    finally:
        hasher.join()
    return h.hexdigest(), head.tell() + len(data)


def save_npy(path: str, arr: np.ndarray, atomic: bool = False) -> dict:
    """``arr`` -> ``path`` as ``.npy``, fsynced; returns its record (sha256, bytes, dtype, shape).

    ``atomic``: write ``path.tmp-<token>`` and rename, for files whose directory is already final."""
    arr = arr if mapped_file(arr) else np.ascontiguousarray(arr)
    target = f"{path}.tmp-{token()}" if atomic else path
    try:
        with open(target, "wb") as f:
            if mapped_file(arr) is None and arr.nbytes >= HASH_APART_BYTES:
                digest, nbytes = _write_hashing_apart(f, arr)
            else:
                w = HashingWriter(f)
                write_npy(w, arr)
                digest, nbytes = w.h.hexdigest(), w.n
            f.flush()
            os.fsync(f.fileno())
        if atomic:
            os.replace(target, path)
    except BaseException:
        if atomic and os.path.exists(target):
            os.remove(target)
        raise
    return {"sha256": digest, "bytes": nbytes, "dtype": str(arr.dtype), "shape": list(arr.shape)}


def npy_digest(arr: np.ndarray) -> tuple[str, int]:
    """sha256 and size of the ``.npy`` bytes :func:`save_npy` would write for ``arr`` (nothing is written)."""
    w = HashingWriter()
    write_npy(w, arr if mapped_file(arr) else np.ascontiguousarray(arr))
    return w.h.hexdigest(), w.n


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def save_strings(path: str, values) -> dict:
    """String ids (a list, or an Arrow string array) -> Parquet file ``path`` (one column ``id``) through
    a temporary name, fsync and rename; returns its manifest record (sha256, bytes, dtype ``"string"``,
    shape)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = f"{path}.tmp-{token()}"
    try:
        col = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
        pq.write_table(pa.table({"id": col}), tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return {"sha256": sha256_file(path), "bytes": os.path.getsize(path), "dtype": "string",
            "shape": [len(values)]}


def write_id_map_file(id_map, directory: str) -> dict:
    """The id map -> ``directory/id_map.npy`` (integers) or ``.parquet`` (strings), temp name + rename.
    It is small next to the shards and written by the client, so every run writes it again."""
    idm = np.asarray(id_map)
    if idm.dtype.kind in "iu":
        rec = save_npy(os.path.join(directory, "id_map.npy"), idm, atomic=True)
        rec["file"] = "id_map.npy"
        other = "id_map.parquet"
    else:
        rec = save_strings(os.path.join(directory, "id_map.parquet"), idm.tolist())
        rec["file"] = "id_map.parquet"
        other = "id_map.npy"
    with contextlib.suppress(FileNotFoundError):  # a stale map of the other kind (an earlier run's)
        os.remove(os.path.join(directory, other))
    return rec


def verify_file(path: str, rec: dict) -> None:
    if not os.path.exists(path):
        raise CorruptStoreError(f"{path}: file listed in the manifest is missing")
    size = os.path.getsize(path)
    if size != rec["bytes"]:
        raise CorruptStoreError(f"{path}: {size} bytes, manifest says {rec['bytes']} (truncated or replaced)")
    if sha256_file(path) != rec["sha256"]:
        raise CorruptStoreError(f"{path}: sha256 checksum mismatch; the file is corrupted")




def npy_data_offset(path: str) -> tuple[int, np.dtype, tuple]:
    """``(byte offset of the data, dtype, shape)`` of a ``.npy`` file, from its header alone."""
    with open(path, "rb") as f, NPY_HEADER_LOCK:  # the header parser is not thread-safe (io/npy_lock.py)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f".npy version {version} is not written by breadth")
        if dtype.hasobject or (fortran and len(shape) > 1):
            raise ValueError("not a plain C-ordered array")
        return f.tell(), dtype, shape


#: bytes per read into an array (and per sha256 update while reading)
_READ_BLOCK = 8 << 20


def read_npy_into(path: str, rec: dict, out: np.ndarray, start: int = 0, verify: bool = True) -> None:
    """Elements ``start .. start + out.size - 1`` of the 1-D ``.npy`` file ``path`` straight into ``out``
    (C-contiguous, the file's dtype): no memory map and no second copy, so reading a shard costs its own
    bytes and no more.  ``rec``: the file's manifest record (dtype, shape, bytes, sha256).  ``verify``: check
    the file's size and sha256 -- while reading when ``out`` takes the whole array (one pass over the
    file), else by hashing the file first.  Raises :class:`CorruptStoreError`."""
    if verify and (start != 0 or out.size != rec["shape"][0]):
        verify_file(path, rec)
        verify = False
    try:
        data_at, dtype, shape = npy_data_offset(path)
    except FileNotFoundError:
        raise CorruptStoreError(f"{path}: file listed in the manifest is missing") from None
    except (ValueError, OSError) as e:
        raise CorruptStoreError(f"{path}: cannot be read as .npy: {e}") from None
    if str(dtype) != rec["dtype"] or list(shape) != rec["shape"]:
        raise CorruptStoreError(f"{path}: dtype/shape {dtype}{tuple(shape)} differ from the manifest")
    if out.dtype != dtype or not out.flags.c_contiguous or start < 0 or start + out.size > shape[0]:
        raise ValueError(f"{path}: cannot read {out.size} {out.dtype} elements at {start} of {dtype}{tuple(shape)}")
    if verify and os.path.getsize(path) != rec["bytes"]:
        raise CorruptStoreError(f"{path}: {os.path.getsize(path)} bytes, manifest says {rec['bytes']} "
                                "(truncated or replaced)")
    h = hashlib.sha256() if verify else None
    view = memoryview(out.reshape(-1)).cast("B") if out.size else memoryview(b"")
    with open(path, "rb", buffering=0) as f:
        if h is not None:
            h.update(f.read(data_at))
        f.seek(data_at + start * dtype.itemsize)
        done = 0
        while done < len(view):
            n = f.readinto(view[done:done + _READ_BLOCK])
            if not n:
                raise CorruptStoreError(f"{path}: ended {len(view) - done} bytes early (truncated)")
            if h is not None:
                h.update(view[done:done + n])
            done += n
    if h is not None and h.hexdigest() != rec["sha256"]:
        raise CorruptStoreError(f"{path}: sha256 checksum mismatch; the file is corrupted")


def load_array(path: str, rec: dict, verify: bool) -> np.ndarray:
    """The whole 1-D ``.npy`` file ``path`` (its manifest record ``rec``) as a new array, read once."""
    out = np.empty(int(rec["shape"][0]) if rec.get("shape") else 0, np.dtype(rec["dtype"]))
    read_npy_into(path, rec, out, 0, verify)
    return out
