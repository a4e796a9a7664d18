"""How worker processes ended, as their nannies saw it: the signal or exit status behind "a worker left
the cluster", which the scheduler does not know.

A Dask nanny logs the end of its worker's process at INFO (``distributed.nanny``: "Worker process 4121
was killed by signal 11") and restarts it; a nanny that ends its worker for passing its memory limit says
so first, at WARNING ("Worker tcp://127.0.0.1:40001 (pid=4121) exceeded 100% memory budget.
Restarting...").  Where the nannies run in this process (a ``LocalCluster``'s, as the ``breadth`` command
starts) :func:`watch` keeps the last of those lines, so that the one-line error of a run whose worker died
can say how it died (SIGKILL from outside: e.g. the system's out-of-memory killer or a user; SIGSEGV: a
crash; its nanny, for its memory limit).  For a remote cluster nothing is seen here
(:mod:`breadth.bfs.worker_loss` asks the scheduler for its nannies' memory events instead).  Memory: the
last :data:`KEEP` lines of each kind, whatever the cluster's size.
"""

from __future__ import annotations

import collections
import logging
import re
import signal
import threading
import time

KEEP = 64  #: death lines kept (one per process that ended; a cluster restarting workers in a loop drops the oldest)

_LINE = re.compile(r"Worker process (\d+) (?:was killed by signal (\d+)|exited with status (\d+)"
                   r"|was killed by (unknown signal))")
_MEMORY = re.compile(r"Worker (\S+) \(pid=(\d+)\) exceeded (\d+)% memory budget")


class _Deaths(logging.Filter):
    """Keeps ``(monotonic time, description)`` of each worker process's end that a nanny logs.

    A filter on the nanny's logger, whose level :func:`watch` lowers to INFO: the CLI (and many a user)
    hides Dask's INFO lines, and a record below a logger's level is never made.  The filter sees each line,
    keeps the death lines, and passes on only what the logger's own level (or, unset, its parents') passes,
    so nothing more is printed than without it."""

    def __init__(self, own_level: int) -> None:
        super().__init__()
        self.own_level = own_level
        self.seen: collections.deque[tuple[float, str, int]] = collections.deque(maxlen=KEEP)
        self.memory: collections.deque[tuple[float, str, int]] = collections.deque(maxlen=KEEP)

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        m = _LINE.match(text)
        if m:
            self.seen.append((time.monotonic(), describe(int(m[1]), m[2], m[3]), int(m[1])))
        elif m := _MEMORY.match(text):
            self.memory.append((time.monotonic(), m[1], int(m[2])))
        return record.levelno >= (self.own_level or logging.getLogger("distributed").getEffectiveLevel())


class _ChildFilter(logging.Filter):
    """The same keeping on a child logger of the nanny's (``distributed.nanny.memory``, whose memory line a
    filter of the parent never sees: a logger's filters see only its own records), passing on what the
    child's own level (or, unset, the nanny's former one, or ``distributed``'s) passes."""

    def __init__(self, deaths: _Deaths, own_level: int) -> None:
        super().__init__()
        self.deaths, self.own_level = deaths, own_level

    def filter(self, record: logging.LogRecord) -> bool:
        self.deaths.filter(record)
        return record.levelno >= (self.own_level or self.deaths.own_level
                                  or logging.getLogger("distributed").getEffectiveLevel())


def describe(pid: int, sig: str | None, status: str | None) -> str:
    """``"process 4121 killed by signal 11 (SIGSEGV)"``, ``"process 4121 exited with status 1"``."""
    if sig is not None:
        try:
            name = f" ({signal.Signals(int(sig)).name})"
        except ValueError:
            name = ""
        return f"process {pid} killed by signal {sig}{name}"
    if status is not None:
        return f"process {pid} exited with status {status}"
    return f"process {pid} killed by an unknown signal"


_deaths: _Deaths | None = None
_lock = threading.Lock()


def watch() -> None:
    """Start keeping the nannies' death lines of this process (once; later calls do nothing)."""
    global _deaths
    with _lock:
        if _deaths is None:
            nanny = logging.getLogger("distributed.nanny")
            memory = logging.getLogger("distributed.nanny.memory")
            _deaths = _Deaths(nanny.level)
            nanny.addFilter(_deaths)
            memory.addFilter(_ChildFilter(_deaths, memory.level))
            nanny.setLevel(min(nanny.getEffectiveLevel(), logging.INFO))


def since(t0: float) -> list[str]:
    """Descriptions of the worker processes that ended after ``time.monotonic()`` was ``t0``, oldest first.

    >>> t0 = time.monotonic(); watch()
    >>> since(t0)
    []
    """
    return [d for t, d, _ in list(_deaths.seen if _deaths is not None else ()) if t >= t0]


def by_pid(t0: float) -> dict[int, tuple[float, str]]:
    """``{pid: (time.monotonic() of its end, description)}`` of the worker processes that ended since ``t0``:
    where several workers died, which one did first (a rank whose peer was killed may be ended by its
    transport after it).

    >>> t0 = time.monotonic(); watch()
    >>> by_pid(t0)
    {}
    """
    return {pid: (t, d) for t, d, pid in list(_deaths.seen if _deaths is not None else ()) if t >= t0}


def ended_for_memory(t0: float) -> dict[str, int]:
    """``{worker address: pid}`` of the workers that their nannies of this process ended for passing their
    memory limit after ``time.monotonic()`` was ``t0``.

    >>> t0 = time.monotonic(); watch()
    >>> ended_for_memory(t0)
    {}
    """
    return {a: pid for t, a, pid in list(_deaths.memory if _deaths is not None else ()) if t >= t0}
