"""What the ``breadth`` command checks before any work: a failure found after an hour of preparation
should have been found in the first second.

Each check raises :class:`~breadth.pipeline.cli.cli_errors.UsageError` (exit status 2) with one line naming the
option, the value and what was expected.  Writability is tested by creating (and removing) a file where the
output will go, not with ``os.access``, which says yes to root on a read-only mount and to nothing else.
"""

from __future__ import annotations

import os
import tempfile

from .cli_errors import UsageError


def enclosing_store(path: str) -> str | None:
    """The shard store that ``path`` lies inside (or is), if any."""
    from breadth.io.shard_store import is_store

    d = os.path.abspath(path)
    while True:
        if is_store(d):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def writable_directory(directory: str, option: str, value: str | None = None) -> None:
    """``directory`` exists and a file can be created in it (``value``: the option's value, when the
    directory is that value's parent)."""
    value = directory if value is None else value
    if not os.path.exists(directory):
        raise UsageError(f"{option} {value}: directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise UsageError(f"{option} {value}: {directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".breadth-probe-", dir=directory)
    except OSError as e:
        raise UsageError(f"{option} {value}: cannot write in {directory} ({e.strerror or e})") from None
    os.close(fd)
    os.remove(probe)


def creatable_directory(directory: str, option: str) -> None:
    """``directory`` exists and takes files, or can be made: its nearest existing ancestor takes files."""
    d = os.path.abspath(directory)
    if os.path.isdir(d):
        writable_directory(d, option, directory)
        return
    if os.path.exists(d):
        raise UsageError(f"{option} {directory}: exists and is not a directory")
    parent = os.path.dirname(d)
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    writable_directory(parent, option, directory)


def output_file(path: str, option: str) -> None:
    """``path`` can be written as a file: its directory exists and takes files, it is not a directory,
    and it is not inside a shard store (whose files only the store's writer may replace)."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory; expected a file name")
    store = enclosing_store(os.path.dirname(os.path.abspath(path)) or ".")
    if store is not None:
        raise UsageError(f"{option} {path}: inside the shard store {store}; write it outside the store")
    writable_directory(os.path.dirname(os.path.abspath(path)), option, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the existing file is not writable")


def output_dataset(path: str, option: str = "--out") -> None:
    """``path`` can become a results dataset directory (:func:`breadth.bfs.results.write_results_dataset`):
    outside any shard store, its parent can be made and takes files, and an existing ``path`` is an earlier
    results dataset (which is replaced), nothing else."""
    from breadth.bfs.results import is_results_dataset

    store = enclosing_store(path)
    if store is not None:
        raise UsageError(f"{option} {path}: inside the shard store {store}; write it outside the store")
    if os.path.exists(path) and not is_results_dataset(path):
        raise UsageError(f"{option} {path}: exists and is not a results dataset written by breadth bfs; "
                         "expected a new directory name (or an earlier results dataset, which is replaced)")
    creatable_directory(os.path.dirname(os.path.abspath(path)), option)


def output_store(path: str, option: str = "--out") -> None:
    """``path`` can become a shard store: its parent directory takes files, and it is not inside another
    store (a store nested in a store would be deleted by the outer one's ``--overwrite``)."""
    parent = os.path.dirname(os.path.abspath(path))
    outer = enclosing_store(parent)
    if outer is not None:
        raise UsageError(f"{option} {path}: inside the shard store {outer}; choose a directory outside it")
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: exists and is not a directory; expected a store directory")
    writable_directory(parent, option, path)


def device(name: str) -> None:
    """``--device gpu`` needs CuPy and dask-cuda importable and a visible CUDA device."""
    if name != "gpu":
        return
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise UsageError("--device gpu: CuPy is not installed; pip install 'breadth[gpu]' (CUDA 12) or "
                         "'breadth[gpu-cuda13]' (CUDA 13)") from None
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        raise UsageError("--device gpu: dask-cuda is not installed; pip install 'breadth[gpu]' (CUDA 12) or "
                         "'breadth[gpu-cuda13]' (CUDA 13)") from None
    from ..cluster.cluster import gpu_available

    if not gpu_available():
        raise UsageError("--device gpu: no CUDA device is visible")


def device_memory_limit(args) -> None:
    """``--device-memory-limit`` sizes the GPU workers of the local cluster this command starts."""
    if getattr(args, "device_memory_limit", None) is None:
        return
    if getattr(args, "device", "cpu") == "cpu":
        raise UsageError("--device-memory-limit limits GPU workers: add --device gpu (or use --memory-limit "
                         "for CPU workers)")
    if getattr(args, "scheduler", None):
        raise UsageError("--device-memory-limit sizes the local cluster's workers; with --scheduler, give it to "
                         "your workers instead (dask cuda worker --device-memory-limit ...)")


def protocol(name: str, device: str | None = None) -> None:
    """``--protocol NAME`` can run here (:mod:`breadth.bfs.transport.registry`): a GPU-only transport (NCCL)
    needs GPU ranks, and a transport whose library does not load (UCX without the ``ucx`` extra, NCCL without
    CuPy's) is refused with what to install."""
    from breadth.bfs.transport.registry import TRANSPORTS

    t = TRANSPORTS.get(name)
    if t is None:  # "auto"
        return
    if t.gpu_only and device == "cpu":
        raise UsageError(f"--protocol {name} moves device buffers between GPU ranks: add --device gpu, or use "
                         "--protocol auto")
    missing = t.missing()
    if missing is not None:
        raise UsageError(f"--protocol {name}: the {t.title} transport is not available here ({missing}); "
                         f"{t.install + ', or ' if t.install else ''}use --protocol auto")


def matplotlib_available(option: str) -> None:
    """``--plot`` needs matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError(f"{option}: matplotlib is not installed; pip install 'breadth[plot]'") from None


def _manifest(store: str) -> dict | None:
    """The store's manifest, or ``None`` where it cannot be read (loading the store reports why)."""
    from breadth.io.shard_store import read_manifest

    try:
        return read_manifest(store)
    except Exception:  # noqa: BLE001 - a broken store is reported by the load, with its own message
        return None


def bfs_searches(args) -> None:
    """``breadth bfs``: exactly one kind of search (``--root`` or ``--source``/``--sources``), ``--batch``
    only with ``--root``, and the roots or sources parsed for the store's id type, read from its manifest
    (left on ``args`` as ``root_ids``, or ``source_ids`` and ``source_labels``): text that is no id of that
    type, or an id outside ``0..n-1`` of a store without an id map, is refused here, before any cluster."""
    from .cli_sources import parse_sources, source_items

    has_sources = bool(args.source) or args.sources is not None
    if not args.root and not has_sources:
        raise UsageError("bfs needs --root ID (one search per root) or --source ID / --sources FILE "
                         "(one search from all sources)")
    if args.root and has_sources:
        raise UsageError("--root and --source/--sources do not combine: --root runs one search per root, "
                         "--source one search from all sources together")
    if args.batch and not args.root:
        raise UsageError("--batch batches independent searches: it needs --root (several sources are already "
                         "one search)")
    manifest = _manifest(args.store)
    if args.root:
        items = [(f"--root {t}", t) for t in args.root]
        args.root_ids = parse_sources(items, manifest) if manifest is not None else list(args.root)
        return
    items = source_items(args)
    args.source_labels = [label for label, _ in items]
    args.source_ids = parse_sources(items, manifest) if manifest is not None else [t for _, t in items]


def bench_store(args) -> None:
    """``breadth bench STORE`` needs a graph with an edge: its roots have degree >= 1 (read from the
    manifest, so an empty graph is refused before any cluster; exit status 1, the input's fault)."""
    from .cli_errors import CommandError

    m = _manifest(args.store)
    if m is not None and m.get("num_edges") == 0:
        n, loops = m.get("num_vertices", 0), m.get("num_self_loops", 0)
        raise CommandError(f"{args.store}: the graph has no edges ({n:,} {'vertex' if n == 1 else 'vertices'}, "
                           f"{loops:,} self-loop{'' if loops == 1 else 's'}): no root to search from")


#: the ingest flags that apply to some formats only, each with the reader keyword it sets: a flag applies to the
#: formats whose reader takes that keyword (:func:`~breadth.pipeline.sources.file_sources.formats_taking`)
_FORMAT_FLAGS = (("--ids str", "ids"), ("--header", "header"), ("--no-header", "header"),
                 ("--extra-columns", "extra_columns"), ("--src/--dst", "src"))


def ingest_inputs(args) -> None:
    """``breadth ingest``: the inputs have one format (given, or recognised from their names and first bytes:
    a file that matches nothing, or is of no format, is refused here, with the reader's message) and every
    format-specific flag applies to it."""
    from breadth.io.formats import FORMATS

    from ..sources.file_sources import formats_taking, input_format

    fmt = args.format if args.format != "auto" else input_format(args.paths)
    given = {"--ids str": args.ids == "str", "--header": args.header, "--no-header": args.no_header,
             "--extra-columns": args.extra_columns, "--src/--dst": bool(args.src or args.dst)}
    for flag, keyword in _FORMAT_FLAGS:
        formats = formats_taking(keyword)
        if given[flag] and fmt not in formats:
            what = " or ".join(FORMATS[f].title for f in formats)
            how = f" (--format {fmt})" if args.format != "auto" else ""
            raise UsageError(f"{flag} applies to {what} input, and {args.paths[0]}{how} is {FORMATS[fmt].title}")


def partition(args) -> None:
    """``--partition``/``--grid``/``--delegate-degree`` agree with each other and, on a local cluster, a grid
    with ``--workers`` (``--grid 3x2 needs 6 workers, got 4``)."""
    from breadth.bfs.partitioning import Partitioning

    kind = getattr(args, "partition", None)
    grid, degree = getattr(args, "grid", None), getattr(args, "delegate_degree", None)
    if kind is None and (grid is not None or degree is not None):
        raise UsageError("--grid and --delegate-degree need --partition 2d or --partition delegates")
    if kind is None:
        return
    if grid is not None and kind != "2d":
        raise UsageError(f"--grid is for --partition 2d, not {kind}")
    if degree is not None and kind != "delegates":
        raise UsageError(f"--delegate-degree is for --partition delegates, not {kind}")
    if not getattr(args, "scheduler", None):  # an existing cluster's workers are known once connected
        try:
            Partitioning(kind, grid, degree).resolved(args.workers)
        except ValueError as e:
            raise UsageError(str(e)) from None


def partition_kw(args) -> dict:
    """``prepare``'s keywords from the partition flags (none: 1D)."""
    if getattr(args, "partition", None) is None:
        return {}
    return {"partition": args.partition, "grid": args.grid, "delegate_degree": args.delegate_degree}
