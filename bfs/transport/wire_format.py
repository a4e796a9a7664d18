"""The wire format the host transports share (:mod:`~breadth.bfs.transport.tcp`,
:mod:`~breadth.bfs.transport.ucx`): a message is a fixed header (magic, sequence number, dtype, device flag,
shape, byte count) followed by the raw bytes of a C-contiguous array; ranks of one session recognise each other
by a digest of its name and listen on their Dask worker's host."""

from __future__ import annotations

import hashlib
import socket
import struct
from typing import Any

import numpy as np

MAGIC = b"BRDT"
MAXDIM = 8
# magic, sequence number, dtype.str (NUL padded), device flag, ndim, payload bytes, shape[8]
HEADER = struct.Struct(f"<4sQ16sBBQ{MAXDIM}q")


def session_digest(session: str) -> bytes:
    """8 bytes naming a session, in every handshake: a rank of another session is turned away."""
    return hashlib.blake2b(session.encode(), digest_size=8).digest()


def worker_host() -> str:
    """The host of the Dask worker running this task (its advertised address), else this machine's name."""
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host

        return get_address_host(get_worker().address)
    except Exception:  # not inside a worker (a plain process): listen on the machine's own name
        return socket.gethostbyname(socket.gethostname())


def as_host_array(arr: Any) -> tuple[np.ndarray, bool]:
    """A C-contiguous NumPy view/copy of ``arr`` and whether it came from the device (CuPy)."""
    if hasattr(arr, "__cuda_array_interface__"):
        # a host transport cannot read device memory: stage through the host; the receiver puts it back on its device
        arr = arr.get()
        device = True
    else:
        device = False
    a = np.asarray(arr)
    if not a.flags.c_contiguous:  # (np.ascontiguousarray would also turn 0-d arrays into 1-d ones)
        a = a.copy(order="C")
    if a.dtype.hasobject:
        raise TypeError("object arrays cannot be sent between ranks; send numeric arrays")
    return a, device
