"""Capture a stream's work as a CUDA graph: the shared step of the captured levels.

:mod:`breadth.bfs.gpu.level_graphs` (levels with their NCCL or peer-memory rounds) and
:mod:`breadth.bfs.engine.one_round_levels` (a UCX level's GPU steps) record their levels once and replay them.
"""

from __future__ import annotations

from typing import Any, Callable


def capture(stream, build: Callable[[], Any]):
    """The ``cupy.cuda.graph.Graph`` of what ``build()`` queues on ``stream`` (made current for it; CUDA's
    relaxed capture mode where CuPy has it).  Nothing runs; ``build`` may allocate nothing.  A failing
    ``build`` ends the capture before its error propagates."""
    import cupy as cp

    rt = cp.cuda.runtime
    mode = getattr(rt, "streamCaptureModeRelaxed", None)
    with stream:
        stream.begin_capture(mode) if mode is not None else stream.begin_capture()
        try:
            build()
        except BaseException:
            try:
                stream.end_capture()
            except Exception:
                pass
            raise
        return stream.end_capture()
