"""Where preparation's time goes: per-stage wall seconds measured inside the tasks, and their summary.

Tasks time their own stages with :class:`StageTimes` (``time.perf_counter`` around each stage, a few
floats per task) and send the figures back with their small results or on the shard's ``meta`` dict;
:func:`summarize` (called by :func:`~breadth.pipeline.prepare` when it is given a ``stages`` dict) adds
them up.  Nothing here moves or copies the data itself.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class StageTimes(dict):
    """Seconds per stage, accumulated: ``with times("read"): ...`` adds the block's wall time to
    ``times["read_s"]``.  ``sync`` (e.g. a device synchronisation) is called before each reading of the
    clock, so that a stage's asynchronous device work is charged to that stage."""

    def __init__(self, sync: Callable[[], None] | None = None):
        super().__init__()
        self._sync = sync

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self._sync:
            self._sync()
        t = time.perf_counter()
        try:
            yield
        finally:
            if self._sync:
                self._sync()
            self[f"{name}_s"] = self.get(f"{name}_s", 0.0) + time.perf_counter() - t

    def add(self, key: str, value: float) -> None:
        """Add ``value`` to a counter (bytes, entries)."""
        self[key] = self.get(key, 0) + value

    def as_dict(self) -> dict:
        """A plain dict (no reference to this class) for pickling back to the client."""
        return dict(self)


def process_peak_rss() -> int:
    """Peak resident set size of the calling process so far, in bytes (the kernel's high-water mark,
    not a sample)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def owner_record(times: StageTimes, batches: list[list[float]]) -> dict:
    """An owner's stage record for ``shard.meta["prepare_stages"]``: its stage seconds and counters,
    ``batches`` (one ``[entries, seconds per stage...]`` row per row batch), its process id and the
    process's peak RSS in bytes at the end of the build."""
    return {**times.as_dict(), "batches": batches, "pid": os.getpid(), "peak_rss_bytes": process_peak_rss()}


def _sum(records: list[dict]) -> dict:
    out: dict = {}
    for r in records:
        for k, v in r.items():
            if isinstance(v, (int, float)) and k not in ("pid", "peak_rss_bytes"):
                out[k] = out.get(k, 0) + v
    return out


def summarize(stages: dict, path: str, wall: dict, chunk_records: list[dict], owner_records: list[dict],
              source_task_s: list[float] | None = None, source_other_s: float = 0.0) -> None:
    """Fill ``stages`` (the caller's dict) with the breakdown of one preparation.

    ``wall``: wall seconds of the phases as seen by the client (``chunks``: submit to the last chunk
    task done; ``build``: then to the last shard built; ``finish``: summaries and the rest).
    ``chunk_records``: each chunk task's :class:`StageTimes` dict, in chunk order; ``owner_records``:
    each owner's :func:`owner_record`; ``source_task_s``: compute seconds of the task that produced each
    chunk (the generator or reader), ``source_other_s`` those of the source's other tasks.  Task seconds
    are summed over tasks, so with several threads they exceed the phase's wall time.
    """
    chunks_total = _sum(chunk_records)
    if source_task_s is not None:
        chunks_total["source_s"] = float(sum(source_task_s)) + source_other_s
        for r, s in zip(chunk_records, source_task_s):
            r["source_s"] = s
    stages.clear()
    stages.update({
        "path": path, "wall_s": {**wall, "total": sum(wall.values())},
        "chunk_tasks": len(chunk_records), "chunk_task_s_total": chunks_total,
        "owner_task_s_total": _sum(owner_records), "chunks": chunk_records, "owners": owner_records,
    })
