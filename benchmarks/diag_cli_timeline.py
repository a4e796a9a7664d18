"""Where ``breadth ingest`` as typed spends its wall time: the CLI run in this process with its stages timed
from the interpreter's start (imports, the local cluster's start, read + relabel, prepare, the store's
write, the cluster's close) and the workers' own clocks (when each worker process began, when its first
task ran).

    python benchmarks/diag_cli_timeline.py ingest /tmp/wc24 --workers 2 --out /tmp/store [--json out.json]

``--numba-first-calls`` also times each Numba function's first dispatch in each worker (a cache load
or a compilation; Numba is then imported as the workers register).  The arguments are otherwise
``breadth``'s own; the timeline goes to stderr (and to ``--json``), seconds since this
process started (``/proc/self/stat``'s start time, so the interpreter's own start counts too).
"""

from __future__ import annotations

import json
import os
import sys
import time


def _process_start_epoch(pid: int | str = "self") -> float:
    """Wall-clock time at which process ``pid`` started (from /proc; clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - up + ticks / os.sysconf("SC_CLK_TCK")


T0 = _process_start_epoch()
MARKS: list[tuple[str, float, float]] = [("main() entered", time.time() - T0, time.process_time())]


def mark(what: str) -> None:
    """A milestone: seconds since the process started, and this process's CPU seconds so far (the client,
    and the scheduler of a local cluster, which runs in it)."""
    MARKS.append((what, time.time() - T0, time.process_time()))


def _wrap(module, name: str, label: str) -> None:
    fn = getattr(module, name)

    def timed(*a, **k):
        mark(f"{label} begins")
        try:
            return fn(*a, **k)
        finally:
            mark(f"{label} ends")

    setattr(module, name, timed)


def _worker_clock() -> dict:
    import os as _os

    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"pid": _os.getpid(), "start_epoch": _process_start_epoch(), "cpu_s": ru.ru_utime + ru.ru_stime}


def _first_last(records: list[dict]) -> list[dict]:
    """Per task name (and worker): when its first computation began and its last ended, and the seconds
    computed, as timeline rows."""
    from dask.utils import key_split

    span: dict = {}
    for r in records:
        for s in r["startstops"]:
            if s["action"] != "compute":
                continue
            k = (key_split(r["key"]), r["worker"].rsplit(":", 1)[-1])
            a, b, c = span.get(k, (1e18, 0.0, 0.0))
            span[k] = (min(a, s["start"]), max(b, s["stop"]), c + s["stop"] - s["start"])
    return [{"what": f"  task {name} @{w}: first begins (to {b - T0:.3f}, {c:.3f} s computed)", "s": round(a - T0, 3)}
            for (name, w), (a, b, c) in span.items()]


class NumbaFirstCalls:
    """A worker plugin (diagnostic): seconds each Numba dispatcher spends in its first dispatch (a cache
    load, or a compilation) in this worker, collected by :func:`_numba_first_calls`."""

    name = "diag-numba-first-calls"

    def setup(self, worker=None) -> None:
        import time as _time

        from numba.core.dispatcher import Dispatcher

        spent: dict = {}
        orig = Dispatcher._compile_for_args

        def timed(self, *a, **k):
            t = _time.perf_counter()
            try:
                return orig(self, *a, **k)
            finally:
                key = getattr(self.py_func, "__qualname__", "?")
                spent[key] = spent.get(key, 0.0) + _time.perf_counter() - t

        Dispatcher._compile_for_args = timed
        worker._diag_numba = spent


def _numba_first_calls(dask_worker=None) -> dict:
    return dict(sorted(getattr(dask_worker, "_diag_numba", {}).items(), key=lambda kv: -kv[1]))


def main() -> None:
    argv = sys.argv[1:]
    out_json = None
    numba_plugin = "--numba-first-calls" in argv
    if numba_plugin:
        argv.remove("--numba-first-calls")
    if "--json" in argv and argv[0] == "ingest":
        i = argv.index("--json")
        out_json = argv[i + 1]
        del argv[i:i + 2]
    import importlib

    from breadth.pipeline import cli, cli_cluster, cli_store
    from breadth.pipeline.command_imports import skip_unused

    skip_unused()  # as the console script does (cli.console_main)

    prep_mod = importlib.import_module("breadth.pipeline.prepare")  # the module (the package exports the function)

    mark("breadth.pipeline.cli imported")
    import breadth.io.shard_store as store
    import breadth.pipeline as pl
    from breadth.pipeline import cluster

    _wrap(cluster, "connect", "cluster start (connect)")
    _wrap(pl, "read_edges", "read_edges")
    _wrap(prep_mod, "prepare", "prepare")
    _wrap(store, "write_store", "write_store")
    workers: list[dict] = []
    numba_calls: dict = {}
    tasks: list[dict] = []
    orig_cc = cli_cluster.cluster_client

    import contextlib

    @contextlib.contextmanager
    def cc(*a, **k):
        mark("cluster_client entered")
        with orig_cc(*a, **k) as client:
            mark("cluster_client yields")
            if numba_plugin:
                from distributed import WorkerPlugin

                class _P(NumbaFirstCalls, WorkerPlugin):
                    pass

                client.register_plugin(_P())
                mark("numba diagnostic plugin registered (imports Numba in the workers)")
            from distributed import get_task_stream

            try:
                with get_task_stream(client) as ts:
                    yield client
            finally:
                workers.extend(client.run(_worker_clock).values())
                if numba_plugin:
                    numba_calls.update(client.run(_numba_first_calls))
                tasks.extend(_first_last(ts.data))
                mark("closing the cluster")
        mark("cluster closed")

    cli_store.cluster_client = cc
    rc = cli.main(argv)
    mark("cli.main returned")
    rows = [{"what": f"{w} (client CPU {c:.2f} s)", "s": round(s, 3)} for w, s, c in MARKS]
    for w in workers:
        rows.append({"what": f"worker {w['pid']} process started (CPU {w['cpu_s']:.2f} s by the end)",
                     "s": round(w["start_epoch"] - T0, 3)})
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    rows.append({"what": f"client CPU so far {ru.ru_utime + ru.ru_stime:.2f} s", "s": MARKS[-1][1]})
    rows += tasks
    rows.sort(key=lambda r: r["s"])
    for r in rows:
        print(f"{r['s']:8.3f}  {r['what']}", file=sys.stderr)
    for w, calls in numba_calls.items():
        print(f"worker {w}: Numba first dispatches {sum(calls.values()):.3f} s: "
              + ", ".join(f"{k} {v:.3f}" for k, v in list(calls.items())[:12]), file=sys.stderr)
    if out_json:
        with open(out_json, "w") as f:
            json.dump({"argv": argv, "timeline": rows, "numba_first_calls": numba_calls}, f, indent=1)
    sys.exit(rc)


if __name__ == "__main__":
    main()
