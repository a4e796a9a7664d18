"""The store commands of the ``breadth`` CLI: ``generate``, ``ingest``, ``info``, ``bfs`` and ``bench STORE``.

Errors about the input (bad lines, missing files, corrupted stores) print one ``breadth: error:`` line
and exit with status 1; argument errors exit with 2 (the parser's convention).

``generate`` and ``ingest`` write the store shard by shard (:mod:`breadth.io.shard_store`): rerunning the
same command after an interruption resumes it (preparation runs again; complete shards are kept), with
the partial store's shard count whatever the number of workers now; other parameters are refused
before any work unless ``--overwrite``; on a complete store with the same parameters it does nothing.
"""

from __future__ import annotations

import os
import shlex
import sys
import time

import numpy as np

from .cli_checks import partition_kw
from .cli_cluster import cluster_client, memory_plan_for, shard_files_for, spill_dir_for, threads_per_worker
from .cli_errors import CommandError


def report(res, json_path: str | None, plot_path: str | None = None) -> int:
    """Print a Graph500 result in the reference format (with its ``note:`` line, naming ``--min-component``,
    where some searches reached almost nothing), write its JSON (and its figure, ``--plot``), and return the
    exit status (1 when any search failed validation)."""
    print(res.report(option="--min-component giant"))
    if json_path:
        res.write_json(json_path)
    if plot_path:
        from .bench_plot import plot_bench

        plot_bench(res.to_dict(), plot_path)
        print(f"{plot_path}: figure written", file=sys.stderr)
    if not res.valid:
        print(f"breadth: validation FAILED for {len(res.failures())} root(s): {res.failures()[:3]}", file=sys.stderr)
        return 1
    return 0


def search_config(args):
    """The command's :class:`~breadth.bfs.search_config.SearchConfig`: breadth's settings
    ``breadth.search.*`` (no flag sets a search tunable).  Built before any work, so that a bad setting is
    one line at once."""
    from breadth.bfs.search_config import SearchConfig

    return SearchConfig.from_config()


def prepare_config(args, **fixed):
    """The command's :class:`~breadth.pipeline.prepare_config.PrepareConfig`: breadth's settings
    ``breadth.prepare.*`` and ``breadth.shuffle.*``, with ``--protocol`` where it names a transport (``auto``
    leaves the setting's, whose default is ``auto``) and ``fixed``, what the command itself decides (a store's
    shards go without bottom-up's order, which loading builds).  Built before any work, so that a bad setting
    is one line at once; ``--memory-limit``'s plan sets ``batch_entries`` later, once the graph's size is
    known."""
    from ..prepare_config import PrepareConfig

    protocol = getattr(args, "protocol", "auto")
    return PrepareConfig.from_config(protocol=None if protocol == "auto" else protocol, **fixed)


def _summary_line(g, t: float, extra: str = "") -> str:
    return (f"{g.num_vertices:,} vertices, {g.num_input_edges:,} input edges ({g.num_self_loops:,} self-loops), "
            f"{g.num_edges:,} {'directed' if g.directed else 'undirected'} edges, {g.nparts} shard(s); "
            f"{t:.2f} s ({g.num_input_edges / max(t, 1e-9):,.0f} edges/s){extra}")


def _command_line(args, parts: list[str]) -> str:
    """The ``breadth`` command line that rebuilds this store (recorded in it, quoted in the error for an
    incomplete store): the arguments that identify the graph, then ``--out``; no cluster options."""
    return " ".join(shlex.quote(str(p)) for p in ["breadth", args.cmd, *parts, "--out", args.out])


def _begin(args, parameters: dict) -> dict | None:
    """Check ``--out`` before any work (see :func:`~breadth.io.shard_store.check_store`): a store written
    with other parameters is refused at once unless ``--overwrite``.  Returns the store's state, or
    ``None`` when a complete store with these parameters is already there (nothing to do)."""
    from breadth.io.shard_store import check_store

    st = check_store(args.out, parameters, overwrite=args.overwrite)
    if st["state"] == "complete" and not args.overwrite:
        print(f"{args.out}: already complete with these parameters; nothing to do (--overwrite rebuilds it)")
        return None
    if st["state"] == "partial" and not args.overwrite:
        print(f"{args.out}: resuming a partial store: {len(st['complete'])} of {st['nparts']} shard(s) already "
              f"written; preparing again to write the rest", file=sys.stderr)
    return st


def _partition_params(args) -> dict:
    """The store parameters of a 2D or delegates partitioning (none for 1D, the default: a 1D store's
    parameters are the same with or without ``--partition 1d``)."""
    kw = partition_kw(args)
    if not kw or kw["partition"] == "1d":
        return {}
    return {"partition": kw["partition"], "grid": list(kw["grid"]) if kw["grid"] else None,
            "delegate_degree": kw["delegate_degree"]}


def _partition_flags(args) -> list:
    """The partition flags as typed, for the store's recorded command line."""
    kw = partition_kw(args)
    out = ["--partition", kw["partition"]] if kw else []
    if kw and kw["grid"]:
        out += ["--grid", f"{kw['grid'][0]}x{kw['grid'][1]}"]
    if kw and kw["delegate_degree"]:
        out += ["--delegate-degree", kw["delegate_degree"]]
    return out


def _nparts(st: dict, client) -> int:
    """Shard count: a partial store's own (so any number of workers can resume it), else one per worker."""
    from ..cluster.cluster import worker_addresses

    if st["state"] == "partial" and isinstance(st["nparts"], int):
        return st["nparts"]
    return len(worker_addresses(client))


def _resumed(m: dict) -> str:
    kept = len(m.get("resume", {}).get("kept", []))
    return f"; resumed: {kept} of {m['nparts']} shard(s) kept from the interrupted run" if kept else ""


def generate(args) -> int:
    """``breadth generate --scale S --out STORE``: a Kronecker graph, prepared and stored.

    Rerunning it on a partial store (an interrupted run) resumes: the graph is generated and prepared
    again (same seed, same graph), the complete shards already on disk are verified and kept, the
    others written.  On a complete store with the same parameters it does nothing."""
    from breadth.io.shard_store import write_store

    from ..cluster.cluster import resolve_device
    from ..sources.kronecker import kronecker
    from ..prepare import prepare

    # chunk size is not a parameter of the graph: the generator gives the same edges for any chunking
    params = {"command": "generate", "scale": args.scale, "edgefactor": args.edgefactor, "seed": args.seed}
    params.update(_partition_params(args))
    prep = prepare_config(args, search_order=False)
    # the limit is checked before anything starts (the graph's size is known from its parameters); an
    # existing cluster (--scheduler) is planned for once its workers are known
    nv, nt = 1 << args.scale, args.edgefactor << args.scale
    device = resolve_device(args.device)
    plan = None if args.scheduler or device == "gpu" else memory_plan_for(
        args, nv, nt, store=True, what=f"scale {args.scale}", numpy_path=True)
    st = _begin(args, params)
    if st is None:
        return 0
    with cluster_client(args, device=device) as client, shard_files_for(args, plan) as shard_dir:
        if args.scheduler and device == "cpu":
            # the NumPy path needs workers started without Numba: only the local cluster's are
            plan = memory_plan_for(args, nv, nt, store=True, what=f"scale {args.scale}", client=client)
        chunk = args.chunk_edges or (plan.chunk_edges if plan else None)
        jit = plan is None or plan.jit
        t0 = time.perf_counter()
        edges = kronecker(args.scale, args.edgefactor, seed=args.seed, chunk_edges=chunk, jit=jit, device=device)
        cpu_only = {"jit": jit, "shard_dir": shard_dir} if device == "cpu" else {}
        g = prepare(edges, client, nparts=_nparts(st, client), spill_dir=spill_dir_for(args), device=device,
                    config=prep.replace(batch_entries=plan.batch_entries if plan else None), **cpu_only,
                    **partition_kw(args))
        m = write_store(g, args.out, overwrite=args.overwrite, parameters=params,
                        command=_command_line(args, ["--scale", args.scale, "--edgefactor", args.edgefactor,
                                                     "--seed", args.seed, *_partition_flags(args)]))
        print(f"{args.out}: " + _summary_line(g, time.perf_counter() - t0, _resumed(m)))
        del g  # the shards' maps, before their folder goes
    return 0


def _fingerprint(paths: list[str]) -> list[list]:
    """``[path, bytes, mtime_ns]`` of every input file: a changed input is a different graph."""
    from breadth.io.paths import expand_paths

    out = []
    for f in expand_paths(paths):
        s = os.stat(f)
        out.append([os.path.abspath(f), s.st_size, s.st_mtime_ns])
    return out


def ingest(args) -> int:
    """``breadth ingest PATH... --out STORE``: read edge files, relabel, prepare, store.

    Rerunning it on a partial store resumes (the input is read and prepared again, complete shards
    are kept); the input files' sizes and modification times are part of the parameters, so a changed
    input is refused rather than mixed into a half-written store."""
    from breadth.io.shard_store import write_store
    from breadth.pipeline import read_edges

    from ..cluster.cluster import resolve_device
    from ..prepare import prepare

    kw = {}
    if args.ids != "int":
        kw["ids"] = args.ids
    if args.header or args.no_header:
        kw["header"] = bool(args.header)
    if args.extra_columns:
        kw["extra_columns"] = "ignore"
    params = {"command": "ingest", "paths": [os.path.abspath(p) for p in args.paths],
              "inputs": _fingerprint(args.paths), "format": args.format, "directed": args.directed,
              "src": args.src, "dst": args.dst, "ids": args.ids, "no_header": args.no_header,
              "extra_columns": args.extra_columns, "on_bad_lines": args.on_bad_lines}
    if args.header:  # only when given: the stores written without the flag stay resumable
        params["header"] = True
    params.update(_partition_params(args))
    # the parsed chunks are handed over to the shuffle; a store's shards go without bottom-up's order
    prep = prepare_config(args, search_order=False, keep_edges=False)
    device = resolve_device(args.device)
    if device == "gpu":  # hash-relabeled on the GPU: small integer spans are numbered apart from the CPU's table
        params["device"] = "gpu"
    target = None
    if args.memory_limit:  # before anything starts: reading these files must fit
        from ..shuffle.memory_plan import plan_reading

        # a local cluster's CPU workers are known before it starts: Parquet inputs too large for them are
        # refused now, not after minutes of reading (GPU ingests have no host plan; an existing cluster's
        # workers are counted once connected)
        rp = plan_reading(args.memory_limit, args.paths, args.workers, threads_per_worker(args),
                          directed=bool(args.directed), format=args.format,
                          count_row_groups=device == "cpu" and args.scheduler is None)
        target = rp.managed_target
        if _text_format(args):
            kw["chunk_bytes"] = rp.chunk_bytes
    st = _begin(args, params)
    if st is None:
        return 0
    flags = [*args.paths, "--format", args.format, "--ids", args.ids, "--on-bad-lines", args.on_bad_lines]
    flags += ["--directed"] * args.directed + ["--header"] * args.header + ["--no-header"] * args.no_header
    flags += ["--extra-columns"] * args.extra_columns
    flags += (["--src", args.src] if args.src else []) + (["--dst", args.dst] if args.dst else [])
    flags += ["--device", args.device] if device == "gpu" else []
    flags += _partition_flags(args)
    with cluster_client(args, device=device, managed_target=target) as client:
        t0 = time.perf_counter()
        el = read_edges(args.paths, format=args.format, directed=True if args.directed else None, src=args.src,
                        dst=args.dst, on_bad_lines=args.on_bad_lines, client=client, device=device,
                        spill_dir=spill_dir_for(args), **kw)
        # the relabeled chunks that already run (hash owners) finish first, and so do the id map's parts (each
        # owner turns its keys into ids after the chunks are done): the memory plan and the shuffle's tier count
        # what the workers hold then, not the relabeling's transient peak (at 2^30 tuples a worker holds
        # about 1 GB while its part is converted, half that five seconds later)
        from distributed import futures_of, wait

        from breadth.bfs.worker_loss import stage

        with stage(client, "relabeling"):
            wait(futures_of([el.edges, el.id_map.parts if el.id_map is not None else []]))
        t_read = time.perf_counter() - t0
        # the graph's size is known once read (parsed chunks wait in the workers' memory, which Dask
        # spills to its local directory past what the reading plan left them); the chunks are the reader's
        plan = None if device == "gpu" else memory_plan_for(
            args, el.num_vertices, el.num_edges, el.directed, store=True,
            what=f"{el.num_vertices:,} vertices and {el.num_edges:,} tuples", client=client,
            chunk_edges=max(el.edges.chunks[0], default=1))
        g = prepare(el, client, nparts=_nparts(st, client), spill_dir=spill_dir_for(args), device=device,
                    config=prep.replace(batch_entries=plan.batch_entries if plan else None), **partition_kw(args))
        m = write_store(g, args.out, overwrite=args.overwrite, parameters=params,
                        command=_command_line(args, flags), extra={"read_s": t_read})
        skipped = el.source.get("skipped_lines", 0)
        print(f"{args.out}: " + _summary_line(g, time.perf_counter() - t0,
                                              (f"; {skipped:,} bad line(s) skipped" if skipped else "")
                                              + _resumed(m)))
        for path, line, what, text in el.source.get("bad_lines", [])[:5]:
            print(f"  skipped {path}:{line}: {what}: {text!r}")
    return 0


def _text_format(args) -> bool:
    """Whether the inputs are text (SNAP, CSV, Matrix Market: read in byte ranges of ``chunk_bytes``), not
    row-grouped (Parquet), as their format's :data:`~breadth.io.formats.FORMATS` record says."""
    from breadth.io.formats import FORMATS, detect_format
    from breadth.io.paths import expand_paths

    if args.format != "auto":
        return FORMATS[args.format].text
    return all(FORMATS[detect_format(f)].text for f in expand_paths(args.paths))


def info(args) -> int:
    """``breadth info STORE``: print the manifest."""
    from breadth.io.shard_store import describe, read_manifest
    from breadth.io.store_files import verify_file

    print(describe(args.store))
    if args.verify:
        m = read_manifest(args.store)
        recs = [(os.path.join(args.store, s["dir"], f"{k}.npy"), r) for s in m["shards"] for k, r in s["files"].items()]
        from breadth.io.id_map_store import id_map_files

        recs += [(os.path.join(args.store, f), r) for f, r in id_map_files(m["id_map"])]
        for p, r in recs:
            verify_file(p, r)
        print(f"checksums:      {len(recs)} file(s) OK")
    return 0


def bfs_cmd(args) -> int:
    """``breadth bfs STORE --root ID ... | --source ID ... | --sources FILE [--depth-limit K] [--batch] --out DIR``:
    a Parquet dataset that ``pandas.read_parquet(DIR)`` reads.  ``--root``: one search per root (``--batch``:
    up to 64 of them per pass); ``--source``/``--sources``: one search from all the sources together."""
    from breadth.bfs import bfs
    from breadth.bfs.engine.search import write_results_dataset
    from breadth.io.shard_store import load_store

    from .cli_sources import missing_source, typed_ids
    from ..cluster.cluster import resolve_device

    search = search_config(args)
    device = resolve_device(args.device)
    with cluster_client(args, device=device) as client:
        g = load_store(args.store, client, device=device)
        t0 = time.perf_counter()
        if args.root:
            # parsed before any work (cli.py's preflight); ids in range but absent need the id map
            roots = typed_ids(g, args.root_ids)
            bad = missing_source(g, roots)
            if bad is not None:
                raise CommandError(f"--root {args.root[bad]}: vertex {args.root[bad]} is not in the graph")
            roots = roots.tolist() if roots.dtype != np.uint64 else roots
            if args.batch:
                from breadth.bfs import bfs_batch

                res = bfs_batch(g, roots, depth_limit=args.depth_limit, protocol=args.protocol, config=search)
            else:
                res = bfs(g, roots, depth_limit=args.depth_limit, protocol=args.protocol, config=search)
            res = res if isinstance(res, list) else [res]
        else:
            # parsed before any work (cli.py's preflight)
            ids, labels = typed_ids(g, args.source_ids), args.source_labels
            bad = missing_source(g, ids)
            if bad is not None:
                raise CommandError(f"{labels[bad]}: vertex {ids[bad]} is not in the graph")
            res = [bfs(g, sources=ids if ids.dtype != object else list(ids), depth_limit=args.depth_limit,
                       protocol=args.protocol, config=search)]
        t = time.perf_counter() - t0
        rows = write_results_dataset(res, args.out)  # written by the workers, a file per root, rank and slice
        for r in res:
            reached, depth = r.summary()
            who = f"root {r.root}" if len(r.sources) == 1 else f"{len(r.sources)} sources"
            print(f"{who}: {reached:,} vertices reached, depth {depth}")
        print(f"{args.out}: {rows:,} rows (reached vertices only) in {t:.2f} s")
    return 0


def bench_store(args) -> int:
    """``breadth bench STORE``: the Graph500 driver on stored shards."""
    from breadth.bfs import graph500
    from breadth.io.shard_store import load_store, read_manifest

    from ..cluster.cluster import resolve_device

    search = search_config(args)
    device = resolve_device(args.device)
    if args.memory_limit and device == "cpu":
        m = read_manifest(args.store)
        memory_plan_for(args, m["num_vertices"], m["num_input_edges"], m["directed"], search=True,
                        what=os.path.basename(os.path.abspath(args.store)))
    with cluster_client(args, device=device) as client:
        g = load_store(args.store, client, device=device)
        if partition_kw(args):  # another partitioning than the store's: cut from its 1D shards
            from breadth.bfs.partitioned import partition_graph
            from breadth.bfs.partitioning import Partitioning

            g = partition_graph(g, Partitioning(args.partition, args.grid, args.delegate_degree))
        st = g.source["load_stages"]
        print(f"{g}; loaded in {g.source['load_time']:.2f} s (shards {st['shards_s']:.2f} s, "
              f"bottom-up order {st['order_s']:.2f} s)", file=sys.stderr)
        res = graph500(g, nroots=args.roots, seed=args.seed + 1, validate=not args.no_validate,
                       progress=sys.stderr.isatty(), protocol=args.protocol, config=search,
                       header={"store": os.path.abspath(args.store), "load_time": f"{g.source['load_time']:.17e}"},
                       batch=args.batch, min_component=args.min_component)
        return report(res, args.json, args.plot)


def run(args) -> int:
    """Run a store command (errors become one line in :func:`breadth.pipeline.cli.cli_errors.report_failures`)."""
    fn = {"generate": generate, "ingest": ingest, "info": info, "bfs": bfs_cmd, "bench": bench_store}[args.cmd]
    return fn(args)


def _store_out_args(p) -> None:
    """``--out`` and ``--overwrite`` of the commands that write a store (resumable, see io/shard_store.py)."""
    p.add_argument("--out", required=True,
                   help="store directory to create; rerunning the command on a partial one resumes it")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing store, or start a partial one again (also one of other parameters)")


def _writer_args(p, cluster_args, memory_args, partition_args) -> None:
    """What ``generate`` and ``ingest`` share after their own options: where the store goes, the cluster, its
    memory and the partitioning."""
    _store_out_args(p)
    cluster_args(p)
    memory_args(p)
    partition_args(p)


def add_store_commands(sub, int_in, cluster_args, memory_args, partition_args) -> None:
    """Add ``generate``, ``ingest``, ``info`` and ``bfs`` to the ``breadth`` subparsers (``ingest``'s formats
    are those registered in :data:`~breadth.io.formats.FORMATS` when the parser is built)."""
    from breadth.io.formats import FORMATS, format_choices

    g = sub.add_parser("generate", help="generate a Kronecker graph and write it as a shard store")
    g.add_argument("--scale", type=int_in("--scale", 1, 40), required=True, help="log2 of the vertex count")
    g.add_argument("--edgefactor", type=int_in("--edgefactor", 1), default=16,
                   help="edge tuples per vertex (default 16, as Graph500)")
    g.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    g.add_argument("--chunk-edges", type=int_in("--chunk-edges", 1), default=None,
                   help="edge tuples per generated chunk (default: from --memory-limit, else 2**22); the graph "
                        "is the same for any value")
    g.add_argument("--device", choices=("cpu", "gpu", "auto"), default="cpu",
                   help="gpu: one dask-cuda worker per GPU generates and builds its part on the device (the same "
                        "graph as on the CPU); auto: gpu when CuPy and a device are present (default cpu)")
    _writer_args(g, cluster_args, memory_args, partition_args)

    i = sub.add_parser("ingest", help=f"read edge files ({', '.join(f.title for f in FORMATS.values())}) into a "
                                      "shard store")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs (gzip allowed)")
    i.add_argument("--format", choices=format_choices(), default="auto",
                   help="input format (default auto: from the file name and its first bytes)")
    i.add_argument("--directed", action="store_true", help="keep edge directions (default: undirected, as Graph500)")
    i.add_argument("--src", default=None,
                   help="source column name (a csv header's or a parquet file's; default: the first column, or "
                        "for parquet a known pair such as src/dst or source/target, else the first of two "
                        "columns, said on stderr)")
    i.add_argument("--dst", default=None, help="target column (csv/parquet), as --src")
    i.add_argument("--ids", choices=("int", "str"), default="int",
                   help="csv vertex id type: int, or str for any text (default int)")
    header = i.add_mutually_exclusive_group()
    header.add_argument("--header", action="store_true",
                        help="csv files start with a header row naming their columns (default: decided from "
                             "the first row, see --no-header)")
    header.add_argument("--no-header", action="store_true",
                        help="csv files have no header row (default: a first row whose source and target are "
                             "integers is an edge; any other is a header, which --ids str says on stderr "
                             "unless it names a known column pair such as source,target)")
    i.add_argument("--extra-columns", action="store_true",
                   help="snap: ignore columns after the first two (timestamps, weights)")
    i.add_argument("--on-bad-lines", choices=("error", "skip", "warn"), default="error",
                   help="malformed lines: stop with an error (default), or skip and count them")
    i.add_argument("--device", choices=("cpu", "gpu", "auto"), default="cpu",
                   help="gpu: one dask-cuda worker per GPU; Parquet, SNAP and CSV read there (cuDF's readers "
                        "where the lines allow), ids relabeled and shards built on the GPUs (default cpu)")
    _writer_args(i, cluster_args, memory_args, partition_args)

    f = sub.add_parser("info", help="print a shard store's manifest")
    f.add_argument("store", help="a shard store directory")
    f.add_argument("--verify", action="store_true", help="also check every file's checksum")
    f.add_argument("--verbose", action="store_true", help="on failure, print the traceback too")

    b = sub.add_parser("bfs", help="BFS from roots on a stored graph; results to Parquet in original ids")
    b.add_argument("store", help="a shard store directory (breadth generate/ingest)")
    b.add_argument("--root", action="append", default=None,
                   help="root vertex (original id); repeatable: one independent search per root")
    b.add_argument("--source", action="append", default=None,
                   help="source vertex (original id); repeatable: ONE search from all sources together, each "
                        "at level 0 (every reached vertex's parent chain ends in one of them)")
    b.add_argument("--sources", default=None, metavar="FILE",
                   help="a file of sources, one id per line (blank lines and # comments skipped); with "
                        "--source, the sources of both")
    b.add_argument("--depth-limit", type=int_in("--depth-limit", 0), default=None, metavar="K",
                   help="stop each search after K levels (farther vertices are left out; 0: the roots only)")
    b.add_argument("--batch", action="store_true",
                   help="with --root: run the searches up to 64 per pass (MS-BFS)")
    b.add_argument("--device", choices=("cpu", "gpu", "auto"), default="cpu",
                   help="gpu: one dask-cuda worker per GPU loads its shard into device memory and searches "
                        "there; auto: gpu when CuPy and a device are present (default cpu)")
    b.add_argument("--out", required=True,
                   help="Parquet dataset directory (a file per root, rank and slice of 2^21 of its vertices, "
                        "written by the workers): columns root, vertex, parent, level; unreached vertices are omitted")
    cluster_args(b)
