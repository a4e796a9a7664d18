"""What every benchmark shares: the record a result starts from (machine, versions, parameters, start time),
the one way results are written (:func:`write_json`: a temporary file, then a rename), summaries (median and
range, harmonic mean), fresh-process runs of commands with their wall time, the JSON each wrote and the
peak memory of their process trees (:func:`run_fresh`), and a short table (:func:`print_table`).

Benchmarks run from the repository root as ``python -m benchmarks.bench_x ...`` and write JSON only where
``--json PATH`` says.  Nothing here imports CuPy: a GPU is described by ``nvidia-smi``, or by CuPy only
where the benchmark has imported it already.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

#: the repository holding these benchmarks
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: an argument of a command given to :func:`run_command` / :func:`run_fresh` that stands for the path of a
#: JSON file the command writes: replaced by a fresh temporary path for each run, read back after it
JSON_PATH = "{json}"

#: modules whose versions every result records when they are installed (never imported to find out)
MODULES = ("numpy", "dask", "distributed", "numba", "pyarrow", "pandas", "scipy", "psutil",
           "cupy", "cudf", "ucxx", "distributed_ucxx", "dask_cuda", "rmm")


# ---------------------------------------------------------------------------------------- what a result records

def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpus() -> list[dict]:
    """The GPUs of this machine: name and memory of each.

    From ``nvidia-smi`` where it is on ``PATH``; else from CuPy when the benchmark has imported it (CuPy is
    never imported here: a client process that does not use the GPU stays off it).

    Returns
    -------
    list of dict
        ``{"name": str, "memory_bytes": int}`` per GPU, in device order; empty without GPUs.
    """
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20).stdout
            rows = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]
            return [{"name": r[0], "memory_bytes": int(float(r[1])) << 20, "driver": r[2]} for r in rows if len(r) == 3]
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
    cp = sys.modules.get("cupy")
    if cp is not None:
        try:
            out = []
            for i in range(cp.cuda.runtime.getDeviceCount()):
                p = cp.cuda.runtime.getDeviceProperties(i)
                out.append({"name": p["name"].decode(), "memory_bytes": int(p["totalGlobalMem"])})
            return out
        except Exception:  # noqa: BLE001 - no usable device: none recorded
            pass
    return []


def machine() -> dict:
    """Where a benchmark runs.

    Returns
    -------
    dict
        ``host``, ``platform``, ``cpu_model``, ``cpus`` (the machine's), ``cpus_usable`` (this process's
        affinity), ``memory_bytes``, ``loadavg_start`` (1, 5, 15 minutes) and ``gpus`` (:func:`gpus`).
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {"host": platform.node(), "platform": platform.platform(), "cpu_model": _cpu_model(),
            "cpus": os.cpu_count(), "cpus_usable": usable, "memory_bytes": _memory_bytes(),
            "loadavg_start": list(os.getloadavg()), "gpus": gpus()}


def _git_commit() -> dict | None:
    """The commit of the checkout holding these benchmarks, and whether tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=20)
        if head.returncode:
            return None
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=20).stdout.strip()
        return {"commit": head.stdout.strip(), "modified_files": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        return None


def versions() -> dict:
    """Versions of Python, breadth (its package and the git commit of this checkout) and the stack.

    Each module of :data:`MODULES` is looked up in the installed distributions' metadata, not imported: a
    GPU library's version is recorded on a machine without a GPU, and costs no import.

    Returns
    -------
    dict
        ``python``, ``breadth``, ``breadth_git`` (``{"commit", "modified_files"}``, None outside a
        checkout) and one entry per installed module of :data:`MODULES`.
    """
    from importlib import metadata

    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        out["breadth"] = metadata.version("breadth")
    except metadata.PackageNotFoundError:
        out["breadth"] = None
    out["breadth_git"] = _git_commit()
    dists = metadata.packages_distributions()
    for mod in MODULES:
        for dist in dists.get(mod, ()):
            try:
                out[mod] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def parameters(args: argparse.Namespace | dict | None) -> dict:
    """A benchmark's parameters as JSON values: its argparse namespace (or a dict) with every value that JSON
    cannot hold given as its ``str``."""
    d = vars(args) if isinstance(args, argparse.Namespace) else dict(args or {})

    def plain(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        return str(v)

    return {k: plain(v) for k, v in d.items()}


def new_record(benchmark: str, args: argparse.Namespace | dict | None = None) -> dict:
    """The record a benchmark's JSON starts from.

    Parameters
    ----------
    benchmark : str
        The benchmark's name (its module, e.g. ``"bench_graph500"``).
    args : argparse.Namespace or dict, optional
        Its parameters.

    Returns
    -------
    dict
        ``benchmark``, ``started`` (UTC, ISO 8601), ``machine`` (:func:`machine`), ``versions``
        (:func:`versions`) and ``parameters`` (:func:`parameters`); the benchmark adds its results.
    """
    return {"benchmark": benchmark, "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "versions": versions(), "parameters": parameters(args)}


def write_json(path: str, payload: dict, default=None) -> None:
    """Write ``payload`` as indented JSON at ``path``, through a temporary file in the same folder and a rename.

    A run killed while writing leaves neither a half-written file nor a replaced good one.  Folders are
    created as needed.

    Parameters
    ----------
    path : str
        Where the JSON goes.
    payload : dict
        The record.
    default : callable, optional
        As in :func:`json.dump` (e.g. ``float`` for NumPy scalars).
    """
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=1, default=default)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json PATH``: where the benchmark writes its results (nothing is written without it)."""
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="write the results here as JSON (temporary file + rename); without it only the "
                             "table is printed")


# ---------------------------------------------------------------------------------------- summaries

def median_range(xs: Iterable[float]) -> dict:
    """``{"median", "min", "max", "n"}`` of the values ``xs`` (each None when there are none)."""
    xs = [float(x) for x in xs]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def harmonic_mean(xs: Iterable[float]) -> float:
    """The harmonic mean of positive rates ``xs`` (Graph500's mean of TEPS)."""
    xs = [float(x) for x in xs]
    return len(xs) / sum(1.0 / x for x in xs)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print ``rows`` under ``headers``, columns aligned (text left, numbers right); floats with 3 decimals."""
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))

    body = [[cell(v) for v in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    numeric = [all(_is_number(r[i]) for r in body) and bool(body) for i in range(len(headers))]
    fmt = lambda cells: "  ".join(c.rjust(w) if n else c.ljust(w)  # noqa: E731
                                  for c, w, n in zip(cells, widths, numeric)).rstrip()
    print(fmt(list(headers)))
    for r in body:
        print(fmt(r))
    sys.stdout.flush()


def _is_number(s: str) -> bool:
    try:
        float(s.rstrip("x%"))
        return True
    except ValueError:
        return s == ""


# ---------------------------------------------------------------------------------------- commands in fresh processes

def breadth_command() -> str:
    """The ``breadth`` console script of this interpreter's environment (an unactivated venv's too)."""
    here = os.path.join(os.path.dirname(sys.executable), "breadth")
    return here if os.path.exists(here) else "breadth"


def module_command(module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS`` with this interpreter (a benchmark running one of its own measurements in a
    fresh process; the repository root, the working directory, stays importable)."""
    return [sys.executable, "-m", module, *map(str, args)]


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _status_rss(pid: int) -> tuple[int, int, int] | None:
    """``(VmRSS, RssAnon, RssFile)`` bytes of ``pid``, or None once it has gone."""
    vals = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    vals[k] = int(v.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return (vals["VmRSS"], vals["RssAnon"], vals["RssFile"]) if len(vals) == 3 else None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:300]
    except OSError:
        return ""


def dir_bytes(path: str | None) -> int:
    """Bytes of the files under ``path`` now (0 when it is None or absent; files vanishing meanwhile skipped)."""
    total = 0
    for d, _, files in os.walk(path or "/nonexistent"):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


class TreeSampler(threading.Thread):
    """The resident memory of a process and all its descendants, sampled from ``/proc`` (Linux) in a thread.

    Every ``period`` seconds: the tree's summed RSS (its peak is :attr:`peak`, a point a second goes to
    :attr:`timeline`), and each process's peaks of RSS, anonymous memory (``RssAnon``: arrays it allocated)
    and mapped file pages (``RssFile``: pages of a memory-mapped file once read); with ``spill_dir``, the
    peak bytes under it (every ``dir_period`` seconds).  Use as a context manager, or :meth:`start` and
    :meth:`stop`.

    Parameters
    ----------
    pid : int
        The tree's root (``os.getpid()``: this process and its children).
    period : float
        Seconds between samples.
    spill_dir : str, optional
        A folder whose size is sampled too.
    dir_period : float
        Seconds between samples of ``spill_dir``.
    """

    def __init__(self, pid: int, period: float = 0.05, spill_dir: str | None = None, dir_period: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.period, self.spill_dir, self.dir_period = pid, period, spill_dir, dir_period
        self.peak = self.spill_peak = 0
        self.each: dict[int, dict] = {}
        self.timeline: list[tuple[float, int]] = []
        self._done = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        next_point = next_dir = 0.0
        while not self._done.is_set():
            kids, todo, total = _children(), [self.pid], 0
            now = time.monotonic() - self._t0
            while todo:
                p = todo.pop()
                todo += kids.get(p, [])
                r = _status_rss(p)
                if r is None:
                    continue
                total += r[0]
                e = self.each.get(p)
                if e is None:
                    e = self.each[p] = {"pid": p, "rss_peak_bytes": 0, "anon_peak_bytes": 0, "file_peak_bytes": 0,
                                        "first_s": round(now, 2), "cmdline": _cmdline(p)}
                e["rss_peak_bytes"] = max(e["rss_peak_bytes"], r[0])
                e["anon_peak_bytes"] = max(e["anon_peak_bytes"], r[1])
                e["file_peak_bytes"] = max(e["file_peak_bytes"], r[2])
                e["last_s"] = round(now, 2)
            self.peak = max(self.peak, total)
            if now >= next_point:
                self.timeline.append((round(now, 1), total))
                next_point = now + 1.0
            if self.spill_dir and now >= next_dir:
                self.spill_peak = max(self.spill_peak, dir_bytes(self.spill_dir))
                next_dir = now + self.dir_period
            self._done.wait(self.period)

    def stop(self) -> int:
        """Stop sampling; the peak summed RSS (bytes)."""
        self._done.set()
        self.join()
        return self.peak

    def processes(self, top: int | None = None) -> list[dict]:
        """Each sampled process's peaks, the largest RSS first (the first ``top`` of them)."""
        rows = sorted(self.each.values(), key=lambda e: -e["rss_peak_bytes"])
        return rows[:top] if top else rows

    def __enter__(self) -> "TreeSampler":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class GpuMemorySampler:
    """The GPUs' peak memory in use (bytes, every process on them) while a block runs, from ``nvidia-smi``
    sampled every 50 ms; :attr:`peak_bytes` is the largest over the GPUs (None without ``nvidia-smi``)."""

    def __enter__(self) -> "GpuMemorySampler":
        smi = shutil.which("nvidia-smi")
        self.peak_bytes = None
        self.proc = None if smi is None else subprocess.Popen(
            [smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "50"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        out, _ = self.proc.communicate()
        mib = [int(x) for x in out.split() if x.strip().isdigit()]
        self.peak_bytes = max(mib, default=0) << 20


def run_command(cmd: Sequence[str], *, env: dict | None = None, timeout: float | None = None,
                memory: bool = False, spill_dir: str | None = None, gpu_memory: bool = False,
                check: bool = False) -> dict:
    """Run ``cmd`` once as a fresh process: its wall time, exit status, output's tails and the JSON it wrote.

    Parameters
    ----------
    cmd : sequence of str
        The command; an argument equal to :data:`JSON_PATH` is replaced by a fresh temporary path, whose
        JSON (when the command wrote one) is returned as ``json``.
    env : dict, optional
        Variables set for the command on top of this process's environment.
    timeout : float, optional
        Seconds before the command is killed (then ``rc`` is None and ``timed_out`` True).
    memory : bool
        Sample the RSS of its process tree (:class:`TreeSampler`): ``tree_rss_peak_bytes``, ``processes``
        (every process's peaks, the largest first), ``tree_rss_timeline`` (a point a second).
    spill_dir : str, optional
        With ``memory``: ``spill_dir_peak_bytes``, the peak bytes under this folder.
    gpu_memory : bool
        ``gpu_memory_peak_bytes``: the GPUs' peak memory in use meanwhile (:class:`GpuMemorySampler`).
    check : bool
        Raise when the command fails instead of returning a record with ``failed`` True.

    Returns
    -------
    dict
        ``command`` (as given), ``rc``, ``failed``, ``wall_s``, ``json`` (or None), ``stdout_tail`` and
        ``stderr_tail`` (their last 2,000 characters), and the samplers' figures asked for.

    Raises
    ------
    RuntimeError
        With ``check``, when the command exits with a status other than 0 or times out.
    """
    tmp = tempfile.mkdtemp(prefix="breadth-bench-")
    js = os.path.join(tmp, "out.json")
    argv = [js if a == JSON_PATH else str(a) for a in cmd]
    rec: dict = {"command": " ".join(map(str, cmd))}
    try:
        gpu = GpuMemorySampler() if gpu_memory else None
        if gpu is not None:
            gpu.__enter__()
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=None if env is None else dict(os.environ, **env))
        sampler = TreeSampler(proc.pid, spill_dir=spill_dir) if memory else None
        if sampler is not None:
            sampler.start()
        try:
            out, err = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            rc = None
        rec["wall_s"] = time.perf_counter() - t0
        if sampler is not None:
            rec["tree_rss_peak_bytes"] = sampler.stop()
            rec["processes"] = sampler.processes()
            rec["tree_rss_timeline"] = sampler.timeline
            if spill_dir:
                rec["spill_dir_peak_bytes"] = sampler.spill_peak
        if gpu is not None:
            gpu.__exit__(None, None, None)
            rec["gpu_memory_peak_bytes"] = gpu.peak_bytes
        rec.update(rc=rc, failed=rc != 0, timed_out=rc is None, stdout_tail=out[-2000:], stderr_tail=err[-2000:])
        rec["json"] = None
        if os.path.exists(js):
            with open(js) as f:
                rec["json"] = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if check and rec["failed"]:
        raise RuntimeError(f"{rec['command']} {'timed out' if rc is None else f'exited {rc}'}: "
                           f"{rec['stderr_tail'][-1500:]}")
    return rec


def run_fresh(commands: dict[str, Sequence[str]], repeat: int, *, envs: dict[str, dict] | None = None,
              progress: bool = True, **kwargs) -> dict[str, list[dict]]:
    """Run each named command ``repeat`` times, each time as a fresh process, interleaved round by round.

    Round ``i`` runs every command once, in the order given: a machine's slow and fast phases then fall on
    every command alike, so that their figures compare.

    Parameters
    ----------
    commands : dict of str to sequence of str
        Name -> command (see :func:`run_command`, :data:`JSON_PATH`).
    repeat : int
        Rounds.
    envs : dict of str to dict, optional
        Name -> variables set for that command.
    progress : bool
        Print a line on standard error after each run.
    **kwargs
        Passed to :func:`run_command` (``memory``, ``timeout``, ``check``, ...).

    Returns
    -------
    dict of str to list of dict
        Name -> one :func:`run_command` record per round.
    """
    runs: dict[str, list[dict]] = {k: [] for k in commands}
    for i in range(repeat):
        for name, cmd in commands.items():
            rec = run_command(cmd, env=(envs or {}).get(name), **kwargs)
            rec["round"] = i
            runs[name].append(rec)
            if progress:
                state = "failed" if rec["failed"] else "ok"
                print(f"  round {i} {name}: {rec['wall_s']:.2f} s {state}", file=sys.stderr, flush=True)
    return runs
