"""Levels in one round each, over communicators whose rounds the host posts (UCX).

The device engine's queued top-down level (:mod:`.device_engine`) takes two rounds: the pairs with the
expansion's counters, then, after the receivers' claims, the counters that size the next frontier, which every
rank needs before the next level (its direction, its pairs' bound, the end of the search).  Over UCX a round is
a host wait and tens of µs of Python (raw ucxx's round trip between two ranks on one H200 is ~60 µs), so a
small level costs what its rounds cost, and this module gives each level one.

**Top-down.**  The counters of frontier F travel with the pairs expanded from F.  Every rank expands its part
of F before it knows the others' parts, and only where the direction rule chooses top-down whatever they hold:
its part's degree sum is at most ``limit`` = min(pair capacity, unexplored edges / (alpha x ranks)), so all
parts together are at most unexplored edges / alpha.  A rank whose part is larger expands nothing and says so,
and sends its part's vertex list in place of pairs where it fits the inline rows.  After the round every rank
knows F exactly, which completes the level that made F (:meth:`OneRoundLevels.step` returns its counters to the
search loop, :func:`~breadth.bfs.engine.levels.run_levels`): if every rank expanded F, the next step's round
completes that level in turn; else those that did take it back (one kernel: their claims and sent marks) and the
loop's next level starts from the exact counters -- a new run where every part fits, the queued level otherwise,
and where every part came listed and the level turns bottom-up, from the global frontier built from the lists
(:meth:`OneRoundLevels.frontier_from_parts`), with no all-gather round of its own.  A round is one launch of a
CUDA graph (captured once per queue buffer, prefix kind and receive buffer: launching its dozen steps from Python
would take most of a small level) and one wait: the parameter block copied from page-locked memory, the last
round's pairs claimed (read in place from the communicator's page-locked receive buffers, which alternate: a graph
per buffer), the gate (the queue length the expansion reads), the expansion, and one kernel that writes the
counters and each peer's first ``inline`` pair rows into page-locked send buffers.  Then one capped round
(:meth:`~breadth.bfs.transport.communicator.Communicator.capped_round`) of host words: a header and the pairs.
Pairs past ``inline`` follow in a sized round of device rows, which every rank joins when any sender's header
says so.

**Bottom-up.**  A level's counters (which decide whether the next level stays bottom-up, and whether there is one)
travel with the frontier it found, as the next level's frontier all-gather (:meth:`OneRoundLevels.bottom_up`): the
level writes its part straight into one of two global bitmaps, the round fills the peers' parts, and the next
bottom-up level reads it.  The level is a captured graph too, whose last kernel writes the counters into page-locked
memory and, where the level found few vertices, their list: the counters go as a capped round's host words, followed
by the bitmap device to device, or carrying the list in its place (on one H200 a 256 KB bitmap's round takes ~86 µs,
a round of words alone ~29).  A receiver posts the bitmap's receive once the words say it follows, and sets a listed
part's bits only if the next level is bottom-up; a level that turns top-down, or ends the search, sent its frontier
for nothing.  Where the ranks map each other's global bitmaps (GPUs of one host,
:meth:`~breadth.bfs.transport.communicator.Communicator.open_shared`; ``SearchConfig(peer_memory=False)`` declines),
the level's graph ends with a copy of its words into each peer's bitmap and the round carries the counters alone,
and a frontier turning bottom-up is gathered the same way (:meth:`OneRoundLevels.gather`): no device message, whose
CUDA IPC rendezvous costs a round trip of UCX control messages first (small bottom-up levels at scale 22 on one H200
take about half the time this way).

The engine starts its searches, and turns bottom-up levels top-down, in the queue buffer a run reads first
(:attr:`~OneRoundLevels.entry`), and a run's first counters ride in the parameter block, so that a run queues
nothing of its own before its first launch.  A run's first level takes two rounds (its expansion, then the round
that claims its pairs), each further level one.  The round that finds every part of F empty ends the search --
unless the level that made F claimed nothing and sent no pairs on any rank (its round says so: then F is empty
everywhere, and the step says so without a round).  Its expansion skips each vertex's own parent (visited by
definition), so that a search's last frontier mostly sends nothing and the search ends without a round more.
"""

from __future__ import annotations

import time

import numpy as np

from ..gpu.graph_capture import capture
from .direction import top_down_bound
from .levels import Level

#: words of a message before its pairs: F's length and degree sum on the sender, whether it expanded (1), listed
#: its part instead (``_LISTED``) or neither (0), the pairs it sends the receiver, the most pairs it sends any peer,
#: the vertices its expansion claimed
_HEAD = 6
_LISTED = 2
#: a bottom-up level's words: its counters (found, their degree sum, tasks), then 1 where its bitmap follows
#: (device to device), 0 where the vertices it found follow in the words
_BU_HEAD = 4
#: sends are whole multiples of this many words (the receiver reads the counts in them), so that a few lengths
#: recur and each is wrapped for UCX once (:meth:`OneRoundLevels._words`)
_WORDS_STEP = 16
#: a limit no degree sum reaches: the first level of a run expands whatever its part (the exact counters
#: chose top-down, and every part fits the pair capacity)
_ANY = 1 << 62


class OneRoundLevels:
    """One-round top-down levels for a :class:`~breadth.bfs.engine.device_engine.DeviceEngine` on GPU ranks
    whose communicator has capped rounds; ``cap`` bounds the pairs one level sends a peer (and the degree
    sum of a part that is expanded blind).  Its buffers and graphs live as long as the engine."""

    #: pair rows that travel inside a level's capped round, per peer (more go in a sized round of their own:
    #: with 2048 rows a quarter of a scale-22 search's small top-down levels on two ranks would need one); the
    #: captured levels copy this many, so a change must come before the first search
    inline = 8192
    #: a bottom-up level that found at most this many vertices sends their list in its round's host words in
    #: place of its bitmap (None: the words' capacity; 0: always the bitmap, to measure what the lists save)
    list_cap: int | None = None

    def __init__(self, engine, cap: int):
        from ..gpu.kernels import _SMALL_QUEUE

        e = self.e = engine
        cp, comm, s = e.b.xp, e.comm, e.shard
        self.cap, self.small_queue = int(cap), _SMALL_QUEUE
        #: the largest part expanded blind (the ranks need not agree: they learn who expanded in the round);
        #: tests lower it on one rank to take expansions back
        self.blind_cap = self.cap
        self.size, self.rank = comm.size, comm.rank
        self.peers = [p for p in range(comm.size) if p != comm.rank]
        nloc = max(s.num_local, 1)
        self.kc = kc = 4 + (self.size if self.size > 2 else 0)  # td_expand's counters, pairs per owner (3+ ranks)
        # ping-pong: the graph for slot k reads frontier queues[1 - k] and its counters ctrs[1 - k] (which the
        # claims complete), and writes the next queue and counters into queues[k], ctrs[k]
        self.queues = [cp.empty(nloc, cp.int64) for _ in range(2)]
        self.ctrs = [cp.zeros(kc, cp.int64) for _ in range(2)]
        self.rpairs = cp.empty((max(self.cap, 1), 2), cp.int64)
        self.regions = cp.empty((self.size * self.cap, 2), cp.int64) if self.size > 2 else None
        self.recv = {p: cp.empty((max(self.cap, 1), 2), cp.int64) for p in self.peers}
        self.pre_small = cp.empty(_SMALL_QUEUE, cp.int64)
        self.pre = cp.empty(nloc, cp.int64)
        self.tiles = cp.empty(nloc // 1024 + 2, cp.int64)
        self.stamps = cp.zeros(1, cp.int64)  # the GPU's clock as the level's kernels start
        self.words = _HEAD + 2 * self.inline

        def pinned(n):
            return np.frombuffer(cp.cuda.alloc_pinned_memory(8 * n), np.int64, n)

        # the parameter block: [depth, queue length (the gate's), limit, depth of the claims, then in peers'
        # order the pairs from each peer inside its capped message, then past them (in the sized round), then
        # the gate's first = [a run's first level?, its frontier's length and degree sum]]; the graphs' kernels
        # read it on the device (prm[0] depth, prm[1] length)
        self.at_first = 4 + 2 * len(self.peers)
        self.blk_host = pinned(self.at_first + 3)
        self.blk = cp.zeros(self.blk_host.size, cp.int64)
        self.out = {p: pinned(self.words) for p in self.peers}
        self._sends: dict[tuple[int, int], np.ndarray] = {}  # (peer, words) -> out[peer][:words] (see _words)
        self.stat = pinned(2 + kc + 2)  # F's counters, the expansion's, the kernels' start and end (GPU clock, ns)
        self.stream = cp.cuda.Stream(non_blocking=True)  # captures only
        self._graphs: dict = {}
        self._bu_graphs: dict = {}
        # bottom-up: where every rank's words of the global frontier bitmap start; two such bitmaps
        self.woff = np.concatenate(([0], np.cumsum(e.rank_words))).tolist()
        self._gbits = None
        #: each global bitmap's address in every peer's process where the ranks map each other's
        #: (:meth:`~breadth.bfs.transport.communicator.Communicator.open_shared`): a bottom-up level then copies
        #: its words into the peers' bitmaps itself, and its round carries the counters alone; else None
        self.peer_bits: list[dict[int, int]] | None = None
        if e.config.peer_memory:
            first = comm.open_shared((max(self.woff[-1], 1),), np.uint64)
            second = comm.open_shared((max(self.woff[-1], 1),), np.uint64) if first is not None else None
            if second is not None:
                self._gbits = [first[0], second[0]]
                self.peer_bits = [first[1], second[1]]
        self.bu_ctr = cp.zeros(4, cp.int64)  # a bottom-up level's counters, then bu_publish's cursor
        self.bu_stamps = cp.zeros(2, cp.int64)
        self.bu_stat = pinned(5)  # its counters, then the kernels' start and end (GPU clock, ns)
        self.bu_rows = np.zeros((self.size, 3), np.int64)
        self._lists: tuple | None = None  # the peers' parts of a global bitmap that came listed, not yet set
        self._bu_cap: int | None = None
        self.launched = 0.0  # the host clock after the last bottom-up graph's launch
        #: the last round, where every rank expanded its part of the next level's frontier: the next step's round
        #: completes that level (None: nothing pending)
        self.pending: dict | None = None
        #: levels done in one round, expansions taken back, sized rounds for pairs past the inline rows, levels
        #: turned bottom-up from the parts listed in their round, searches ended by a level that claimed and
        #: sent nothing anywhere; bottom-up levels that sent their bitmap, that sent the list of what they found,
        #: and that wrote their bitmap into the peers' own; frontiers gathered that way
        self.tally = {"levels": 0, "taken_back": 0, "sized": 0, "listed": 0, "ended": 0, "bu_bitmaps": 0,
                      "bu_lists": 0, "bu_written": 0, "gathered": 0}
        #: a list to collect each top-down round's host clock (``time.perf_counter``) as its graph is launched,
        #: after the launch, after the wait, as its round starts, after the round and at its end, whether it took a
        #: sized round for pairs past the inline rows, whether it was its run's first and the words it sent
        #: (diagnostics; None: not collected)
        self.trace: list | None = None
        #: the communicator's two page-locked receive buffers per peer, which its capped rounds return in turn:
        #: a level's claims read the rows of the last round in place (a graph per buffer)
        self.rbufs = comm.open_capped(self.words)
        self._which = {id(buf): j for bufs in self.rbufs.values() for j, buf in enumerate(bufs)}

    @property
    def entry(self):
        """The queue buffer (int64, the shard's local vertices long) for a run's frontier: :meth:`step` takes a
        queue there without a copy."""
        return self.queues[0]

    def turn_bits(self):
        """Where the engine writes this rank's words of a frontier that turns bottom-up (uint64, on the device):
        its part of the global bitmap the next bottom-up level reads, where the ranks map each other's
        bitmaps; else None (anywhere: :meth:`gather` then declines)."""
        if self.peer_bits is None:
            return None
        return self._gbits[0][self.woff[self.rank]:self.woff[self.rank + 1]]

    def gather(self, bits):
        """The global frontier bitmap from every rank's words ``bits``, where the ranks map each other's
        bitmaps (else None: the engine gathers it its own way): this rank's words copied into the peers'
        bitmap and its own (none where ``bits`` is :meth:`turn_bits`), the stream waited for, then a capped
        round of one word, which tells each peer that they have landed.  Returns that global bitmap."""
        if self.peer_bits is None:
            return None
        cp = self.e.b.xp
        stream, comm = cp.cuda.get_current_stream(), self.e.comm
        g, self._lists = self._gbits[0], None
        own = g[self.woff[self.rank]:self.woff[self.rank + 1]]
        if bits.data.ptr != own.data.ptr:
            own[:] = bits
        self._copy_to_peers(own, self._to_peers(0), stream)
        stream.synchronize()
        w = self.out[self.peers[0]]
        w[0] = 1
        comm.capped_round(dict.fromkeys(self.peers, self._words(self.peers[0], 1)))
        comm.note_sent(own.nbytes * len(self.peers))
        self.tally["gathered"] += 1
        return g

    def _global_bits(self) -> None:
        if self._gbits is None:
            cp = self.e.b.xp
            self._gbits = [cp.zeros(max(self.woff[-1], 1), cp.uint64) for _ in range(2)]

    def bottom_up(self, fbits, depth: int, bu_off, bu_col, first: bool) -> tuple[np.ndarray, float, object, object]:
        """One bottom-up level from global frontier bitmap ``fbits`` (uint64 words of every rank, on the
        device) and its one round; ``first``: the kernel reads first neighbours from the backend's packed table.
        Returns every rank's ``[found, their degree sum, tasks]`` (``(size, 3)`` on the host), the kernels'
        seconds, this rank's words of the next frontier and the global bitmap holding them, which is the next
        bottom-up level's ``fbits``."""
        e = self.e
        cp = e.b.xp
        self._global_bits()
        j = next((k for k, g in enumerate(self._gbits) if g.data.ptr == fbits.data.ptr), None)
        if j is None:  # a frontier gathered by the engine: into a bitmap the graphs read
            j, self._lists = 0, None
            self._gbits[0][:] = fbits
        if self._lists is not None:
            self._set_listed(j)
        g = self._gbits[1 - j]
        own = g[self.woff[self.rank]:self.woff[self.rank + 1]]
        self.blk_host[0] = depth
        graph = self._bu_graphs.get((j, first))
        if graph is None:
            graph = self._bu_graphs[j, first] = self._capture_bottom_up(self._gbits[j], own, bu_off, bu_col, first,
                                                                        self._to_peers(1 - j))
        stream = cp.cuda.get_current_stream()
        graph.launch(stream)
        self.launched = time.perf_counter()
        stream.synchronize()  # the level's one wait
        rows = self.close_bottom_up(own, g)
        st = self.bu_stat
        return rows, float(st[4] - st[3]) * 1e-9, own, g

    def _words(self, p: int, n: int) -> np.ndarray:
        """The first ``n`` words of ``out[p]`` to send, rounded up to a multiple of :data:`_WORDS_STEP` (the
        receiver reads the counts in them), the same array object for the same length: the communicator wraps
        an array for UCX once, which costs microseconds each time between a level's other steps."""
        n = min(self.words, -(-n // _WORDS_STEP) * _WORDS_STEP)
        a = self._sends.get((p, n))
        if a is None:
            a = self._sends[p, n] = self.out[p][:n]
        return a

    def _to_peers(self, k: int) -> list[int]:
        """Where this rank's words of global bitmap ``k`` go in each peer's process (empty where the ranks do
        not map each other's bitmaps)."""
        if self.peer_bits is None:
            return []
        return [self.peer_bits[k][p] + 8 * self.woff[self.rank] for p in self.peers]

    def _copy_to_peers(self, own, ptrs: list[int], stream) -> None:
        """Queue copies of this rank's words ``own`` to addresses ``ptrs`` of the peers' bitmaps on ``stream``."""
        rt = self.e.b.xp.cuda.runtime
        for ptr in ptrs:
            rt.memcpyAsync(ptr, own.data.ptr, own.nbytes, rt.memcpyDefault, stream.ptr)

    def _capture_bottom_up(self, fbits, own, bu_off, bu_col, first: bool, to_peers: list[int]):
        """The captured bottom-up level: the depth from the parameter block, the counters zeroed, the kernels
        between two stamps, then what the host reads (:meth:`~breadth.bfs.gpu.backend.GpuBackend.
        publish_bottom_up`) into page-locked memory: the counters, and the vertices found where they fit the
        round's words; then, where the ranks map each other's bitmaps, a copy of ``own`` to each address of
        ``to_peers``."""
        e = self.e
        b, cp = e.b, e.b.xp
        rt = cp.cuda.runtime
        st, blk, ctr = self.stream, self.blk, self.bu_ctr
        b.bottom_up_g_buffers(bu_off, bu_col)  # built outside the capture (they allocate), cached by the backend
        if self._bu_cap is None:  # (what the host then sends: fixed by the first capture; never a list where the
            # bitmap is written into the peers' own)
            self._bu_cap = (-1 if self.peer_bits is not None else self.words - _BU_HEAD if self.list_cap is None
                            else min(self.list_cap, self.words - _BU_HEAD))
        cap = self._bu_cap

        def level():
            rt.memcpyAsync(blk.data.ptr, self.blk_host.ctypes.data, blk.nbytes, rt.memcpyHostToDevice, st.ptr)
            rt.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, st.ptr)
            b.stamp(self.bu_stamps, 0)
            b.bottom_up_g(bu_off, bu_col, fbits, e.parent, e.level, blk, own, ctr, first_neighbours=first)
            b.stamp(self.bu_stamps, 1)
            b.publish_bottom_up(ctr, self.bu_stamps, self.bu_stat.ctypes.data, own, cap,
                                self.out[self.peers[0]].ctypes.data + 8 * _BU_HEAD)
            self._copy_to_peers(own, to_peers, st)  # (read by the peers after this level's round: the host
            # waits for the graph first)

        return capture(st, level)

    def close_bottom_up(self, own, g) -> np.ndarray:
        """A bottom-up level's one round, its kernels done: its counters (:attr:`bu_stat`) to every peer, with
        its words ``own`` of global bitmap ``g`` -- as the list of the vertices found where it fits the round's
        host words, else as the words themselves, device to device; the peers' likewise, whose words land in
        ``g`` (the listed ones when the next bottom-up level reads ``g``).  Returns every rank's counters,
        ``(size, 3)`` on the host."""
        woff, rows, peers, comm = self.woff, self.bu_rows, self.peers, self.e.comm
        c, dg, tasks = self.bu_stat[:3].tolist()
        written = self.peer_bits is not None  # the graph wrote the bitmap into the peers' own (on every rank)
        listed = not written and c <= self._bu_cap  # (as the GPU decided)
        how = 2 if written else 0 if listed else 1  # what follows the counters: a list, a device bitmap, nothing
        self.tally[("bu_lists", "bu_bitmaps", "bu_written")[how]] += 1
        w = self.out[peers[0]]  # (the GPU wrote the list there; every peer is sent the same words)
        w[:_BU_HEAD] = (c, dg, tasks, how)
        msgs = dict.fromkeys(peers, self._words(peers[0], _BU_HEAD + (c if listed else 0)))
        # the counters go as a capped round's host words, into receives posted a round ahead: as a small device
        # array the round would stage them through the host, which adds ~45 us to a 256 KB bitmap's ~71 us round
        # on an H200.  The bitmaps stay device to device: staged through page-locked host memory, a scale-22
        # search's small bottom-up levels take 1.6-2x as long
        got = comm.capped_round(msgs, device=None if written else (
            {} if listed else {p: own for p in peers},
            lambda words: {p: g[woff[p]:woff[p + 1]] for p in peers if words[p][3] == 1}))
        if written:
            comm.note_sent(own.nbytes * len(peers))
        lists = {}
        for p in peers:
            rows[p] = got[p][:3]
            if not got[p][3]:
                lists[p] = (got[p], int(rows[p, 0]))
        rows[self.rank] = (c, dg, tasks)
        self._lists = (g, lists) if lists else None
        return rows.copy()

    def _set_listed(self, j: int) -> None:
        """Set the peers' parts of global bitmap ``j`` from the lists the last bottom-up round brought, if that
        round filled it (else they are stale: the search went top-down in between)."""
        (g, lists), self._lists = self._lists, None
        if g.data.ptr != self._gbits[j].data.ptr:
            return
        woff = self.woff
        for p, (buf, n) in lists.items():  # the receive buffer, read in place: valid until the next round ends
            self.e.b.queue_to_bits(self._host_view(buf, _BU_HEAD, (n,)), woff[p + 1] - woff[p],
                                   out=g[woff[p]:woff[p + 1]])

    def _rows(self, p: int):
        """The device rows of this level's pairs for peer ``p`` (its first ones)."""
        return self.rpairs if self.size == 2 else self.regions[p * self.cap:(p + 1) * self.cap]

    def _graph(self, k: int, tiled: bool, j: int):
        """The captured level for queue slot ``k`` with the one-block (``tiled`` False) or tiled prefix,
        claiming the rows of the peers' receive buffers ``j``."""
        g = self._graphs.get((k, tiled, j))
        if g is None:
            g = self._graphs[k, tiled, j] = self._capture(k, tiled, j)
        return g

    def _host_view(self, buf: np.ndarray, at: int, shape: tuple):
        """int64 words of page-locked host array ``buf`` from word ``at`` as a CuPy array of ``shape`` over the
        same bytes, for kernels to read in place (over the bus; addresses are unified on 64-bit CUDA)."""
        cp = self.e.b.xp
        mem = cp.cuda.UnownedMemory(buf.ctypes.data + 8 * at, 8 * int(np.prod(shape)), buf, cp.cuda.Device().id)
        return cp.ndarray(shape, cp.int64, cp.cuda.MemoryPointer(mem, 0))

    def _inline_rows(self, j: int) -> dict:
        """Each peer's inline pair rows in its receive buffer ``j`` as ``(inline, 2)`` device-readable views:
        the claims read them where the round left them."""
        return {p: self._host_view(self.rbufs[p][j], _HEAD, (self.inline, 2)) for p in self.peers}

    def _capture(self, k: int, tiled: bool, j: int):
        e = self.e
        b, cp, s = e.b, e.b.xp, e.shard
        rt = cp.cuda.runtime
        st, blk, npeers, inline = self.stream, self.blk, len(self.peers), self.inline
        qbuf, fctr, nxt, ctr = self.queues[1 - k], self.ctrs[1 - k], self.queues[k], self.ctrs[k]
        rows_in = self._inline_rows(j)

        def level():
            rt.memcpyAsync(blk.data.ptr, self.blk_host.ctypes.data, blk.nbytes, rt.memcpyHostToDevice, st.ptr)
            b.stamp(self.stamps, 0)
            for i, p in enumerate(self.peers):  # depth blk[3]; the inline rows count blk[4 + i], those past
                # them (a sized round's, on the device) blk[4 + npeers + i]; a grid for the inline rows (most
                # levels have fewer, and idle blocks cost every level)
                past = 4 + npeers + i
                b.claim_split_g(rows_in[p], blk[4 + i:5 + i], self.recv[p][inline:], blk[past:past + 1], s.lo,
                                e.parent, e.level, blk[3:], qbuf, fctr, s.offsets, grid_rows=inline)
            b.gate_queue(fctr, blk, ctr, blk[self.at_first:])
            b.top_down_g(s.offsets, s.columns, s.lo, s.hi, qbuf, self.pre if tiled else self.pre_small, blk,
                         e.parent, e.level, e.sent, nxt, self.rpairs, ctr, self.tiles if tiled else None,
                         skip_parent=True)
            if self.size > 2:
                b.pairs_to_regions(self.rpairs, ctr, s.block, self.size, self.cap, out=self.regions)
            # the counters, the clock and each peer's first rows (as many as it has) written by the GPU into
            # page-locked memory: one node a peer instead of a stamp and four copies (the last 128 KB a peer
            # whatever the level sent)
            for i, p in enumerate(self.peers):
                b.publish_level(fctr, ctr, self.stamps, self.stat.ctypes.data if i == 0 else 0, self._rows(p),
                                2 if self.size == 2 else 4 + p, min(inline, self.cap),
                                self.out[p].ctypes.data + 8 * _HEAD)

        return capture(st, level)

    # -- top-down levels, a round each ---------------------------------------------------------------------
    # A run of levels starts where the engine's exact counters chose top-down and every part fits the pair capacity
    # (:meth:`step` with nothing pending).  Each round claims the pairs of the level before, completing frontier F,
    # and expands F on the ranks whose part the rule keeps top-down whatever the others hold: where every rank did,
    # the next step's level is already expanded (``pending``) and its round completes it.

    def begin(self) -> None:
        """A search starts: nothing pending."""
        self.pending = None

    def step(self, queue, level: Level, degs) -> tuple[np.ndarray, float, float, object, tuple | None]:
        """Top-down level ``level.depth`` (a :class:`~breadth.bfs.engine.levels.Level`) from this rank's part
        ``queue`` of its frontier and every rank's degree sum ``degs``: expanded now where no earlier round did
        (a run's first level: every part at most ``cap``), completed by the round that claims its pairs, which also
        expands the next level wherever the direction rule allows.  Returns every rank's ``[vertices, out-edges]``
        of the next frontier (``(size, 2)`` on the host), the kernels' seconds, the rounds' seconds after the
        waits, this rank's part of the next frontier (local ids on the device; None where the round expanded it:
        the next step completes it, or :meth:`take_back` returns it), and where the round brought every other
        rank's part listed, what :meth:`frontier_from_parts` makes the global frontier of (valid until the next
        round; else None).  None rather than a view of the queue the next round reads in place: making a CuPy view
        took the host about as long as the rest of the step between two rounds (~15 us of ~30, two ranks on an
        H200)."""
        depth = level.depth
        local_s = reduce_s = 0.0
        if self.pending is None:
            self._begin_run(queue, degs)
            r = self._round(depth, _ANY)  # (the exact counters chose top-down: every rank expands)
            local_s, reduce_s = r["local_s"], r["reduce_s"]
            self._advance(r)
        r, self.pending = self.pending, None
        if r["quiet"]:  # no rank claimed or sent anything at this level: it found nothing, no round says so
            self.tally["ended"] += 1
            return np.zeros((self.size, 2), np.int64), local_s, reduce_s, None, None
        unexplored = max(level.edges_to_check - sum(degs.tolist()), 0)  # after this level, as the loop counts it
        limit = -1 if level.last else min(self.blind_cap, top_down_bound(unexplored, self.e.alpha, self.size,
                                                                          self.cap))
        r = self._round(depth + 1, limit)
        local_s, reduce_s = local_s + r["local_s"], reduce_s + r["reduce_s"]
        cnt = np.array([r["counts"], r["dsum"]], np.int64).T
        if r["everyone"] and any(r["counts"]):
            self._advance(r)
            return cnt, local_s, reduce_s, None, None
        # some part too large to expand blind (or the last level): ours taken back
        nxt, parts = self._take_back(r), None
        self.e.b.note_degree_sum(nxt, self.e.shard.offsets, r["dsum"][self.rank])
        if r["every_list"]:  # a level turning bottom-up reads its frontier from the parts' lists
            parts = (nxt, r["got"], r["counts"])
        return cnt, local_s, reduce_s, nxt, parts

    def frontier_from_parts(self, queue, got: dict, counts: list):
        """The global frontier bitmap (one of the bottom-up levels' two) from this rank's part ``queue`` (local ids
        on the device) and each peer's, listed in its last capped message (``got``, read in place; every rank's
        lengths ``counts``: :meth:`step`'s last return), which then needs no gather round of its own."""
        self.tally["listed"] += 1
        b, woff = self.e.b, self.woff
        self._global_bits()
        g, self._lists = self._gbits[0], None
        for r in range(self.size):
            part = queue if r == self.rank else self._host_view(got[r], _HEAD, (counts[r],))
            b.queue_to_bits(part, woff[r + 1] - woff[r], out=g[woff[r]:woff[r + 1]])
        return g

    def take_back(self):
        """Undo a pending expansion (the search leaves the run before its round: every rank does the same);
        returns this rank's part of the frontier it expanded (local ids on the device), or None where nothing was
        pending."""
        if self.pending is None:
            return None
        r, self.pending = self.pending, None
        return self._take_back(r)

    def _begin_run(self, queue, degs) -> None:
        """A run's first level: its frontier goes in the queue slot the first graph reads (the engine starts its
        searches and turns bottom-up levels top-down in slot 0, :attr:`entry`: no copy); its counters ride in
        the parameter block."""
        cp = self.e.b.xp
        rt, stream = cp.cuda.runtime, cp.cuda.get_current_stream()
        qn = int(queue.size)
        ptr = queue.data.ptr if qn else None
        k = 1 if ptr == self.queues[0].data.ptr else 0
        if qn and ptr != self.queues[1 - k].data.ptr:
            rt.memcpyAsync(self.queues[1 - k].data.ptr, ptr, 8 * qn, rt.memcpyDeviceToDevice, stream.ptr)
        f = self.at_first
        self.blk_host[f:f + 3] = (1, qn, int(degs[self.rank]))
        self._lists = None  # (the last bottom-up round's lists: stale once a level went top-down)
        self.slot, self.bound, self.got = k, qn, None  # the bound: the frontier's longest possible length
        self.nfrom = {p: 0 for p in self.peers}  # the last round's pairs from each peer (claimed next)

    def _advance(self, r: dict) -> None:
        """Every rank expanded in round ``r``: the next round claims its pairs, from the other queue slot."""
        self.pending = r
        self.tally["levels"] += 1
        self.slot = 1 - self.slot
        self.bound = r["lc"] + sum(self.nfrom.values())

    def _take_back(self, r: dict):
        """Undo this rank's expansion in round ``r`` (its claims and sent marks), if it made one; returns this
        rank's part of the frontier the round completed."""
        if r["expanded"] and (r["lc"] or r["npairs"]):
            self.tally["taken_back"] += 1
            e = self.e
            e.b.undo_top_down(r["claimed"][:r["lc"]], self.rpairs[:r["npairs"]], e.parent, e.level, e.sent)
        return r["frontier"][:r["c"]]

    def _round(self, depth: int, limit: int) -> dict:
        """One launch and one round: the graph claims the last round's pairs, completing this rank's part F of the
        frontier of level ``depth``, and expands F where its degree sum is at most ``limit`` (-1: nowhere); the
        round tells every rank each part's length and degree sum, who expanded, and the pairs for each peer."""
        e = self.e
        cp, comm = e.b.xp, e.comm
        rt = cp.cuda.runtime
        stream = cp.cuda.get_current_stream()
        size, rank, peers, inline, kc = self.size, self.rank, self.peers, self.inline, self.kc
        blk, stat, out, nfrom, k = self.blk_host, self.stat, self.out, self.nfrom, self.slot
        npeers = len(peers)
        for i, p in enumerate(peers):
            n = nfrom[p]
            blk[4 + i], blk[4 + npeers + i] = (inline, n - inline) if n > inline else (n, 0)
        blk[0], blk[2], blk[3] = depth, limit, depth - 1
        # the receive buffers the last round returned (none yet: no rows to read, either graph will do)
        first = self.got is None
        graph = self._graph(k, self.bound > self.small_queue, 0 if first else self._which[id(self.got[peers[0]])])
        t0 = time.perf_counter()
        graph.launch(stream)
        tl = time.perf_counter()
        stream.synchronize()  # the round's one wait
        blk[self.at_first] = 0  # (after the wait: the graph's copy has read it)
        t1 = time.perf_counter()
        v = stat.tolist()
        c, dg, lc, npairs = v[0], v[1], v[2], v[4]
        expanded = dg <= limit  # td_gate's test
        nfor = {p: (v[4] if size == 2 else v[6 + p]) for p in peers}
        most = max(nfor.values())
        # a part not expanded sends no pairs: its vertex list takes their place where it fits, so that if
        # every part is listed and the level turns bottom-up, its frontier needs no round of its own
        listed = not expanded and limit >= 0 and c <= 2 * inline
        if listed:
            rt.memcpyAsync(out[peers[0]].ctypes.data + 8 * _HEAD, self.queues[1 - k].data.ptr, 8 * c,
                           rt.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()
        msgs = {}
        for p in peers:
            w = out[p]
            w[:_HEAD] = (c, dg, _LISTED if listed else int(expanded), nfor[p], most, lc)
            if listed and p != peers[0]:
                w[_HEAD:_HEAD + c] = out[peers[0]][_HEAD:_HEAD + c]
            msgs[p] = self._words(p, _HEAD + (c if listed else 2 * min(nfor[p], inline)))
        tp = time.perf_counter()
        got = self.got = comm.capped_round(msgs)
        tr = time.perf_counter()
        counts, dsum = [0] * size, [0] * size
        counts[rank], dsum[rank] = c, dg
        everyone, every_list, over = expanded, listed, most > inline
        quiet = lc == 0 and most == 0  # (where everyone expanded: the next frontier is empty everywhere)
        for p in peers:
            h = got[p][:_HEAD].tolist()
            counts[p], dsum[p], nfrom[p] = h[0], h[1], h[3]
            everyone = everyone and h[2] == 1
            every_list = every_list and h[2] == _LISTED
            over = over or h[4] > inline
            quiet = quiet and h[4] == 0 and h[5] == 0
        if over:  # some sender has pairs past the inline rows for someone: all join the sized round
            self.tally["sized"] += 1
            comm.exchange_device({p: self._rows(p)[inline:nfor[p]] for p in peers if nfor[p] > inline},
                                 {p: self.recv[p][inline:nfrom[p]] for p in peers if nfrom[p] > inline})
        t2 = time.perf_counter()
        if self.trace is not None:
            self.trace.append((t0, tl, t1, tp, tr, t2, int(over), int(first),
                               sum(int(m.size) for m in msgs.values())))
        return {"counts": counts, "dsum": dsum, "c": c, "expanded": expanded, "everyone": everyone,
                "every_list": every_list, "quiet": quiet and everyone, "lc": lc, "npairs": npairs,
                "claimed": self.queues[k], "frontier": self.queues[1 - k], "got": got,
                "local_s": (v[2 + kc + 1] - v[2 + kc]) * 1e-9, "reduce_s": t2 - t1}
