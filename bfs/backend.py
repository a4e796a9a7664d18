"""Array-module backends: the engine calls the same kernel names on NumPy (Numba) or CuPy arrays."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np


def _parent_dtype(num_vertices: int) -> np.dtype:
    """32-bit parents when every global id fits: half the bytes that bottom-up reads per vertex."""
    return np.dtype(np.int32) if num_vertices <= np.iinfo(np.int32).max else np.dtype(np.int64)


def cpu_backend() -> SimpleNamespace:
    """NumPy arrays, Numba kernels.  Each call makes a new instance: its top-down workspace (buffers that
    grow to the largest level seen and are then reused, so no level page-faults fresh memory) belongs to
    one engine."""
    from functools import partial

    from . import bottom_up, frontier, top_down

    ordered: dict = {}  # the shard's degree-ordered bottom-up rows, see use_bottom_up_columns
    return SimpleNamespace(
        name="cpu", xp=np, parent_dtype=_parent_dtype, start_search=top_down.start_search,
        top_down_step=partial(top_down.top_down_step, workspace={}), claim_remote=top_down.claim_remote,
        degree_sum=top_down.degree_sum, bottom_up_step=partial(_bottom_up_step, ordered, bottom_up.bottom_up_step),
        use_bottom_up_columns=partial(_use_bottom_up_columns, ordered),
        queue_to_bits=frontier.queue_to_bits, bits_to_queue=frontier.bits_to_queue,
        pairs_by_owner=frontier.pairs_by_owner, to_host=np.asarray, mark_visited=_visited_is_parent,
    )


def _use_bottom_up_columns(ordered: dict, cols, bu_cols) -> None:
    """Engine hook: bottom-up scans ``bu_cols`` (the same rows as ``cols``, neighbours by decreasing
    degree; built during preparation, see :mod:`breadth.pipeline.bottom_up_order`) when asked for ``cols``."""
    ordered["cols"], ordered["ordered"] = cols, bu_cols


def _bottom_up_step(ordered: dict, step, offsets, cols, *args):
    return step(offsets, ordered["ordered"] if ordered.get("cols") is cols else cols, *args)


def _visited_is_parent(local_ids) -> None:
    """The CPU backend's ``mark_visited``: nothing to do, its kernels read "visited" from the parent array,
    which the engine sets for every source (the GPU backend keeps a bitmap of its own)."""


def get_backend(name: str = "cpu") -> SimpleNamespace:
    """``"cpu"`` or ``"gpu"`` (CuPy kernels; imported only when asked for)."""
    if name == "cpu":
        return cpu_backend()
    if name == "gpu":
        from .gpu_kernels import gpu_backend

        return gpu_backend()
    raise ValueError(f"unknown backend {name!r}: expected 'cpu' or 'gpu'")
