"""One lock around NumPy's ``.npy`` header parsing, which threads of one worker may not do at once.

NumPy parses an ``.npy`` header with ``ast.literal_eval``; on CPython 3.11 before 3.11.8 two threads
parsing at the same time can fail with ``SystemError: AST constructor recursion depth mismatch``
(CPython gh-106905), which a Dask worker's threads loading shuffle pieces or store arrays hit.  Every
``.npy`` read of breadth goes through :func:`load_npy` or holds :data:`NPY_HEADER_LOCK` while it reads
a header.
"""

from __future__ import annotations

import threading

import numpy as np

NPY_HEADER_LOCK = threading.Lock()


def load_npy(path: str, *, allow_pickle: bool = False, mmap_mode: str | None = None) -> np.ndarray:
    """``np.load(path)`` with the header parsed under :data:`NPY_HEADER_LOCK` (the data read outside it
    when memory-mapped; whole files are small pieces here)."""
    with NPY_HEADER_LOCK:
        return np.load(path, allow_pickle=allow_pickle, mmap_mode=mmap_mode)
