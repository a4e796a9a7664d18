"""The benchmarks' one way to write their JSON: a temporary file beside the target, then a rename, so a
run killed mid-write never leaves a half-written result (nor replaces a good one); and the machine and
versions every result records."""

from __future__ import annotations

import json
import os
import platform
import tempfile


def write_json(path: str, doc: dict, default=None) -> None:
    """``doc`` as indented JSON at ``path`` (folders created), through a temporary file and a rename;
    ``default`` as in :func:`json.dump` (e.g. ``float`` for NumPy scalars)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, default=default)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def machine() -> dict:
    """Where a benchmark ran: platform, CPU count and kind, load average at the start."""
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "processor": platform.machine(),
            "loadavg_start": os.getloadavg()}


def versions(*optional: str) -> dict:
    """Versions of Python and the stack (NumPy, Numba, Dask, distributed), plus each ``optional`` module's
    where it imports."""
    import dask
    import distributed
    import numba
    import numpy

    v = {"python": platform.python_version(), "numpy": numpy.__version__, "numba": numba.__version__,
         "dask": dask.__version__, "distributed": distributed.__version__}
    for name in optional:
        try:
            v[name] = __import__(name).__version__
        except Exception:  # noqa: BLE001 - absent or broken: not recorded
            pass
    return v
