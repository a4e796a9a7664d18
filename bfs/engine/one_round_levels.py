"""Top-down levels in one round each, over communicators whose rounds the host posts (UCX).

The device engine's queued top-down level (:mod:`.device_engine`) takes two rounds: the pairs with the
expansion's counters, then, after the receivers' claims, the counters that size the next frontier, which
every rank needs before the next level (its direction, its pairs' bound, the end of the search).  Over UCX a
round is a host wait and tens of µs of Python: on two ranks sharing one H200 a small level took 380-850 µs
against raw ucxx's 60 µs round trip (``bench_multigpu.py --commbench --raw-ucxx``, session 27).

Here a run of top-down levels takes one round each: the counters of frontier F travel with the pairs
expanded from F.  Every rank expands its part of F before it knows the others' parts, and only where the
direction rule chooses top-down whatever they hold: its part's degree sum is at most ``limit`` = min(pair
capacity, unexplored edges / (alpha x ranks)), so all parts together are at most unexplored edges / alpha.
A rank whose part is larger expands nothing and says so.  After the round every rank knows F exactly: if
every rank expanded, the level is done; else those that did take it back (one kernel: their claims and sent
marks) and the engine runs the level its usual way from the exact counters.

A level queues, with no host wait: the last round's pairs to the device and their claims, which append to
the last expansion's queue and counters (F's counters are then complete on the device); the gate (the queue
length the expansion reads: F's, or none); the expansion, which reads that length on the device; the
counters and each peer's first ``inline`` pair rows copied into page-locked send buffers.  Then one wait for
the stream and one capped round
(:meth:`~breadth.bfs.transport.communicator.Communicator.capped_round`) of host words: a header (F's length
and degree sum here, expanded or not, the pairs for the receiver, the most pairs this rank sends any peer)
and the pairs.  Pairs past ``inline`` follow in a sized round of device rows, which every rank joins when any
sender's header says so.

A level's record is complete a round late (its ``found`` is the next frontier's length); the round that
finds every part of F empty ends the search, as the exact level's counters round did.
"""

from __future__ import annotations

import time

import numpy as np

from .engine import LevelRecord

#: words of a message before its pairs: F's length and degree sum on the sender, whether it expanded, the
#: pairs it sends the receiver, the most pairs it sends any peer
_HEAD = 5
#: a limit no degree sum reaches: the first level of a run expands whatever its part (the exact counters
#: chose top-down, and every part fits the pair capacity)
_ANY = 1 << 62


class OneRoundLevels:
    """One-round top-down levels for a :class:`~breadth.bfs.engine.device_engine.DeviceEngine` on GPU ranks
    whose communicator has capped rounds; ``cap`` bounds the pairs one level sends a peer (and the degree
    sum of a part that is expanded speculatively).  Its buffers live as long as the engine."""

    #: pair rows that travel inside a level's capped round, per peer (more go in a sized round)
    inline = 2048

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
        kc = 4 + (self.size if self.size > 2 else 0)  # td_expand's counters, then pairs per owner (3+ ranks)
        self.queues = [cp.empty(nloc, cp.int64) for _ in range(2)]
        self.ctrs = [cp.zeros(kc, cp.int64) for _ in range(2)]
        self.rpairs = cp.empty((max(self.cap, 1), 2), cp.int64)
        self.regions = cp.empty((self.size * self.cap, 2), cp.int64) if self.size > 2 else None
        self.recv = {p: cp.empty((max(self.cap, 1), 2), cp.int64) for p in self.peers}
        self.prm = cp.zeros(2, cp.int64)
        self.pre_small = cp.empty(_SMALL_QUEUE, cp.int64)
        self.pre = cp.empty(nloc, cp.int64)
        self.tiles = cp.empty(nloc // 1024 + 2, cp.int64)
        self.words = _HEAD + 2 * self.inline

        def pinned(n):
            return np.frombuffer(cp.cuda.alloc_pinned_memory(8 * n), np.int64, n)

        self.out = {p: pinned(self.words) for p in self.peers}
        self.stat = pinned(2 + kc)  # F's counters, then the expansion's
        self.first = pinned(2)  # the counters of a run's first frontier, for the device
        self.ev = [cp.cuda.Event(), cp.cuda.Event()]
        #: levels done in one round, expansions taken back, sized rounds for pairs past the inline rows
        self.tally = {"levels": 0, "taken_back": 0, "sized": 0}
        comm.open_capped(self.words)

    def _rows(self, p: int):
        """The device rows of this level's pairs for peer ``p`` (its first ones)."""
        return self.rpairs if self.size == 2 else self.regions[p * self.cap:(p + 1) * self.cap]

    def run(self, queue, depth: int, degs, edges_to_check: int, depth_limit: int | None, records: list,
            t0: float, bytes0: int):
        """Top-down levels from ``depth``: ``queue`` is this rank's part of the frontier, ``degs`` every
        rank's degree sum (each at most ``cap``; the exact counters chose top-down), ``edges_to_check`` the
        direction rule's unexplored edges, ``t0``/``bytes0`` when this level started.  Appends a record per
        level done to ``records``.  Returns None when the search has ended, else the state the engine's own
        level starts from: ``(queue, depth, counts, degs, edges_to_check, t0, bytes0)`` (this rank's part
        of the frontier, every rank's lengths and degree sums; the time and bytes of the attempt are that
        level's)."""
        e = self.e
        b, cp, comm, s = e.b, e.b.xp, e.comm, e.shard
        rt = cp.cuda.runtime
        stream = cp.cuda.get_current_stream()
        size, rank, peers, inline, cap = self.size, self.rank, self.peers, self.inline, self.cap
        # the expansion writes the queue buffer that does not hold the frontier
        ptr = queue.data.ptr if queue.size else None
        kq = 1 if ptr == self.queues[0].data.ptr else 0
        qbuf, fctr = queue, self.ctrs[1 - kq]
        self.first[0], self.first[1] = int(queue.size), int(degs[rank])
        rt.memcpyAsync(fctr.data.ptr, self.first.ctypes.data, 16, rt.memcpyHostToDevice, stream.ptr)
        bound, limit = int(queue.size), _ANY  # the frontier's longest possible length; the gate
        pending: dict = {}  # peer -> (its words, pairs): the last round's pairs, claimed at the next level
        rec = None  # the last level done: its found is this frontier's length
        while True:
            self.ev[0].record()
            for p, (words, n) in pending.items():
                m = min(n, inline)
                rt.memcpyAsync(self.recv[p].data.ptr, words.ctypes.data + 8 * _HEAD, 16 * m,
                               rt.memcpyHostToDevice, stream.ptr)
                b.claim_pairs_async(self.recv[p][:n], s.lo, e.parent, e.level, np.int32(depth - 1), qbuf, fctr,
                                    s.offsets)
            b.gate_queue(fctr, limit, depth, self.prm)
            nxt, ctr = self.queues[kq], self.ctrs[kq]
            rt.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, stream.ptr)
            tiled = bound > self.small_queue
            b.top_down_g(s.offsets, s.columns, s.lo, s.hi, qbuf, self.pre if tiled else self.pre_small, self.prm,
                         e.parent, e.level, e.sent, nxt, self.rpairs, ctr, self.tiles if tiled else None)
            if size > 2:
                b.pairs_to_regions(self.rpairs, ctr, s.block, size, cap, out=self.regions)
            self.ev[1].record()
            rt.memcpyAsync(self.stat.ctypes.data, fctr.data.ptr, 16, rt.memcpyDeviceToHost, stream.ptr)
            rt.memcpyAsync(self.stat.ctypes.data + 16, ctr.data.ptr, ctr.nbytes, rt.memcpyDeviceToHost, stream.ptr)
            for p in peers:
                rt.memcpyAsync(self.out[p].ctypes.data + 8 * _HEAD, self._rows(p).data.ptr, 16 * min(inline, cap),
                               rt.memcpyDeviceToHost, stream.ptr)
            stream.synchronize()  # the level's one wait
            t1 = time.perf_counter()
            st = self.stat
            c, dg, lc, npairs = int(st[0]), int(st[1]), int(st[2]), int(st[4])
            expanded = dg <= limit  # td_gate's test
            nfor = {p: int(st[4] if size == 2 else st[6 + p]) for p in peers}
            most = max(nfor.values())
            msgs = {}
            for p in peers:
                w = self.out[p]
                w[:_HEAD] = (c, dg, int(expanded), nfor[p], most)
                msgs[p] = w[:_HEAD + 2 * min(nfor[p], inline)]
            got = comm.capped_round(msgs)
            counts, dsum = np.empty(size, np.int64), np.empty(size, np.int64)
            counts[rank], dsum[rank] = c, dg
            everyone, nfrom, over = expanded, {}, most > inline
            for p in peers:
                h = got[p]
                counts[p], dsum[p], nfrom[p] = h[0], h[1], int(h[3])
                everyone = everyone and bool(h[2])
                over = over or int(h[4]) > inline
            if over:  # some sender has pairs past the inline rows for someone: all join the sized round
                self.tally["sized"] += 1
                comm.exchange_device({p: self._rows(p)[inline:nfor[p]] for p in peers if nfor[p] > inline},
                                     {p: self.recv[p][inline:nfrom[p]] for p in peers if nfrom[p] > inline})
            total = int(counts.sum())
            t2 = time.perf_counter()
            if rec is not None:
                rec.found = total
            if total == 0 or limit < 0:  # no frontier anywhere, or past the depth limit: the search is over, and
                # this round (no rank expanded) closed its last level
                if rec is not None:
                    rec.exchange_s += t2 - t0
                    rec.bytes_sent += comm.bytes_sent() - bytes0
                return None
            if not everyone:  # a part was too large to expand blind: take ours back, run the level exactly
                if expanded and (lc or npairs):
                    self.tally["taken_back"] += 1
                    b.undo_top_down(nxt[:lc], self.rpairs[:npairs], e.parent, e.level, e.sent)
                queue = qbuf[:c]
                b.note_degree_sum(queue, s.offsets, dg)
                return queue, depth, counts, dsum, edges_to_check, t0, bytes0
            local_s = cp.cuda.get_elapsed_time(self.ev[0], self.ev[1]) * 1e-3
            rec = LevelRecord(depth, "td", total, -1, local_s, t2 - t0 - local_s, comm.bytes_sent() - bytes0, t2 - t1)
            records.append(rec)
            self.tally["levels"] += 1
            edges_to_check = max(edges_to_check - int(dsum.sum()), 0)
            pending = {p: (got[p], nfrom[p]) for p in peers if nfrom[p]}
            qbuf, fctr, kq = nxt, ctr, 1 - kq
            bound = lc + sum(nfrom.values())
            depth += 1
            # the next part is expanded blind only if every part that size keeps the rule on top-down
            if depth_limit is not None and depth > depth_limit:
                limit = -1
            else:  # (alpha 0: the rule never leaves top-down)
                limit = min(self.blind_cap, int(edges_to_check / (e.alpha * size)) if e.alpha > 0 else cap)
            t0, bytes0 = time.perf_counter(), comm.bytes_sent()
