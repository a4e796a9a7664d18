"""A worker lost while a graph is prepared, stored or loaded ends the work within seconds: one error naming the
worker, how its process ended and the stage, never a hang, never a store with fewer shards than planned, and
never a memory limit blamed for a kill from outside.

The worker process is SIGKILLed as a task of the chosen stage starts, by a plugin of the tests'
(``tests/worker_kill.py``): installed with ``client.register_plugin`` on this module's cluster, or as the
workers' preload module of a ``breadth`` command's own cluster.  The commands run in a process group of their
own, killed whole if one outlives its bound (a hang fails the test, it does not hold CI).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from worker_kill import KillWhenStarting, killed, preload_env

CLI = [sys.executable, "-m", "breadth.pipeline.cli.cli"]
LOST_WITHIN_S = 30.0  # the most a loss may take to end the work, from the kill on
SIGKILL = "killed by signal 9 (SIGKILL)"


def _command_killed_at(pattern: str, tmp_path, *args, balloon: int = 0, bound: float = 240.0):
    """Run ``breadth ARGS`` whose worker dies as the first task matching ``pattern`` starts; returns
    ``(status, stderr, (pid, address, key) of the killed worker, seconds from the kill to the end)``."""
    mark = tmp_path / "killed"
    p = subprocess.Popen([*CLI, *map(str, args)], env=preload_env(pattern, mark, balloon), text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        pytest.fail(f"breadth {' '.join(map(str, args))} still ran {bound:g} s after it started (a worker "
                    f"{'was' if mark.exists() else 'was not'} killed): {err[-2000:]}")
    ended = time.time()
    assert mark.exists(), f"no task matched {pattern!r}: {err[-3000:]}"
    return p.returncode, err, killed(mark), ended - mark.stat().st_mtime


def _one_error_line(err: str) -> str:
    """The command's one ``breadth: error:`` line, checked to be its last and only error, with no traceback."""
    assert "Traceback" not in err and "Task exception" not in err, err[-3000:]
    lines = err.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("breadth: error:")] == lines[-1:], err[-3000:]
    return lines[-1]


def test_bench_whose_worker_is_killed_while_building_ends_with_one_line(tmp_path):
    status, err, (pid, worker, _), took = _command_killed_at(
        r"^shard-", tmp_path, "bench", "--scale", 14, "--workers", 2, "--roots", 2)
    line = _one_error_line(err)
    assert status == 1, err[-3000:]
    assert f"worker {worker} left the cluster during the build (process {pid} {SIGKILL})" in line, line
    assert took < LOST_WITHIN_S, took


def test_generate_under_a_memory_limit_whose_worker_is_killed_writing_keeps_no_manifest(tmp_path):
    # the kill comes from outside: the limit (far above what the worker holds) must not be blamed
    out = tmp_path / "g.store"
    status, err, (pid, worker, _), took = _command_killed_at(
        r"^_write_shard-", tmp_path, "generate", "--scale", 14, "--workers", 2, "--memory-limit", "1GB",
        "--out", out)
    line = _one_error_line(err)
    assert status == 1, err[-3000:]
    assert f"worker {worker} left the cluster during the store write (process {pid} {SIGKILL})" in line, line
    assert "memory" not in line, line
    assert took < LOST_WITHIN_S, took
    assert not (out / "manifest.json").exists() and (out / "progress.json").exists()


def test_a_worker_ended_for_its_memory_limit_is_named_so(tmp_path):
    # the worker takes 600 MB under a 400 MB limit as its shard's write starts: its nanny ends it
    status, err, (_, worker, _), took = _command_killed_at(
        r"^_write_shard-", tmp_path, "generate", "--scale", 14, "--workers", 2, "--memory-limit", "400MB",
        "--out", tmp_path / "g.store", balloon=600_000_000)
    line = _one_error_line(err)
    assert status == 1, err[-3000:]
    assert f"worker {worker} was ended by its nanny during the store write: its memory (" in line, line
    assert line.endswith("passed --memory-limit 400MB (raise the limit)"), line
    assert took < LOST_WITHIN_S, took
    assert not (tmp_path / "g.store" / "manifest.json").exists()


def test_ingest_whose_worker_is_killed_while_relabeling_ends_with_one_line(tmp_path):
    # sparse 41-bit ids: hash relabeling, whose owners are pinned to their workers
    rng = np.random.default_rng(5)
    ids = rng.integers(1 << 40, 1 << 41, 2000)
    src = tmp_path / "sparse.txt"
    np.savetxt(src, ids[rng.integers(0, ids.size, (20000, 2))], fmt="%d", delimiter="\t")
    out = tmp_path / "s.store"
    status, err, (pid, worker, _), took = _command_killed_at(
        r"^owner_part-", tmp_path, "ingest", src, "--workers", 2, "--out", out)
    line = _one_error_line(err)
    assert status == 1, err[-3000:]
    assert f"worker {worker} left the cluster during the relabeling (process {pid} {SIGKILL})" in line, line
    assert took < LOST_WITHIN_S, took
    assert not (out / "manifest.json").exists()


# ---------------------------------------------------------------- the Python API, on a cluster of the test's


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    # a client of the scheduler's address, as of a cluster the user started: the client holds no cluster
    client = Client(lc.scheduler_address)
    yield client
    client.close()
    lc.close()


@pytest.fixture
def kill_at(cluster, tmp_path):
    """``kill_at(pattern)``: the cluster's worker that starts the first task matching ``pattern`` is killed;
    afterwards the plugin goes and the cluster is whole again (the nanny has restarted the worker)."""
    mark = tmp_path / "killed"

    def arm(pattern: str):
        cluster.register_plugin(KillWhenStarting(pattern, str(mark)))
        return mark

    yield arm
    cluster.unregister_worker_plugin(KillWhenStarting.name)
    cluster.wait_for_workers(2, timeout=60)


def _bounded(fn, bound: float) -> dict:
    """``{"returned": value}`` or ``{"raised": exception}`` of ``fn()``, run on a thread given ``bound``
    seconds: a hang fails the test."""
    out: dict = {}

    def run() -> None:
        try:
            out["returned"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            out["raised"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound)
    if t.is_alive():
        pytest.fail(f"still waiting {bound:g} s after it began: a hang")
    return out


def _raises_lost(fn, mark, stage: str):
    """Run ``fn()``, which must raise WorkerLost naming the killed worker, its signal and ``stage``."""
    from breadth.bfs import WorkerLost

    out = _bounded(fn, 120.0)
    e = out.get("raised")
    assert isinstance(e, WorkerLost), f"expected WorkerLost, got {out}"
    took = time.time() - mark.stat().st_mtime
    pid, worker, _ = killed(mark)
    assert (e.worker, e.stage, e.memory) == (worker, stage, None), str(e)
    assert f"worker {worker} left the cluster during the {stage} (process {pid} {SIGKILL})" in str(e), str(e)
    assert took < LOST_WITHIN_S, took
    return e


def test_prepare_raises_workerlost_naming_the_worker_and_stage(cluster, kill_at):
    from breadth.pipeline import kronecker, prepare

    mark = kill_at(r"^shard-")
    # with its progress bar, as on a terminal: a bar that follows the tasks at the scheduler waited forever
    _raises_lost(lambda: prepare(kronecker(12, seed=3), cluster, progress=True), mark, "build")


def test_a_store_whose_worker_is_lost_is_not_completed_nor_loaded(cluster, kill_at, tmp_path):
    from breadth.bfs import WorkerLost
    from breadth.io.errors import IncompleteStoreError
    from breadth.io.shard_store import load_store, read_manifest, write_store
    from breadth.pipeline import kronecker, prepare

    g = prepare(kronecker(12, seed=3), cluster)
    write_store(g, tmp_path / "whole.store")
    mark = kill_at(r"^_write_shard-")
    _raises_lost(lambda: write_store(g, tmp_path / "cut.store"), mark, "store write")
    with pytest.raises(IncompleteStoreError):
        read_manifest(tmp_path / "cut.store")
    # the graph lost a worker: writing it again is refused at once, before anything is written
    t0 = time.monotonic()
    out = _bounded(lambda: write_store(g, tmp_path / "again.store"), 60.0)
    assert isinstance(out.get("raised"), WorkerLost), out
    assert "had left the cluster before the store write" in str(out["raised"]), out
    assert time.monotonic() - t0 < 5 and not (tmp_path / "again.store").exists()
    cluster.wait_for_workers(2, timeout=60)
    mark.unlink()
    kill_at(r"^shard-load-")
    _raises_lost(lambda: load_store(tmp_path / "whole.store", cluster), mark, "store load")


def test_a_worker_lost_while_owners_exchange_their_pieces_ends_the_preparation(cluster, kill_at):
    """The owners' direct exchange (:mod:`breadth.pipeline.build.direct_exchange`) runs as ranks: a worker lost
    there ends ``prepare`` as a lost search rank does, naming the worker, its signal and the stage."""
    import dask

    from breadth.bfs import RankError
    from breadth.pipeline import kronecker, prepare

    mark = kill_at(r"-rank-1$")
    with dask.config.set({"breadth.shuffle.exchange": "direct"}):
        out = _bounded(lambda: prepare(kronecker(12, seed=3), cluster), 120.0)
    e = out.get("raised")
    assert isinstance(e, RankError), out
    pid, worker, _ = killed(mark)
    assert f"worker {worker} left the cluster during the build (pieces exchanged) (process {pid} {SIGKILL})" \
        in str(e), str(e)
    assert time.time() - mark.stat().st_mtime < LOST_WITHIN_S
