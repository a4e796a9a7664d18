"""The CUDA C++ sources of the GPU kernels: ``.cu`` files shipped in this package (``package-data`` in
``pyproject.toml``), read as text for NVRTC (``cupy.RawModule(code=...)``).

Imports no CuPy, so that CPU machines (the tests) can read the sources an install carries.

>>> "td_expand" in read("kernels.cu")
True
"""

from __future__ import annotations

from importlib import resources


def read(name: str) -> str:
    """The text of the source file ``name`` (``"kernels.cu"``, ...) of the installed ``breadth.bfs.gpu``."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
