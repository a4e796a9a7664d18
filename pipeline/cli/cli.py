"""The ``breadth`` command line.

    breadth bench --scale 20                     # Graph500 on a local CPU cluster
    breadth bench --scale 22 --workers 2 --json result.json
    breadth bench --scale 26 --scheduler tcp://host:8786
    breadth generate --scale 20 --out g20.store        # prepare once ...
    breadth ingest web.txt.gz --directed --out web.store
    breadth info web.store
    breadth bfs web.store --root 12 --root 99 --out levels.parquet   # ... search many times
    breadth bfs web.store --sources seeds.txt --depth-limit 3 --out near   # one search from many sources
    breadth bench --scale 20 --batch --plot bench.png              # 64 roots per pass, and a figure
    breadth bench web.store
"""

from __future__ import annotations

import argparse
import os
import sys
import time


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit status 2
        sys.stderr.write(f"breadth: error: {message}\n")
        sys.exit(2)


def _int_in(name: str, lo: int, hi: int | None = None):
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            rng = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
            raise argparse.ArgumentTypeError(f"{name} must be {rng}, got {v}")
        return v
    return conv


def _min_component(text: str) -> int | str:
    if text == "giant":
        return text
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"--min-component must be giant or an integer >= 1, got {text!r}")
    return v


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("breadth")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _memory_limit(text: str) -> int:
    from ..shuffle.memory_plan import parse_memory_limit

    try:
        return parse_memory_limit(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _memory_args(p: argparse.ArgumentParser) -> None:
    """``--memory-limit``, ``--spill-dir`` and ``--device-memory-limit`` of the commands that prepare a graph
    (generate, ingest, bench)."""
    p.add_argument("--memory-limit", type=_memory_limit, default=None,
                   help="RSS limit per local worker, e.g. 300MB: chunk and batch sizes and where the shuffle keeps "
                        "its pieces (memory, host batches, disk) follow from it, and a limit below the graph's "
                        "minimum is refused at once")
    p.add_argument("--device-memory-limit", type=_memory_limit, default=None,
                   help="with --device gpu: GPU memory per local worker, e.g. 8GB, past which the worker "
                        "moves task outputs to host memory (dask-cuda's device_memory_limit; default 80%% of "
                        "the GPU); the shuffle keeps its pieces in host batches when the graph does not fit "
                        "under it")
    p.add_argument("--spill-dir", default=None,
                   help="where the shuffle's disk tier writes its per-owner bucket files when the memory limit "
                        "needs it (default: a temporary directory, removed afterwards); also Dask's local "
                        "directory under --memory-limit")


def _grid(text: str) -> tuple[int, int]:
    from breadth.bfs.partitioning import parse_grid

    try:
        return parse_grid(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _partition_args(p: argparse.ArgumentParser, store: bool = False) -> None:
    """``--partition``, ``--grid`` and ``--delegate-degree`` of the commands that prepare a graph (generate,
    ingest, bench) or search a store with another partitioning than its own (``store``: bench STORE)."""
    from breadth.bfs.partitioning import DEFAULT_DELEGATE_DEGREE, KINDS

    p.add_argument("--partition", choices=KINDS, default=None,
                   help="where the search's adjacency entries live: 1d (at the owner of the row vertex; the "
                        "default), 2d (an R x C grid of the workers: frontiers gathered within grid columns, "
                        "reached vertices folded within grid rows) or delegates (high-degree vertices known to "
                        "every worker, their visited bits all-reduced)"
                        + ("; default: the store's own" if store else ""))
    p.add_argument("--grid", type=_grid, default=None, metavar="RxC",
                   help="with --partition 2d: grid rows x columns, R x C = --workers (default: the squarest)")
    p.add_argument("--delegate-degree", type=_int_in("--delegate-degree", 1), default=None, metavar="D",
                   help=f"with --partition delegates: vertices of degree >= D are delegates "
                        f"(default {DEFAULT_DELEGATE_DEGREE})")


def _cluster_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=_int_in("--workers", 1), default=1,
                   help="local worker processes, one BFS rank each (default 1)")
    p.add_argument("--threads", type=_int_in("--threads", 1), default=None,
                   help="threads per local worker (default: cores // workers, so workers x threads <= cores)")
    p.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler (default: start a local cluster on this machine)")
    from breadth.bfs.transport.registry import protocol_choices

    p.add_argument("--protocol", choices=protocol_choices(), default="auto",
                   help="rank-to-rank transport of the search (default auto: NCCL between GPU ranks, TCP between "
                        "CPU ranks; the report's 'protocol' and 'protocol_choice' lines say which ran and why; ucx needs "
                        "the 'ucx' extra)")
    p.add_argument("--verbose", action="store_true",
                   help="on failure, print the traceback and Dask's worker logs, not only the one-line error")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="breadth", description="Out-of-core graph preparation and multi-GPU BFS on Dask.")
    p.add_argument("--version", action="version", version=f"breadth {_version()}")
    sub = p.add_subparsers(dest="cmd", parser_class=_Parser, metavar="COMMAND")
    b = sub.add_parser("bench", help="Graph500 BFS benchmark on a Kronecker graph or a shard store")
    b.add_argument("store", nargs="?", default=None,
                   help="a shard store (breadth generate/ingest); without it, --scale generates a graph")
    b.add_argument("--scale", type=_int_in("--scale", 1, 40), default=None, help="log2 of the vertex count")
    b.add_argument("--edgefactor", type=_int_in("--edgefactor", 1), default=16,
                   help="edge tuples per vertex (default 16, as Graph500)")
    b.add_argument("--roots", type=_int_in("--roots", 1), default=64, help="number of searches (default 64)")
    b.add_argument("--seed", type=int, default=1, help="generator seed (default 1; roots use seed + 1)")
    b.add_argument("--min-component", type=_min_component, default=None, metavar="N|giant",
                   help="roots only from components of at least N vertices (directed: searches reaching N), or "
                        "from the giant component (searches reaching half as many as the farthest-reaching "
                        "candidate); each candidate is searched once, untimed, to tell (default: Graph500's "
                        "rule, any vertex of degree >= 1)")
    b.add_argument("--json", default=None, help="write the full result as JSON to this file")
    b.add_argument("--no-validate", action="store_true", help="skip the five validation rules")
    b.add_argument("--chunk-edges", type=_int_in("--chunk-edges", 1), default=None,
                   help="edge tuples per generated chunk (default 2**22 on CPU, 2**26 on GPU)")
    _cluster_args(b)
    _memory_args(b)
    b.add_argument("--batch", action="store_true",
                   help="search the roots 64 per pass (MS-BFS); a root's time is its batch's time (the pass "
                        "and deriving every root's parents and levels) divided by the batch size")
    b.add_argument("--plot", default=None, metavar="FILE.png",
                   help="draw TEPS per root, frontier size and time per level (direction marked) and, on "
                        "several ranks, local vs exchange time per level (needs the 'plot' extra)")
    b.add_argument("--device", choices=("cpu", "gpu", "auto"), default="cpu",
                   help="cpu: NumPy/Numba workers; gpu: one dask-cuda worker per GPU, CuPy kernels; "
                        "auto: gpu when CuPy and a device are present")
    _partition_args(b, store=True)
    from .cli_store import add_store_commands

    add_store_commands(sub, _int_in, _cluster_args, _memory_args, _partition_args)
    return p


def _bench(args) -> int:
    """``breadth bench --scale S``: generate, prepare and run the Graph500 driver."""
    import json

    from distributed import wait

    from breadth.bfs import graph500, worker_loss

    from .cli_checks import partition_kw
    from .cli_cluster import cluster_client, memory_plan_for, spill_dir_for
    from .cli_store import prepare_config, report, search_config
    from ..cluster.cluster import resolve_device, workers_info
    from ..sources.kronecker import kronecker
    from ..prepare import prepare

    search, prep = search_config(args), prepare_config(args)  # a bad setting fails before any work
    device = resolve_device(args.device)
    nv, nt, what = 1 << args.scale, args.edgefactor << args.scale, f"scale {args.scale}"
    # before any cluster starts: the graph's size is known from its parameters
    plan = None if args.scheduler or device == "gpu" else memory_plan_for(args, nv, nt, search=True, what=what)
    with cluster_client(args, device=device) as client:
        if plan is None and args.scheduler and device == "cpu":  # an existing cluster: its own workers
            plan = memory_plan_for(args, nv, nt, search=True, what=what, client=client)
        chunk = args.chunk_edges or (plan.chunk_edges if plan else None)
        edges = kronecker(args.scale, args.edgefactor, seed=args.seed, chunk_edges=chunk, device=device)
        # Generate first (Graph500 times generation and construction apart) when the tuples fit in a
        # quarter of the cluster's memory and no memory plan sized the chunks to be streamed;
        # otherwise generation streams inside construction.
        mem = sum(w.get("memory_limit", 0) or 0 for w in workers_info(client).values())
        gen_time = None
        if edges.num_edges * 16 * 4 <= mem and not args.spill_dir and plan is None:
            t0 = time.perf_counter()
            with worker_loss.stage(client, "generation"):
                edges.edges = client.persist(edges.edges)
                wait(edges.edges)
            gen_time = time.perf_counter() - t0
        # --memory-limit's plan sizes the batches
        prep = prep.replace(batch_entries=plan.batch_entries if plan else None)
        g = prepare(edges, client, progress=sys.stderr.isatty(), device=device, spill_dir=spill_dir_for(args),
                    config=prep, **partition_kw(args))
        edges.edges = None
        print(f"{g}; construction {g.construction_time:.2f} s", file=sys.stderr)
        res = graph500(g, nroots=args.roots, seed=args.seed + 1, validate=not args.no_validate,
                       progress=sys.stderr.isatty(), protocol=args.protocol, config=search,
                       header={"graph_generation": f"{gen_time:.17e}" if gen_time is not None else "fused",
                               "prepare_config": json.dumps(prep.as_dict(), separators=(",", ":"))},
                       batch=args.batch, min_component=args.min_component)
        status = report(res, args.json, args.plot)
        g.release()
        return status


def _preflight(args) -> None:
    """Everything that can be checked before any work (see :mod:`breadth.pipeline.cli.cli_checks`)."""
    from . import cli_checks
    from .cli_errors import UsageError

    if args.cmd == "bench" and (args.store is None) == (args.scale is None):
        raise UsageError("bench needs either a STORE or --scale (not both)")
    if getattr(args, "json", None):
        cli_checks.output_file(args.json, "--json")
    if getattr(args, "plot", None):
        cli_checks.output_file(args.plot, "--plot")
        cli_checks.matplotlib_available("--plot")
    if args.cmd in ("generate", "ingest"):
        cli_checks.output_store(args.out)
    if args.cmd == "bfs":
        cli_checks.output_dataset(args.out, "--out")
    store = getattr(args, "store", None)
    if store is not None and not os.path.isdir(store):
        raise UsageError(f"{store}: no such shard store (expected a directory written by "
                         "breadth generate or breadth ingest)")
    if args.cmd == "bfs":
        cli_checks.bfs_searches(args)
    if args.cmd == "bench" and store is not None:
        cli_checks.bench_store(args)
    if args.cmd == "ingest":
        cli_checks.ingest_inputs(args)
    if getattr(args, "spill_dir", None):
        cli_checks.creatable_directory(args.spill_dir, "--spill-dir")
    cli_checks.partition(args)
    cli_checks.device(getattr(args, "device", "cpu"))
    cli_checks.device_memory_limit(args)
    cli_checks.protocol(getattr(args, "protocol", "auto"), getattr(args, "device", None))


def _dispatch(args) -> int:
    from .cli_cluster import memory_errors

    _preflight(args)
    with memory_errors(args):
        if args.cmd == "bench" and args.store is None:
            return _bench(args)
        from .cli_store import run

        return run(args)


def main(argv: list[str] | None = None) -> int:
    """The ``breadth`` command: parse, check, run; every failure is one ``breadth: error:`` line."""
    from .cli_errors import quiet_logs, report_failures, warnings_as_lines

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd is None:  # `breadth` alone
        parser.print_help(sys.stderr)
        return 2
    args.log_level = quiet_logs(args.verbose)
    warnings_as_lines()
    return report_failures(lambda: _dispatch(args), verbose=args.verbose,
                           resumable=args.cmd in ("generate", "ingest"))


def console_main() -> None:
    """The ``breadth`` console script: :func:`main`, then the process ends at once with its status.  The
    command has closed its cluster and written its output by then; Python's own teardown of the loaded
    modules (Dask, NumPy, pyarrow, SciPy) would add 0.14-0.2 s to every command's wall time on 2 cores
    (:mod:`breadth.pipeline.cluster.quick_exit`).  SciPy's sparse and FFT modules, which
    ``dask.array`` would load, stay unloaded in this process (:mod:`breadth.pipeline.cli.command_imports`)."""
    from .command_imports import skip_unused

    skip_unused()
    status = main()
    from ..cluster.quick_exit import exit_process

    exit_process(int(status or 0))


if __name__ == "__main__":
    console_main()
