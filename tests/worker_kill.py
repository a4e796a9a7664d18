"""A worker process killed (SIGKILL) as a task of a chosen stage starts: the tests' way to lose a worker at a
point they choose, without a hook in breadth itself.

:class:`KillWhenStarting` is a Dask worker plugin: the first task whose key matches ``pattern`` that reaches
"executing" on any worker of the cluster (the first to create ``mark``, which records its pid and address)
kills its own process, as the system's out-of-memory killer or a user's ``kill -9`` would -- or, with
``balloon`` bytes, takes that much memory and waits, for its nanny to end it for passing its memory limit.
The restarted worker (its nanny's) finds ``mark`` there and kills nothing.  A test installs it with
``client.register_plugin`` on its own cluster, or -- for the ``breadth`` command, whose cluster it does not
hold -- as the workers' preload module (:func:`preload_env`: Dask's ``distributed.worker.preload`` from the
environment, which the command's worker processes inherit; :func:`dask_setup` reads the pattern and mark
from it).
"""

from __future__ import annotations

import os
import re
import signal

from distributed import WorkerPlugin

PATTERN_ENV, MARK_ENV, BALLOON_ENV = "BREADTH_TEST_KILL_KEY", "BREADTH_TEST_KILL_MARK", "BREADTH_TEST_KILL_BALLOON"


class KillWhenStarting(WorkerPlugin):
    """SIGKILL this worker's process as the first task whose key matches ``pattern`` starts (once per
    cluster: the worker that creates ``mark`` first); with ``balloon``, take that many bytes instead and wait."""

    name = "breadth-test-kill-when-starting"

    def __init__(self, pattern: str, mark: str, balloon: int = 0):
        self.pattern, self.mark, self.balloon, self.address = pattern, mark, balloon, None

    def setup(self, worker=None) -> None:
        self.address = worker.address

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing" or not re.search(self.pattern, str(key)):
            return
        try:
            fd = os.open(self.mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, f"{os.getpid()} {self.address} {key}\n".encode())
        os.close(fd)
        if self.balloon:
            import time

            import numpy as np

            held = np.ones(self.balloon // 8)  # every page touched: resident
            time.sleep(60)  # the nanny (another process) sees the RSS and ends this one
            del held
        os.kill(os.getpid(), signal.SIGKILL)


def killed(mark) -> tuple[int, str, str]:
    """``(pid, worker address, task key)`` that the plugin recorded in ``mark``."""
    pid, address, key = open(mark).read().split(" ", 2)
    return int(pid), address, key.strip()


def preload_env(pattern: str, mark, balloon: int = 0) -> dict[str, str]:
    """Environment variables under which a ``breadth`` command's workers load this module as their preload
    and kill themselves at ``pattern`` (the rest of ``os.environ`` included)."""
    return {**os.environ, "DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{os.path.abspath(__file__)}"]',
            PATTERN_ENV: pattern, MARK_ENV: str(mark), BALLOON_ENV: str(balloon)}


async def dask_setup(worker) -> None:
    """Dask's preload entry point: install :class:`KillWhenStarting` from the environment."""
    pattern, mark = os.environ.get(PATTERN_ENV), os.environ.get(MARK_ENV)
    if pattern and mark:
        await worker.plugin_add(KillWhenStarting(pattern, mark, int(os.environ.get(BALLOON_ENV) or 0)))
