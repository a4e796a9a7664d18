"""The Graph500 BFS benchmark driver on a prepared graph: roots, timed searches, validation, report.

Each search is timed alone, from just before the root is visited to the parent array written, as the
maximum over ranks between two barriers; an untimed warm-up search precedes them.  The edge count of a
search (``nedge``) is the number of input edge tuples inside the root's component, self-loops and
duplicates included: ``sum(tuple_degree[reached]) / 2 + sum(self_loops[reached])``.  For directed graphs
(not a Graph500 case) it is the number of input tuples whose tail the search reached -- every tuple it
could traverse, each counted once -- ``sum(out_tuple_degree[reached]) + sum(self_loops[reached])``; tuples
pointing into the reached set from outside are not counted.

Roots are Graph500's: distinct vertices of degree >= 1, self-loops not counted, drawn from a seed
(:func:`~breadth.bfs.graph500.roots.choose_roots`).  On a real graph some of them lie in tiny components
(or, directed, reach almost nothing): a search of 4 edges still takes about a millisecond, so its TEPS
are hundreds of times below the others' and sink the harmonic mean (soc-Slashdot0902, directed, one CPU
rank: one such root of 64 gave a harmonic mean of 1.3e6 TEPS against a median of 6.4e8; the giant
component's 64 roots 6.1e8).  The report then says so in a ``note:`` line beside the median, and
``min_component`` keeps only roots whose search reaches a component of a given size, or the giant one:
each candidate, in the seed's order, is searched once untimed and set aside if it reaches too little.
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

from ..advice import AdvisedValueError
from ..engine.batch_engine import BatchEngine
from ..engine.batch_search import batches
from ..engine.session import protocol_choice, run_session
from ..search_config import SearchConfig
from .roots import choose_roots
from .statistics import report_lines, statistics
from .validate import RULES, validate_rank

PROGRESS_TOPIC = "breadth-progress"
#: candidate roots drawn per root asked for under ``min_component``: enough where the giant component holds
#: a sixteenth of the non-isolated vertices; screening stops as soon as enough roots pass
SCREEN_CANDIDATES = 16
#: a search is small, for the report's note, below this share of the largest search's edges
SMALL_SEARCH_SHARE = 0.01


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


def _reach_single(engine, roots) -> list[int]:
    """Vertices reached from each of ``roots``, one untimed search each (every rank gets the same counts)."""
    out = []
    for r in roots:
        engine.search(int(r))
        out.append(_search_edge_count(engine)[1])
    return out


def _reach_batch(engine, roots) -> list[int]:
    """:func:`_reach_single` for the batch engine: up to 64 roots in one pass."""
    engine.search(roots)
    return [_search_edge_count(_search_view(engine, i))[1] for i in range(len(roots))]


def _screen_roots(engine, candidates, want: int, rule, reach) -> tuple[np.ndarray, dict]:
    """The first ``want`` of ``candidates`` (in order) whose search reaches ``rule`` vertices or more, or with
    ``rule="giant"`` at least half as many as the farthest-reaching candidate searched (in an undirected graph
    with a giant component: the roots inside it).  Candidates are searched a few at a time, as many as roots
    are still missing, so that about ``want`` searches are made where most candidates pass.  Collective:
    the counts are all-reduced, so every rank takes the same roots."""
    reached: list[int] = []

    def threshold() -> int:
        return -(-max(reached) // 2) if rule == "giant" else int(rule)

    while len(reached) < len(candidates):
        passed = sum(r >= threshold() for r in reached) if reached else 0
        if reached and passed >= want:
            break
        k = max(1, min(64, want - passed))
        reached += reach(engine, candidates[len(reached):len(reached) + k])
    limit = threshold()
    keep = [i for i, r in enumerate(reached) if r >= limit][:want]
    return np.asarray(candidates)[keep], {"screened": len(reached), "threshold": limit, "largest": max(reached)}


def _graph500_rank(engine, setup_s, roots, validate, topic, want=None, rule=None):
    comm = engine.comm
    screen = None
    if rule is not None:
        roots, screen = _screen_roots(engine, roots, want, rule, _reach_single)
    if not len(roots):
        return {"rank": comm.rank, "setup_s": setup_s, "rows": [], "screen": screen}
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
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows, "screen": screen, "engine": engine.describe()}


def _search_view(engine: BatchEngine, i: int) -> SimpleNamespace:
    """Search ``i`` of the engine's last batch as the single-search engine's fields that the edge count
    and the validation read (``shard``, ``comm``, ``parent``, ``level``, ``b``): the engine's own arrays on
    its device, checked there (a GPU rank validates on the GPU, as its single searches do)."""
    parent, level = engine.device_result(i)
    return SimpleNamespace(shard=engine.shard, comm=engine.comm, parent=parent, level=level, b=engine.k.validation)


def _graph500_batch_rank(engine, setup_s, roots, validate, topic, want=None, rule=None):
    """The Graph500 loop over batches of up to 64 roots (MS-BFS): each batch timed as the pass plus the
    derivation of every root's parents and levels (:meth:`BatchEngine.device_result`, group by group), the
    time shared equally by its roots; every root's edge count and validation as a single search's."""
    comm = engine.comm
    screen = None
    if rule is not None:
        roots, screen = _screen_roots(engine, roots, want, rule, _reach_batch)
    if not len(roots):
        return {"rank": comm.rank, "setup_s": setup_s, "rows": [], "screen": screen}
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
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows, "screen": screen, "engine": engine.describe()}


@dataclass
class Graph500Result:
    """What :func:`graph500` measured: per-root figures, and the benchmark's statistics over them.

    Parameters
    ----------
    header : dict
        The report's leading ``name: value`` fields (``SCALE``, ``edgefactor``, ``NBFS``, ``num_ranks``,
        ``protocol``, ``search_config``, ``construction_time``, ...).
    rows : list of dict
        One per root, in search order: ``root`` (dense id), ``time`` (seconds), ``nedge`` (input edge
        tuples in the root's component), ``reached``, ``depth``, ``validate_time`` (seconds),
        ``violations`` (:data:`~breadth.bfs.graph500.validate.RULES` -> count, or None when not validated),
        ``bytes_sent`` and ``levels`` (per-level records); batched runs add ``batch``, ``batch_size``,
        ``batch_time``, ``pass_time`` and ``results_time``.
    setup_s : list of float
        Each rank's seconds to connect and build its engine.

    Examples
    --------
    >>> from breadth.bfs import Graph500Result
    >>> res = Graph500Result(header={"SCALE": 10, "edgefactor": 16, "NBFS": 2},
    ...                      rows=[{"root": 5, "time": 0.002, "nedge": 16000, "validate_time": 0.01,
    ...                             "violations": {"tree": 0}},
    ...                            {"root": 9, "time": 0.004, "nedge": 16000, "validate_time": 0.01,
    ...                             "violations": {"tree": 0}}])
    >>> res.teps.tolist(), round(res.harmonic_mean_teps), res.valid
    ([8000000.0, 4000000.0], 5333333, True)
    >>> print(res.report())
    SCALE: 10
    edgefactor: 16
    NBFS: 2
    bfs  min_time: 2.00000000000000004e-03
    ...
    bfs  harmonic_mean_TEPS: 5.33333333333333302e+06
    ...
    """

    header: dict
    rows: list[dict]
    setup_s: list[float] = field(default_factory=list)
    #: each rank's :meth:`~breadth.bfs.Engine.describe`: what its searches ran on
    engines: list[dict] = field(default_factory=list)

    @property
    def times(self) -> np.ndarray:
        """``(nroots,)`` float64 seconds of each search, in row order."""
        return np.array([r["time"] for r in self.rows])

    @property
    def nedges(self) -> np.ndarray:
        """``(nroots,)`` float64 edge counts of each search (Graph500's ``nedge``), in row order."""
        return np.array([r["nedge"] for r in self.rows], np.float64)

    @property
    def teps(self) -> np.ndarray:
        """``(nroots,)`` float64 traversed edges per second of each search, ``nedges / times``."""
        return self.nedges / self.times

    @property
    def harmonic_mean_teps(self) -> float:
        """The harmonic mean of :attr:`teps`: Graph500's headline figure, in edges per second."""
        return statistics(self.teps, rate=True)["harmonic_mean"]

    @property
    def valid(self) -> bool:
        """Whether every validated search broke no rule (True when none was validated)."""
        return all(r["violations"] is None or not any(r["violations"].values()) for r in self.rows)

    def failures(self) -> list[tuple[int, dict]]:
        """The searches that broke a rule.

        Returns
        -------
        list of (int, dict)
            ``(root, violations)`` of each failed search, in row order; empty when :attr:`valid`.

        Examples
        --------
        >>> from breadth.bfs import Graph500Result
        >>> res = Graph500Result({"NBFS": 1}, [{"root": 3, "time": 0.5, "nedge": 10, "validate_time": 0.1,
        ...                                     "violations": {"tree": 1}}])
        >>> res.failures(), res.valid
        ([(3, {'tree': 1})], False)
        """
        return [(r["root"], r["violations"]) for r in self.rows
                if r["violations"] is not None and any(r["violations"].values())]

    def small_searches(self) -> dict:
        """The searches that reached almost nothing: ``roots`` of them, their ``most_nedge``, below
        ``SMALL_SEARCH_SHARE`` of the ``largest_nedge`` (0 roots where none did)."""
        nedges = self.nedges
        largest = float(nedges.max()) if nedges.size else 0.0
        small = nedges[nedges < SMALL_SEARCH_SHARE * largest]
        return {"roots": int(small.size), "most_nedge": float(small.max()) if small.size else 0.0,
                "largest_nedge": largest, "share": SMALL_SEARCH_SHARE}

    def note(self, option: str = "min_component='giant'") -> str | None:
        """The report's ``note:`` line where some searches reached almost nothing (see the module docstring),
        naming ``option``, the way to take roots from the giant component only; ``None`` otherwise."""
        s = self.small_searches()
        if not s["roots"]:
            return None
        st = statistics(self.teps, rate=True)
        how = "" if "root_rule" in self.header else f"; {option} takes roots from the giant component only"
        return (f"note: {s['roots']} of {len(self.rows)} roots reached at most {s['most_nedge']:,.0f} edges (under "
                f"{s['share']:.0%} of the largest search's {s['largest_nedge']:,.0f}): harmonic_mean_TEPS "
                f"{st['harmonic_mean']:.3g} against median_TEPS {st['median']:.3g}{how}")

    def report(self, option: str = "min_component='giant'") -> str:
        """The reference implementation's report: ``name: value`` lines, and a ``note:`` line where some
        searches reached almost nothing (:meth:`note`).

        Parameters
        ----------
        option : str
            How the note names the way to roots of the giant component only: the keyword, or the command
            line's ``--min-component giant``.

        Returns
        -------
        str
            The header's fields, then the order statistics, mean and standard deviation of the times
            (seconds), of the edge counts and of the TEPS (with their harmonic mean and its deviation), and
            of the validation times where searches were validated, one per line, floats as ``%.17e``.

        Examples
        --------
        >>> from breadth.bfs import Graph500Result
        >>> res = Graph500Result({"NBFS": 1}, [{"root": 3, "time": 0.5, "nedge": 10, "validate_time": 0.1,
        ...                                     "violations": {"tree": 1}}])
        >>> print(res.report())
        NBFS: 1
        bfs  min_time: 5.00000000000000000e-01
        ...
        bfs  harmonic_mean_TEPS: 2.00000000000000000e+01
        ...
        """
        vt = [r["validate_time"] for r in self.rows if r["violations"] is not None]
        lines = report_lines(self.header, self.times, self.nedges, vt)
        note = self.note(option)
        return "\n".join(lines + ([note] if note else []))

    def to_dict(self) -> dict:
        """Everything as JSON-ready values.

        Returns
        -------
        dict
            ``header``, ``statistics`` (``time``, ``nedge``, ``teps`` and, where recorded, ``bytes_sent``:
            each a dict of order statistics, mean and standard deviation), ``valid``, ``rules``, ``setup_s``,
            ``roots`` (the rows) and ``machine`` (Python version, platform, processor).

        Examples
        --------
        >>> from breadth.bfs import Graph500Result
        >>> res = Graph500Result({"NBFS": 1}, [{"root": 3, "time": 0.5, "nedge": 10, "validate_time": 0.1,
        ...                                     "violations": {"tree": 1}}])
        >>> d = res.to_dict()
        >>> d["valid"], d["statistics"]["teps"]["harmonic_mean"]
        (False, 20.0)
        """
        return {
            "header": self.header,
            "statistics": {"time": statistics(self.times), "nedge": statistics(self.nedges),
                           "teps": statistics(self.teps, rate=True),
                           **({"bytes_sent": statistics(np.array([r["bytes_sent"] for r in self.rows], np.float64))}
                              if self.rows and "bytes_sent" in self.rows[0] else {})},
            "small_searches": self.small_searches(),
            "valid": self.valid, "rules": list(RULES), "setup_s": self.setup_s, "engines": self.engines,
            "roots": self.rows,
            "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                        "processor": platform.processor() or platform.machine()},
        }

    def write_json(self, path: str) -> None:
        """Write :meth:`to_dict` as a JSON file.

        The file is written under ``path + ".tmp"`` and renamed to ``path``: a reader never sees half a
        file, and an existing ``path`` stays whole until the new one replaces it.

        Parameters
        ----------
        path : str
            The file to write.

        Raises
        ------
        OSError
            When the directory is missing or not writable.

        Examples
        --------
        >>> graph500(g).write_json("graph500.json")      # doctest: +SKIP
        """
        import os

        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        os.replace(tmp, path)


def graph500(graph, nroots: int = 64, seed: int = 2, validate: bool = True, progress: bool = False,
             protocol: str = "auto", timeout: float = 120.0, alpha: float | None = None, beta: float | None = None,
             header: dict | None = None, batch: bool = False, config: SearchConfig | None = None,
             min_component: int | str | None = None) -> Graph500Result:
    """Run the Graph500 BFS kernel: ``nroots`` timed, validated searches from random roots of degree >= 1.

    One session of the graph's ranks: an untimed warm-up search, then each search timed alone (the slowest
    rank's time between two barriers), its edge count taken and its result validated where it lives.

    Parameters
    ----------
    graph : ShardedGraph
        The prepared graph.
    nroots : int
        Searches to run (Graph500: 64); fewer where the graph has fewer vertices of degree >= 1.
    seed : int
        The roots' seed (:func:`~breadth.bfs.graph500.roots.choose_roots`).
    validate : bool
        Check every search against the five rules (:mod:`~breadth.bfs.graph500.validate`).
    progress : bool
        Draw a progress bar on stderr.
    protocol : str
        The ranks' transport (:func:`~breadth.bfs.engine.session.run_session`).
    timeout : float
        Seconds a rank waits for a silent peer before the run fails.
    alpha, beta : float, optional
        Override ``config``'s direction rule: bottom-up once the frontier's edges exceed the unexplored
        edges / alpha, top-down again below n / beta vertices; ``alpha`` None is the backend's default
        (:meth:`breadth.bfs.engine.engine.Engine.default_alpha`: 15 on CPUs, 50 on one or two GPUs, scaled
        by (ranks / 2)^2 beyond).
    header : dict, optional
        Extra report header fields.
    batch : bool
        Search the roots 64 at a time in one pass each (MS-BFS, :mod:`breadth.bfs.engine.batch_engine`).
        Each root's ``time`` is then its batch's time -- the pass plus laying out every root's parents and
        levels -- divided by the batch's size, so TEPS are the batch's edges per second shared out, not a
        single search's.
    config : SearchConfig, optional
        The search's tunables (default: :meth:`SearchConfig.from_config`), recorded in the report's header
        (``search_config``).
    min_component : int or "giant", optional
        ``None``: Graph500's rule, any vertex of degree >= 1.  An integer: roots whose search reaches at
        least that many vertices (in an undirected graph, roots of components that large).  ``"giant"``:
        roots whose search reaches at least half as many vertices as the farthest-reaching candidate (the
        giant component's).  Candidates are drawn in the seed's order
        (:func:`~breadth.bfs.graph500.roots.choose_roots`, up to ``SCREEN_CANDIDATES`` per root) and each is
        searched once, untimed, before the timed searches; the header's ``root_rule`` says how many were
        set aside.

    Returns
    -------
    Graph500Result
        The per-root rows and the statistics.

    Raises
    ------
    ValueError
        For ``nroots < 1``, an unknown ``protocol``, a ``min_component`` that is neither ``"giant"`` nor an
        integer >= 1, or one that no candidate root reaches.
    RankError
        When a rank fails during the run.

    Examples
    --------
    >>> from breadth.bfs import graph500
    >>> res = graph500(g, nroots=64)               # doctest: +SKIP
    >>> print(res.report())                        # doctest: +SKIP
    >>> res.harmonic_mean_teps                     # doctest: +SKIP
    """
    from ..worker_loss import watch_workers

    config = (config if config is not None else SearchConfig.from_config()).replace(alpha=alpha, beta=beta)
    rule = _component_rule(min_component)
    with watch_workers(graph.client, "choice of roots", graph.workers):  # degrees asked of the shards' workers
        roots = choose_roots(graph, nroots, seed, count=None if rule is None else SCREEN_CANDIDATES * nroots)
    topic = PROGRESS_TOPIC if progress else None
    bar = _ProgressBar(min(nroots, len(roots)), "searches") if progress else None
    if bar:
        graph.client.subscribe_topic(PROGRESS_TOPIC, bar.event)
    try:
        out = run_session(graph, _graph500_batch_rank if batch else _graph500_rank, roots, validate, topic,
                          nroots, rule, protocol=protocol, timeout=timeout, config=config,
                          engine_class=BatchEngine if batch else None)
    finally:
        if bar:
            graph.client.unsubscribe_topic(PROGRESS_TOPIC)
            bar.close()
    rows, screen = out[0]["rows"], out[0].get("screen")
    if rule is not None:
        _check_screen(rule, screen, len(rows), nroots)
    src = graph.source
    hdr = {}
    if src.get("kind") == "kronecker":
        hdr.update({"SCALE": src["scale"], "edgefactor": src["edgefactor"]})
    else:
        hdr.update({"graph": src.get("path", src.get("kind", "graph")), "num_vertices": graph.num_vertices})
    hdr["NBFS"] = len(rows)
    if rule is not None:
        hdr["root_rule"] = (f"{'giant component' if rule == 'giant' else f'components of >= {rule:,} vertices'}: "
                            f"searches reaching >= {screen['threshold']:,} vertices; "
                            f"{screen['screened'] - len(rows)} of {screen['screened']} candidate roots set aside")
    if batch:
        hdr["batch"] = ("MS-BFS, up to 64 roots per pass; time per root = (pass + every root's parent and "
                        "level arrays) / batch size")
    hdr.update(header or {})
    hdr["num_ranks"] = graph.nparts
    hdr["partition"] = str(graph.partitioning)
    hdr["protocol"], hdr["protocol_choice"] = protocol_choice(graph, protocol)
    hdr["search_config"] = json.dumps(config.as_dict(), separators=(",", ":"))
    hdr["construction_time"] = f"{graph.construction_time:.17e}"
    e = out[0]["engine"]
    hdr["engine"] = f"{e['engine']} ({e['backend']}, {e['arrays']} arrays, {e['bottom_up_rows']} bottom-up rows" + (
        f", {e['levels']} levels)" if "levels" in e else ")")
    return Graph500Result(hdr, rows, [o["setup_s"] for o in out], [o["engine"] for o in out])


def _component_rule(min_component) -> int | str | None:
    """``min_component`` checked: ``None``, ``"giant"`` or an integer >= 1."""
    if min_component is None or min_component == "giant":
        return min_component
    if isinstance(min_component, (int, np.integer)) and not isinstance(min_component, bool) and min_component >= 1:
        return int(min_component)
    raise ValueError(f"min_component must be 'giant' or an integer >= 1, got {min_component!r}")


def _check_screen(rule, screen: dict, found: int, nroots: int) -> None:
    """Raise where no candidate passed the rule; warn where fewer than ``nroots`` did."""
    if not found:
        raise AdvisedValueError(f"no candidate root's search reaches {rule:,} vertices (the farthest of the "
                                f"{screen['screened']:,} searched reaches {screen['largest']:,}); "
                                "{min_component=} with a smaller value, or 'giant'")
    if found < nroots:
        import warnings

        warnings.warn(f"only {found} of the {screen['screened']} candidate roots searched reach "
                      f">= {screen['threshold']:,} vertices; using {found} roots")


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
