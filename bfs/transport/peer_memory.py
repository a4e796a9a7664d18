"""Device rounds through peer memory: ranks write into each other's GPU buffers over NVLink (CUDA IPC).

A captured multi-GPU level (:mod:`breadth.bfs.gpu.level_graphs`) makes two rounds: pairs or frontier bits to
the peers, then everyone's counters.  Over NCCL a round moves whole buffers whose sizes were fixed at
capture.  Here every receive buffer of a captured round is allocated once, from ``cudaMalloc``, and mapped
into every peer process (``cudaIpc*``), so a round is one kernel, ``peer_push``, which can also read how
much to move from a count the kernels before it just wrote:

1. every thread copies its share of the round's segments (``src`` here -> ``dst`` in a peer's mapped
   buffer, or a local one) with plain stores, which NVLink carries to the peer's memory;
2. each block fences at system scope and counts itself done; the last block bumps this rank's round number
   ``epoch`` and stores it into its slot of every peer's flag array (the *signal*: the fences order it
   after every block's stores);
3. it then spins until every peer's flag in this rank's array has reached ``epoch`` (their signals), so the
   kernels queued after the round read what every peer wrote.

Every rank replays the same rounds in the same order (the same graphs, chosen from the same counters), so
the round numbers agree without being exchanged.  A peer may run one round ahead, never two: it waits in
the next round for this rank's signal, which comes after this rank's kernels of the previous round.  No
buffer is written by two consecutive rounds, so a peer one round ahead never overwrites what this rank
still reads.  A push lands where the *sender* points, so every rank must receive a round's data in the
same buffer (level_graphs shares one per kind of level).

On four H200s, top-down levels with large frontiers spend ~120 µs beyond their kernels this way, ~205 µs
over NCCL (on two: ~75 and ~305), since only the filled pair rows move and the second round is rarer; a tiny
round is no faster than NCCL's (~45 µs per level on four GPUs, NCCL's ~36).

Failure: the spin gives up after ``timeout`` seconds, or at once when the host raises the abort flag (in
pinned host memory, which the GPU reads through unified addressing): the kernel records why in the same
pinned block and exits, the graph's remaining kernels run on stale data, and the host, which checks the
record after every wait, raises :class:`~breadth.bfs.transport.communicator.CommError`.  The host raises the flag
when its own watch of the peers (their TCP sockets, the Dask task's cancellation) sees one fail.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..gpu.cuda_source import read
from .communicator import CommError
from .ipc_buffers import share, unmap

_SOURCE = read("peer_push.cu")

_THREADS = 256


@functools.lru_cache(maxsize=None)
def _kernel():
    import cupy as cp

    return cp.RawModule(code=_SOURCE, options=("-std=c++17",)).get_function("peer_push")


def push_segments(sends: dict[int, list[tuple[int, int, int, int]]], where: dict[int, list[tuple[int, int, int]]],
                  peer_bases: dict[int, list[int]]) -> list[tuple[int, int, int, int, int]]:
    """The segments of one exchange: ``sends[p]`` this rank's arrays for peer ``p`` as ``(pointer, bytes,
    count pointer, unit)`` (count pointer 0: all the bytes; else at most ``*count * unit`` of them, read on
    the device), ``where[p]`` the ``(buffer index, byte offset, bytes)`` of the matching receive arrays on
    ``p`` (in the same order), ``peer_bases[p][i]`` this process's mapping of ``p``'s registered buffer
    ``i``.  Returns ``(source, destination, bytes, count pointer, unit)``; raises ``ValueError`` when the
    two sides disagree."""
    segs = []
    for p in sorted(sends):
        if len(sends[p]) != len(where.get(p, ())):
            raise ValueError(f"rank {p} receives {len(where.get(p, ()))} arrays from here, {len(sends[p])} are sent")
        for (ptr, nbytes, cptr, unit), (idx, off, rbytes) in zip(sends[p], where[p]):
            if nbytes != rbytes:
                raise ValueError(f"{nbytes} bytes sent to rank {p}, which receives {rbytes} there")
            if nbytes % 8 or (cptr and unit % 8):
                raise ValueError(f"peer rounds move multiples of 8 bytes, not {nbytes} (unit {unit})")
            segs.append((int(ptr), int(peer_bases[p][idx]) + int(off), int(nbytes), int(cptr), int(unit)))
    return segs


def _bus_id(cp, dev: int) -> str:
    return cp.cuda.runtime.deviceGetPCIBusId(dev)


class PeerMemory:
    """Peer-mapped receive buffers and one-kernel rounds among the GPUs of one node.

    Build it with :meth:`connect` (collective over the ranks' host mesh ``tcp``); ``None`` comes back when
    some pair of GPUs cannot reach each other directly, and the caller keeps its other transport."""

    def __init__(self, tcp, timeout: float):
        import cupy as cp

        self._cp, self._tcp = cp, tcp
        self.rank, self.size = tcp.rank, tcp.size
        self.timeout_ns = int(float(timeout) * 1e9)
        self._own: list[Any] = []  # cupy Memory objects of the registered buffers (kept alive)
        self._regs: list[tuple[int, int]] = []  # (local pointer, bytes) of registered buffer i
        self._bases: dict[int, list[int]] = {p: [] for p in range(self.size) if p != self.rank}
        self._opened: list[int] = []  # mapped peer pointers, closed at the end
        self._keep: list[Any] = []  # descriptor arrays of captured rounds
        self._host_mem = cp.cuda.alloc_pinned_memory(64)
        self.host = np.frombuffer(self._host_mem, np.int64, 8)
        self.host[:] = 0
        self._state = cp.zeros(2, cp.uint64)
        _kernel()  # compiled now, not while a round is being captured
        self.flags = self.alloc((self.size,), np.uint64)
        flag_ptrs = np.zeros(self.size, np.uint64)
        for p, bases in self._bases.items():
            flag_ptrs[p] = bases[0] + 8 * self.rank
        self._peer_flags = cp.asarray(flag_ptrs)
        self._closed = False

    @classmethod
    def connect(cls, tcp, timeout: float, enabled: bool = True) -> "PeerMemory | None":
        """Peer memory for the ranks of ``tcp`` if every GPU can write every other's memory (all ranks
        agree: one all-reduce of their answers), else ``None``.  ``enabled=False`` declines
        (:attr:`~breadth.bfs.search_config.SearchConfig.peer_memory`)."""
        import cupy as cp

        ok = enabled and tcp.size > 1
        mine = cp.cuda.Device().id
        bus = np.zeros(16, np.uint8)
        try:
            b = _bus_id(cp, mine).encode()[:16]
            bus[:len(b)] = np.frombuffer(b, np.uint8)
        except Exception:
            ok = False
        buses = tcp.allgather(bus)
        if ok:
            try:
                for p, pb in enumerate(buses):
                    if p == tcp.rank:
                        continue
                    other = cp.cuda.runtime.deviceGetByPCIBusId(bytes(pb).rstrip(b"\0").decode())
                    if other == mine or not cp.cuda.runtime.deviceCanAccessPeer(mine, other):
                        ok = False
            except Exception:
                ok = False
        if int(tcp.allreduce(np.array([0 if ok else 1], np.int64))[0]):
            return None
        return cls(tcp, timeout)

    # -- buffers --------------------------------------------------------------------------------------
    def alloc(self, shape, dtype):
        """A zeroed CuPy array that every peer can write (collective: every rank calls it with the same
        shape and dtype, in the same order)."""
        arr, opened = share(self._tcp, shape, dtype)
        for p, ptr in opened.items():
            self._opened.append(ptr)
            self._bases[p].append(ptr)
        mem = arr.data.mem
        self._own.append(mem)
        self._regs.append((mem.ptr, mem.size))
        return arr

    def find(self, arr) -> tuple[int, int] | None:
        """``(buffer index, byte offset)`` of device array ``arr`` inside a registered buffer, or None (an
        empty array allocated on its own has no address and is never inside one)."""
        ptr, n = arr.data.ptr, arr.nbytes
        if not ptr:
            return None
        for i, (base, size) in enumerate(self._regs):
            if base <= ptr and ptr + n <= base + size:
                return i, ptr - base
        return None

    def registered(self, arrays) -> bool:
        return all(self.find(a) is not None for a in arrays)

    # -- rounds ---------------------------------------------------------------------------------------
    def push(self, segs: list[tuple[int, int, int, int, int]]) -> None:
        """Queue one round on the current stream: copy every ``(source, destination, bytes, count pointer,
        unit)`` segment (see :func:`push_segments`), then signal every peer and wait for theirs (captured
        as one kernel node)."""
        cp = self._cp
        table = np.array(segs, np.uint64).reshape(-1, 5) if segs else np.zeros((1, 5), np.uint64)
        # uploaded on a stream of its own (this one may be capturing a graph), before the launch
        with cp.cuda.Stream(non_blocking=True) as side:
            desc = cp.asarray(table)
            side.synchronize()
        self._keep.append(desc)  # a captured graph reads it at every replay
        words = sum(s[2] for s in segs) // 8
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        grid = max(1, min(4 * sms, -(-words // (_THREADS * 4))))
        _kernel()((grid,), (_THREADS,), (desc, np.int32(len(segs)), self._peer_flags, self.flags, self._state,
                                         np.uint64(self._host_mem.ptr), np.int32(self.size), np.int32(self.rank),
                                         np.int64(self.timeout_ns)))

    def allgather_into(self, send, recv) -> None:
        """``recv`` (registered, ``(size * k,)``) = every rank's ``send`` (``(k,)``) in rank order."""
        idx, off = self.find(recv)
        n = send.nbytes
        at = off + self.rank * n
        segs = [(send.data.ptr, self._regs[idx][0] + at, n, 0, 0)]
        segs += [(send.data.ptr, self._bases[p][idx] + at, n, 0, 0) for p in sorted(self._bases)]
        self.push(segs)

    def exchange(self, sends: dict[int, list], recvs: dict[int, list], counts: dict[int, list] | None = None) -> None:
        """``sends[p][j]`` lands in peer ``p``'s ``recvs[rank][j]``: the receive arrays' places are swapped
        once over the host mesh (at capture time, not at replays), then one round.  ``counts[p][j]``, if
        given and not None, is ``(count, unit)``: a one-element int64 device array and a byte size, and
        only the first ``count`` units of ``sends[p][j]`` move (the rest of the receive array is stale)."""
        table = [np.zeros((0, 3), np.int64)] * self.size
        for p, arrs in recvs.items():
            rows = []
            for a in arrs:
                idx, off = self.find(a)
                rows.append((idx, off, a.nbytes))
            table[p] = np.array(rows, np.int64).reshape(-1, 3)
        got = self._tcp.alltoallv(table)
        where = {p: [tuple(int(x) for x in r) for r in got[p]] for p in sends}
        def one(p, j, a):
            c = (counts or {}).get(p)
            c = c[j] if c is not None else None
            return (a.data.ptr, a.nbytes, 0, 0) if c is None else (a.data.ptr, a.nbytes, c[0].data.ptr, int(c[1]))

        segs = push_segments({p: [one(p, j, a) for j, a in enumerate(arrs)] for p, arrs in sends.items()}, where,
                             self._bases)
        self.push(segs)

    # -- failure --------------------------------------------------------------------------------------
    def abort(self) -> None:
        """Make every spinning and future round give up at once (the host saw a peer fail)."""
        self.host[0] = 1

    def check(self, what: str) -> None:
        """Raise :class:`CommError` if a round of the work just waited for gave up."""
        why = int(self.host[1])
        if why:
            peer, mine, theirs = (int(x) for x in self.host[2:5])
            how = "was aborted" if why == 1 else f"timed out after {self.timeout_ns / 1e9:g} s"
            raise CommError(f"rank {self.rank}: {what} {how} waiting for rank {peer} (peer memory: round {mine}, "
                            f"the peer's last signal {theirs})", peer=peer)

    def close(self, failed: bool) -> None:
        """Unmap the peers' buffers and free this rank's (after a failure nothing is released: a kernel may
        still be writing into a peer's buffer or a peer into ours)."""
        if self._closed:
            return
        self._closed = True
        if failed:
            return
        self._cp.cuda.Device().synchronize()
        unmap(self._opened)
        self._opened.clear()
        self._keep.clear()
