"""UCX transport between BFS ranks, over ucxx's core API (``pip install "breadth[ucx]"``).

Each communicator owns a UCX context, a worker and a listener; ranks exchange their listener and worker
addresses once through Dask (one ``distributed.Variable`` per rank) and every rank opens two endpoints to every
peer, so that each rank sends on endpoints of its own: the rounds with a peer of the same host go on an endpoint
to its worker address without UCX's peer error handling, the hellos and goodbyes (and the rounds with peers
elsewhere) on connections to its listener with it.  UCX's shared-memory transports cannot report a failed peer,
so an endpoint that asks for that gets TCP even between two processes of one host.  UCX picks shared memory,
TCP, InfiniBand or NVLink by itself, and moves CuPy arrays device to device
when it is built with CUDA.

No event loop: the rank's own thread posts sends and receives (``tag_send``/``tag_recv``, which return at
once) and progresses the worker until its requests complete -- a busy poll (``_HOST_SPIN_S`` on CPU ranks,
``_SPIN_S`` on GPU ranks) where the host has a core for each of its ranks (``_DEVICE_SPIN_S`` for rounds that
move device buffers), then
``progress_worker_event`` (the worker's epoll wakeup, which leaves the CPU to other ranks) -- bounded by
``timeout``.  Receives match on the 64-bit tag alone (UCX matches per worker, whatever the endpoint), so a tag
carries what a message is, its round's sequence number and its sender (:func:`_tag`): a message can never be
taken for another round's or another peer's.

Three kinds of rounds:

* **slot rounds** (``alltoallv``, ``allgather``, ``allreduce``, ``barrier``: shapes unknown to the
  receiver): one slot per peer, the :mod:`.wire_format` header followed by the payload itself when it is
  a host array of at most the rank's inline size (256 KiB on CPU ranks, 16 KiB on GPU ranks: counters,
  barriers, frontiers and pair lists, one message each); a larger or device payload follows as a second
  message, received straight into an array sized from the slot.  The next round's slot receives are posted
  as soon as a round's slots arrive, so a small round finds its receives waiting.
* **sized rounds** (``allgatherv``, ``gather_device``, ``exchange_device``, ``allgather_into``: sizes
  known to both sides): one message per non-empty array, received straight into the caller's buffer.
* **capped rounds** (``capped_round``, after ``open_capped``): host words of at most a fixed capacity, one
  message each way per peer, into receive buffers of that capacity posted a round ahead (two per peer,
  alternating; page-locked on GPU ranks, so that the caller's copies from them to the device are queued
  without a wait).  No header: the words say how many of them count, and UCX takes a message shorter than
  its receive.  The device engine's one-round top-down levels send their counters and pairs this way
  (:mod:`breadth.bfs.engine.one_round_levels`), and its bottom-up levels their counters, with a sized
  round's device arrays (the frontier bitmap) in the same round, whose receives may follow from the words
  (a level that found few vertices sends their list in the words instead).

Device rounds (:mod:`breadth.bfs.engine.device_engine`): UCX reads and writes device memory outside the
CUDA stream, so a round that touches device arrays first waits for the stream (the round's one host wait)
and returns once its receives have landed; UCX rounds cannot be captured in CUDA graphs
(``capturable_rounds`` is False).  The device methods take NumPy arrays too, which is how the CPU tests
drive them.

Failure model: a peer whose process dies fails its control endpoint, which cancels the goodbye receive posted
there (``CommError`` within ``_CHECK_EVERY_S`` of a wait); a request that fails on a rounds' endpoint raises at
once; a peer that closed its communicator says so in a goodbye message carrying the
last rounds it completed, so a rank waiting for a round that peer never joined fails at once; a silent peer
is given up after ``timeout`` seconds, and inside a Dask task a cancelled session stops the wait.
``ucxx`` is imported only when a communicator is built: ``import breadth.bfs.transport.ucx`` works without
it, and :meth:`UCXCommunicator.connect` raises ``ImportError`` with the install command.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

from .communicator import CommError, PeerCommunicator, task_cancelled_probe
from .wire_format import HEADER, MAGIC, MAXDIM, as_host_array, session_digest, worker_host


def _import_ucxx():
    try:
        import ucxx._lib.libucxx as ucx_api
        from ucxx._lib.arr import Array
    except Exception as e:  # ImportError, or a UCX library that fails to load
        raise ImportError(f"the UCX transport needs ucxx ({type(e).__name__}: {e}); install it with "
                          "`pip install \"breadth[ucx]\"` (ucxx-cu12) or use protocol='tcp'") from e
    return ucx_api, Array


# Every slot round's message starts with a slot: the header, then the payload itself when it is a host array
# of at most the rank's inline size (counters, barriers, frontiers and pair lists), so those take one UCX
# message instead of two, into a receive posted ahead.  A slot goes out at its length; its receive buffer
# holds the largest.  CPU ranks inline up to _INLINE_HOST bytes, within _SLOTS_MAX bytes of receive buffers
# per rank: a payload in a message of its own waits for the slot before its receive can be posted (at scale 20
# a level's pairs are ~31 KB, and sent so its exchange takes longer over UCX than over TCP); GPU ranks up to
# _INLINE (their large payloads are device buffers).  The header's flags say whether a payload is inline, so the
# two sides need not agree.
_INLINE = 1 << 14
_INLINE_HOST = 1 << 18
_SLOTS_MAX = 1 << 23
_INLINED = 2  # header flag beside "device" (1)
# Device arrays of at most _STAGE bytes travel through host memory (a copy to the host on the sender, one to
# the device on the receiver): UCX moves a small device buffer between two processes on one H100 in a ~340 us
# round trip, host bytes in ~22 us, and the copies cost ~10 us each.  In a slot round such an array rides inline
# in the slot, as a small host one does.  Larger arrays go device to device: staging up to 1 MiB cut a scale-24
# search on two ranks of one H100 to ~60 % of its GTEPS.
_STAGE = _INLINE
_WRAPS = 256  # device buffers whose ucxx wrappers a communicator caches (UCXCommunicator._device_array)

# tag = kind (2 bits) | sequence number (40 bits) | sender rank (14 bits) | index in the round (8 bits)
_SLOT_KIND, _SLOT_DATA, _SIZED, _CONTROL = 0, 1, 2, 3
_SEQ_BITS, _RANK_BITS, _INDEX_BITS = 40, 14, 8
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_CAPPED = (1 << _INDEX_BITS) - 1  # index of a capped round's message (kind _SIZED, the capped rounds' sequence)
_HELLO, _GOODBYE = 0, 1  # indices of the control messages (their sequence field holds the session digest)

_SPIN_S = 5e-5  # GPU ranks busy-poll the worker this long before waiting on its epoll wakeup (see _spin_for)
# (not NCCL's 2 ms: polling that long, a one-element all-reduce between GPU ranks on an H100 takes ~140 us, ~90
# polling 50 us)
# CPU ranks poll up to 1 ms: a message above the eager 32 KB (_HOST_UCX) goes by rendezvous, whose steps each
# need the other side to progress, and a side asleep in epoll delays every step by a wake-up.  Two ranks at
# scale 20 on a 2-core machine: polling 1 ms, the level exchange over UCX takes about as long as over TCP
# (median 1.03x); polling 50 us, 1.35x.
_HOST_SPIN_S = 1e-3
# Rounds that move device buffers poll longer: the CUDA IPC copies' completion does not wake the worker's
# epoll, so a wait that goes to sleep returns late (two ranks on one H100: a 64 MB sized round moves ~103 GB/s
# per direction that way, 134-158 GB/s polled)
_DEVICE_SPIN_S = 2e-3
_EVENT_MS = 2  # longest sleep in the worker's epoll wait between checks of time, liveness and cancellation
_CHECK_EVERY_S = 0.005  # how often a long wait looks at goodbyes, the timeout and the task's cancellation
_CANCEL_EVERY_S = 0.2  # how often it asks the Dask worker whether the session was cancelled
_BYE_S = 2.0  # how long close() waits for the peers' goodbyes (each peer's last round's data is then safe)
_CLOSE_S = 0.1  # how long it then progresses the rounds' endpoints' closing, which a peer that answers completes
_SEND_WRAPS = 64  # capped rounds' send arrays kept wrapped for ucxx (at most this many, of at most the opened words)


# UCX settings for host-only ranks (a user's own UCX_* variables win).  Between two CPU processes on one host,
# on endpoints with error handling (UCX then moves host messages over TCP), UCX's defaults move 16 KB-800 KB
# messages slower than a TCP socket; its put protocol and eager messages up to 32 KB are faster at every size
# (a 200 KB round both ways: ~85 us with them, 168-284 with the defaults).  On the rounds' endpoints without
# error handling (shared memory) they make no difference.
_HOST_UCX = {"RNDV_SCHEME": "put_zcopy", "RNDV_THRESH": "32k"}


def _context_config(device: bool) -> dict[str, str]:
    """UCX settings for this rank's context: :data:`_HOST_UCX` on CPU ranks, minus what the user set."""
    if device:  # GPU ranks keep UCX's choice: the put protocol moves their host messages faster only over TCP,
        # and their rounds with peers of the host go over shared memory
        return {}
    return {k: v for k, v in _HOST_UCX.items() if f"UCX_{k}" not in os.environ}


def _spin_for(ranks_here: int, device: bool = False) -> float:
    """How long a rank busy-polls before sleeping on the worker's wakeup: :data:`_HOST_SPIN_S` on CPU ranks,
    :data:`_SPIN_S` on GPU ranks, where this host has a core for every rank on it, else not at all -- a polling
    rank then holds a core its peers need to send what it waits for.  On a 2-core machine a barrier of 2 ranks
    takes ~62 us polling and ~122 us not; one of 4 ranks ~500 us not polling, ~590 polling."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if ranks_here > cores:
        return 0.0
    return _SPIN_S if device else _HOST_SPIN_S


def _tag(kind: int, seq: int, sender: int, index: int = 0) -> int:
    """The 64-bit tag of message ``index`` of round ``seq`` of ``kind`` from rank ``sender``."""
    return (kind << 62) | ((seq & _SEQ_MASK) << (_RANK_BITS + _INDEX_BITS)) | (sender << _INDEX_BITS) | index


def _slot(seq: int, dtype: np.dtype, device: bool, shape: tuple, nbytes: int, inline: Any = None) -> np.ndarray:
    buf = np.empty(HEADER.size + (nbytes if inline is not None else 0), np.uint8)
    dims = list(shape) + [0] * (MAXDIM - len(shape))
    flags = int(device) | (_INLINED if inline is not None else 0)
    HEADER.pack_into(buf, 0, MAGIC, seq, dtype.str.encode(), flags, len(shape), nbytes, *dims)
    if inline is not None and nbytes:
        buf[HEADER.size:HEADER.size + nbytes] = inline.reshape(-1).view(np.uint8)
    return buf


def _flat_bytes(a: Any) -> Any:
    """A flat uint8 view of C-contiguous host array ``a`` that UCX reads from or writes into."""
    if not a.flags.c_contiguous:
        raise ValueError(f"UCX moves C-contiguous arrays only; got one of shape {a.shape} and strides {a.strides}")
    return a.reshape(-1).view(np.uint8)


class _DeviceBytes:
    """The bytes of a C-contiguous device array as ucxx's ``Array`` reads them: the CUDA array interface of a
    flat uint8 array, built from the array's pointer.  A flat byte view costs two CuPy array objects (wrapping
    one takes 3.7-7.3 us a message on an H200, this 1.7-3.6): a 64 MB round both ways between two ranks on one
    H200 takes ~160 us with these wrappers, ~190 with flat views.  ``base`` keeps the array, and so its memory,
    alive as long as UCX holds the wrapper (``keep``; the sized rounds' cached wrappers do not)."""

    __slots__ = ("__cuda_array_interface__", "base")

    def __init__(self, a: Any, keep: bool = True):
        if not a.flags.c_contiguous:
            raise ValueError(f"UCX moves C-contiguous arrays only; got one of shape {a.shape} and strides "
                             f"{a.strides}")
        self.base = a if keep else None
        self.__cuda_array_interface__ = {"data": (a.data.ptr, False), "shape": (int(a.nbytes),), "typestr": "|u1",
                                         "strides": None, "version": 3}


def _nonempty(x) -> list:
    """The non-empty arrays of one peer's entry in a sized round (``None``, an array, or a list of them),
    in order: both sides know the sizes, so both skip the same empty ones."""
    if x is None:
        return []
    return [a for a in (x if isinstance(x, (list, tuple)) else [x]) if a is not None and a.nbytes]


class UCXCommunicator(PeerCommunicator):
    """Collectives over UCX endpoints among ``size`` ranks; build it with :meth:`connect` (see the module
    notes).  ``timeout`` (seconds) bounds each round: one not complete by then raises ``CommError``.
    ``device`` is True on GPU ranks (device buffers are CuPy arrays, and rounds on them wait for the
    current stream first)."""

    #: device rounds (gather_device, exchange_device, allgather_into, allgatherv(wait=False)): the device
    #: engine runs over UCX, one host wait per round
    device_counters = True
    #: UCX rounds run on the host, outside any CUDA stream: they cannot be captured in CUDA graphs
    capturable_rounds = False
    #: host words into receives posted a round ahead (:meth:`capped_round`)
    capped_rounds = True

    def __init__(self, rank: int, size: int, api, array, ctx, worker, listener, eps: dict, ctl: dict,
                 accepted: list, local: set, digest: int, timeout: float, device: bool):
        self.rank, self.size, self.timeout = rank, size, float(timeout)
        self._spin = _spin_for(1 + len(local), device)
        self._api, self._array = api, array
        self._ctx, self._worker, self._listener = ctx, worker, listener
        self._eps, self._ctl, self._accepted = eps, ctl, accepted
        self._local = local  # the peers on this host: their rounds' endpoints have no error handling
        self._peers = sorted(eps)
        self._digest = digest
        self._cp = None  # CuPy on GPU ranks: the module of device buffers
        if device:
            import cupy

            self._cp = cupy
        self._held: list = []  # pinned buffers whose copies to the device may still be queued on the stream
        self._wraps: dict[tuple[int, int], Any] = {}  # (address, bytes) -> ucxx Array, device buffers
        self._shared: list[tuple[Any, list[int]]] = []  # open_shared's allocations and this rank's mappings of
        # the peers' (unmapped before the goodbye; the allocations freed after the peers' goodbyes)
        self._orphans: list = []  # the arrays of failed sized rounds, alive until the communicator is released
        self._seq = 0  # slot rounds completed (both sides count the same collectives)
        self._dseq = 0  # sized rounds
        self._cseq = 0  # capped rounds
        self._capped: dict[int, tuple] | None = None  # peer -> two (receive buffer, its ucxx wrapper)
        self._capped_reqs: dict[int, Any] = {}
        self._capped_got: tuple[dict, dict] = ({}, {})  # what capped_round returns, by sequence parity
        self._send_wraps: dict[int, tuple] = {}  # id -> (array, wrapper, bytes): capped rounds' send buffers
        self._sent = 0
        self._closed = False
        self._failed: CommError | None = None
        self._cancelled = task_cancelled_probe()
        # the next slot round's receives, posted ahead into one of two buffers per peer (by seq parity)
        self._inline = _INLINE if device else max(_INLINE, min(_INLINE_HOST, _SLOTS_MAX // (2 * max(size - 1, 1))))
        slot = HEADER.size + self._inline
        self._slot_bufs = {p: (np.empty(slot, np.uint8), np.empty(slot, np.uint8)) for p in self._peers}
        self._slot_reqs: dict[int, Any] = {}
        # each peer's goodbye ([digest, last slot round, last sized round, last capped round]), posted once
        self._bye_bufs = {p: np.zeros(4, np.int64) for p in self._peers}
        self._bye_reqs = {p: self._recv(p, self._bye_bufs[p], _CONTROL, self._digest, _GOODBYE)
                          for p in self._peers}
        for p in self._peers:
            self._post_slot(p, 1)

    # -- set-up ----------------------------------------------------------------------------------
    @classmethod
    def connect(cls, rank: int, size: int, session: str, timeout: float = 60.0,
                device: bool = False) -> "UCXCommunicator":
        """Join ``session`` as ``rank`` of ``size`` (collective over the session's rank tasks); ``device``
        on GPU ranks.  Raises ``CommError`` naming a peer that does not show up within ``timeout`` s."""
        api, array = _import_ucxx()
        from distributed import Variable, get_client

        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} outside [0, {size})")
        if size >= 1 << _RANK_BITS:
            raise ValueError(f"the UCX transport supports fewer than {1 << _RANK_BITS} ranks, got {size}")
        if device:
            import cupy

            cupy.cuda.runtime.free(0)  # a current CUDA context before UCX looks for CUDA memory support
        deadline = time.monotonic() + timeout
        left = lambda: max(0.01, deadline - time.monotonic())  # noqa: E731
        digest = int.from_bytes(session_digest(session), "little") & _SEQ_MASK
        ctx = api.UCXContext(config_dict=_context_config(device), feature_flags=(api.Feature.TAG, api.Feature.WAKEUP))
        worker = api.UCXWorker(ctx)
        worker.init_blocking_progress_mode()
        # two endpoints a peer: one for the rounds and one for the hellos and goodbyes.  UCX's shared-memory
        # transports cannot report a peer's failure, so an endpoint asked to (ucxx's default) leaves them out
        # and moves a host message over TCP even between two processes of one host: on the rounds' endpoints to
        # a peer of this host none is asked, and a peer's failure is seen on its control endpoint, whose goodbye
        # receive it cancels.  Without error handling a round both ways of 128 KB of page-locked host words
        # between two GPU processes of one H200 takes ~17 us, with it ~82 (two CPU processes, 200 KB: 32 and
        # 171 us).  The rounds' endpoint to a peer of this host goes to its worker address, not through its
        # listener: closing a listener's connection without error handling flushes it, and where the peer had
        # closed its end first UCX prints "error during flush: Connection reset by remote peer" at about one
        # close in ten (tests/test_multirank.py); the worker address takes the same shared-memory lanes.
        # ``accepted``: the endpoints of the peers' connections to our listener (their hellos, goodbyes and the
        # rounds of peers elsewhere: they send on them, we on our own)
        accepted: list = []
        listener = api.UCXListener.create(worker, 0, accepted.append, deliver_endpoint=True)
        eps: dict[int, Any] = {}
        ctl: dict[int, Any] = {}
        local: set[int] = set()  # the peers on this host
        client = get_client()
        mine = Variable(f"{session}-ucx-{rank}", client=client)
        comm = None
        try:
            mine.set([worker_host(), int(listener.port), worker.address.tobytes()], timeout=left())
            for j in range(size):
                if j == rank:
                    continue
                try:
                    host, port, address = Variable(f"{session}-ucx-{j}", client=client).get(timeout=left())
                except Exception as e:
                    raise CommError(f"rank {rank}: rank {j} did not publish its address within {timeout} s",
                                    peer=j) from e
                here = host == worker_host()
                if here:
                    local.add(j)
                try:  # (a peer on another host: no shared memory to gain, and a transport error there, on an
                    # endpoint without error handling, may end this process -- its rounds keep error handling)
                    eps[j] = (api.UCXEndpoint.create_from_worker_address(
                        worker, api.UCXAddress.create_from_buffer(address), False) if here
                        else api.UCXEndpoint.create(worker, host, int(port), True))
                    ctl[j] = api.UCXEndpoint.create(worker, host, int(port), True)
                except Exception as e:
                    raise CommError(f"rank {rank}: cannot reach rank {j} at {host}:{port}: {e!r}", peer=j) from e
            comm = cls(rank, size, api, array, ctx, worker, listener, eps, ctl, accepted, local, digest, timeout,
                       device)
            comm._hello(session, left())
        except BaseException:
            if comm is not None:
                comm.close()
            raise
        finally:
            try:
                mine.delete()
            except Exception:
                pass
        return comm

    def _hello(self, session: str, within: float) -> None:
        """Every peer says which session and rank it is on this rank's endpoints (so it has dialed us, and
        our address may be withdrawn): a rank of another session never matches, its tags differ."""
        me = np.array([self._digest, self.rank], np.int64)
        got = {p: np.zeros(2, np.int64) for p in self._peers}
        reqs = [(p, self._send(p, me, _CONTROL, self._digest, _HELLO)) for p in self._peers]
        reqs += [(p, self._recv(p, got[p], _CONTROL, self._digest, _HELLO)) for p in self._peers]
        self._wait(reqs, f"the connection to session {session}", None, limit=within)
        for p, g in got.items():
            if g[0] != self._digest or g[1] != p:
                raise CommError(f"rank {self.rank}: rank {p} answered for another session or rank ({g.tolist()})",
                                peer=p)

    # -- messages and waiting ----------------------------------------------------------------------
    def _send(self, p: int, buf, kind: int, seq: int, index: int = 0):
        """Post message ``buf`` to peer ``p``: a control message (hello, goodbye) on the endpoint that sees the
        peer fail, the rounds' on the other."""
        ep = (self._ctl if kind == _CONTROL else self._eps)[p]
        return ep.tag_send(self._array(self._bytes(buf)), self._api.UCXXTag(_tag(kind, seq, self.rank, index)))

    def _recv(self, p: int, buf, kind: int, seq: int, index: int = 0):
        ep = (self._ctl if kind == _CONTROL else self._eps)[p]
        return ep.tag_recv(self._array(self._bytes(buf)), self._api.UCXXTag(_tag(kind, seq, p, index)))

    def _bytes(self, buf):
        """``buf``'s bytes in the form ucxx's ``Array`` takes them (a flat view, or a device array's interface)."""
        return _DeviceBytes(buf) if self._on_device(buf) else _flat_bytes(buf)

    def _post_slot(self, p: int, seq: int) -> None:
        self._slot_reqs[p] = self._recv(p, self._slot_bufs[p][seq % 2], _SLOT_KIND, seq)

    def _check(self) -> None:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._failed is not None:
            raise self._failed

    def _fail(self, err: CommError):
        self._failed = err
        raise err

    def _wait(self, reqs: list, what: str, round_of: tuple[int, int] | None, limit: float | None = None,
              spin: float | None = None) -> None:
        """Progress the worker until every ``(peer, request)`` of ``reqs`` completed, busy for ``spin``
        seconds (default: this rank's host-round spin, :func:`_spin_for`), then sleeping on the worker's
        wakeup; ``round_of`` is ``(goodbye field, sequence number)`` of the round, so that a peer whose
        goodbye says it never joined that round fails the wait at once.
        Raises ``CommError`` on a failed request, a closed or silent peer (``limit`` seconds, default
        ``timeout``) or a cancelled session."""
        pending = [(p, r) for p, r in reqs if not self._done(p, r, what)]
        if not pending:
            return
        worker = self._worker
        t0 = time.perf_counter()
        spin_until = t0 + (self._spin if spin is None else spin)
        while True:  # the common case: a few µs
            worker.progress()
            pending = [(p, r) for p, r in pending if not self._done(p, r, what)]
            if not pending:
                return
            if time.perf_counter() >= spin_until:
                break
        limit = self.timeout if limit is None else limit
        next_check = next_cancel = t0
        while pending:
            worker.progress_worker_event(_EVENT_MS)
            # woken (or timed out): poll a while before sleeping again, since a round's next step (a
            # rendezvous's reply, the data after a slot) follows within microseconds and another epoll
            # wake-up costs tens of them
            rearm = time.perf_counter() + self._spin
            while True:
                pending = [(p, r) for p, r in pending if not self._done(p, r, what)]
                if not pending or time.perf_counter() >= rearm:
                    break
                worker.progress()
            now = time.perf_counter()
            if not pending or now < next_check:
                continue
            next_check = now + _CHECK_EVERY_S
            waiting = sorted({p for p, _ in pending})
            if round_of is not None:
                field, seq = round_of
                for p in waiting:
                    bye = self._bye_reqs[p]
                    if bye.completed:
                        try:
                            bye.check_error()
                        except Exception as e:  # its control endpoint failed: the peer is gone
                            self._fail(CommError(f"rank {self.rank}: rank {p} failed during {what}: {e!r}", peer=p))
                        if self._bye_bufs[p][field] < seq:
                            self._fail(CommError(f"rank {self.rank}: rank {p} closed its communicator before "
                                                 f"{what}", peer=p))
            if now - t0 > limit:
                self._fail(CommError(f"rank {self.rank}: no answer from rank(s) {waiting} within {limit:g} s "
                                     f"({what})", peer=waiting[0]))
            if self._cancelled is not None and now >= next_cancel:
                next_cancel = now + _CANCEL_EVERY_S
                if self._cancelled():
                    self._fail(CommError(f"rank {self.rank}: the session was cancelled during {what} (a peer "
                                         "failed or its worker died)", peer=None))

    def _done(self, p: int, req, what: str) -> bool:
        if not req.completed:
            return False
        try:
            req.check_error()
        except Exception as e:  # the endpoint failed (the peer died) and UCX cancelled its requests
            self._fail(CommError(f"rank {self.rank}: {what} with rank {p} failed: {e!r}", peer=p))
        return True

    def _wait_stream(self, arrays) -> None:
        """On a GPU rank, wait for the current stream when a round touches device arrays: the kernels that
        write a send buffer (or still use a receive buffer) must be done before UCX touches it."""
        if self._cp is not None and any(isinstance(a, self._cp.ndarray) for a in arrays):
            self._cp.cuda.get_current_stream().synchronize()

    # -- slot rounds ---------------------------------------------------------------------------------
    def _payload(self, arr: Any) -> tuple[Any, bool]:
        """The buffer to send for ``arr``: CuPy arrays stay on the device, anything else becomes NumPy."""
        if self._cp is not None and isinstance(arr, self._cp.ndarray):
            return self._cp.ascontiguousarray(arr), True
        return as_host_array(arr)

    def _exchange(self, send: dict[int, Any]) -> dict[int, Any]:
        """One slot round: ``send[p]`` (any shape and dtype) to every peer ``p``; what each peer sent."""
        self._check()
        self._seq = seq = self._seq + 1
        what = f"collective #{seq}"
        bufs = {p: self._payload(a) for p, a in send.items()}
        synced = any(device for _, device in bufs.values())
        self._wait_stream([b for b, _ in bufs.values()])
        reqs, keep = [], []  # keep: the slots and buffers, alive until their sends complete
        for p, (buf, device) in bufs.items():
            if buf.ndim > MAXDIM:
                raise ValueError(f"arrays of at most {MAXDIM} dimensions can be sent, got {buf.ndim}")
            inline = buf.nbytes <= (_STAGE if device else self._inline)
            slot = _slot(seq, buf.dtype, device, buf.shape, buf.nbytes,
                         (buf.get() if device else buf) if inline else None)
            keep.append(slot)
            reqs.append((p, self._send(p, slot, _SLOT_KIND, seq)))
            if buf.nbytes and not inline:
                keep.append(buf)
                reqs.append((p, self._send(p, buf, _SLOT_DATA, seq)))
            self._sent += buf.nbytes
        self._wait([(p, self._slot_reqs[p]) for p in self._peers], what, (1, seq))
        out = {}
        for p in self._peers:
            slot = self._slot_bufs[p][seq % 2]
            self._post_slot(p, seq + 1)  # into the other buffer: this one is read below
            magic, rseq, dt, flags, ndim, nbytes, *shape = HEADER.unpack_from(slot)
            if magic != MAGIC or rseq != seq:
                self._fail(CommError(f"rank {self.rank}: rank {p} is out of step (message #{rseq}, expected "
                                     f"#{seq})", peer=p))
            device, inline = bool(flags & 1), bool(flags & _INLINED)
            dtype, shape = np.dtype(dt.rstrip(b"\0").decode()), tuple(shape[:ndim])
            if device and not synced:  # the pool may hand out memory that queued kernels still use
                self._cp.cuda.get_current_stream().synchronize()
                synced = True
            arr = self._cp.empty(shape, dtype) if device else np.empty(shape, dtype)
            if nbytes and inline:
                data = slot[HEADER.size:HEADER.size + nbytes]
                if device:
                    arr.reshape(-1).view(np.uint8).set(data)
                else:
                    arr.reshape(-1).view(np.uint8)[:] = data
            elif nbytes:
                reqs.append((p, self._recv(p, arr, _SLOT_DATA, seq)))
            out[p] = arr
        on_device = any(device and b.nbytes > _STAGE for b, device in bufs.values()) or any(
            self._cp is not None and isinstance(a, self._cp.ndarray) and a.nbytes > _STAGE for a in out.values())
        self._wait(reqs, what, (1, seq), spin=_DEVICE_SPIN_S if on_device else None)
        return out

    # -- sized rounds --------------------------------------------------------------------------------
    def _sized_round(self, sends: dict[int, Any], recvs: dict[int, Any] | Callable, what: str,
                     capped: dict[int, np.ndarray] | None = None) -> int:
        """``sends[p]``/``recvs[p]`` (an array or a list of them, matched in order, empty ones skipped: both
        sides know the sizes) to and from peer ``p``; returns once every receive has landed, with the bytes
        sent.  ``capped``: a capped round's host words (:meth:`capped_round`) that travel in the same round,
        sent after the wait for the stream (a copy queued into them has landed), waited for together.
        ``recvs`` may be a function of the peers' capped words (``{peer: its receive buffer}``, as
        :meth:`capped_round` returns them) where the words say what follows: its receives are posted once
        every peer's words have landed (a device message that came first waits in UCX's unexpected queue).

        A peer's arrays of at most ``_STAGE`` bytes travel together as one message (index 0), packed in
        order into one host buffer: a small device array is copied there on the stream (pinned memory, all
        such copies queued before the round's one wait on the stream) and, received, copied to the device
        on the stream without a wait.  A larger array is a message of its own (index ``1 + i``), device to
        device.  A host array is read after the round's wait for the stream, so one that a copy queued on the
        stream writes may be sent.  A top-down level's round of counters and pairs between two ranks on one
        H100 takes 93-146 us packed, ~170 as four messages with a wait per copy.

        Plain loops, device buffers wrapped once (:meth:`_device_array`): the round's own code takes 2-12 us
        beside its posts and wait on an H200's host, and a 64 MB round with the stream's wait ~140 us, where raw
        ucxx's exchange takes 112-116."""
        self._check()
        self._dseq = seq = self._dseq + 1
        me, on_dev = self.rank, self._on_device
        out, into, sent, stream = [], [], 0, None
        for p, x in sends.items():
            if p != me:
                xs = _nonempty(x)
                if xs:
                    for i, a in enumerate(xs):
                        if not a.flags.c_contiguous:  # NumPy or CuPy alike
                            xs[i] = a.copy()
                        sent += a.nbytes
                    out.append((p, *self._messages(xs)))
        follow = recvs if callable(recvs) else None
        if follow is not None and capped is None:
            raise ValueError("receives that follow the words need a capped round's words")
        for p, x in ({} if follow is not None else recvs).items():
            if p != me:
                xs = _nonempty(x)
                if xs:
                    into.append((p, *self._messages(xs)))
        touches = any(t for *_, t in out) or any(t for *_, t in into)  # a device array, sent or received
        reqs: list = []

        def post(side: list, send: bool) -> bool:
            device = False
            for p, _, msgs, _ in side:
                for i, b in msgs:
                    device = device or on_dev(b)
                    reqs.append((p, self._sized_post(p, b, seq, i, send=send)))
            return device

        try:
            # (capped words a copy may still write; receives that follow them may be device arrays)
            if touches or (capped is not None and self._cp is not None):
                stream = self._cp.cuda.get_current_stream()
                for _, packed, msgs, _ in out:
                    if packed:
                        self._copy_packed(packed, msgs, stream, into_buffer=True, on_device=True)
                stream.synchronize()  # the kernels that write the send buffers (or read the receive ones), the copies
                self._held = []  # the last rounds' staged receives have reached the device
            device = post(into, False)
            for _, packed, msgs, _ in out:
                if packed:  # host arrays after the wait: a copy queued into one has landed
                    self._copy_packed(packed, msgs, stream, into_buffer=True, on_device=False)
            # the capped words before the arrays: a receiver whose receives follow the words learns of them first
            words = self._capped_posts(capped) if capped is not None else []  # sends, then receives
            device = post(out, True) or device
            reqs += words
            if follow is not None:  # the words first: they say which receives to post
                cseq = self._cseq
                self._wait(words[len(self._peers):], f"{what} (capped round #{cseq})", (3, cseq))
                for p, x in follow({p: self._capped[p][cseq % 2][0] for p in self._peers}).items():
                    xs = _nonempty(x) if p != me else None
                    if xs:
                        into.append((p, *self._messages(xs)))
                device = post(into, False) or device
            self._wait(reqs, f"{what} (round #{seq})", (2, seq), spin=_DEVICE_SPIN_S if device else None)
        except BaseException:
            # UCX may still write into the receives until the communicator is released: keep them alive
            self._orphans.append((out, into))
            raise
        for _, packed, msgs, _ in into:
            if packed:
                self._copy_packed(packed, msgs, stream, into_buffer=False)
                if any(on_dev(a) for a in packed):  # its copies to the device may still be queued
                    self._held.append(msgs[0][1])
        return sent

    def _sized_post(self, p: int, buf, seq: int, index: int, send: bool):
        """Post message ``index`` of sized round ``seq`` to (``send``) or from peer ``p``: ``buf``, a host array
        or a device array (wrapped once, :meth:`_device_array`)."""
        w = self._device_array(buf) if self._on_device(buf) else self._array(_flat_bytes(buf))
        tag = self._api.UCXXTag(_tag(_SIZED, seq, self.rank if send else p, index))
        return self._eps[p].tag_send(w, tag) if send else self._eps[p].tag_recv(w, tag)

    def _device_array(self, a) -> Any:
        """ucxx's ``Array`` over device array ``a``'s bytes, wrapped once per address and length: wrapping a
        round's two buffers anew costs a 64 MB round 5-13 us on an H200's host.  The wrapper holds
        no reference to ``a``: the caller's arrays are alive through the round, and a failed round keeps them
        (``_orphans``) until the communicator is released.  The cache forgets everything past ``_WRAPS``
        entries."""
        key = (a.data.ptr, a.nbytes)
        w = self._wraps.get(key)
        if w is None:
            if len(self._wraps) >= _WRAPS:
                self._wraps.clear()
            w = self._wraps[key] = self._array(_DeviceBytes(a, keep=False))
        return w

    def _messages(self, xs: list) -> tuple[list, list[tuple[int, Any]], bool]:
        """One peer's arrays (sent or received) as ``(packed, messages, device)``: ``messages`` are ``(index,
        buffer)`` (see :meth:`_sized_round`), ``packed`` the small arrays that share message 0's host buffer --
        none where the one small array is a host array, which is then message 0 itself; ``device``: some
        array is a device array."""
        small, msgs, nsmall, device, on_dev = [], [], 0, False, self._on_device
        for i, a in enumerate(xs):
            d = on_dev(a)
            device = device or d
            if a.nbytes > _STAGE:
                msgs.append((1 + i, a))
            else:
                small.append(a)
                nsmall += a.nbytes
        if len(small) == 1 and not on_dev(small[0]):
            return [], [(0, small[0])] + msgs, device
        if small:
            msgs.insert(0, (0, self._host_buffer(nsmall, any(on_dev(a) for a in small))))
        return small, msgs, device

    def _copy_packed(self, packed: list, msgs: list, stream, into_buffer: bool, on_device: bool | None = None
                     ) -> None:
        """Copy the ``packed`` arrays into message 0's buffer (``into_buffer``) or out of it, in order; device
        arrays by copies queued on ``stream``, not waited for.  ``on_device``: only the device arrays (True)
        or only the host ones (False)."""
        if not packed:
            return
        buf, off = msgs[0][1], 0
        rt = self._cp.cuda.runtime if self._cp is not None else None
        for a in packed:
            part = buf[off:off + a.nbytes]
            dev = self._on_device(a)
            if on_device is not None and dev != on_device:
                off += a.nbytes
                continue
            if dev:
                if into_buffer:
                    rt.memcpyAsync(part.ctypes.data, a.data.ptr, a.nbytes, rt.memcpyDeviceToHost, stream.ptr)
                else:
                    rt.memcpyAsync(a.data.ptr, part.ctypes.data, a.nbytes, rt.memcpyHostToDevice, stream.ptr)
            else:
                flat = a.reshape(-1).view(np.uint8)
                if into_buffer:
                    part[:] = flat
                else:
                    flat[:] = part
            off += a.nbytes

    def _on_device(self, a) -> bool:
        return self._cp is not None and isinstance(a, self._cp.ndarray)

    def _host_buffer(self, nbytes: int, pinned: bool) -> np.ndarray:
        """A uint8 host buffer; page-locked (CuPy's pinned pool) where device copies read or write it, so that
        they run on the stream without the host waiting."""
        if pinned:
            import cupyx

            return cupyx.empty_pinned((nbytes,), np.uint8)
        return np.empty(nbytes, np.uint8)

    def allgatherv(self, arr: Any, counts: list[int], wait: bool = True) -> list[Any]:
        """Every rank's 1-D ``arr`` (NumPy or CuPy; ``counts[r]`` elements of its dtype from rank ``r``) in
        rank order, received into arrays of ``arr``'s module: one sized round, no header.  ``wait`` is for
        the device engine's signature: a UCX round has always landed when it returns."""
        if int(arr.size) != int(counts[self.rank]):
            raise ValueError(f"rank {self.rank}: allgatherv given {arr.size} elements, counts say "
                             f"{counts[self.rank]}")
        out: list[Any] = [np.empty_like(arr, shape=(int(c),)) for c in counts]  # CuPy for CuPy (array function)
        out[self.rank] = arr
        self._sent += self._sized_round({p: arr for p in self._peers}, {p: out[p] for p in self._peers}, "allgatherv")
        return out

    # -- capped rounds -------------------------------------------------------------------------------
    def open_capped(self, words: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Receive buffers of ``words`` int64 for :meth:`capped_round` (two per peer, returned; page-locked on
        GPU ranks, where kernels may read them in place), and the first round's receives posted.  Every
        rank opens the same ``words``, once."""
        words = int(words)
        if self._capped is not None:
            if words != self._capped_words:
                raise ValueError(f"rank {self.rank}: capped rounds are open for {self._capped_words} words, "
                                 f"not {words}")
            return self._capped_bufs()
        self._check()
        self._capped, self._capped_words = {}, words
        for p in self._peers:
            bufs = []
            for _ in range(2):
                buf = self._host_buffer(8 * words, self._cp is not None).view(np.int64)
                bufs.append((buf, self._array(_flat_bytes(buf))))  # wrapped once: the receives reuse it
            self._capped[p] = tuple(bufs)
            self._post_capped(p, self._cseq + 1)
        self._capped_got = tuple({p: self._capped[p][k][0] for p in self._peers} for k in range(2))
        return self._capped_bufs()

    def _capped_bufs(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        return {p: (bufs[0][0], bufs[1][0]) for p, bufs in self._capped.items()}

    def _post_capped(self, p: int, seq: int) -> None:
        _, wrapped = self._capped[p][seq % 2]
        self._capped_reqs[p] = self._eps[p].tag_recv(wrapped, self._api.UCXXTag(_tag(_SIZED, seq, p, _CAPPED)))

    def capped_round(self, sends: dict[int, np.ndarray], device: tuple[dict, dict | Callable] | None = None
                     ) -> dict[int, np.ndarray]:
        """``sends[p]`` (1-D int64 host words, at most the opened ``words``; page-locked or not) to every peer ``p``,
        one message each way; returns ``{peer: its receive buffer}`` (the same dict every other round), whose first
        words are the ones it sent (they carry their own counts).  The words' wrapper for UCX is kept with the array
        object (:meth:`_wrap_words`): send from the same arrays each round.  A buffer stays valid until the round after
        the next: this round's receives were posted a round ago, and the next round's are posted into the other buffer
        before this returns.  ``device``: ``(sends, recvs)`` as :meth:`exchange_device` takes them, moved in the same
        round (one wait for the stream, before the words go: a copy queued into them has landed; one wait for every
        message); its receives may instead be a function of the peers' words (the buffers this returns), called once
        they have landed, whose receives are then posted (a message whose words say whether device arrays follow).
        Raises ``CommError`` as every round does; a message longer than the receive fails the round (UCX's truncation
        error)."""
        if self._closed or self._failed is not None:
            self._check()
        if self._capped is None:
            raise RuntimeError("capped_round before open_capped")
        if device is not None:
            self._sent += self._sized_round(*device, "exchange", capped=sends)
        else:
            self._wait(self._capped_posts(sends), "capped round", (3, self._cseq + 1))
        seq = self._cseq
        for p in self._peers:
            self._post_capped(p, seq + 1)
        return self._capped_got[seq % 2]

    def _capped_posts(self, sends: dict[int, np.ndarray]) -> list:
        """The next capped round's sends, posted, and its receives (posted a round ago)."""
        wraps = self._send_wraps  # (an entry keeps its array alive: its id names no other array meanwhile)
        # all wrapped before anything is posted: a bad array fails no round
        ws = [wraps.get(id(sends[p])) or self._wrap_words(sends[p]) for p in self._peers]
        self._cseq = seq = self._cseq + 1
        eps, tag = self._eps, self._api.UCXXTag(_tag(_SIZED, seq, self.rank, _CAPPED))
        reqs = []
        for p, w in zip(self._peers, ws):
            reqs.append((p, eps[p].tag_send(w[1], tag)))
            self._sent += w[2]
        return reqs + [(p, self._capped_reqs[p]) for p in self._peers]

    def _wrap_words(self, a: np.ndarray) -> tuple:
        """``(a, ucxx's wrapper of a, its bytes)``, kept for the next capped rounds that send the same array
        object (the callers send from a few buffers).  Making one takes 1.5 us in a loop but 5 or more
        between a level's other steps: for two CPU ranks starting their rounds 0-40 us apart, as in a search,
        a new wrapper each round adds 7-12 us to a round of 24-42 us."""
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError(f"rank {self.rank}: a capped round sends 1-D C-contiguous words, got shape {a.shape} "
                             f"and strides {a.strides}")
        if len(self._send_wraps) >= _SEND_WRAPS:
            self._send_wraps.clear()
        w = self._send_wraps[id(a)] = (a, self._array(a), int(a.nbytes))
        return w

    # -- device rounds (breadth.bfs.engine.device_engine) -----------------------------------------------
    def gather_device(self, vec) -> np.ndarray:
        """Every rank's int64 vector ``vec`` (``(k,)``, the same ``k`` everywhere; device or host) as a host
        ``(size, k)`` matrix: its copy to the host (the round's one wait on the stream), then one sized
        round of ``8 k`` bytes per peer."""
        self._check()
        mine = vec.get() if self._cp is not None and isinstance(vec, self._cp.ndarray) else vec
        mine = np.ascontiguousarray(mine, np.int64).reshape(-1)
        out = np.empty((self.size, mine.size), np.int64)
        out[self.rank] = mine
        self._sized_round({p: mine for p in self._peers}, {p: out[p] for p in self._peers}, "counters")
        return out

    def exchange_device(self, sends: dict[int, Any], recvs: dict[int, Any], counts: dict[int, list] | None = None
                        ) -> None:
        """Arrays ``sends[p]`` to peer ``p`` and ``recvs[p]`` from it (each an array or a list of them, sizes
        known to both sides): one wait for the stream, then one sized round, landed when this returns.
        ``counts`` (see the NCCL communicator) bounds what peer memory would move; UCX moves whole arrays."""
        self._sent += self._sized_round(sends, recvs, "exchange")

    def device_buffer(self, shape, dtype):
        """A zeroed array for rounds to receive into: CuPy on GPU ranks, NumPy on CPU ranks."""
        return (self._cp or np).zeros(shape, dtype)

    def allgather_into(self, send, recv, payload: bool = False) -> None:
        """``recv`` (``(size * k,)``) = every rank's ``send`` (``(k,)``, the same ``k`` and dtype everywhere)
        in rank order: one sized round straight into ``recv``'s slices, landed when this returns.
        ``payload`` counts ``send`` as sent to every peer in :meth:`bytes_sent`."""
        k = int(send.size)
        if int(recv.size) < k * self.size:
            raise ValueError(f"allgather_into: {recv.size} elements cannot hold {self.size} x {k}")
        sent = self._sized_round({p: send for p in self._peers},
                                 {p: recv[p * k:(p + 1) * k] for p in self._peers}, "allgather")
        recv[self.rank * k:(self.rank + 1) * k] = send
        if payload:
            self._sent += sent

    def open_shared(self, shape, dtype) -> tuple[Any, dict[int, int]] | None:
        """:meth:`Communicator.open_shared`: on GPU ranks whose peers are all on this host, through CUDA IPC
        (:mod:`.ipc_buffers`); a device round then needs no UCX message of its own, where UCX's CUDA IPC
        rendezvous costs each one a round trip of control messages first."""
        if self._cp is None or len(self._local) < self.size - 1:  # (alike on every rank: a host is a host)
            return None
        from .ipc_buffers import share

        got = share(self, shape, dtype, agree=True)
        if got is not None:
            self._shared.append((got[0].data.mem, list(got[1].values())))
        return got

    def wait(self, what: str) -> None:
        """Wait for the work queued on the current stream (UCX's own rounds have landed already)."""
        self._check()
        if self._cp is not None:
            self._cp.cuda.get_current_stream().synchronize()

    def note_sent(self, nbytes: int) -> None:
        """Count ``nbytes`` more payload in :meth:`bytes_sent`."""
        self._sent += int(nbytes)

    # -- the end ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Say goodbye to every peer, wait briefly for theirs, and release UCX (idempotent).

        Closing an endpoint aborts transfers still in flight, so the last round's data could be lost if a
        rank closed as soon as its own part was done: a rank that completed its rounds waits (at most
        ``_BYE_S``) for each peer's goodbye, which a peer sends only after its own last round.  A rank
        that failed says goodbye without waiting: its peers see it at once (the goodbye names the last
        rounds it joined)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._shared and self._failed is None:  # (after a failure a peer may still write: left mapped)
                from .ipc_buffers import unmap

                self._cp.cuda.Device().synchronize()
                unmap(ptr for _, ptrs in self._shared for ptr in ptrs)
            bye = np.array([self._digest, self._seq, self._dseq, self._cseq], np.int64)
            reqs = []
            for p in self._peers:
                try:
                    reqs.append((p, self._send(p, bye, _CONTROL, self._digest, _GOODBYE)))
                except Exception:
                    pass
            if self._failed is None:
                reqs += list(self._bye_reqs.items())
            deadline = time.perf_counter() + (_BYE_S if self._failed is None else 0.2)
            while time.perf_counter() < deadline and not all(r.completed for _, r in reqs):
                self._worker.progress_worker_event(_EVENT_MS)
        except Exception:
            pass
        finally:
            self._release()

    def _release(self) -> None:
        try:
            self._worker.cancel_inflight_requests()
        except Exception:
            pass
        # the endpoints without error handling close without waiting: their blocking close waits until the peer
        # answers, and a silent peer never does (a stalled rank would hold its failed peers 60 s); the others' forced
        # close returns at once
        unhandled = [ep for p, ep in self._eps.items() if p in self._local]
        handled = [ep for p, ep in self._eps.items() if p not in self._local] + list(self._ctl.values())
        closing = []
        for ep in unhandled:
            try:
                closing.append(ep.close())
            except Exception:
                pass
        for ep in handled + self._accepted:
            try:
                ep.close_blocking(period=10 ** 8, max_attempts=1)
            except Exception:
                pass
        deadline = time.perf_counter() + _CLOSE_S
        try:
            while time.perf_counter() < deadline and not all(r is None or r.completed for r in closing):
                self._worker.progress_worker_event(_EVENT_MS)
        except Exception:
            pass
        self._eps, self._ctl, self._accepted = {}, {}, []
        self._slot_reqs, self._bye_reqs, self._capped_reqs = {}, {}, {}
        self._wraps, self._orphans, self._shared, self._send_wraps = {}, [], [], {}
        self._listener = self._worker = self._ctx = None


def connect(rank: int, size: int, session: str, *, timeout: float, backend: str = "cpu",
            config: Any = None) -> UCXCommunicator:
    """The UCX transport's entry in :mod:`breadth.bfs.transport.registry`: :meth:`UCXCommunicator.connect`,
    with device buffers on GPU ranks (``backend="gpu"``)."""
    return UCXCommunicator.connect(rank, size, session, timeout=timeout, device=backend == "gpu")
