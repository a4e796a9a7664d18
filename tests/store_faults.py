"""A shard store's writer interrupted in the middle of a shard: the tests' way to stop a write after some
shards, without a hook in breadth itself.

:func:`interrupt_writes` wraps the store's file writer (``breadth.io.shard_store.save_npy``) so that the
writer of each listed rank, right after its first file lands in its temporary directory
(``shard-NNNNN.tmp-<token>/``), raises ``RuntimeError`` (``"fail"``) or sleeps until its process is killed
(``"pause"``) -- a failing disk or a process ended mid-shard.  A test installs it in its own process (whose
in-process workers write the shards) with :func:`patched`, or -- for the ``breadth`` command, whose workers
are processes it does not hold -- as the workers' preload module (:func:`preload_env`: Dask's
``distributed.worker.preload`` from the environment, which the command's worker processes inherit;
:func:`dask_setup` reads the action and ranks from it).
"""

from __future__ import annotations

import contextlib
import os
import re
import time

ACTION_ENV = "BREADTH_TEST_STORE_FAULT"
_TMP_SHARD = re.compile(r"^shard-(\d{5,})\.tmp-[0-9a-f]{8}$")


def interrupt_writes(save_npy, action: str, ranks: set[int]):
    """``save_npy`` that fails (``action="fail"``) or stalls (``"pause"``) right after writing the first file
    of the listed ranks' shard directories."""
    if action not in ("fail", "pause"):
        raise ValueError(f"action must be 'fail' or 'pause', got {action!r}")

    def wrapped(path: str, arr, *args, **kwargs):
        record = save_npy(path, arr, *args, **kwargs)
        folder = os.path.dirname(path)
        m = _TMP_SHARD.match(os.path.basename(folder))
        if m and int(m.group(1)) in ranks and len(os.listdir(folder)) == 1:  # its first file
            rank = int(m.group(1))
            if action == "fail":
                raise RuntimeError(f"store_faults: injected failure while writing shard {rank}")
            while True:  # until the process is killed: an interruption in the middle of a shard
                time.sleep(1)
        return record

    return wrapped


def _parse(spec: str) -> tuple[str, set[int]]:
    action, _, ranks = spec.partition("=")
    return action, {int(r) for r in ranks.split(",") if r.strip()}


@contextlib.contextmanager
def patched(monkeypatch, spec: str):
    """Within the block, this process's shard writers interrupt as ``spec`` says (``"fail=1,2"``,
    ``"pause=1"``)."""
    import breadth.io.shard_store as shard_store

    with monkeypatch.context() as m:
        m.setattr(shard_store, "save_npy", interrupt_writes(shard_store.save_npy, *_parse(spec)))
        yield


def preload_env(spec: str) -> dict[str, str]:
    """Environment variables under which a ``breadth`` command's workers load this module as their preload
    and interrupt their shard writers as ``spec`` says (the rest of ``os.environ`` included)."""
    return {**os.environ, "DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{os.path.abspath(__file__)}"]',
            ACTION_ENV: spec}


def dask_setup(worker) -> None:
    """Dask's preload entry point: wrap this worker process's shard writer from the environment."""
    spec = os.environ.get(ACTION_ENV)
    if spec:
        import breadth.io.shard_store as shard_store

        shard_store.save_npy = interrupt_writes(shard_store.save_npy, *_parse(spec))
