"""Array-module backends: the engine calls the same kernel names on NumPy (Numba) or CuPy arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..search_config import SearchConfig

if TYPE_CHECKING:
    from ..gpu.backend import GpuBackend


def _parent_dtype(num_vertices: int) -> np.dtype:
    """32-bit parents when every global id fits: half the bytes that bottom-up reads per vertex."""
    return np.dtype(np.int32) if num_vertices <= np.iinfo(np.int32).max else np.dtype(np.int64)


class Backend(Protocol):
    """What the engines ask of an array backend (:class:`CpuBackend`, the GPU's
    :class:`~breadth.bfs.gpu.backend.GpuBackend`): the array module, the kernels of a level (top-down
    step and claims, bottom-up step, frontier conversions), search hooks, and these declared features:

    * ``async_levels``: levels can be queued without a host wait (``top_down_async``, ``bottom_up_async``,
      device counters): the device engine needs it;
    * ``claims_count_degrees``: ``claim_remote(..., offsets=)`` also learns the claimed vertices' degree
      sum in the claim's own synchronisation;
    * ``checks_on_device``: validation's rules run on the device (``row_violations``,
      ``tree_violations``), with no host copy of the parents.
    """

    name: str
    xp: Any
    async_levels: bool
    claims_count_degrees: bool
    checks_on_device: bool

    def parent_dtype(self, num_vertices: int) -> np.dtype: ...

    def start_search(self, parent, level, root_local: int) -> None: ...

    def mark_visited(self, local_ids) -> None: ...

    def top_down_step(self, offsets, cols, lo, hi, queue, parent, level, depth, sent, nchunks, claim_offsets=None):
        ...

    def claim_remote(self, v, p, lo, parent, level, depth, **kw): ...

    def bottom_up_step(self, offsets, cols, frontier_bits, parent, level, depth, next_bits): ...

    def note_degree_sum(self, queue, offsets, total: int) -> None:
        """Engine hook: ``total`` is ``queue``'s degree sum (a backend may remember it rather than sum again)."""


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


def get_backend(name: str = "cpu", config: SearchConfig | None = None) -> CpuBackend | GpuBackend:
    """``"cpu"`` or ``"gpu"`` (CuPy kernels; imported only when asked for), set up as ``config`` says."""
    if name == "cpu":
        return cpu_backend()
    if name == "gpu":
        from ..gpu.backend import gpu_backend

        return gpu_backend(config)
    raise ValueError(f"unknown backend {name!r}: expected 'cpu' or 'gpu'")
