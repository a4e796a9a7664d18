"""The sources of ``breadth bfs --source ID ... | --sources FILE``: read, parsed and checked before any work.

A sources file holds one vertex id per line; blank lines and lines starting with ``#`` are skipped.  The
ids are parsed for the store's id type (read from its manifest, so no cluster is needed): integers for
integer ids, the text itself for string ids.  On a store without an id map (ids already 0..n-1) an id
outside the range is refused here too; ids of a mapped store are looked up in the map once it is loaded
(:func:`missing_source`).  Every refusal is one line naming the option, or the file and line.
"""

from __future__ import annotations

import numpy as np

from .cli_errors import UsageError


def read_sources_file(path: str) -> list[tuple[str, str]]:
    """``(label, text)`` for each id of the file ``path``, the label ``--sources PATH:LINE``."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"--sources {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--sources {path}: is a directory; expected a file with one vertex id per line") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"--sources {path}: not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"--sources {path}: cannot read it ({e.strerror or e})") from None
    out = []
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if len(text.split()) != 1:
            raise UsageError(f"--sources {path}:{no}: expected one vertex id per line, got {text!r}")
        out.append((f"--sources {path}:{no}", text))
    if not out:
        raise UsageError(f"--sources {path}: no vertex ids in the file (expected one id per line)")
    return out


def _id_kind(manifest: dict) -> tuple[str, np.dtype | None]:
    """``("dense", None)`` without an id map, ``("string", None)`` or ``("int", dtype)``."""
    rec = manifest.get("id_map")
    if rec is None:
        return "dense", None
    if rec.get("dtype") == "string":
        return "string", None
    return "int", np.dtype(rec.get("dtype", "int64"))


def parse_sources(items: list[tuple[str, str]], manifest: dict) -> list:
    """The ids of ``items`` (``(label, text)``) for a store with ``manifest``: a list of ints (of strings for
    string ids).  Raises :class:`UsageError` naming the label for text that is not an id of this graph's
    type, or (without an id map) an id outside ``0..n-1``."""
    kind, dtype = _id_kind(manifest)
    if kind == "string":
        return [text for _, text in items]
    n = int(manifest.get("num_vertices", 0))
    lo, hi = (0, n - 1) if kind == "dense" else (max(int(np.iinfo(dtype).min), 0) if dtype.kind == "u" else
                                                  int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
    out = []
    for label, text in items:
        try:
            v = int(text)
        except ValueError:
            raise UsageError(f"{label}: expected an integer vertex id (this graph's ids are integers), "
                             f"got {text!r}") from None
        if not lo <= v <= hi:
            what = f"ids are 0..{n - 1}" if kind == "dense" else f"ids are {dtype} in {lo}..{hi}"
            raise UsageError(f"{label}: vertex {text} is not in the graph (its {what})")
        out.append(v)
    return out


def source_items(args) -> list[tuple[str, str]]:
    """``(label, text)`` of every ``--source`` then every id of ``--sources FILE``."""
    items = [(f"--source {t}", t) for t in (args.source or [])]
    if args.sources:
        items += read_sources_file(args.sources)
    return items


def typed_ids(graph, ids: list) -> np.ndarray:
    """``ids`` as an array of the graph's id type (int64 without an id map, the map's dtype otherwise)."""
    from breadth.bfs.engine.search import graph_id_map

    idm = graph_id_map(graph)
    return np.asarray(ids, np.int64) if idm is None else np.array(ids, dtype=idm.dtype)


def missing_source(graph, ids: np.ndarray) -> int | None:
    """Index of the first of ``ids`` (:func:`typed_ids`) that is not a vertex of ``graph``, or None; looked
    up in the id-map parts on the workers, all ids in one pass."""
    from breadth.bfs.engine.search import graph_id_map

    idm = graph_id_map(graph)
    if idm is None:
        bad = (ids < 0) | (ids >= graph.num_vertices)
    else:
        bad = np.asarray(idm.to_dense(ids)) < 0
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.size else None
