"""Array-module backends: the engine calls the same kernel names on NumPy (Numba) or CuPy arrays."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..search_config import SearchConfig


def _parent_dtype(num_vertices: int) -> np.dtype:
    """32-bit parents when every global id fits: half the bytes that bottom-up reads per vertex."""
    return np.dtype(np.int32) if num_vertices <= np.iinfo(np.int32).max else np.dtype(np.int64)


class Backend(Protocol):
    """What every engine may ask of an array backend (:class:`CpuBackend`, the GPU's
    :class:`~breadth.bfs.gpu.backend.GpuBackend`): the array module, the kernels of a level (top-down step and
    claims, bottom-up step, frontier conversions, degree sums), search hooks, and three declared capabilities,
    flags that every backend sets:

    * ``async_levels``: levels can be queued without a host wait: the backend also implements
      :class:`AsyncLevels` (the device engine, its captured and one-round levels, need it);
    * ``claims_count_degrees``: ``claim_remote(..., offsets=)`` also learns the claimed vertices' degree sum in
      the claim's own synchronisation;
    * ``checks_on_device``: validation's rules run on the device: the backend also implements
      :class:`DeviceChecks` (no host copy of the parents).

    An engine tests a flag, never the backend's type or whether it has an attribute; ``tests/test_backend_
    contract.py`` checks that the engines ask for nothing undeclared and that the backends implement what they
    declare.  Arrays: ``offsets`` int64 ``(num_local + 1,)``; ``cols`` global ids; queues int64 local ids;
    bitmaps uint64 words, bit ``i`` for local id ``i``.
    """

    name: str
    xp: Any
    async_levels: bool
    claims_count_degrees: bool
    checks_on_device: bool

    def parent_dtype(self, num_vertices: int) -> np.dtype:
        """The dtype of the parents for a graph of ``num_vertices``."""

    def start_search(self, parent, level, root_local: int) -> None:
        """Engine hook: ``parent = level = -1``, the backend's own state reset (``root_local``: the root's local
        id, -1 where another rank owns it or the search has several sources)."""

    def mark_visited(self, local_ids) -> None:
        """Engine hook: ``local_ids`` (host int64) were marked visited in the parents outside the kernels."""

    def degree_sum(self, offsets, queue) -> int:
        """The out-degree sum of local ids ``queue`` (a host int)."""

    def top_down_step(self, offsets, cols, lo, hi, queue, parent, level, depth, sent, nchunks, claim_offsets=None):
        """One top-down level from ``queue``: claims owned targets, lists remote ones once per search (``sent``);
        returns ``(next_queue, remote_vertices, their_parents, scanned)``."""

    def claim_remote(self, v, p, lo, parent, level, depth, **kw):
        """Claim received (vertex, parent) pairs; returns the newly claimed local ids (``offsets=``: see
        ``claims_count_degrees``)."""

    def bottom_up_step(self, offsets, cols, frontier_bits, parent, level, depth, next_bits):
        """One bottom-up level against the global frontier bitmap; returns ``(found, ...)``, ``next_bits`` the
        vertices found."""

    def queue_to_bits(self, queue, nwords: int):
        """A bitmap of ``nwords`` words with the bits of ``queue`` set (``out=``: see :class:`AsyncLevels`)."""

    def bits_to_queue(self, bits):
        """The local ids of the set bits, ascending (``out=``: see :class:`AsyncLevels`)."""

    def pairs_by_owner(self, v, p, block: int, nparts: int):
        """(vertex, parent) pairs grouped by owner ``v // block``: ``(k, 2)`` pairs and ``nparts + 1`` offsets."""

    def to_host(self, a) -> np.ndarray:
        """``a`` as a host array."""

    def note_degree_sum(self, queue, offsets, total: int) -> None:
        """Engine hook: ``total`` is ``queue``'s degree sum (a backend may remember it rather than sum again)."""

    def use_bottom_up_columns(self, cols, ordered) -> None:
        """Engine hook: bottom-up scans ``ordered`` (the same rows, neighbours by decreasing degree) when given
        ``cols``."""

    @property
    def bottom_up_ordered(self) -> bool:
        """Whether bottom-up scans degree-ordered rows."""


class AsyncLevels(Protocol):
    """What a backend with ``async_levels`` adds to :class:`Backend` (:class:`~breadth.bfs.gpu.backend.GpuBackend`:
    the device engine's queued, captured and one-round levels).  Counts stay in device counters that the
    engine gathers in its own rounds; ``queue_to_bits`` and ``bits_to_queue`` also take ``out=``, a device array
    to write into."""

    def start_root(self, parent, level, offsets, root_local: int, root: int, queue) -> int:
        """:meth:`Backend.start_search` for one root, seeded on the device into ``queue``; returns its degree."""

    def note_bits(self, bits, count: int, degree_sum: int, offsets) -> None:
        """Engine hook: ``bits`` has ``count`` set bits whose degrees sum to ``degree_sum``."""

    def top_down_async(self, offsets, cols, lo, hi, queue, parent, level, depth, sent, total: int, nparts: int = 0,
                       block: int = 0, count_owners: bool = True, claim_offsets=None):
        """One top-down level queued on the stream: ``(next_queue, remote_pairs, counters)`` on the device."""

    def bottom_up_async(self, offsets, cols, frontier_bits, parent, level, depth, next_bits, first_neighbours=False):
        """One bottom-up level queued on the stream: its counters on the device."""

    def claim_pairs_async(self, pairs, lo, parent, level, depth, out, ctr, offsets, count=None) -> None:
        """Claim received pairs on the stream, the winners appended to ``out`` and counted in ``ctr``."""

    def group_pairs(self, pairs, n: int, starts, block: int):
        """The first ``n`` pairs grouped by owner."""

    def pairs_to_regions(self, rpairs, ctr, block: int, nparts: int, cap: int, out=None):
        """The level's remote pairs into ``nparts`` regions of ``cap`` rows."""

    def bottom_up_g_buffers(self, offsets, cols) -> tuple:
        """The buffers a captured bottom-up level reads, built outside the capture."""

    def bottom_up_g(self, offsets, cols, fbits, parent, level, prm, next_bits, ctr, first_neighbours=False) -> None:
        """A bottom-up level for capture: the depth read on the device from ``prm``."""

    def top_down_g(self, offsets, cols, lo, hi, queue, pre, prm, parent, level, sent, nxt, rpairs, ctr, tiles=None,
                   skip_parent: bool = False) -> None:
        """A top-down level for capture: the queue length and depth read on the device from ``prm``."""

    def claim_pairs_g(self, pairs, count, lo, parent, level, prm, out, ctr, offsets, grid_rows=None) -> None:
        """Claims for capture: the pair count read on the device."""

    def claim_split_g(self, host_rows, nh, dev_rows, nd, lo, parent, level, prm, out, ctr, offsets,
                      grid_rows: int) -> None:
        """Claims for capture of pairs in host-mapped rows and in device rows."""

    def gate_queue(self, fctr, prm, ctr, first) -> None:
        """A one-round level's gate: whether the expansion runs, from the frontier's counters."""

    def publish_level(self, fctr, ctr, stamps, stat: int, rows, at: int, cap: int, out: int) -> None:
        """A one-round top-down level's counters and first pair rows written into page-locked memory."""

    def publish_bottom_up(self, ctr, stamps, stat: int, next_bits, cap: int, out: int) -> None:
        """A one-round bottom-up level's counters, and the vertices found where they fit, into page-locked
        memory."""

    def undo_top_down(self, nxt, rpairs, parent, level, sent) -> None:
        """Take back a top-down expansion (its claims and sent marks)."""

    def stamp(self, ts, i: int) -> None:
        """``ts[i]``: the device clock when the stream reaches this point."""


class DeviceChecks(Protocol):
    """What a backend with ``checks_on_device`` adds to :class:`Backend`: validation's rules on the device
    (:mod:`breadth.bfs.graph500.validate`)."""

    def row_violations(self, shard, parent_local, level_g, root: int) -> tuple[int, int, int, int]:
        """Rules 2-5 over ``shard``'s rows."""

    def tree_violations(self, parent_g, root: int) -> int:
        """Rule 1: parents that do not lead to ``root``."""


#: each capability flag of :class:`Backend` -> the protocol of the methods it adds (None: a keyword of a
#: required method)
CAPABILITIES: dict[str, type | None] = {"async_levels": AsyncLevels, "claims_count_degrees": None,
                                        "checks_on_device": DeviceChecks}


def members(protocol: type) -> frozenset[str]:
    """The names a protocol of this module declares: its methods, properties and annotated attributes.

    Parameters
    ----------
    protocol : type
        :class:`Backend`, :class:`AsyncLevels` or :class:`DeviceChecks`.

    Returns
    -------
    frozenset of str
        The declared names (no dunder names).

    Examples
    --------
    >>> from breadth.bfs.engine.backend import Backend, DeviceChecks, members
    >>> sorted(members(DeviceChecks))
    ['row_violations', 'tree_violations']
    >>> {"xp", "async_levels", "top_down_step", "bottom_up_ordered"} <= members(Backend)
    True
    """
    names = set(protocol.__dict__.get("__annotations__", {}))
    names |= {k for k, v in vars(protocol).items()
              if not k.startswith("_") and (callable(v) or isinstance(v, (property, staticmethod)))}
    return frozenset(names)


class CpuBackend:
    """NumPy arrays, Numba kernels, and the per-engine state they keep between levels (one instance per
    :class:`~breadth.bfs.engine.engine.Engine`): the top-down workspace (buffers that grow to the largest level
    seen and are then reused, so no level page-faults fresh memory), bottom-up's words of unvisited
    vertices with edges (rebuilt from the parents at the first bottom-up level after a search starts or a
    top-down level, then kept by the bottom-up kernel itself) and the shard's degree-ordered rows."""

    name = "cpu"
    xp = np
    parent_dtype = staticmethod(_parent_dtype)
    #: optional features (see :class:`Backend`): none on the host
    async_levels = False
    claims_count_degrees = False
    checks_on_device = False

    def __init__(self):
        from ..cpu import bottom_up, frontier, top_down

        self._td, self._bu = top_down, bottom_up
        self.degree_sum = top_down.degree_sum
        self.queue_to_bits, self.bits_to_queue = frontier.queue_to_bits, frontier.bits_to_queue
        self.pairs_by_owner = frontier.pairs_by_owner
        self.to_host = np.asarray
        self._workspace: dict = {}
        self._ordered: tuple | None = None  # (cols, the same rows with neighbours by decreasing degree)
        self._unvisited = None  # uint64 words over the local ids, valid while _fresh
        self._fresh = False

    def start_search(self, parent, level, root_local: int) -> None:
        """Engine hook: ``parent = level = -1`` on all threads (the engine then writes the root)."""
        self._fresh = False
        self._td.start_search(parent, level, root_local)

    def mark_visited(self, local_ids) -> None:
        """Engine hook: vertices were marked visited in the parent array outside the kernels (the sources of a
        search, a 2D grid row's vertices claimed by their owners): the unvisited words are rebuilt from the
        parent array before the next bottom-up level."""
        self._fresh = False

    def top_down_step(self, offsets, cols, lo, hi, queue, parent, level, depth, sent, nchunks, claim_offsets=None):
        """One top-down level (``claim_offsets``, the owned rows when ``queue`` indexes other rows, is for the
        GPU's kernel, which adds the claimed vertices' degrees up as it claims; this one does not)."""
        self._fresh = False
        return self._td.top_down_step(offsets, cols, lo, hi, queue, parent, level, depth, sent, nchunks,
                                      workspace=self._workspace)

    def claim_remote(self, v, p, lo, parent, level, depth):
        self._fresh = False
        return self._td.claim_remote(v, p, lo, parent, level, depth)

    def note_degree_sum(self, queue, offsets, total: int) -> None:
        """Engine hook: the host sums degrees when asked; nothing to remember."""

    @property
    def bottom_up_ordered(self) -> bool:
        """Whether bottom-up scans degree-ordered rows (:meth:`use_bottom_up_columns`)."""
        return self._ordered is not None

    def use_bottom_up_columns(self, cols, ordered) -> None:
        """Engine hook: bottom-up scans ``ordered`` (the same rows as ``cols``, neighbours by decreasing
        degree; built where the graph is prepared or loaded, see :mod:`breadth.bfs.search_order`) when given
        ``cols``."""
        self._ordered = (cols, ordered)

    def bottom_up_step(self, offsets, cols, frontier_bits, parent, level, depth, next_bits):
        if self._ordered is not None and self._ordered[0] is cols:
            cols = self._ordered[1]
        if not self._fresh:
            if self._unvisited is None or self._unvisited.size != next_bits.size:
                self._unvisited = np.empty(next_bits.size, np.uint64)
            self._bu.unvisited_words(offsets, parent, self._unvisited)
            self._fresh = True
        return self._bu.bottom_up_step(offsets, cols, frontier_bits, parent, level, depth, next_bits,
                                       self._unvisited)


def cpu_backend() -> CpuBackend:
    """NumPy arrays, Numba kernels.  Each call makes a new instance, whose state belongs to one engine."""
    return CpuBackend()


def get_backend(name: str = "cpu", config: SearchConfig | None = None) -> Backend:
    """``"cpu"`` or ``"gpu"`` (CuPy kernels; imported only when asked for), set up as ``config`` says."""
    if name == "cpu":
        return cpu_backend()
    if name == "gpu":
        from ..gpu.backend import gpu_backend

        return gpu_backend(config)
    raise ValueError(f"unknown backend {name!r}: expected 'cpu' or 'gpu'")
