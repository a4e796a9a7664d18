"""The shuffle's pieces sent owner to owner over the ranks' own transport, device to device on GPUs.

In the memory tier the chunks' pieces wait where their chunks were split, as Dask task outputs (in device
memory on GPU workers).  Dask's comm would move each piece to its owner's worker through host memory and a
TCP connection: on two H200s that made the construction of Kronecker scale 27 take 12.7-14.6 s where one
H200 takes 3.3 s, most of it copying 17 GB of pieces through the host.  Here, with one owner per worker,
each owner runs one rank task on its worker (:func:`~breadth.bfs.engine.session.run_ranks`, the search
sessions' machinery): it takes the pieces that wait on its own worker, sends every other owner its pieces
through the ranks' communicator -- NCCL between GPUs, UCX between ranks that share a GPU (CUDA IPC), TCP
between CPU ranks, as a search would choose (:func:`~breadth.bfs.engine.session.resolve_protocol`) -- one
piece per peer and round, so no piece is copied into a larger send buffer, and builds its shard from what
it holds and receives (:func:`~breadth.pipeline.build.build_owner.build_owner`).  The build sorts and
deduplicates each row, so the order in which pieces arrive changes nothing: the shards are those of the
Dask path, bit for bit.

Where it runs is :class:`~breadth.pipeline.prepare_config.PrepareConfig`'s ``exchange`` (the setting
:data:`EXCHANGE_CONFIG`): ``"auto"`` (GPU workers, one owner per worker, more than one owner, the memory
tier), ``"direct"`` (any such graph, CPU workers too) or ``"dask"``.
"""

from __future__ import annotations

import time

import numpy as np

from breadth.bfs.shard import column_dtype

from ..kernels.piece import Piece
from ..prepare_config import EXCHANGES
from ..shuffle.shuffle_tiers import ShuffleSpec

#: breadth's setting of how the memory tier's pieces reach their owners ("auto", "direct", "dask";
#: :attr:`PrepareConfig.exchange <breadth.pipeline.prepare_config.PrepareConfig>`)
EXCHANGE_CONFIG = "breadth.shuffle.exchange"


def use_direct(spec: ShuffleSpec, nworkers: int, how: str = "auto") -> bool:
    """Whether :func:`build_direct` prepares a graph of ``spec`` on ``nworkers`` workers: ``how`` (the
    setting :data:`EXCHANGE_CONFIG`), and a graph it can serve (the memory tier, one owner per worker,
    several)."""
    if how not in EXCHANGES:
        raise ValueError(f"exchange must be one of {', '.join(EXCHANGES)}, got {how!r}")
    if how == "dask":
        return False
    fits = spec.tier == "memory" and spec.nparts == nworkers > 1 and spec.shard_dir is None
    if how == "direct" and not fits:
        raise ValueError(f"{EXCHANGE_CONFIG}='direct' needs the memory tier and one owner per worker "
                         f"(tier {spec.tier!r}, {spec.nparts} owners on {nworkers} workers)")
    return fits and (how == "direct" or spec.device == "gpu")


def build_direct(client, sent, spec: ShuffleSpec, workers: list[str], protocol: str = "auto",
                 timeout: float = 120.0) -> tuple[list, str]:
    """Every owner's shard, built on its worker from pieces sent by the ranks' transport.

    Parameters
    ----------
    client : distributed.Client
    sent : breadth.pipeline.shuffle.shuffle.Sent
        The chunk phase's parcels (``sent.parcels[o][c]``: chunk ``c``'s piece for owner ``o``).
    spec : ShuffleSpec
        The memory tier's spec, ``spec.nparts == len(workers)``.
    workers : list of str
        Owner ``r``'s worker is ``workers[r]``.
    protocol : str
        The ranks' transport (``"auto"``: as a search on these workers would choose).
    timeout : float
        Seconds a rank waits for a silent peer.

    Returns
    -------
    shards : list of distributed.Future
        Owner ``r``'s :class:`~breadth.bfs.shard.Shard` on ``workers[r]``, finished.
    how : str
        ``"direct (PROTOCOL)"``: the transport that carried the pieces.
    """
    from breadth.bfs.engine.session import Placement, run_ranks, session_protocol

    rank_of = {w: r for r, w in enumerate(workers)}
    flat = [f for row in sent.parcels for f in row]
    who = client.who_has(flat)
    # held[r][o]: the parcels for owner o that wait on rank r's worker (a parcel on no rank's worker, or on
    # several, goes with its owner's task, which Dask then gives it)
    held: list[list[list]] = [[[] for _ in workers] for _ in workers]
    for o, row in enumerate(sent.parcels):
        for f in row:
            ranks = sorted(rank_of[w] for w in who.get(f.key, ()) if w in rank_of)
            held[o if o in ranks or not ranks else ranks[0]][o].append(f)
    placement = Placement(client, list(workers), spec.device)
    protocol = session_protocol(placement, protocol)
    shards = run_ranks(placement, _exchange_and_build, [(spec, held[r]) for r in range(len(workers))],
                       protocol=protocol, timeout=timeout, gather=False, stage="build (pieces exchanged)")
    return shards, f"direct ({protocol})"


def _exchange_and_build(comm, ctx, spec: ShuffleSpec, held: list[list[Piece]]):
    """Rank ``comm.rank``'s side: send each peer its pieces held here, one piece per peer a round; build
    this owner's shard from its own pieces and the ones received."""
    from .build_owner import build_owner

    me, size = comm.rank, comm.size
    dt = column_dtype(spec.num_vertices)
    xp = _array_module(spec.device)
    t0 = time.perf_counter()
    rounds = int(comm.allreduce(np.array([max(len(h) for h in held)], np.int64), "max")[0])
    mine = list(held[me])
    empty = (xp.empty((0, 2), dt), xp.empty(0, np.int64))
    for i in range(rounds):
        pieces = [held[p][i] if i < len(held[p]) and p != me else None for p in range(size)]
        out = comm.alltoallv([empty[0] if q is None else q.out for q in pieces])
        inc = comm.alltoallv([empty[0] if q is None else q.inc for q in pieces]) if spec.directed else None
        loops = comm.alltoallv([empty[1] if q is None else q.loops for q in pieces])
        for p in range(size):
            if p != me and (out[p].shape[0] or loops[p].shape[0] or (inc is not None and inc[p].shape[0])):
                mine.append(Piece(out[p], None if inc is None else inc[p], loops[p]))
    del held
    if spec.device == "gpu":
        xp.cuda.get_current_stream().synchronize()
    exchange_s = time.perf_counter() - t0
    shard = build_owner(me, spec, mine)
    shard.meta.setdefault("prepare_stages", {}).update(connect_s=t0 - ctx.started, exchange_s=exchange_s,
                                                       exchange_rounds=rounds, exchange_bytes_sent=comm.bytes_sent())
    return shard


def _array_module(device: str):
    if device == "gpu":
        import cupy

        return cupy
    return np
