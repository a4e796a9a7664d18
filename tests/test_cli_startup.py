"""What the ``breadth`` command's processes load and how they end (the CLI's start-up and close costs).

Each check is a behaviour, not a time: the client of an integer-id Parquet ingest never imports Numba or
SciPy's sparse and FFT modules; the CLI's workers dispatch Numba kernels without SciPy's linalg and end
cleanly (status 0, their local directories gone) when the cluster closes; a local cluster's workers have
Numba up before their first task.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_CLIENT_SCRIPT = textwrap.dedent("""
    import sys

    from breadth.pipeline.cli.cli import main
    from breadth.pipeline.cli.command_imports import skip_unused

    skip_unused()  # as the console script does
    status = main(["ingest", sys.argv[1], "--workers", "1", "--out", sys.argv[2]])
    loaded = [m for m in ("numba", "scipy.sparse", "scipy.fftpack", "scipy.linalg") if sys.modules.get(m)]
    print("LOADED", status, loaded)
""")


def _parquet_dataset(folder) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    ids = rng.integers(1 << 40, 1 << 62, size=300, dtype=np.int64)  # sparse 64-bit ids: hash relabeling
    os.makedirs(folder)
    for i in range(2):
        e = ids[rng.integers(0, ids.size, size=(2000, 2))]
        pq.write_table(pa.table({"src": e[:, 0], "dst": e[:, 1]}), os.path.join(folder, f"part-{i}.parquet"))
    return str(folder)


def test_parquet_ingest_client_loads_no_numba_or_scipy(tmp_path):
    """The client reads Parquet metadata, schedules, and writes the manifest: Numba (0.23-0.28 s to import
    here) and SciPy stay in the workers."""
    data = _parquet_dataset(tmp_path / "in")
    r = subprocess.run([sys.executable, "-c", _CLIENT_SCRIPT, data, str(tmp_path / "s")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "LOADED 0 []" in r.stdout, (r.stdout, r.stderr[-2000:])
    assert os.path.exists(tmp_path / "s" / "manifest.json")


def _kernel_and_modules():
    import sys

    from breadth.pipeline.relabel.hashed_factorize import hashed_factorize

    codes, _ = hashed_factorize(np.array([30, 20, 30, 10], np.int64))
    return codes.tolist(), "scipy.linalg" in sys.modules, os.getpid()


def test_breadth_only_workers_skip_blas_probe_and_end_cleanly():
    from breadth.pipeline.cluster.cluster import local_cluster

    client = local_cluster(workers=1, breadth_only=True)
    try:
        (got,) = client.run(_kernel_and_modules).values()
        dirs = list(client.run(lambda dask_worker: dask_worker.local_directory).values())
        nanny = next(iter(client.cluster.workers.values()))
        proc = nanny.process.process
    finally:
        client.close()
        client.cluster.close()
    codes, linalg_loaded, _ = got
    assert codes[0] == codes[2] and sorted(set(codes)) == [0, 1, 2]
    assert not linalg_loaded
    assert proc.exitcode == 0
    assert not any(os.path.exists(d) for d in dirs)


def _numba_up_without_a_task():
    """On a worker: wait for the warm-up thread (if any), then say whether Numba's first dispatch has run
    (its typing of NumPy is loaded then) and whether any of breadth's kernels were loaded for it."""
    import sys
    import threading

    for t in threading.enumerate():
        if t.name == "breadth-warm-numba":
            t.join(60)
    return "numba.np.arraymath" in sys.modules, "breadth.pipeline.relabel.hashed_factorize" in sys.modules


@pytest.mark.parametrize("kw, numba_up", [({"breadth_only": False}, True), ({"breadth_only": True}, True),
                                           ({"breadth_only": True, "memory_limit": "2GB"}, False)])
def test_local_cluster_workers_start_with_numba_up(kw, numba_up):
    """A local cluster's workers bring Numba up as they start, before their first task, and its kernels still
    load only when a task needs them; under a memory limit a job may run without Numba (its ~110 MiB would
    not fit), so there is no warm-up then."""
    from breadth.pipeline.cluster.cluster import local_cluster

    client = local_cluster(workers=1, **kw)
    try:
        (got,) = client.run(_numba_up_without_a_task).values()
    finally:
        client.close()
        client.cluster.close()
    assert got == (numba_up, False)


@pytest.mark.parametrize("status", [0, 3])
def test_console_script_exit_status_and_output(status):
    """The console script's quick exit keeps the status and flushes what was printed."""
    code = ("from breadth.pipeline.cluster.quick_exit import exit_process; import sys; print('out'); "
            f"print('err', file=sys.stderr); exit_process({status})")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (status, "out\n", "err\n")
