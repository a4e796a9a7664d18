"""Device buffers that the ranks of one host map into each other's processes (CUDA IPC).

A shared buffer is an allocation of its own (``cudaMalloc``: an IPC handle names a whole allocation, so not
CuPy's pool), whose handle goes to every peer over the ranks' host rounds; each peer opens it
(``cudaIpcOpenMemHandle``) and gets a device pointer of its own process, which its kernels and copies write
through -- over NVLink between two GPUs, in the device's own memory where the ranks share one.  Nothing here
orders a writer against the owner's reads: the callers' rounds do (a writer waits for its stream before its next
message), as :mod:`.peer_memory`'s flags do for its kernels.

The owner frees a buffer only after every peer has closed its mapping (CUDA leaves freeing it earlier
undefined): a communicator keeps its buffers until the peers' goodbyes, which they send after :func:`unmap`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: bytes of the driver's allocation blocks (the granularity of device allocations on H100/H200): a shared buffer
#: takes whole ones, so that no other allocation shares its IPC handle
BLOCK = 2 << 20


def share(mesh, shape: tuple[int, ...], dtype, agree: bool = False,
          attempts: int = 3) -> tuple[Any, dict[int, int]] | None:
    """A zeroed CuPy array of ``shape`` and ``dtype`` in an allocation of its own (``.data.mem``, which the
    caller keeps until the peers have unmapped it) and this process's pointer to every peer's
    (``{peer: address}``); collective over ``mesh`` (a communicator's ``allgather``/``allreduce``): every rank
    calls it with the same shape and dtype, in the same order.  ``agree``: where some rank cannot open a
    peer's handle (processes that may not share device memory: containers apart, MIG), every rank gets None
    instead of the error, at the cost of one all-reduce an attempt.

    A peer may refuse a handle as already mapped (``cudaErrorAlreadyMapped``, seen on two ranks sharing an H200
    after sessions of device transfers): a handle names the driver's allocation block, which a small
    ``cudaMalloc`` shares with other allocations the peer may have mapped already (UCX's CUDA IPC cache keeps
    the blocks it moved data from).  Each buffer therefore takes whole :data:`BLOCK` bytes, and with ``agree``
    the ranks try again with a fresh allocation, up to ``attempts``, each failed one held until the end so that
    the next lands elsewhere."""
    import cupy as cp

    rt = cp.cuda.runtime
    dtype = np.dtype(dtype)
    nbytes = -(-max(int(np.prod(shape)) * dtype.itemsize, 8) // BLOCK) * BLOCK
    held = []  # allocations some rank could not open, kept until the end so that the next one lands elsewhere
    for _ in range(max(1, attempts) if agree else 1):
        mem = cp.cuda.Memory(nbytes)
        rt.memset(mem.ptr, 0, nbytes)
        opened: dict[int, int] = {}
        failed = False
        try:
            handle = np.frombuffer(bytes(rt.ipcGetMemHandle(mem.ptr)), np.uint8)
        except Exception:
            if not agree:
                raise
            handle, failed = np.zeros(64, np.uint8), True
        handles = mesh.allgather(handle)
        try:
            for p in range(mesh.size):
                if p != mesh.rank and not failed:
                    opened[p] = rt.ipcOpenMemHandle(bytes(handles[p]))
        except Exception:
            if not agree:
                unmap(opened.values())
                raise
            failed = True
        if agree and int(mesh.allreduce(np.array([int(failed)], np.int64))[0]):
            unmap(opened.values())
            held.append(mem)
            continue
        return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0)), opened
    return None


def unmap(ptrs) -> None:
    """Close this process's mappings ``ptrs`` of peers' buffers (after the work that writes them is done)."""
    import cupy as cp

    for ptr in list(ptrs):
        try:
            cp.cuda.runtime.ipcCloseMemHandle(ptr)
        except Exception:
            pass
