"""The Graph500 BFS benchmark driver on a prepared graph: roots, timed searches, validation, report.

Each search is timed alone, from just before the root is visited to the parent array written, as the
maximum over ranks between two barriers; an untimed warm-up search precedes them.  The edge count of a
search (``nedge``) is the number of input edge tuples inside the root's component, self-loops and
duplicates included: ``sum(tuple_degree[reached]) / 2 + sum(self_loops[reached])``.  For directed graphs
(not a Graph500 case) it is the number of input tuples whose tail the search reached -- every tuple it
could traverse, each counted once -- ``sum(out_tuple_degree[reached]) + sum(self_loops[reached])``; tuples
pointing into the reached set from outside are not counted.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numba
import numpy as np

from ..engine.batch_engine import BatchEngine
from ..engine.batch_search import batches
from ..engine.session import run_session, session_protocol
from ..search_config import SearchConfig
from .roots import choose_roots
from .statistics import report_lines, statistics
from .validate import RULES, validate_rank

PROGRESS_TOPIC = "breadth-progress"


@numba.njit(parallel=True, nogil=True, cache=True)
def _reached_sums(parent, tuple_degree, self_loops):
    # one pass, no mask or gathered copies: between two timed searches, what this touches is all it evicts
    t = 0
    loops = 0
    reached = 0
    for i in numba.prange(parent.size):
        if parent[i] >= 0:
            t += tuple_degree[i]
            loops += self_loops[i]
            reached += 1
    return t, loops, reached


def _search_edge_count(engine) -> tuple[int, int]:
    s, comm = engine.shard, engine.comm
    if engine.b.name == "cpu":
        sums = np.array(_reached_sums(engine.parent, s.tuple_degree, s.self_loops), np.int64)
    else:
        reached = engine.parent >= 0
        sums = np.array([int(s.tuple_degree[reached].sum()), int(s.self_loops[reached].sum()),
                         int(reached.sum())], np.int64)
    sums = comm.allreduce(sums)
    if s.directed:  # tuple_degree holds out-tuples (see the module docstring)
        return int(sums[0] + sums[1]), int(sums[2])
    return int(sums[0] // 2 + sums[1]), int(sums[2])


def _graph500_rank(engine, setup_s, roots, validate, topic):
    comm = engine.comm
    engine.search(int(roots[0]))  # warm-up: kernels compiled, pages touched
    rows = []
    for i, root in enumerate(roots):
        comm.barrier()
        t0 = time.perf_counter()
        records = engine.search(int(root))
        t = time.perf_counter() - t0
        t = float(comm.allreduce(np.array([t]), "max")[0])
        nedge, reached = _search_edge_count(engine)
        # every rank's payload bytes per level (untimed): the machine-independent measure of a partitioning
        level_bytes = comm.allreduce(np.array([r.bytes_sent for r in records], np.int64)) if records else []
        tv = time.perf_counter()
        violations = validate_rank(engine, int(root)) if validate else None
        tv = time.perf_counter() - tv
        if comm.rank == 0:
            rows.append({"root": int(root), "time": t, "nedge": nedge, "reached": reached,
                         "depth": len(records), "validate_time": tv, "violations": violations,
                         "bytes_sent": int(np.sum(level_bytes)),
                         "levels": [dict(r.as_dict(), bytes_all_ranks=int(b)) for r, b in zip(records, level_bytes)]})
            if topic:
                from distributed import get_worker

                get_worker().log_event(topic, {"done": i + 1, "total": len(roots)})
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows}


def _search_view(engine: BatchEngine, i: int) -> SimpleNamespace:
    """Search ``i`` of the engine's last batch as the single-search engine's fields that the edge count
    and the validation read (``shard``, ``comm``, ``parent``, ``level``, ``b``): the engine's own arrays on
    its device, checked there (a GPU rank validates on the GPU, as its single searches do)."""
    parent, level = engine.device_result(i)
    return SimpleNamespace(shard=engine.shard, comm=engine.comm, parent=parent, level=level, b=engine.k.validation)


def _graph500_batch_rank(engine, setup_s, roots, validate, topic):
    """The Graph500 loop over batches of up to 64 roots (MS-BFS): each batch timed as the pass plus the
    derivation of every root's parents and levels (:meth:`BatchEngine.device_result`, group by group), the
    time shared equally by its roots; every root's edge count and validation as a single search's."""
    comm = engine.comm
    engine.search(roots[:64])  # warm-up: kernels compiled, pages touched
    engine.device_result(0)
    rows = []
    done = 0
    for b, sl in enumerate(batches(len(roots))):
        comm.barrier()
        t0 = time.perf_counter()
        records = engine.search(roots[sl])
        t = time.perf_counter() - t0
        t = float(comm.allreduce(np.array([t]), "max")[0])
        k = sl.stop - sl.start
        views, derive_s = [], 0.0
        for i in range(k):
            # a group's results are derived when its first search is asked for; only those calls take time
            comm.barrier()
            t0 = time.perf_counter()
            view = _search_view(engine, i)
            engine.k.synchronize()
            derive_s += float(comm.allreduce(np.array([time.perf_counter() - t0]), "max")[0])
            nedge, reached = _search_edge_count(view)
            depth = int(comm.allreduce(np.array([int(view.level.max()) if view.level.size else -1]), "max")[0])
            tv = time.perf_counter()
            violations = validate_rank(view, int(roots[sl.start + i])) if validate else None
            tv = time.perf_counter() - tv
            views.append({"root": int(roots[sl.start + i]), "nedge": nedge, "reached": reached, "depth": depth + 1,
                          "validate_time": tv, "violations": violations})
        if comm.rank == 0:
            for v in views:
                rows.append({**v, "time": (t + derive_s) / k, "batch": b, "batch_size": k, "batch_time": t + derive_s,
                             "pass_time": t, "results_time": derive_s, "levels": [r.as_dict() for r in records]})
        done += k
        if topic and comm.rank == 0:
            from distributed import get_worker

            get_worker().log_event(topic, {"done": done, "total": len(roots)})
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows}


@dataclass
class Graph500Result:
    """Per-root figures and the benchmark statistics; :meth:`report` prints the reference format."""

    header: dict
    rows: list[dict]
    setup_s: list[float] = field(default_factory=list)

    @property
    def times(self) -> np.ndarray:
        return np.array([r["time"] for r in self.rows])

    @property
    def nedges(self) -> np.ndarray:
        return np.array([r["nedge"] for r in self.rows], np.float64)

    @property
    def teps(self) -> np.ndarray:
        return self.nedges / self.times

    @property
    def harmonic_mean_teps(self) -> float:
        return statistics(self.teps, rate=True)["harmonic_mean"]

    @property
    def valid(self) -> bool:
        return all(r["violations"] is None or not any(r["violations"].values()) for r in self.rows)

    def failures(self) -> list[tuple[int, dict]]:
        return [(r["root"], r["violations"]) for r in self.rows
                if r["violations"] is not None and any(r["violations"].values())]

    def report(self) -> str:
        vt = [r["validate_time"] for r in self.rows if r["violations"] is not None]
        return "\n".join(report_lines(self.header, self.times, self.nedges, vt))

    def to_dict(self) -> dict:
        return {
            "header": self.header,
            "statistics": {"time": statistics(self.times), "nedge": statistics(self.nedges),
                           "teps": statistics(self.teps, rate=True),
                           **({"bytes_sent": statistics(np.array([r["bytes_sent"] for r in self.rows], np.float64))}
                              if self.rows and "bytes_sent" in self.rows[0] else {})},
            "valid": self.valid, "rules": list(RULES), "setup_s": self.setup_s, "roots": self.rows,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "processor": platform.processor() or platform.machine()},
        }

    def write_json(self, path: str) -> None:
        """Write :meth:`to_dict` as JSON through a temporary name and a rename."""
        import os

        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        os.replace(tmp, path)


def graph500(graph, nroots: int = 64, seed: int = 2, validate: bool = True, progress: bool = False,
             protocol: str = "auto", timeout: float = 120.0, alpha: float | None = None, beta: float | None = None,
             header: dict | None = None, batch: bool = False, config: SearchConfig | None = None) -> Graph500Result:
    """Run the Graph500 BFS kernel: ``nroots`` validated searches from random roots of degree >= 1.

    ``config``: the search's tunables (:class:`~breadth.bfs.search_config.SearchConfig`; default: its
    defaults with the environment's ``BREADTH_*`` overrides), recorded in the report's header
    (``search_config``).  ``alpha``/``beta`` override its direction rule's thresholds (bottom-up once the
    frontier's edges exceed the unexplored edges / alpha; top-down again below n / beta vertices);
    ``alpha`` None is the backend's default (:meth:`breadth.bfs.engine.engine.Engine.default_alpha`: 15 on CPUs,
    50 on one or two GPUs, scaled by (ranks / 2)^2 beyond).

    ``batch``: search the roots 64 at a time in one pass each (MS-BFS, :mod:`breadth.bfs.engine.batch_engine`);
    each root's ``time`` is then its batch's time -- the pass plus deriving every root's parents and
    levels -- divided by the batch's size (the rows also carry ``batch``, ``batch_size``, ``batch_time``,
    ``pass_time`` and ``results_time``), so TEPS are the batch's edges per second shared out, not a
    single search's.

    >>> from breadth.bfs import graph500
    >>> res = graph500(g, nroots=64)               # doctest: +SKIP
    >>> print(res.report())                        # doctest: +SKIP
    >>> res.harmonic_mean_teps                     # doctest: +SKIP
    """
    from ..worker_loss import watch_workers

    config = (config if config is not None else SearchConfig.from_env()).replace(alpha=alpha, beta=beta)
    with watch_workers(graph.client, "choice of roots", graph.workers):  # degrees asked of the shards' workers
        roots = choose_roots(graph, nroots, seed)
    topic = PROGRESS_TOPIC if progress else None
    bar = _ProgressBar(len(roots), "searches") if progress else None
    if bar:
        graph.client.subscribe_topic(PROGRESS_TOPIC, bar.event)
    try:
        out = run_session(graph, _graph500_batch_rank if batch else _graph500_rank, roots, validate, topic,
                          protocol=protocol, timeout=timeout, config=config,
                          engine_class=BatchEngine if batch else None)
    finally:
        if bar:
            graph.client.unsubscribe_topic(PROGRESS_TOPIC)
            bar.close()
    src = graph.source
    hdr = {}
    if src.get("kind") == "kronecker":
        hdr.update({"SCALE": src["scale"], "edgefactor": src["edgefactor"]})
    else:
        hdr.update({"graph": src.get("path", src.get("kind", "graph")), "num_vertices": graph.num_vertices})
    hdr["NBFS"] = len(roots)
    if batch:
        hdr["batch"] = ("MS-BFS, up to 64 roots per pass; time per root = (pass + every root's parent and "
                        "level arrays) / batch size")
    hdr.update(header or {})
    hdr["num_ranks"] = graph.nparts
    hdr["partition"] = str(graph.partitioning)
    hdr["protocol"] = session_protocol(graph, protocol)
    hdr["search_config"] = json.dumps(config.as_dict(), separators=(",", ":"))
    hdr["construction_time"] = f"{graph.construction_time:.17e}"
    return Graph500Result(hdr, out[0]["rows"], [o["setup_s"] for o in out])


class _ProgressBar:
    """A one-line text bar on stderr fed by the ranks' progress events."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.t0 = total, label, time.perf_counter()
        self.event((0, {"done": 0}))

    def event(self, ev) -> None:
        done = ev[1]["done"] if isinstance(ev, tuple) else ev["done"]
        w = 30
        fill = w * done // max(self.total, 1)
        sys.stderr.write(f"\r[{'#' * fill}{' ' * (w - fill)}] {done}/{self.total} {self.label} "
                         f"| {time.perf_counter() - self.t0:.1f}s")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\n")
