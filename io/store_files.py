"""The files of a shard store: ``.npy`` arrays and Parquet string columns written through a temporary name,
fsync and rename, with their manifest records (sha256, bytes, dtype, shape), and read back checked against
them.  :mod:`breadth.io.shard_store` (shards, manifest) and :mod:`breadth.io.id_map_store` (the id map's
parts) both write and read through here."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import uuid

import numpy as np

from .errors import CorruptStoreError
from .npy_lock import NPY_HEADER_LOCK


def token() -> str:
    """8 hex digits naming one temporary file (``NAME.tmp-<token>``)."""
    return uuid.uuid4().hex[:8]


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
    to files, :mod:`breadth.pipeline.build.shard_files`), else ``None``."""
    if not isinstance(arr, np.memmap) or arr.filename is None or not arr.flags.c_contiguous:
        return None
    if os.path.getsize(arr.filename) != arr.offset + arr.nbytes:  # a slice of a map: its own offset is not recorded
        return None
    return arr.filename, arr.offset


def write_npy(w, arr: np.ndarray) -> None:
    """``arr`` (C-contiguous, not object) as ``.npy`` bytes into ``w`` (a writable binary file):
    the header ``numpy.lib.format.write_array`` writes (version 1.0), then the data in slices of the array's
    own memory (no copy), so the file is ``write_array``'s exactly.  A memory-mapped array
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


#: every file's sha256 is recorded per block of this many bytes (file offsets ``k * BLOCK_BYTES``, the
#: ``.npy`` header in the first): the blocks are hashed by several threads at once, where one digest of a
#: whole file must be computed in order -- one thread hashes ~1.2 GB/s on an H200's host, so a scale-26
#: shard's 9.2 GB took 7.6 s to check alone, against ~0.6 s on 16 threads
BLOCK_BYTES = 64 << 20


def hash_threads() -> int:
    """Threads that read and hash a file's blocks: the CPUs this process may use, at most 16."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(16, n))


def _num_blocks(nbytes: int, block: int) -> int:
    return max(1, -(-nbytes // block))


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)  # hashlib lets go of the GIL for buffers of more than 2 KiB
    return h.hexdigest()


#: bytes per read while hashing a file's block: each thread holds one such buffer, so hashing a file costs
#: a few MiB of memory whatever its size (a worker under a small memory limit writes and checks stores too)
_HASH_PIECE = 1 << 20


def _parallel(fn, n: int, threads: int | None = None) -> list:
    """``[fn(0), ..., fn(n - 1)]``, on up to :func:`hash_threads` threads."""
    from concurrent.futures import ThreadPoolExecutor

    threads = min(n, threads or hash_threads())
    if threads <= 1:
        return [fn(k) for k in range(n)]
    with ThreadPoolExecutor(threads, thread_name_prefix="breadth-sha256") as pool:
        return list(pool.map(fn, range(n)))


def _hash_file(h, fd: int, start: int, end: int, path: str) -> None:
    """Add bytes ``[start, end)`` of the open file ``fd`` to hash ``h``, :data:`_HASH_PIECE` at a time."""
    buf = memoryview(bytearray(min(_HASH_PIECE, max(end - start, 0))))
    while start < end:
        n = min(len(buf), end - start)
        _preadinto(fd, buf[:n], start, path)
        h.update(buf[:n])
        start += n


def _blocks_of(head: bytes, data, block: int) -> list[str]:
    """sha256 of each ``block`` bytes of a ``.npy`` file made of ``head`` (its header) and ``data``: a
    memoryview of the array's bytes, or ``(path, offset, nbytes)`` of a file that holds them (a memory map's
    file, read a piece at a time).  Blocks are hashed in parallel."""
    h = len(head)
    if isinstance(data, memoryview):
        total = h + len(data)

        def one(k: int) -> str:
            a, b = k * block, min((k + 1) * block, total)
            return _digest(head[min(a, h):min(b, h)], data[max(a - h, 0):max(b - h, 0)])

        return _parallel(one, _num_blocks(total, block))
    path, offset, nbytes = data
    total = h + nbytes
    fd = os.open(path, os.O_RDONLY)
    try:
        def one_from_file(k: int) -> str:
            a, b = k * block, min((k + 1) * block, total)
            d = hashlib.sha256(head[min(a, h):min(b, h)])
            _hash_file(d, fd, offset + max(a - h, 0), offset + max(b - h, 0), path)
            return d.hexdigest()

        return _parallel(one_from_file, _num_blocks(total, block))
    finally:
        os.close(fd)


def _preadinto(fd: int, view: memoryview, offset: int, path: str) -> None:
    """Fill ``view`` from file offset ``offset`` (``os.preadv``: no GIL held, no copy)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if not n:
            raise CorruptStoreError(f"{path}: ended {len(view) - done} bytes early (truncated)")
        done += n


def file_block_digests(path: str, block: int | None = None) -> list[str]:
    """sha256 of each ``block`` bytes (default :data:`BLOCK_BYTES`) of the file ``path``, read and hashed by
    several threads."""
    return _blocks_of(b"", (path, 0, os.path.getsize(path)), block or BLOCK_BYTES)


def _record(digests: list[str], nbytes: int, block: int) -> dict:
    return {"sha256_blocks": digests, "block_bytes": block, "bytes": nbytes}


def same_content(rec: dict, digest: dict) -> bool:
    """Whether a file record ``rec`` and a :func:`npy_digest` describe the same bytes (a record of the
    store's first format, one sha256 of the whole file, never matches: such a file is written again)."""
    return all(rec.get(k) == digest[k] for k in ("sha256_blocks", "block_bytes", "bytes"))


def save_npy(path: str, arr: np.ndarray, atomic: bool = False) -> dict:
    """``arr`` -> ``path`` as ``.npy``, fsynced; returns its record (``sha256_blocks``, ``block_bytes``,
    ``bytes``, ``dtype``, ``shape``).

    An array in memory is hashed block by block by other threads while this one writes it; a memory-mapped
    one (a shard built to files) is copied from its file, then the written file is hashed.
    ``atomic``: write ``path.tmp-<token>`` and rename, for files whose directory is already final."""
    from concurrent.futures import ThreadPoolExecutor

    arr = arr if mapped_file(arr) else np.ascontiguousarray(arr)
    target = f"{path}.tmp-{token()}" if atomic else path
    try:
        with open(target, "wb") as f:
            if mapped_file(arr) is None:
                head = _header(arr)
                with ThreadPoolExecutor(1) as hasher:
                    digests = hasher.submit(_blocks_of, head, _data(arr), BLOCK_BYTES)
                    write_npy(f, arr)
                    digests = digests.result()
            else:
                write_npy(f, arr)
                digests = None
            f.flush()
            os.fsync(f.fileno())
        nbytes = os.path.getsize(target)
        if digests is None:
            digests = file_block_digests(target, BLOCK_BYTES)
        if atomic:
            os.replace(target, path)
    except BaseException:
        if atomic and os.path.exists(target):
            os.remove(target)
        raise
    return dict(_record(digests, nbytes, BLOCK_BYTES), dtype=str(arr.dtype), shape=list(arr.shape))


def _header(arr: np.ndarray) -> bytes:
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(arr))
    return head.getvalue()


def _data(arr: np.ndarray) -> memoryview:
    return memoryview(arr.reshape(-1)).cast("B") if arr.size else memoryview(b"")


def npy_digest(arr: np.ndarray) -> dict:
    """The ``sha256_blocks``, ``block_bytes`` and ``bytes`` of the ``.npy`` file :func:`save_npy` would
    write for ``arr`` (nothing is written; a memory map's data is read from its file a piece at a time)."""
    source = mapped_file(arr)
    if source is None:
        arr = np.ascontiguousarray(arr)
    head = _header(arr)
    data = _data(arr) if source is None else (source[0], source[1], arr.nbytes)
    return _record(_blocks_of(head, data, BLOCK_BYTES), len(head) + arr.nbytes, BLOCK_BYTES)


def sha256_file(path: str) -> str:
    """One sha256 of the whole file (the store's first format records files so)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def save_strings(path: str, values) -> dict:
    """String ids (a list, or an Arrow string array) -> Parquet file ``path`` (one column ``id``) through
    a temporary name, fsync and rename; returns its manifest record (``sha256_blocks``, ``block_bytes``,
    ``bytes``, dtype ``"string"``, shape)."""
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
    return dict(_record(file_block_digests(path, BLOCK_BYTES), os.path.getsize(path), BLOCK_BYTES), dtype="string",
                shape=[len(values)])


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


def _mismatch(path: str) -> CorruptStoreError:
    return CorruptStoreError(f"{path}: sha256 checksum mismatch; the file is corrupted")


def verify_file(path: str, rec: dict) -> None:
    """Check the file ``path`` against its manifest record: size, and sha256 (of each block, hashed in
    parallel, or of the whole file for a record of the store's first format).  Raises
    :class:`CorruptStoreError`."""
    if not os.path.exists(path):
        raise CorruptStoreError(f"{path}: file listed in the manifest is missing")
    size = os.path.getsize(path)
    if size != rec["bytes"]:
        raise CorruptStoreError(f"{path}: {size} bytes, manifest says {rec['bytes']} (truncated or replaced)")
    if "sha256_blocks" not in rec:
        if sha256_file(path) != rec["sha256"]:
            raise _mismatch(path)
        return
    got = file_block_digests(path, rec["block_bytes"])
    bad = [k for k, (g, w) in enumerate(zip(got, rec["sha256_blocks"])) if g != w]
    if bad or len(got) != len(rec["sha256_blocks"]):
        raise _block_mismatch(path, bad[0] if bad else len(got), rec["block_bytes"])


def _block_mismatch(path: str, k: int, block: int) -> CorruptStoreError:
    end = min((k + 1) * block, os.path.getsize(path)) - 1
    return CorruptStoreError(f"{path}: sha256 checksum mismatch in bytes {k * block:,}..{end:,}; the file is "
                             "corrupted")


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


#: bytes per read into a device array's page-locked staging buffers (two per reading thread)
_STAGE_BYTES = 8 << 20


def read_npy_into(path: str, rec: dict, out, start: int = 0, verify: bool = True) -> None:
    """Elements ``start .. start + out.size - 1`` of the 1-D ``.npy`` file ``path`` straight into ``out``.

    Several threads read the file's blocks at once (``os.preadv``, no GIL); a NumPy ``out`` is read into
    in place (no memory map, no second copy: reading a shard costs its own bytes and no more), a CuPy
    ``out`` through two small page-locked buffers per thread, each copied to the device while the thread
    reads the next.  ``rec``: the file's manifest record (dtype, shape, bytes and its sha256 per block).
    ``verify``: check the file's size and sha256 -- block by block as they are read when ``out`` takes the
    whole array, else by hashing the file first.  A record of the store's first format (one sha256 of the
    whole file) is checked in one pass, in order.  Raises :class:`CorruptStoreError`."""
    whole = start == 0 and out.size == rec["shape"][0]
    if verify and not whole:
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
    device = not isinstance(out, np.ndarray)
    if verify and "sha256_blocks" not in rec:  # one digest of the whole file: read in parallel, hash in order
        host = np.empty(out.size, out.dtype) if device else out
        _read_blocks(path, data_at, 0, host, None, BLOCK_BYTES)
        with open(path, "rb") as f:
            head = f.read(data_at)
        if _digest(head, _data(host)) != rec["sha256"]:
            raise _mismatch(path)
        if device:
            out.set(host)
        return
    _read_blocks(path, data_at, start, out, rec if verify else None, rec.get("block_bytes", BLOCK_BYTES))


def _read_blocks(path: str, data_at: int, start: int, out, rec: dict | None, block: int) -> None:
    """Read ``out.size`` elements from element ``start`` of the ``.npy`` file (data at byte ``data_at``)
    into ``out`` (NumPy or CuPy), the file's ``block``-byte blocks on several threads; with ``rec``, check
    each block against ``rec["sha256_blocks"]`` (``out`` then holds the whole array)."""
    first = data_at + start * out.dtype.itemsize  # the file bytes [first, last) go to out
    last = first + out.nbytes
    if last == first:
        if rec is not None:
            verify_file(path, rec)
        return
    k0, k1 = first // block, -(-last // block)
    if rec is not None and len(rec["sha256_blocks"]) != k1 - k0:
        raise CorruptStoreError(f"{path}: the manifest lists {len(rec['sha256_blocks'])} sha256 blocks, the file "
                                f"has {k1 - k0}; the manifest disagrees with the store")
    fd = os.open(path, os.O_RDONLY)
    try:
        head = b""
        if rec is not None and first > 0:  # block 0 starts with the header, which is not copied
            head = bytearray(first)
            _preadinto(fd, memoryview(head), 0, path)
        device = not isinstance(out, np.ndarray)
        if device:
            copy = _DeviceCopies(out)
        else:
            dest = _data(out)

        def one(k: int) -> None:
            a, b = max(k * block, first), min((k + 1) * block, last)
            h = hashlib.sha256(head) if rec is not None and k == 0 else hashlib.sha256() if rec is not None else None
            if device:
                copy(fd, a, b, first, h, path)
            else:
                view = dest[a - first:b - first]
                _preadinto(fd, view, a, path)
                if h is not None:
                    h.update(view)
            if h is not None and h.hexdigest() != rec["sha256_blocks"][k - k0]:
                raise _block_mismatch(path, k, block)

        _parallel(one, k1 - k0)
        if device:
            copy.finish()
    finally:
        os.close(fd)


class _DeviceCopies:
    """File bytes to a CuPy array through page-locked buffers: each reading thread has two buffers, a
    stream and an event per buffer, so that its next read overlaps the copy of its last."""

    def __init__(self, out):
        import threading

        import cupy

        self.cp, self.dest = cupy, out.reshape(-1).view(cupy.uint8)
        self.local, self.streams, self.lock = threading.local(), [], threading.Lock()

    def _mine(self):
        st = getattr(self.local, "st", None)
        if st is None:
            import cupyx

            cp = self.cp
            st = self.local.st = {"stream": cp.cuda.Stream(non_blocking=True), "i": 0,
                                  "bufs": [cupyx.empty_pinned(_STAGE_BYTES, np.uint8) for _ in range(2)],
                                  "events": [None, None]}
            with self.lock:
                self.streams.append(st["stream"])
        return st

    def __call__(self, fd: int, a: int, b: int, first: int, h, path: str) -> None:
        st = self._mine()
        while a < b:
            n = min(_STAGE_BYTES, b - a)
            i = st["i"]
            if st["events"][i] is not None:
                st["events"][i].synchronize()  # this buffer's last copy has left it
            buf = st["bufs"][i]
            _preadinto(fd, memoryview(buf)[:n], a, path)
            if h is not None:
                h.update(memoryview(buf)[:n])
            self.dest[a - first:a - first + n].set(buf[:n], stream=st["stream"])
            ev = st["events"][i] = self.cp.cuda.Event(block=False, disable_timing=True)
            ev.record(st["stream"])
            st["i"] = 1 - i
            a += n

    def finish(self) -> None:
        for s in self.streams:
            s.synchronize()


def load_array(path: str, rec: dict, verify: bool) -> np.ndarray:
    """The whole 1-D ``.npy`` file ``path`` (its manifest record ``rec``) as a new array, read once."""
    out = np.empty(int(rec["shape"][0]) if rec.get("shape") else 0, np.dtype(rec["dtype"]))
    read_npy_into(path, rec, out, 0, verify)
    return out
