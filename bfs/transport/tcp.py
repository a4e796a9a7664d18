"""TCP transport between BFS ranks: a full mesh of sockets, one round of messages per collective.

Each rank listens on its worker's host; the ``(host, port)`` pairs are exchanged once through Dask
(one ``distributed.Variable`` per rank, deleted as soon as every peer has connected), so per-level
traffic never touches the scheduler.  Rank ``i`` connects to every lower rank and accepts the higher ones.

Every collective is one round in which each rank sends at most one message to each peer and receives one
from each.  A message is a fixed header (sequence number, dtype, shape, byte count) followed by the raw
bytes of a C-contiguous array, received straight into a freshly allocated array (no pickling, no copy
beyond the kernel's).  A round of small messages (at most ``_EAGER`` bytes each: counters, short
frontiers) sends them all first, then waits on each peer's socket in turn; otherwise sends and receives
progress together in a selector loop on non-blocking sockets, so a large message never deadlocks two ranks
that send to each other at once.

Failure model: a peer whose process exits or whose socket closes is seen at once (EOF or reset); a peer
that stops answering is given up after ``timeout`` seconds without progress.  Either way the collective
raises :class:`~breadth.bfs.transport.communicator.CommError` naming the peer.
"""

from __future__ import annotations

import select
import selectors
import socket
import struct
import time
from typing import Any

import numpy as np

from .communicator import CommError, PeerCommunicator
from .wire_format import HEADER, MAGIC, MAXDIM, as_host_array, session_digest, worker_host

# handshake sent by the connecting rank: magic, session digest, rank
_HELLO = struct.Struct("<4s8sQ")
_CHUNK = 1 << 22  # bytes per send/recv call: large enough to amortize the syscall, small enough to interleave
#: messages up to this size are sent before anything is received (they fit the sockets' buffers); a round of
#: larger ones is driven by the selector loop (sending 128 KB eagerly gains nothing steady: a round takes
#: 42-127 us so, 63-110 us not)
_EAGER = 1 << 15



def _bytes_view(a: np.ndarray) -> memoryview:
    """Writable/readable flat byte view of a C-contiguous array (0-d and empty arrays included)."""
    return memoryview(a.reshape(-1).view(np.uint8)) if a.size else memoryview(b"")


class _Peer:
    """Per-round state of one connection: bytes left to send, the message being received."""

    __slots__ = ("rank", "sock", "out", "out_pos", "hdr", "hdr_pos", "arr", "view", "pos", "device", "done_in",
                 "readable")

    def __init__(self, rank: int, sock: socket.socket):
        self.rank, self.sock = rank, sock
        self.hdr = bytearray(HEADER.size)
        # registered once: waiting for this peer alone is then one poll() call, not a selector's three
        self.readable = select.poll()
        self.readable.register(sock, select.POLLIN)
        self.reset()

    def reset(self) -> None:
        self.out: list[memoryview] = []
        self.out_pos = 0
        self.hdr_pos = 0
        self.arr = None
        self.view = None
        self.pos = 0
        self.device = False
        self.done_in = True


class TCPCommunicator(PeerCommunicator):
    """Collectives over a full mesh of TCP sockets among ``size`` ranks (see the module notes).

    Build it with :meth:`connect` inside a session's rank task.  ``timeout`` (seconds) bounds how long a
    collective waits without any progress from a peer before it raises ``CommError``.
    """

    def __init__(self, rank: int, size: int, socks: dict[int, socket.socket], timeout: float = 60.0):
        self.rank, self.size, self.timeout = rank, size, float(timeout)
        self._peers = {r: _Peer(r, s) for r, s in socks.items()}
        for s in socks.values():
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small counters must not wait for Nagle
        self._sel = selectors.DefaultSelector()
        self._seq = 0
        self._sent = 0
        self._closed = False
        self._failed: CommError | None = None

    # -- set-up ----------------------------------------------------------------------------------
    @classmethod
    def connect(cls, rank: int, size: int, session: str, timeout: float = 60.0) -> "TCPCommunicator":
        """Join the mesh of ``session`` as ``rank`` of ``size``; every rank of the session must call this.

        Addresses go through one Dask ``Variable`` per rank (the scheduler sees ``size`` small values);
        raises ``CommError`` if a peer does not show up within ``timeout`` seconds.
        """
        from distributed import Variable, get_client

        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} outside [0, {size})")
        deadline = time.monotonic() + timeout
        left = lambda: max(0.01, deadline - time.monotonic())  # noqa: E731
        host = worker_host()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET  # workers may advertise IPv6 addresses
        lsock = socket.create_server((host, 0), family=family, backlog=max(size, 8))
        digest = session_digest(session)
        client = get_client()
        mine = Variable(f"{session}-tcp-{rank}", client=client)
        socks: dict[int, socket.socket] = {}
        try:
            mine.set(list(lsock.getsockname()[:2]), timeout=left())
            for j in range(rank):  # lower ranks listen already once their address is published
                try:
                    addr = Variable(f"{session}-tcp-{j}", client=client).get(timeout=left())
                except Exception as e:
                    raise CommError(f"rank {rank}: rank {j} did not publish its address within {timeout} s "
                                    f"({type(e).__name__})", peer=j) from e
                try:
                    s = socket.create_connection(tuple(addr), timeout=left())
                    s.sendall(_HELLO.pack(MAGIC, digest, rank))
                except OSError as e:
                    raise CommError(f"rank {rank}: cannot connect to rank {j} at {addr}: {e}", peer=j) from e
                socks[j] = s
            while len(socks) < size - 1:  # the higher ranks connect to us
                lsock.settimeout(left())
                try:
                    s, _ = lsock.accept()
                    s.settimeout(left())
                    magic, dig, j = _HELLO.unpack(_recv_exact(s, _HELLO.size))
                except (socket.timeout, OSError, ConnectionError) as e:
                    missing = sorted(set(range(rank + 1, size)) - set(socks))
                    raise CommError(f"rank {rank}: ranks {missing} did not connect within {timeout} s ({e})",
                                    peer=missing[0] if missing else None) from e
                if magic != MAGIC or dig != digest or not rank < j < size or j in socks:
                    s.close()  # a stray or stale connection: not one of this session's ranks
                    continue
                socks[j] = s
        except BaseException:
            for s in socks.values():
                s.close()
            raise
        finally:
            lsock.close()
            # every higher rank has read our address by now (or the session failed): drop it
            try:
                mine.delete()
            except Exception:
                pass
        comm = cls(rank, size, socks, timeout=timeout)
        comm.barrier()  # all meshes complete before anyone sends data
        return comm

    # -- the one round primitive -----------------------------------------------------------------
    def _round(self, send: dict[int, np.ndarray | None], recv_from: set[int]) -> dict[int, Any]:
        """Send ``send[p]`` to each peer ``p`` and receive one array from each peer in ``recv_from``."""
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._failed is not None:
            raise self._failed  # a failed mesh stays failed: its streams are out of step
        self._seq += 1
        seq = self._seq
        sel = self._sel
        active: dict[socket.socket, _Peer] = {}
        for p, peer in self._peers.items():
            peer.reset()
            if p in send:
                a, device = as_host_array(send[p])
                if a.ndim > MAXDIM:
                    raise ValueError(f"arrays of at most {MAXDIM} dimensions can be sent, got {a.ndim}")
                shape = list(a.shape) + [0] * (MAXDIM - a.ndim)
                hdr = HEADER.pack(MAGIC, seq, a.dtype.str.encode(), int(device), a.ndim, a.nbytes, *shape)
                peer.out = [memoryview(hdr)] + ([_bytes_view(a)] if a.nbytes else [])
                self._sent += a.nbytes
            if p in recv_from:
                peer.done_in = False
        out: dict[int, Any] = {}
        try:
            # Most rounds of a search are small: every message leaves in the first send, and each peer's
            # is then awaited on its socket alone, with no selector to set up and tear down (an all-reduce
            # between two ranks: 35-52 us so, 66-82 through the selector).  A message that does not leave at
            # once goes on in the selector loop.
            if all(sum(len(b) for b in peer.out) <= _EAGER for peer in self._peers.values()):
                for peer in self._peers.values():
                    if peer.out:
                        self._pump_out(peer)
            if not any(peer.out for peer in self._peers.values()):
                for p in sorted(recv_from):
                    peer = self._peers[p]
                    self._receive_alone(peer, seq)
                    out[p] = peer.arr
                return out
        except CommError as e:
            self._failed = e
            raise
        for p, peer in self._peers.items():
            events = (selectors.EVENT_WRITE if peer.out else 0) | (0 if peer.done_in else selectors.EVENT_READ)
            if events:
                sel.register(peer.sock, events, peer)
                active[peer.sock] = peer
        last = time.monotonic()
        try:
            while active:
                ready = sel.select(timeout=min(1.0, self.timeout))
                if not ready:
                    if time.monotonic() - last > self.timeout:
                        waiting = sorted(p.rank for p in active.values())
                        raise CommError(f"rank {self.rank}: no progress from rank(s) {waiting} for "
                                        f"{self.timeout:g} s (collective #{seq})", peer=waiting[0])
                    continue
                last = time.monotonic()
                for key, mask in ready:
                    peer = key.data
                    if mask & selectors.EVENT_WRITE and peer.out:
                        self._pump_out(peer)
                    if mask & selectors.EVENT_READ and not peer.done_in:
                        if self._pump_in(peer, seq):
                            out[peer.rank] = peer.arr
                    want = (selectors.EVENT_WRITE if peer.out else 0) | (0 if peer.done_in else selectors.EVENT_READ)
                    if not want:
                        sel.unregister(peer.sock)
                        del active[peer.sock]
                    elif want != key.events:
                        sel.modify(peer.sock, want, peer)
        except CommError as e:
            self._failed = e
            raise
        finally:
            for s in list(active):
                sel.unregister(s)
        return out

    def _receive_alone(self, peer: _Peer, seq: int) -> None:
        """Receive this round's message from ``peer``, waiting on its socket alone (nothing left to send)."""
        while not self._pump_in(peer, seq):
            if not peer.readable.poll(self.timeout * 1000):
                raise CommError(f"rank {self.rank}: no progress from rank(s) {[peer.rank]} for "
                                f"{self.timeout:g} s (collective #{seq})", peer=peer.rank)

    def _pump_out(self, peer: _Peer) -> None:
        while peer.out:
            buf = peer.out[0]
            try:
                n = peer.sock.send(buf[peer.out_pos:peer.out_pos + _CHUNK])
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                raise CommError(f"rank {self.rank}: sending to rank {peer.rank} failed: {e}", peer=peer.rank) from e
            peer.out_pos += n
            if peer.out_pos == len(buf):
                peer.out.pop(0)
                peer.out_pos = 0
            elif n == 0:
                return

    def _recv_into(self, peer: _Peer, view: memoryview) -> int:
        try:
            n = peer.sock.recv_into(view, min(len(view), _CHUNK))
        except (BlockingIOError, InterruptedError):
            return -1
        except OSError as e:
            raise CommError(f"rank {self.rank}: receiving from rank {peer.rank} failed: {e}", peer=peer.rank) from e
        if n == 0:
            raise CommError(f"rank {self.rank}: rank {peer.rank} closed its connection", peer=peer.rank)
        return n

    def _pump_in(self, peer: _Peer, seq: int) -> bool:
        """Read what is available; True once the whole message of this round has arrived."""
        while True:
            if peer.hdr_pos < HEADER.size:
                n = self._recv_into(peer, memoryview(peer.hdr)[peer.hdr_pos:])
                if n < 0:
                    return False
                peer.hdr_pos += n
                if peer.hdr_pos < HEADER.size:
                    continue
                magic, rseq, dt, device, ndim, nbytes, *shape = HEADER.unpack(peer.hdr)
                if magic != MAGIC or rseq != seq:
                    raise CommError(f"rank {self.rank}: rank {peer.rank} is out of step (message #{rseq}, "
                                    f"expected #{seq})", peer=peer.rank)
                peer.arr = np.empty(tuple(shape[:ndim]), np.dtype(dt.rstrip(b"\0").decode()))
                peer.device = bool(device)
                peer.view = _bytes_view(peer.arr)
                if peer.arr.nbytes != nbytes:
                    raise CommError(f"rank {self.rank}: bad header from rank {peer.rank}", peer=peer.rank)
            if peer.pos == len(peer.view):
                if peer.device:
                    import cupy

                    peer.arr = cupy.asarray(peer.arr)
                peer.done_in = True
                return True
            n = self._recv_into(peer, peer.view[peer.pos:])
            if n < 0:
                return False
            peer.pos += n

    def _exchange(self, send: dict[int, Any]) -> dict[int, Any]:
        return self._round(send, set(self._peers))

    def _exchange_among(self, send: dict[int, Any]) -> dict[int, Any]:
        """Nothing at all to or from the peers outside the group (its members' rounds stay in step: every
        rank of the session takes part in one group's round at the same time)."""
        return self._round(send, set(send))

    def close(self) -> None:
        """Close every connection (idempotent); peers still waiting on this rank get ``CommError``."""
        if self._closed:
            return
        self._closed = True
        self._sel.close()
        for peer in self._peers.values():
            try:
                peer.sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already reset by the peer
                pass
            peer.sock.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed during the handshake")
        buf += chunk
    return bytes(buf)


def connect(rank: int, size: int, session: str, *, timeout: float, backend: str = "cpu",
            config: Any = None) -> TCPCommunicator:
    """The TCP transport's entry in :mod:`breadth.bfs.transport.registry`: :meth:`TCPCommunicator.connect`
    (host buffers on CPU and GPU ranks alike, so ``backend`` and ``config`` change nothing)."""
    return TCPCommunicator.connect(rank, size, session, timeout=timeout)
