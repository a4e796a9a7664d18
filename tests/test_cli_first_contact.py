"""The ``breadth`` command as a new user meets it: each failure is one line naming what is wrong, with the
right exit status, no traceback, and nothing left behind; a cold Numba cache and several workers work.

Every case runs the command line in a subprocess, as a user types it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import data_file

CLI = [sys.executable, "-m", "breadth.pipeline.cli.cli"]


def _run(*args, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    # PYTHONFAULTHANDLER: a worker process that crashes prints its threads' stacks to the stderr it shares
    # with the command, which a failed assertion shows
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}, stdin=subprocess.DEVNULL)


def _one_line(r: subprocess.CompletedProcess, status: int, *needles: str) -> str:
    """The run failed with ``status`` and said so in one ``breadth: error:`` line holding every needle."""
    err = r.stderr.strip()
    assert r.returncode == status, (r.returncode, err[-3000:])
    assert "Traceback" not in r.stderr and "Compute Failed" not in r.stderr, err[-3000:]
    lines = err.splitlines()
    assert len(lines) == 1, err[-3000:]
    assert lines[0].startswith("breadth: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A small directed store written by ``breadth ingest``."""
    d = tmp_path_factory.mktemp("cli")
    src = d / "g.txt"
    src.write_text("# a small graph\n1 2\n2 3\n3 1\n3 4\n10 11\n")
    out = d / "g.store"
    r = _run("ingest", src, "--directed", "--out", out)
    assert r.returncode == 0, r.stderr
    return out


def test_no_arguments_prints_usage_and_version():
    r = _run()
    assert r.returncode == 2 and "usage: breadth" in r.stderr and "bench" in r.stderr
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.startswith("breadth ")


def test_every_option_has_help_text():
    from breadth.pipeline.cli.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "cmd").choices
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, sp in subparsers.items() for a in sp._actions
               if not a.help and a.dest != "help"]
    assert not missing, missing


@pytest.mark.parametrize("args,status,needles", [
    (["bench", "--scale", "8", "--memory-limit", "banana"], 2, ["--memory-limit", "'banana'", "expected a size"]),
    (["bench", "--scale", "8", "--memory-limit", "-3GB"], 2, ["--memory-limit"]),
    (["bench", "--scale", "8", "--json", "/proc/breadth-report.json"], 2, ["--json /proc/breadth-report.json",
                                                                         "cannot write"]),
    (["bench", "--scale", "8", "--json", "{tmp}"], 2, ["--json", "is a directory"]),
    (["bench", "--scale", "8", "--json", "{tmp}/no/such/dir/r.json"], 2, ["does not exist"]),
    (["bench", "--scale", "8", "--spill-dir", "/proc/breadth-spill"], 2, ["--spill-dir /proc/breadth-spill",
                                                                         "cannot write"]),
    (["bench", "{tmp}/absent.store"], 2, ["absent.store: no such shard store"]),
    (["bench"], 2, ["needs either a STORE or --scale"]),
    (["generate", "--scale", "8", "--out", "/proc/g.store"], 2, ["--out /proc/g.store", "cannot write"]),
    (["bfs", "{tmp}/absent.store", "--root", "1", "--out", "{tmp}/r.parquet"], 2, ["no such shard store"]),
    (["bench", "--scale", "8", "--workers", "4", "--partition", "2d", "--grid", "3x2"], 2,
     ["--grid 3x2 needs 6 workers, got 4"]),
    (["bench", "--scale", "8", "--partition", "2d", "--grid", "3"], 2, ["--grid", "ROWSxCOLUMNS", "'3'"]),
    (["generate", "--scale", "8", "--out", "{tmp}/g.store", "--grid", "2x2"], 2, ["need --partition 2d"]),
    (["bench", "--scale", "8", "--partition", "2d", "--delegate-degree", "9"], 2,
     ["--delegate-degree is for --partition delegates, not 2d"]),
    (["bench", "--scale", "8", "--partition", "3d"], 2, ["--partition", "invalid choice"]),
])
def test_bad_options_fail_before_any_work(tmp_path, args, status, needles):
    t0 = time.perf_counter()
    r = _run(*[a.format(tmp=tmp_path) for a in args])
    _one_line(r, status, *needles)
    assert time.perf_counter() - t0 < 60  # no cluster was started and waited on
    assert sorted(os.listdir(tmp_path)) == []  # nothing written


def test_device_gpu_without_cupy_is_a_usage_error():
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    _one_line(_run("bench", "--scale", "8", "--device", "gpu"), 2, "--device gpu", "CuPy is not installed")


def test_unreachable_scheduler_is_one_line_in_bounded_time():
    t0 = time.perf_counter()
    r = _run("bench", "--scale", "8", "--scheduler", "tcp://127.0.0.1:9")
    _one_line(r, 1, "tcp://127.0.0.1:9", "no Dask scheduler answered")
    assert time.perf_counter() - t0 < 40


def test_outputs_inside_a_store_are_refused(store, tmp_path):
    before = sorted(os.listdir(store))
    manifest = (store / "manifest.json").read_bytes()
    _one_line(_run("bfs", store, "--root", "1", "--out", store / "manifest.json"), 2, "inside the shard store")
    _one_line(_run("generate", "--scale", "6", "--out", store / "inner"), 2, "inside the shard store")
    _one_line(_run("bench", "--scale", "6", "--json", store / "r.json"), 2, "inside the shard store")
    assert sorted(os.listdir(store)) == before and (store / "manifest.json").read_bytes() == manifest


@pytest.mark.parametrize("root,status,needles", [
    ("99999999999999999999999", 2, ["--root 99999999999999999999999", "not in the graph", "int64"]),
    ("abc", 2, ["--root abc", "expected an integer"]),
    ("7", 1, ["--root 7: vertex 7 is not in the graph"]),  # in the ids' range: only the id map can tell
])
def test_bad_roots(store, tmp_path, root, status, needles):
    _one_line(_run("bfs", store, "--root", root, "--out", tmp_path / "r.parquet"), status, *needles)
    assert not os.listdir(tmp_path)


def test_bad_input_line_names_file_and_line_and_leaves_no_store(tmp_path):
    src = tmp_path / "bad.txt"
    src.write_text("1 2\n2 3\n3 x\n4 5\n")
    _one_line(_run("ingest", src, "--out", tmp_path / "bad.store", "--workers", "2"), 1,
              f"{src}:3:", "'3 x'")
    assert not (tmp_path / "bad.store").exists()


def test_report_goes_to_stdout_alone(tmp_path):
    """Progress and status go to stderr, so ``breadth bench > report.txt`` holds the report only."""
    r = _run("bench", "--scale", "8", "--roots", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("SCALE: 8") and "\r" not in r.stdout and "Completed" not in r.stdout


def test_cli_imports_nothing_heavy():
    """A worker spawned under the console script re-imports ``breadth.pipeline.cli.cli``: it must not import
    Numba (whose thread count the worker's nanny sets afterwards) or the kernels."""
    code = ("import sys, breadth.pipeline.cli.cli; "
            "print(sorted(m for m in ('numba', 'pandas', 'pyarrow', 'distributed') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)


def test_two_workers_on_a_cold_numba_cache(tmp_path):
    """A fresh machine: nothing compiled yet, two worker processes, one Numba thread each."""
    # --verbose: were it to fail, the traceback and the workers' logs come with the one line (CI once saw a
    # worker of this test leave mid-search, never reproduced)
    r = _run("bench", "--scale", "10", "--roots", "2", "--workers", "2", "--verbose",
             env={"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "bfs  harmonic_mean_TEPS:" in r.stdout


def test_workers_get_one_numba_thread_each():
    import numba  # noqa: F401  (the check below runs in the workers)

    from breadth.pipeline.cluster.cluster import local_cluster

    client = local_cluster(workers=2)
    try:
        def threads():
            import numba

            return numba.config.NUMBA_NUM_THREADS, numba.get_num_threads()

        got = client.run(threads)
        cores = os.cpu_count() or 1
        assert all(t == (max(1, cores // 2),) * 2 for t in got.values()), got
    finally:
        client.close()
        client.cluster.close()


_USER_SCRIPT = """
import os

import numba  # a user's script imports Numba and breadth at its top: spawned workers import it again first
from breadth.pipeline import local_cluster


def threads():
    import numba

    return numba.config.NUMBA_NUM_THREADS


if __name__ == "__main__":
    before = os.environ.get("NUMBA_NUM_THREADS")
    client = local_cluster(workers=2)
    print(sorted(client.run(threads).values()), os.environ.get("NUMBA_NUM_THREADS") == before)
    client.close()
    client.cluster.close()
"""


def test_workers_of_a_script_that_imports_breadth_at_its_top_get_their_threads(tmp_path):
    """The worker processes re-import the caller's main module before their nanny's ``env`` applies; the
    thread count must be in their environment from the spawn on (it was not: two workers ran two Numba
    threads each on two cores, and a scale-20 search took 87 ms instead of 14), and the caller's own
    environment is left as it was."""
    script = tmp_path / "user_job.py"
    script.write_text(_USER_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"})
    assert r.returncode == 0, r.stderr[-3000:]
    per_worker = max(1, (os.cpu_count() or 1) // 2)
    assert r.stdout.split("\n")[0] == f"{[per_worker] * 2} True", r.stdout + r.stderr[-3000:]


#: what a shell reports as 130 / 143: the command's own exit status, or its end by SIGINT / SIGTERM (Python
#: ends that way when a second signal of the same interruption arrives while the interpreter exits)
_SHELL_STATUS = {130: (130, -signal.SIGINT), 143: (143, -signal.SIGTERM)}


def _interrupt_when(cmd: list[str], ready, sig=signal.SIGINT, timeout: float = 120):
    """Start ``cmd`` in a process group of its own, send ``sig`` to the whole group (as a terminal's Ctrl-C
    does) once ``ready()`` is true, and return the finished process and its stderr."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    t0 = time.perf_counter()
    while not ready() and p.poll() is None and time.perf_counter() - t0 < timeout:
        time.sleep(0.02)
    assert p.poll() is None, "the command ended before it could be interrupted"
    os.killpg(p.pid, sig)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, err


def test_a_signal_cutting_an_init_short_leaves_no_finalizer_traceback():
    """A Ctrl-C landing inside an object's ``__init__`` (a Dask Future before its ``_cleared``: CI saw ``Exception
    ignored in: <function Future.__del__ ...>`` and a traceback after ``breadth: error: interrupted``) leaves an
    object whose ``__del__`` fails as the exception's frames go: the command prints its one line, nothing more."""
    code = ("import sys\n"
            "from breadth.pipeline.cli.cli_errors import report_failures\n"
            "class HalfBuilt:\n"
            "    def __init__(self):\n"
            "        raise KeyboardInterrupt  # the signal, before the attribute that __del__ reads is set\n"
            "    def __del__(self):\n"
            "        self.cleared\n"
            "sys.exit(report_failures(HalfBuilt))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 130 and p.stderr == "breadth: error: interrupted\n", p.stderr


def test_ctrl_c_during_out_of_core_preparation_leaves_no_spill_files(tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir()
    from breadth.pipeline.shuffle.memory_plan import plan_memory

    # --spill-dir only says where the disk tier writes; a limit at the graph's minimum is what needs it
    plan = plan_memory(10**15, 1 << 17, 16 << 17, 1, os.cpu_count() or 1, search=True)
    limit = plan_memory(plan.minimum, 1 << 17, 16 << 17, 1, os.cpu_count() or 1, search=True)
    assert limit.tier == "disk"
    cmd = [*CLI, "bench", "--scale", "17", "--roots", "2", "--spill-dir", str(spill),
           "--memory-limit", str(plan.minimum)]
    rc, err = _interrupt_when(cmd, lambda: any("owner-" in d for d, _, _ in os.walk(spill)))
    assert rc in _SHELL_STATUS[130] and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == "breadth: error: interrupted"
    assert list(os.walk(spill)) == [(str(spill), [], [])]


@pytest.mark.parametrize("sig,status,word", [(signal.SIGINT, 130, "interrupted"),
                                             (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_interrupted_generate_leaves_a_store_that_the_same_command_finishes(tmp_path, sig, status, word):
    out = tmp_path / "g.store"
    cmd = [*CLI, "generate", "--scale", "16", "--workers", "2", "--out", str(out)]
    rc, err = _interrupt_when(cmd, lambda: (out / "progress.json").exists(), sig=sig)
    assert rc in _SHELL_STATUS[status] and "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == f"breadth: error: {word}; run the same command again to finish the store"
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _run("bench", out, "--roots", "4")
    assert r.returncode == 0 and "bfs  harmonic_mean_TEPS:" in r.stdout, r.stderr[-3000:]


def test_a_killed_worker_is_one_line_naming_the_rank(tmp_path):
    psutil = pytest.importorskip("psutil")
    # scale 18: 64 searches with validation take seconds, so the kill lands inside them (at scale 15 the
    # searches ended within the 0.5 s wait on a fast machine and the run exited 0)
    p = subprocess.Popen([*CLI, "bench", "--scale", "18", "--workers", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    first = p.stderr.readline()  # "ShardedGraph(...); construction ... s": the searches start now
    assert "construction" in first, first
    time.sleep(0.2)
    workers = [c for c in psutil.Process(p.pid).children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]
    assert len(workers) == 2
    workers[-1].kill()
    t0 = time.perf_counter()
    _, err = p.communicate(timeout=300)
    assert time.perf_counter() - t0 < 120
    assert p.returncode == 1 and "Traceback" not in err, err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breadth: error: BFS rank "), err[-3000:]
    assert f"process {workers[-1].pid} killed by signal 9 (SIGKILL)" in lines[0], lines[0]


def test_shared_data_ingest_through_the_cli(tmp_path):
    src = data_file("Wiki-Vote.txt")
    r = _run("ingest", src, "--directed", "--out", tmp_path / "wv.store")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "7,115 vertices, 103,689 input edges" in r.stdout


def test_protocol_ucx_without_the_extra_is_a_usage_error(tmp_path):
    """Without the ``ucx`` extra (simulated by a ``ucxx`` that cannot be imported), ``--protocol ucx`` is
    refused before any work, with the install command."""
    (tmp_path / "ucxx.py").write_text("raise ImportError(\"No module named 'ucxx'\")\n")
    r = _run("bench", "--scale", "8", "--protocol", "ucx", env={"PYTHONPATH": str(tmp_path)})
    _one_line(r, 2, "--protocol ucx", "pip install 'breadth[ucx]'")


def test_device_memory_limit_on_cpu_workers_or_an_existing_cluster_is_a_usage_error():
    _one_line(_run("bench", "--scale", "8", "--device-memory-limit", "8GB"), 2, "--device-memory-limit",
              "--device gpu")
    _one_line(_run("bench", "--scale", "8", "--device-memory-limit", "lots"), 2, "--device-memory-limit",
              "'lots'")
    _one_line(_run("generate", "--scale", "8", "--out", "x.store", "--device-memory-limit", "8GB"), 2,
              "--device-memory-limit", "--device gpu")


def test_protocol_nccl_on_cpu_ranks_is_a_usage_error():
    r = _run("bench", "--scale", "8", "--protocol", "nccl")
    _one_line(r, 2, "--protocol nccl", "--device gpu")


def test_protocol_auto_picks_per_backend():
    from breadth.bfs.engine.session import ranks_share_a_gpu, resolve_protocol
    from breadth.bfs.transport.registry import ucx_available

    assert resolve_protocol("auto", "cpu", 2) == "tcp"
    assert resolve_protocol("auto", "cpu", 1) == resolve_protocol("auto", "gpu", 1) == "self"
    assert resolve_protocol("ucx", "gpu", 2) == "ucx"
    # two GPU ranks on one device: NCCL refuses them, UCX (else TCP) carries their rounds
    assert resolve_protocol("auto", "gpu", 2, shared_gpu=True) == ("ucx" if ucx_available() else "tcp")
    assert ranks_share_a_gpu(None, ["tcp://w:1", "tcp://w:1"])  # two ranks on one worker: no need to ask
    with pytest.raises(ValueError, match="nccl"):
        resolve_protocol("nccl", "cpu", 2)
    with pytest.raises(ValueError, match="unknown protocol"):
        resolve_protocol("mpi", "cpu", 2)
