"""Expanding user paths (files, directories, globs) into a sorted list of input files."""

from __future__ import annotations

import glob
import os

from .errors import EmptyInputError


def expand_paths(paths, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """Files named by ``paths`` (a path, a glob, a directory or a list of them), sorted per argument.

    Directories contribute their non-hidden files (``_SUCCESS``/``.crc`` style markers skipped),
    filtered by ``suffixes`` when given.  A name that matches nothing raises ``FileNotFoundError``.

    >>> expand_paths("/work/shared/data/Wiki-Vote.txt")     # doctest: +SKIP
    ['/work/shared/data/Wiki-Vote.txt']
    """
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for item in items:
        item = os.fspath(item)
        if os.path.isdir(item):
            names = sorted(f for f in os.listdir(item) if not f.startswith((".", "_")) and not f.endswith(".crc"))
            files = [os.path.join(item, f) for f in names if os.path.isfile(os.path.join(item, f))]
            if suffixes:
                files = [f for f in files if f.endswith(suffixes)]
            if not files:
                raise EmptyInputError(f"{item}: directory holds no input files", path=item)
            out += files
        elif os.path.exists(item):
            out.append(item)
        elif any(ch in item for ch in "*?["):
            files = sorted(f for f in glob.glob(item) if os.path.isfile(f))
            if not files:
                raise FileNotFoundError(f"{item}: no file matches this pattern")
            out += files
        else:
            raise FileNotFoundError(f"{item}: no such file or directory")
    if not out:
        raise EmptyInputError("no input files given")
    return out
